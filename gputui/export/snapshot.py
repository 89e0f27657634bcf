"""One snapshot as nvidia-smi-style CSV or as a versioned JSON document (`gputui snapshot`).

Field names are nvidia-smi's `--query-gpu` / `--query-compute-apps` names wherever nvidia-smi
has the same quantity (`index`, `memory.used`, `utilization.gpu`, `clocks.current.sm`, ...),
with nvidia-smi's units and formatting: CSV prints `memory.used [MiB]` in the header and
`143771 MiB` as the value (`nounits`: `143771`), `[N/A]` where NVML gave nothing.  The JSON
document uses the same names with plain numbers in the same units (null for N/A); its schema
is `gputui/schemas/snapshot-v1.json` (`gputui snapshot --schema`).  Fields nvidia-smi does not
have (PCIe throughput, energy, per-process details) are gputui's own and marked so.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gputui import __version__
from gputui.rules import iso_utc
from gputui.telemetry.host.jobs import CONTAINER_KINDS, job_label
from gputui.telemetry.metric_types import GpuMetric, Smi
from gputui.telemetry.metrics import GPM_METRICS, GPU_METRICS
from gputui.telemetry.model import (
    DeviceInfo,
    GpuProcess,
    GpuSample,
    MachineInfo,
    Snapshot,
    decode_clock_events,
)
from gputui.telemetry.process_metrics import PROCESS_METRICS, ProcessMetric
from gputui.untrusted import csv_cell, json_text

FORMAT_NAME = "gputui-snapshot"
FORMAT_VERSION = 1
MIB = 2**20
NA = "[N/A]"


@dataclass(frozen=True)
class Ctx:
    """What a field's getter may look at."""

    info: MachineInfo
    snap: Snapshot
    dev: DeviceInfo | None
    gpu: GpuSample | None
    proc: GpuProcess | None = None
    no_window: str = ""
    """Why a GPU sample without GPM has none (`NO_WINDOW_LIVE` or `NO_WINDOW_REPLAY`)."""


@dataclass(frozen=True)
class Field:
    name: str
    kind: str
    """JSON type: integer, number, string or boolean."""
    unit: str
    """Shown in the CSV header ("memory.used [MiB]") and after each value, unless nounits."""
    doc: str
    get: Callable[[Ctx], Any]
    smi: bool = True
    """Same name and meaning as nvidia-smi's query field."""
    decimals: int | None = None
    """CSV: digits after the point (nvidia-smi prints watts with 2)."""
    aliases: tuple[str, ...] = ()
    slow: bool = False
    """Sampled on NVML's slow cadence: a single live snapshot must wait for it."""
    dev: tuple[str, ...] = ()
    """The static facts (DeviceInfo attributes) `get` reads besides index, name, UUID and
    bus id, so a one-shot reader asks NVML for those alone."""
    window: bool = False
    """Measured over a window between two slow-cadence passes (GPM): a single live snapshot
    waits for the second pass.  (GPM reads the architecture to say why it is unavailable.)"""

    @property
    def header(self) -> str:
        return f"{self.name} [{self.unit}]" if self.unit else self.name

    @property
    def static(self) -> tuple[str, ...]:
        return self.dev + (self.get.attrs if isinstance(self.get, _Dev) else ())


def static_facts(fields: Iterable[Field]) -> frozenset[str]:
    """Every static fact the fields read (NvmlSource's `static=`)."""
    return frozenset(a for f in fields for a in f.static)


def _mib(v: int | None) -> int | None:
    return None if v is None else v // MIB


def _smi_time(ts: float) -> str:
    t = time.localtime(ts)
    return time.strftime("%Y/%m/%d %H:%M:%S", t) + f".{int(ts * 1000) % 1000:03d}"


def _enabled(v: bool | None) -> str | None:
    return None if v is None else ("Enabled" if v else "Disabled")


def _g(attr: str) -> Callable[[Ctx], Any]:
    return lambda c: None if c.gpu is None or c.gpu.lost else getattr(c.gpu, attr)


class _Dev:
    """A getter of one static fact; the field knows what it reads."""

    def __init__(self, attr: str) -> None:
        self.attr = attr
        self.attrs = (attr,)

    def __call__(self, c: Ctx) -> Any:
        return None if c.dev is None else getattr(c.dev, self.attr)


def _d(attr: str) -> Callable[[Ctx], Any]:
    return _Dev(attr)


