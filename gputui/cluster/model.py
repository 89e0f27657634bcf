"""The cluster's GPUs as gputui's own model types, built from Prometheus series.

A series of dcgm-exporter or `gputui export` (same names: gputui/export/prometheus.py) maps
onto a `GpuSample` field; its labels give the host, the GPU's index, UUID and model, and the
Kubernetes pod that holds it.  The UI then draws a remote GPU with the Overview's own cards.

DCGM reports a value the GPU does not support as a "blank" sentinel (0x7ffffffffffffff0 and
up for integers, 2**47 and up for floats, e.g. `DCGM_FI_DEV_MEMORY_TEMP ... 9223372036854775794`
in dcgm-exporter's README): those read as N/A, never as numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gputui.cluster.jobs import JOB_SERIES, FleetJob, HostJobs
from gputui.telemetry.alerts import IdleRule
from gputui.telemetry.gpm_check import checked
from gputui.telemetry.hints import KINDS as HINT_KINDS
from gputui.telemetry.hints import REMEDIES, Hint
from gputui.telemetry.metric_types import MIB, Export, GpuMetric, Per, Ratio
from gputui.telemetry.metrics import FB_TOTAL as FB_TOTAL_EXPORT
from gputui.telemetry.metrics import GPM_METRICS, GPU_LOST, GPU_METRICS, GPU_PROCESSES
from gputui.telemetry.model import CLOCK_EVENT_SLOWDOWN_MASK, DeviceInfo, GpmSample, GpuProcess, GpuSample
from gputui.telemetry.process_metrics import PROCESS_METRICS

DCGM_BLANK = float(2**47)
"""DCGM_FP64_BLANK; every integer blank (0x7ffffffffffffff0...) is larger too."""
POWER_CAP = 0x004
THROTTLED_MASK = CLOCK_EVENT_SLOWDOWN_MASK | POWER_CAP
"""Clock-event reasons that count as throttled: power cap, HW slowdown, thermal, power brake."""


def _int(v: float) -> int:
    return round(v)


def _bool(v: float) -> bool:
    return v != 0


_BY_TYPE: dict[str, Callable[[float], Any]] = {"int": _int, "float": float, "bool": _bool}


def _reader(field_name: str, export: Export) -> Callable[[float], Any]:
    """From an exported number back to the `GpuSample` field's value: the export's own
    conversion undone (MiB and KB to bytes), else the field's declared type."""
    if isinstance(export.convert, Per):
        return export.convert.undo
    declared = GpuSample.__annotations__[field_name]  # e.g. "int | None"
    return _BY_TYPE[declared.split("|")[0].strip()]


def _sample_fields() -> dict[str, tuple[str, Callable[[float], Any]]]:
    out: dict[str, tuple[str, Callable[[float], Any]]] = {}
    exports = [(m.field, m.prometheus) for m in GPU_METRICS if m.prometheus is not None and m.gpm is None]
    for field_name, export in [*exports, ("lost", GPU_LOST)]:
        for name in (export.name, *export.aliases):
            out[name] = (field_name, _reader(field_name, export))
    return out


#: metric name -> (GpuSample field, conversion from the exported unit): the registry's
#: /metrics names (gputui/telemetry/metrics.py, what `gputui export` writes), read back.
SAMPLE_FIELDS: dict[str, tuple[str, Callable[[float], Any]]] = _sample_fields()
FB_TOTAL = FB_TOTAL_EXPORT.name
"""Memory total in MiB: `gputui export` has it; dcgm-exporter's default set does not (then
total = used + free + reserved)."""
assert isinstance(FB_TOTAL_EXPORT.convert, Per)  # (exported in MiB)
_fb_total_bytes = FB_TOTAL_EXPORT.convert.undo
PROCESSES = GPU_PROCESSES.name
PROCESS_MEMORY = next(m.prometheus.name for m in PROCESS_METRICS if m.attr == "gpu_memory" and m.prometheus)
"""`gputui export`'s per-process series (labels pid, process_name, user, type)."""
GPM_BY_NAME: dict[str, GpuMetric] = {
    name: m
    for m in GPM_METRICS
    if m.prometheus is not None
    for name in (m.prometheus.name, *m.prometheus.aliases)
}
"""DCGM's profiling ("DCP") metrics, DCGM_FI_PROF_*: the registry's GPM figures under
dcgm-exporter's names; the `_ACTIVE` ones are ratios 0-1 there."""


