"""The fields of `gputui snapshot`: each GPU and process field (nvidia-smi's `--query-gpu` /
`--query-compute-apps` name where nvidia-smi has the quantity, its unit and JSON type, how it
is read from a sample), derived from the metric registry plus the identity, static and
composed fields; the CSV defaults, and `select` for `--query-gpu` lists.  snapshot.py writes
them as CSV or JSON."""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gputui.rules.timestamps import iso_utc
from gputui.telemetry.host.jobs import CONTAINER_KINDS, UNPUBLISHED, job_label
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


def mib(v: int | None) -> int | None:
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
          lambda c: mib(c.dev.memory_total) if c.dev else None, dev=("memory_total",)),
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
          lambda c: mib(sum(p.gpu_memory or 0 for p in _procs_of(c))), smi=False),
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


def iso(ts: float | None) -> str | None:
    return None if ts is None else iso_utc(ts)


def _job(c: Ctx, attr: str, kind: str | None = None) -> Any:
    """A field of the job; the kind-specific ones (slurm_step, pod, namespace) are None for
    an unverified job (a user's lookalike cgroup path) or a user's rootless container: `job`
    says what it is."""
    job = c.proc.job if c.proc is not None else None
    if job is None or (kind is not None and (job.kind != kind or job.source in UNPUBLISHED)):
        return None
    return getattr(job, attr)


def _slurm_job(c: Ctx) -> str | None:
    job = c.proc.job if c.proc is not None else None
    if job is None or job.kind != "slurm" or job.source in UNPUBLISHED:
        return None
    return job.array or job.id


def _container(c: Ctx) -> str | None:
    job = c.proc.job if c.proc is not None else None
    if job is None or job.source in UNPUBLISHED:
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
          lambda c: iso(c.proc.create_time if c.proc else None), smi=False),
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