def _power_limit(c: Ctx) -> float | None:
    if c.gpu is not None and c.gpu.power_limit is not None:
        return c.gpu.power_limit
    return c.dev.power_limit if c.dev else None


def _procs_of(c: Ctx) -> list[GpuProcess]:
    return [p for p in c.snap.processes if c.dev is not None and p.gpu_index == c.dev.index]


def _reason_names(c: Ctx) -> str | None:
    v = _g("clock_event_reasons")(c)
    return None if v is None else ";".join(decode_clock_events(v))


NO_WINDOW_LIVE = "not measured: no GPM window closed before this snapshot (a window needs two GPM samples)"
NO_WINDOW_REPLAY = "not in the recording at this tick (made without GPM, or before its first GPM window)"


def _gpm_unavailable(c: Ctx) -> str | None:
    """Why the gpm.* figures are null; None only when they were measured (the schema's
    promise: never null without a reason)."""
    if c.gpu is None:
        return "no sample of this GPU"
    if c.gpu.lost:
        return "the GPU is lost"
    w = c.gpu.gpm
    if w is None:
        return c.no_window or NO_WINDOW_LIVE
    return w.unavailable


def _sample_field(m: GpuMetric, s: Smi) -> Field:
    """A GPU quantity of the registry as a snapshot field."""
    convert = s.convert

    def get(c: Ctx) -> Any:
        v = None if c.gpu is None or c.gpu.lost else m.value(c.gpu)
        return v if v is None or convert is None else convert(v)

    doc = m.doc if m.prometheus is None or m.gpm is None else f"{m.doc} ({m.prometheus.name})"
    return Field(s.name, s.kind, s.unit, doc, get, smi=not s.own, decimals=s.decimals,
                 aliases=s.aliases, slow=s.slow, window=s.window,
                 dev=("architecture",) if s.window else ())  # fmt: skip


GPM_FIELDS: tuple[Field, ...] = (
    *(_sample_field(m, m.snapshot) for m in GPM_METRICS if m.snapshot is not None),
    Field("gpm.unavailable", "string", "", "why GPM gives no figures for this GPU (null: measured)",
          _gpm_unavailable, smi=False, slow=True, window=True, dev=("architecture",)),
)  # fmt: skip
"""GPM activity (Hopper and newer) over the last slow-cadence window: gputui's own fields."""

_HEAD: tuple[Field, ...] = (
    Field("timestamp", "string", "", "when the sample was taken, local time (nvidia-smi's format)",
          lambda c: _smi_time(c.snap.timestamp)),
    Field("count", "integer", "", "number of GPUs", lambda c: len(c.info.devices)),
    Field("index", "integer", "", "NVML index of the GPU", lambda c: c.dev.index if c.dev else None),
    Field("name", "string", "", "product name", _d("name"), aliases=("gpu_name",)),
    Field("uuid", "string", "", "globally unique id, GPU-...", _d("uuid"), aliases=("gpu_uuid",)),
    Field("serial", "string", "", "board serial number", _d("serial"), aliases=("gpu_serial",)),
    Field("pci.bus_id", "string", "", "PCI bus id, domain:bus:device.function",
          _d("bus_id"), aliases=("gpu_bus_id",)),
    Field("driver_version", "string", "", "driver version", lambda c: c.info.system.driver_version),
    Field("vbios_version", "string", "", "VBIOS version", _d("vbios_version")),
    Field("compute_cap", "string", "", "CUDA compute capability, major.minor",
          lambda c: None if c.dev is None or c.dev.compute_capability is None
          else "{}.{}".format(*c.dev.compute_capability), dev=("compute_capability",)),
    Field("persistence_mode", "string", "", "Enabled or Disabled",
          lambda c: _enabled(c.dev.persistence_mode) if c.dev else None, dev=("persistence_mode",)),
    Field("compute_mode", "string", "", "Default, Exclusive_Process, Prohibited", _d("compute_mode")),
    Field("mig.mode.current", "string", "", "Enabled or Disabled",
          lambda c: _enabled(c.dev.mig_mode) if c.dev else None, dev=("mig_mode",)),
    Field("ecc.mode.current", "string", "", "Enabled or Disabled",
          lambda c: _enabled(c.dev.ecc_mode) if c.dev else None, dev=("ecc_mode",)),
)  # fmt: skip