def gpm_value(m: GpuMetric, value: float) -> float:
    """A DCGM_FI_PROF_* value in `GpmSample`'s unit: the export's conversion undone (the
    `_ACTIVE` ratios 0-1 as percent), the byte rates as whole bytes."""
    convert = m.prometheus.convert if m.prometheus is not None else None
    return convert.undo(value) if isinstance(convert, Ratio) else round(value)


HINT = "gputui_gpu_efficiency_hint"
"""`gputui export`'s efficiency hints: one series per GPU and hint (label `hint`), value 1."""

#: Every metric name the cluster view reads (for a Prometheus query).
WANTED: tuple[str, ...] = (*SAMPLE_FIELDS, FB_TOTAL, PROCESSES, HINT, *GPM_BY_NAME)
#: What the list of every GPU needs (its columns, flags and summary): a Prometheus refresh
#: asks only for these; a host's view asks for everything of that host.
LIST_WANTED: tuple[str, ...] = (
    *(
        name
        for name, (field_name, _) in SAMPLE_FIELDS.items()
        if field_name
        in {
            "gpu_util",
            "mem_used",
            "mem_free",
            "mem_reserved",
            "temperature",
            "power_draw",
            "clock_event_reasons",
            "xid_last",
            "xid_count",
            "ecc_volatile_uncorrected",
            "ecc_aggregate_uncorrected",
            "remapped_rows_failure",
            "retired_pages_dbe",
            "lost",
        }
    ),
    FB_TOTAL,
    *(name for name, m in GPM_BY_NAME.items() if m.key == "tensor_active"),
)


@dataclass(frozen=True)
class LabelMap:
    """Which label carries each fact (dcgm-exporter's names by default)."""

    host: str = "Hostname"
    gpu: str = "gpu"
    uuid: str = "UUID"
    model: str = "modelName"
    pod: str = "pod"
    namespace: str = "namespace"
    container: str = "container"
    driver: str = "DCGM_FI_DRIVER_VERSION"
    cluster: str = "cluster"
    """The label naming a Slurm or Kubernetes cluster (a Prometheus target label): a job id
    is merged across nodes only within one cluster."""


def usable(v: float) -> bool:
    """Not NaN/inf, not a DCGM blank."""
    return math.isfinite(v) and abs(v) < DCGM_BLANK


# --------------------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterGpu:
    host: str
    """The host's key (see HostState.key)."""
    device: DeviceInfo
    sample: GpuSample
    pod: str = ""
    namespace: str = ""
    container: str = ""
    processes: int | None = None
    """How many processes use it (`gputui export` only); None where the exporter does not
    say (dcgm-exporter): unknown, not 0."""
    procs: tuple[GpuProcess, ...] = ()
    hints: tuple[str, ...] = ()
    """The efficiency hints the exporter publishes now (`gputui export`): their kinds."""

    @property
    def process_count(self) -> int | None:
        """The exporter's count, else the processes listed, else None (unknown)."""
        if self.processes is not None:
            return self.processes
        return len(self.procs) if self.procs else None

    @property
    def key(self) -> str:
        return f"{self.host}\0{self.device.uuid or self.device.index}"

    @property
    def workload(self) -> str:
        """namespace/pod (container), or the empty string."""
        if not self.pod:
            return ""
        text = f"{self.namespace}/{self.pod}" if self.namespace else self.pod
        return f"{text} ({self.container})" if self.container else text


@dataclass(frozen=True)
class HostState:
    key: str
    """Unique per scrape target and host name ("instance" + Hostname)."""
    name: str
    """What to show: the host name, with the target when two targets share one."""
    instance: str
    up: bool
    error: str | None = None
    """Why it is down: the scrape error (direct), "up == 0" (Prometheus)."""
    gpus: tuple[ClusterGpu, ...] = ()
    driver: str = ""
    stale: bool = False
    """The GPUs are the last ones seen before the host went down."""
    jobs: HostJobs = field(default_factory=HostJobs)
    """Its jobs' verdicts and what NCCL's RAS says (gputui/cluster/jobs.py)."""