_STATIC: tuple[Field, ...] = (
    Field("memory.total", "integer", "MiB", "total memory",
          lambda c: _mib(c.dev.memory_total) if c.dev else None, dev=("memory_total",)),
    Field("power.limit", "number", "W", "power limit in force", _power_limit, decimals=2,
          aliases=("enforced.power.limit",), dev=("power_limit",)),
    Field("power.default_limit", "number", "W", "default power limit", _d("power_default_limit"),
          decimals=2),
    Field("power.min_limit", "number", "W", "lowest settable power limit", _d("power_min_limit"),
          decimals=2),
    Field("power.max_limit", "number", "W", "highest settable power limit", _d("power_max_limit"),
          decimals=2),
    Field("clocks.max.sm", "integer", "MHz", "maximum SM clock", _d("max_sm_clock")),
    Field("clocks.max.memory", "integer", "MHz", "maximum memory clock", _d("max_mem_clock"),
          aliases=("clocks.max.mem",)),
    Field("clocks.max.graphics", "integer", "MHz", "maximum graphics clock", _d("max_graphics_clock"),
          aliases=("clocks.max.gr",)),
    Field("pcie.link.gen.max", "integer", "", "highest PCIe generation of the GPU and slot",
          _d("pcie_max_gen")),
    Field("pcie.link.width.max", "integer", "", "most PCIe lanes", _d("pcie_max_width")),
)  # fmt: skip

#: gputui's own, composed of several values (nvidia-smi has no such query field).
_COMPOSED: tuple[Field, ...] = (
    Field("clocks_event_reasons.names", "string", "", "the clock-event reasons by name, ;-separated",
          _reason_names, smi=False),
    Field("lost", "boolean", "", "true when the GPU fell off the bus (GPU is lost)",
          lambda c: bool(c.gpu and c.gpu.lost), smi=False),
    Field("processes.count", "integer", "", "processes using the GPU",
          lambda c: len(_procs_of(c)), smi=False),
    Field("processes.memory_used", "integer", "MiB", "GPU memory held by its listed processes",
          lambda c: _mib(sum(p.gpu_memory or 0 for p in _procs_of(c))), smi=False),
    *GPM_FIELDS,
)  # fmt: skip


#: Identity, the registry's quantities (gputui/telemetry/metrics.py), static limits, and
#: gputui's composed fields.
GPU_FIELDS: tuple[Field, ...] = (
    *_HEAD,
    *(_sample_field(m, m.snapshot) for m in GPU_METRICS if m.snapshot is not None and m.gpm is None),
    *_STATIC,
    *_COMPOSED,
)


def _p(attr: str) -> Callable[[Ctx], Any]:
    return lambda c: None if c.proc is None else getattr(c.proc, attr)


def _elapsed(c: Ctx) -> float | None:
    if c.proc is None or c.proc.create_time is None:
        return None
    return round(max(0.0, c.snap.timestamp - c.proc.create_time), 1)


def _iso(ts: float | None) -> str | None:
    return None if ts is None else iso_utc(ts)


def _job(c: Ctx, attr: str, kind: str | None = None) -> Any:
    """A field of the job; the kind-specific ones (slurm_step, pod, namespace) are None for
    an unverified job (a user's lookalike cgroup path): `job` says what it claims."""
    job = c.proc.job if c.proc is not None else None
    if job is None or (kind is not None and (job.kind != kind or job.source == "unverified")):
        return None
    return getattr(job, attr)


def _slurm_job(c: Ctx) -> str | None:
    job = c.proc.job if c.proc is not None else None
    if job is None or job.kind != "slurm" or job.source == "unverified":
        return None
    return job.array or job.id


def _container(c: Ctx) -> str | None:
    job = c.proc.job if c.proc is not None else None
    if job is None or job.source == "unverified":
        return None
    return job.container if job.kind == "pod" else job.name if job.kind in CONTAINER_KINDS else None


def _process_field(m: ProcessMetric, s: Smi) -> Field:
    """A process column of the registry as a snapshot field: the process's own field."""
    convert = s.convert

    def get(c: Ctx) -> Any:
        v = None if c.proc is None else getattr(c.proc, m.attr)
        return v if v is None or convert is None else convert(v)

    return Field(s.name, s.kind, s.unit, m.doc, get, smi=not s.own, decimals=s.decimals,
                 aliases=s.aliases, slow=s.slow)  # fmt: skip


_PROCESS_HEAD: tuple[Field, ...] = (
    Field("timestamp", "string", "", "when the sample was taken, local time (nvidia-smi's format)",
          lambda c: _smi_time(c.snap.timestamp)),
    Field("gpu_name", "string", "", "product name of the GPU", _d("name")),
    Field("gpu_bus_id", "string", "", "PCI bus id of the GPU", _d("bus_id")),
    Field("gpu_serial", "string", "", "serial number of the GPU", _d("serial")),
    Field("gpu_uuid", "string", "", "UUID of the GPU", _d("uuid")),
)  # fmt: skip

_PROCESS_COMPOSED: tuple[Field, ...] = (
    Field("process_name", "string", "", "executable name (psutil); null when not visible", _p("name"),
          aliases=("name",)),
    Field("start_time", "string", "", "when the process started, ISO 8601 UTC",
          lambda c: _iso(c.proc.create_time if c.proc else None), smi=False),
    Field("elapsed", "number", "s", "seconds since the process started", _elapsed, smi=False, decimals=1),
    Field("command", "string", "", "full command line", lambda c: None if c.proc is None or
          c.proc.cmdline is None else shlex.join(c.proc.cmdline), smi=False),
    Field("visible", "boolean", "", "false when the PID is not in gputui's PID namespace (containers)",
          _p("visible"), smi=False),
    Field("job", "string", "", "the job as the JOB column shows it: slurm 48213.0, pod ns/name, docker ID",
          lambda c: (job_label(c.proc.job) or None) if c.proc else None, smi=False),
    Field("job.kind", "string", "", "slurm, pod, docker, containerd, cri-o, podman, unit or session",
          lambda c: _job(c, "kind"), smi=False),
    Field("job.id", "string", "", "Slurm job id, pod UID, container id, unit name or session",
          lambda c: _job(c, "id"), smi=False),
    Field("slurm_job", "string", "", "Slurm job id (array jobs: ARRAY_TASK)",
          _slurm_job, smi=False),
    Field("slurm_step", "string", "", "Slurm step", lambda c: _job(c, "step", "slurm"), smi=False),
    Field("pod", "string", "", "Kubernetes pod name (where readable)", lambda c: _job(c, "name", "pod"),
          smi=False),
    Field("namespace", "string", "", "Kubernetes namespace (where readable)",
          lambda c: _job(c, "namespace", "pod"), smi=False),
    Field("container", "string", "", "container name (in a pod, or a runtime's), where readable",
          _container, smi=False),
    Field("launcher_pid", "integer", "", "PID of its launcher (torchrun, mpirun, ...), if any",
          _p("launcher"), smi=False),
)  # fmt: skip

#: The GPU's identity, the registry's process columns that have a snapshot name
#: (gputui/telemetry/metrics.py), and the fields composed from several values.
PROCESS_FIELDS: tuple[Field, ...] = (
    *_PROCESS_HEAD,
    *(_process_field(m, m.snapshot) for m in PROCESS_METRICS if m.snapshot is not None),
    *_PROCESS_COMPOSED,
)

DEFAULT_CSV_GPU = (
    "index", "name", "uuid", "pci.bus_id", "utilization.gpu", "utilization.memory", "memory.used",
    "memory.total", "temperature.gpu", "power.draw", "power.limit", "clocks.current.sm",
    "clocks.current.memory", "pstate",
)  # fmt: skip
DEFAULT_CSV_PROCESS = (
    "gpu_index", "gpu_uuid", "pid", "process_name", "used_gpu_memory", "type", "user",
    "utilization.sm", "cpu_percent", "host_memory", "elapsed", "command",
)  # fmt: skip


JSON_DOCUMENT_LEVEL = frozenset({"timestamp", "count", "driver_version"})
"""Left out of each GPU object by default in JSON: the document itself carries them."""


def _index(fields: Sequence[Field]) -> dict[str, Field]:
    out: dict[str, Field] = {}
    for f in fields:
        out[f.name] = f
        for a in f.aliases:
            out[a] = f
    return out


GPU_BY_NAME = _index(GPU_FIELDS)
PROCESS_BY_NAME = _index(PROCESS_FIELDS)


class FieldError(ValueError):
    pass


def select(names: Sequence[str], table: dict[str, Field], what: str) -> list[tuple[str, Field]]:
    """(name as the user wrote it, field) for each requested name, in order."""
    out = []
    for raw in names:
        name = raw.strip()
        if not name:
            continue
        f = table.get(name.lower())
        if f is None:
            raise FieldError(f"unknown {what} field {name!r}; `gputui snapshot --list-fields` lists them")
        out.append((name, f))
    return out