@dataclass(frozen=True)
class ClusterState:
    hosts: tuple[HostState, ...] = ()
    fetched_at: float = 0.0
    duration: float = 0.0
    """Seconds the refresh took."""
    source: str = ""
    error: str | None = None
    """The whole source failed (Prometheus unreachable): `hosts` are the last good ones."""
    queries: int = 0
    """HTTP requests this refresh made."""
    bytes: int = 0
    """Bytes received this refresh."""
    jobs: tuple[FleetJob, ...] = ()
    """Jobs with a verdict or a RAS problem, their nodes merged, worst first."""
    jobs_left_out: int = 0
    """Job series over the caps (per host and for the fleet): counted, not held."""
    note: str | None = None
    """Something the refresh cut (series over a cap), in one line."""

    @property
    def gpus(self) -> list[ClusterGpu]:
        return [g for h in self.hosts for g in h.gpus]


# --------------------------------------------------------------------------------------
# series -> GPUs
# --------------------------------------------------------------------------------------


@dataclass
class _Gpu:
    labels: Mapping[str, str]
    values: dict[str, float] = field(default_factory=dict)
    procs: list[GpuProcess] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)


def _index(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def gpu_identity(labels: Mapping[str, str], lm: LabelMap) -> str | None:
    """A GPU's key within its host, or None for a series of no GPU."""
    uuid = labels.get(lm.uuid, "")
    gpu = labels.get(lm.gpu, "")
    if not uuid and _index(gpu) is None:
        return None
    return uuid or gpu


JOB_NAMES = frozenset(JOB_SERIES)


def split_jobs(
    series: Iterable[tuple[str, Mapping[str, str], float]],
) -> tuple[list[tuple[str, Mapping[str, str], float]], list[tuple[str, Mapping[str, str], float]]]:
    """(the GPUs' series, the jobs' series): a job's series names a GPU too (the rank's), and
    must never make one."""
    gpus: list[tuple[str, Mapping[str, str], float]] = []
    jobs: list[tuple[str, Mapping[str, str], float]] = []
    for item in series:
        (jobs if item[0] in JOB_NAMES else gpus).append(item)
    return gpus, jobs


def build_gpus(
    host: str, series: Iterable[tuple[str, Mapping[str, str], float]], lm: LabelMap
) -> list[ClusterGpu]:
    """The GPUs of one host from (name, labels, value) series."""
    gpus: dict[str, _Gpu] = {}
    for name, labels, value in series:
        if name in JOB_NAMES:
            continue  # a job's series names its rank's GPU: it never makes one
        ident = gpu_identity(labels, lm)
        if ident is None:
            continue
        g = gpus.get(ident)
        if g is None:
            g = gpus[ident] = _Gpu(labels)
        if name == PROCESS_MEMORY:
            pid = _index(labels.get("pid", ""))
            if pid is not None and usable(value):
                g.procs.append(
                    GpuProcess(
                        gpu_index=_index(labels.get(lm.gpu, "")) or 0,
                        pid=pid,
                        type=labels.get("type", "C")[:3],
                        gpu_memory=round(value),
                        name=labels.get("process_name") or None,
                        user=labels.get("user") or None,
                        visible=False,
                    )
                )
            continue
        if name == HINT:
            kind = labels.get("hint", "")
            if value == 1 and kind in HINT_KINDS and kind not in g.hints:
                g.hints.append(kind)
            continue
        if usable(value):
            g.values[name] = value
    out = [_to_gpu(host, g, lm) for g in gpus.values()]
    out.sort(key=lambda c: (c.device.index, c.device.uuid or ""))
    return out


def _to_gpu(host: str, g: _Gpu, lm: LabelMap) -> ClusterGpu:
    v = g.values
    fields: dict[str, Any] = {}
    for name, (attr, conv) in SAMPLE_FIELDS.items():
        if name in v:
            fields[attr] = conv(v[name])
    gpm: dict[str, Any] = {
        m.gpm.figure: gpm_value(m, v[name]) for name, m in GPM_BY_NAME.items() if name in v and m.gpm
    }
    if gpm:
        fields["gpm"] = checked(GpmSample(**gpm))  # impossible figures: N/A with the reason
    xid = fields.get("xid_last")
    if xid is not None:
        # dcgm-exporter exports the last Xid (0: none); gputui export also its count
        fields["xid_last"] = xid or None
        fields.setdefault("xid_count", 1 if xid else 0)
    index = _index(g.labels.get(lm.gpu, "")) or 0
    sample = GpuSample(index=index, **fields)
    total: int | None = None
    if FB_TOTAL in v:
        total = _fb_total_bytes(v[FB_TOTAL])
    elif sample.mem_used is not None and sample.mem_free is not None:
        total = sample.mem_used + sample.mem_free + (sample.mem_reserved or 0)
    device = DeviceInfo(
        index=index,
        name=g.labels.get(lm.model, "") or "GPU",
        uuid=g.labels.get(lm.uuid) or None,
        bus_id=g.labels.get("pci_bus_id") or None,
        memory_total=total,
        power_limit=sample.power_limit,
    )
    procs = tuple(replace(p, gpu_index=index) for p in g.procs)
    return ClusterGpu(
        host=host,
        device=device,
        sample=sample,
        pod=g.labels.get(lm.pod, ""),
        namespace=g.labels.get(lm.namespace, ""),
        container=g.labels.get(lm.container, ""),
        processes=round(v[PROCESSES]) if PROCESSES in v else None,
        procs=procs,
        hints=tuple(sorted(g.hints, key=HINT_KINDS.index)),
    )


PUBLISHED_HINT = {
    "fp32_no_tensor": "no tensor cores: try TF32 or bf16",
    "tiny_kernels": "SMs idle: tiny kernels or CPU-bound",
    "dram_bound": "memory-bandwidth bound",
    "idle_memory": "idle, holding memory",
    "input_bound": "input-bound: loader workers at 100 % CPU",
}
"""A published hint's words on a card: the local hint's own (telemetry/hints.py), without
the numbers the exporter does not publish."""


def published_hints(g: ClusterGpu) -> tuple[Hint, ...]:
    """The exporter's hints for one GPU as `Hint`s for the Overview's card."""
    return tuple(
        Hint(kind, g.device.index, PUBLISHED_HINT[kind], "published by the exporter", REMEDIES[kind])
        for kind in g.hints
    )


# --------------------------------------------------------------------------------------
# what state a GPU is in (for filters and the summary line)
# --------------------------------------------------------------------------------------

FLAGS = ("busy", "idle", "held_idle", "throttled", "xid", "ecc", "down", "unhealthy")


def gpu_flags(g: ClusterGpu, up: bool, rule: IdleRule) -> frozenset[str]:
    """busy / idle / held_idle (memory held, nothing running: "reserved but idle"),
    throttled, xid, ecc, down; unhealthy = down, Xid, ECC or row-remap failure, GPU lost.
    Idle follows the alerts' idle_memory rule (max_util, min_memory_mib)."""
    s = g.sample
    out: set[str] = set()
    if not up:
        out |= {"down", "unhealthy"}
        return frozenset(out)
    if s.gpu_util is not None:
        if s.gpu_util > rule.max_util:
            out.add("busy")
        elif (s.mem_used or 0) >= rule.min_memory_mib * MIB:
            out.add("held_idle")
        else:
            out.add("idle")
    if s.clock_event_reasons and s.clock_event_reasons & THROTTLED_MASK:
        out.add("throttled")
    if s.xid_last:
        out.add("xid")
    if (
        (s.ecc_volatile_uncorrected or 0) > 0
        or (s.ecc_aggregate_uncorrected or 0) > 0
        or s.remapped_rows_failure
        or (s.retired_pages_dbe or 0) > 0
    ):
        out.add("ecc")
    if out & {"xid", "ecc"} or s.lost:
        out.add("unhealthy")
    return frozenset(out)


@dataclass(frozen=True)
class Summary:
    hosts: int
    hosts_down: int
    gpus: int
    busy: int
    idle: int
    held_idle: int
    unhealthy: int
    throttled: int


def summarize(state: ClusterState, rule: IdleRule) -> Summary:
    counts = dict.fromkeys(FLAGS, 0)
    for h in state.hosts:
        for g in h.gpus:
            for f in gpu_flags(g, h.up, rule):
                counts[f] += 1
    return Summary(
        hosts=len(state.hosts),
        hosts_down=sum(1 for h in state.hosts if not h.up),
        gpus=len(state.gpus),
        busy=counts["busy"],
        idle=counts["idle"],
        held_idle=counts["held_idle"],
        unhealthy=counts["unhealthy"],
        throttled=counts["throttled"],
    )


def host_names(keys: Iterable[tuple[str, str, str]]) -> dict[str, str]:
    """(key, hostname, instance) -> key: display name; a host name that two targets share
    gets its target appended."""
    items = list(keys)
    seen: dict[str, int] = {}
    for _, name, _ in items:
        seen[name] = seen.get(name, 0) + 1
    return {
        key: (name if seen[name] == 1 and name else f"{name or '?'} ({inst})") for key, name, inst in items
    }