# --------------------------------------------------------------------------------------
# rows
# --------------------------------------------------------------------------------------


def _contexts(info: MachineInfo, snap: Snapshot, live: bool = True) -> list[Ctx]:
    gpus = {g.index: g for g in snap.gpus}
    why = NO_WINDOW_LIVE if live else NO_WINDOW_REPLAY
    return [Ctx(info, snap, d, gpus.get(d.index), no_window=why) for d in info.devices]


def _process_contexts(info: MachineInfo, snap: Snapshot) -> list[Ctx]:
    gpus = {g.index: g for g in snap.gpus}
    devs = {d.index: d for d in info.devices}
    procs = sorted(snap.processes, key=lambda p: (p.gpu_index, p.pid))
    return [Ctx(info, snap, devs.get(p.gpu_index), gpus.get(p.gpu_index), p) for p in procs]


def _csv_value(f: Field, v: Any, units: bool) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return NA
    if isinstance(v, bool):
        text = "true" if v else "false"
    elif isinstance(v, float) and f.decimals is not None:
        text = f"{v:.{f.decimals}f}"
    elif isinstance(v, str):
        text = csv_cell(v)  # untrusted: escaped, and no formula for a spreadsheet
    else:
        text = str(v)
    return f"{text} {f.unit}" if units and f.unit else text


def csv_text(
    info: MachineInfo,
    snap: Snapshot,
    fields: Sequence[tuple[str, Field]],
    *,
    processes: bool = False,
    header: bool = True,
    units: bool = True,
    live: bool = True,
) -> str:
    """nvidia-smi's CSV: ", "-separated; a value holding a comma or quote is quoted (RFC 4180),
    so `csv.reader(f, skipinitialspace=True)` reads it back."""
    rows: list[list[str]] = []
    if header:  # nvidia-smi heads a column with the field's own name, whatever alias was asked
        rows.append([f.header for _, f in fields])
    for ctx in _process_contexts(info, snap) if processes else _contexts(info, snap, live):
        rows.append([_csv_value(f, f.get(ctx), units) for _, f in fields])
    return "".join(", ".join(_quote(cell) for cell in row) + "\n" for row in rows)


def _quote(cell: str) -> str:
    if any(ch in cell for ch in ',"\n\r') or cell != cell.strip():
        return '"' + cell.replace('"', '""') + '"'
    return cell


# --------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------


def document(
    info: MachineInfo,
    snap: Snapshot,
    gpu_fields: Sequence[tuple[str, Field]] | None = None,
    process_fields: Sequence[tuple[str, Field]] | None = None,
    *,
    processes: bool = False,
    source: dict[str, Any] | None = None,
    health: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The gputui-snapshot document (version 1); fields default to all of them; `health`:
    the job-health block (gputui/export/health_json.py)."""
    if gpu_fields is None:
        gsel = [(f.name, f) for f in GPU_FIELDS if f.name not in JSON_DOCUMENT_LEVEL]
    else:
        gsel = list(gpu_fields)
    if not any(f.name == "index" for _, f in gsel):
        gsel.insert(0, ("index", GPU_BY_NAME["index"]))
    doc_source = source or {"kind": "live"}
    contexts = _contexts(info, snap, live=doc_source.get("kind") != "replay")
    gpus = [{f.name: f.get(ctx) for _, f in gsel} for ctx in contexts]
    sys_ = info.system
    host = snap.host
    doc: dict[str, Any] = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "gputui": __version__,
        "source": doc_source,
        "hostname": sys_.hostname,
        "driver_version": sys_.driver_version,
        "cuda_version": sys_.cuda_driver_version,
        "nvml_version": sys_.nvml_version,
        "timestamp": snap.timestamp,
        "time": _iso(snap.timestamp),
        "gpus": gpus,
        "host": None
        if host is None
        else {
            "cpu_count": len(host.per_cpu) or (os.cpu_count() if doc_source["kind"] == "live" else None),
            "cpu_percent": host.cpu_percent,
            "memory.total": _mib(host.mem_total),
            "memory.used": _mib(host.mem_used),
            "memory.available": _mib(host.mem_available),
            "swap.total": _mib(host.swap_total),
            "swap.used": _mib(host.swap_used),
            "load_average": list(host.load_avg) if host.load_avg else None,
            "uptime": host.uptime,
        },
    }
    if processes:
        psel = [(f.name, f) for f in PROCESS_FIELDS] if process_fields is None else list(process_fields)
        for must in ("pid", "gpu_index"):
            if not any(f.name == must for _, f in psel):
                psel.insert(0, (must, PROCESS_BY_NAME[must]))
        doc["processes"] = [{f.name: f.get(ctx) for _, f in psel} for ctx in _process_contexts(info, snap)]
    if health is not None:
        doc["health"] = health
    return doc


def _finite(obj: Any) -> Any:
    """`obj` with NaN and infinities as null (JSON has no such numbers; "not a measurement"
    is what null already means in these documents)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def dumps(doc: dict[str, Any], pretty: bool) -> str:
    """A document as JSON: non-finite numbers as null, and every character of untrusted text
    that a terminal would not show as itself (C1 controls, bidi, zero-width) as an escape."""
    doc = _finite(doc)
    if pretty:
        text = json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False)
    else:
        text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return json_text(text)


def _prop(f: Field) -> dict[str, Any]:
    unit = f" [{f.unit}]" if f.unit else ""
    origin = "" if f.smi else " (gputui's own field)"
    return {"type": [f.kind, "null"], "description": f"{f.doc}{unit}{origin}"}


def schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of the document; committed as gputui/schemas/snapshot-v1.json."""
    from gputui.export.health_json import health_schema

    mib = {"type": ["integer", "null"], "minimum": 0}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://github.com/gputui/gputui/blob/main/gputui/schemas/snapshot-v1.json",
        "title": "gputui snapshot, version 1",
        "description": (
            "`gputui snapshot --json`: one sample of every GPU.  Field names are nvidia-smi "
            "--query-gpu / --query-compute-apps names where nvidia-smi has the quantity, with "
            "its units (MiB, W, MHz, %, °C); null = not available.  With --fields a GPU object "
            "carries only the fields asked for (and always index)."
        ),
        "type": "object",
        "required": [
            "format",
            "version",
            "gputui",
            "source",
            "hostname",
            "driver_version",
            "cuda_version",
            "nvml_version",
            "timestamp",
            "time",
            "gpus",
            "host",
        ],
        "additionalProperties": False,
        "properties": {
            "format": {"const": FORMAT_NAME},
            "version": {"const": FORMAT_VERSION, "description": "incremented on incompatible changes"},
            "gputui": {"type": "string", "description": "version of gputui that wrote it"},
            "source": {
                "type": "object",
                "required": ["kind"],
                "additionalProperties": False,
                "properties": {
                    "kind": {"enum": ["live", "replay"]},
                    "file": {"type": "string", "description": "the recording (kind replay)"},
                    "tick": {"type": "integer", "minimum": 1, "description": "its tick, from 1"},
                },
            },
            "hostname": {"type": "string"},
            "driver_version": {"type": ["string", "null"]},
            "cuda_version": {"type": ["string", "null"], "description": "highest CUDA the driver supports"},
            "nvml_version": {"type": ["string", "null"]},
            "timestamp": {"type": "number", "description": "when sampled, seconds since the epoch"},
            "time": {"type": "string", "format": "date-time", "description": "the same, ISO 8601 UTC"},
            "gpus": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["index"],
                    "additionalProperties": False,
                    "properties": {f.name: _prop(f) for f in GPU_FIELDS},
                },
            },
            "processes": {
                "description": "with --processes: one object per process per GPU",
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["gpu_index", "pid"],
                    "additionalProperties": False,
                    "properties": {f.name: _prop(f) for f in PROCESS_FIELDS},
                },
            },
            "health": health_schema(),
            "host": {
                "type": ["object", "null"],
                "additionalProperties": False,
                "properties": {
                    "cpu_count": {"type": ["integer", "null"]},
                    "cpu_percent": {
                        "type": ["number", "null"],
                        "description": "all cores, 0-100, since the previous document; null in "
                        "the first of a live snapshot (a rate needs readings 0.2 s apart)",
                    },
                    "memory.total": {**mib, "description": "[MiB]"},
                    "memory.used": {**mib, "description": "[MiB] total minus available"},
                    "memory.available": {**mib, "description": "[MiB]"},
                    "swap.total": {**mib, "description": "[MiB]"},
                    "swap.used": {**mib, "description": "[MiB]"},
                    "load_average": {
                        "type": ["array", "null"],
                        "items": {"type": "number"},
                        "minItems": 3,
                        "maxItems": 3,
                        "description": "1, 5 and 15 minutes",
                    },
                    "uptime": {"type": ["number", "null"], "description": "[s] since boot"},
                },
            },
        },
    }
