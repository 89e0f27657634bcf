"""The process table's columns (`ProcessMetric`): title, width, unit, sort, and where set the
process's field in snapshots and on /metrics.  The second half of the metric registry
(metrics.py holds the GPU quantities)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from gputui.telemetry.metric_types import MIB, SMI_MIB, Export, Smi, Unit, as_ratio, per
from gputui.telemetry.model import GpuProcess

_E = Export
_S = Smi


class ProcessView(Protocol):
    """What a process column reads: the process, and what the table derived from it."""

    @property
    def proc(self) -> GpuProcess: ...
    @property
    def elapsed(self) -> float | None: ...
    @property
    def command(self) -> str: ...
    @property
    def job(self) -> str:
        """The JOB column's text (escaped), "" when unknown."""
        ...

    @property
    def gpu_text(self) -> str:
        """The GPU column's text (a launcher's row names its ranks' GPUs)."""
        ...


@dataclass(frozen=True, slots=True)
class ProcessMetric:
    """One column of the process table (and, where set, a process field of snapshots and
    /metrics)."""

    key: str
    title: str
    unit: Unit
    width: int
    """Cells; 0 = takes the rest of the line (the command)."""
    align: Literal["<", ">"] = ">"
    priority: int = 0
    """0 = always shown; higher numbers are dropped first when the terminal is narrow."""
    descending: bool = True
    """The direction a sort by this column starts in (largest first for numbers)."""
    doc: str = ""
    """What it is (the help of its snapshot field)."""
    field: str | None = None
    """The `GpuProcess` attribute it shows (also its config-file sort name); None: `key`."""
    sort_names: tuple[str, ...] = ()
    """More names the config file's `default_sort` accepts for it (GpuProcess fields)."""
    inverted: bool = False
    """Its sort names run the other way (an older start time is a longer TIME)."""
    host: bool = False
    """A host-side fact: blank where the process is not visible from here."""
    history: bool = False
    """Kept in per-process history while the process lives."""
    snapshot: Smi | None = None
    """Its field in `gputui snapshot --processes` (the process's `field`, converted)."""
    prometheus: Export | None = None
    read: Callable[[ProcessView], Any] | None = None
    """Where the value is not just the process's `field`."""
    cell: Callable[[ProcessView], str] | None = None
    """Where the cell's text is not the value in its unit's format (already display text)."""
    sort: Callable[[ProcessView], Any] | None = None
    """Where sorting is not by the value (None sorts last)."""

    @property
    def attr(self) -> str:
        return self.field or self.key

    def value(self, row: ProcessView) -> Any:
        return self.read(row) if self.read is not None else getattr(row.proc, self.attr)

    @property
    def config_names(self) -> tuple[str, ...]:
        """The names `default_sort` takes for this column."""
        return (self.attr, *self.sort_names)


_P = ProcessMetric

#: The process table's columns, left to right.
PROCESS_METRICS: tuple[ProcessMetric, ...] = (
    _P("gpu", "GPU", "count", 3, ">", 0, False, field="gpu_index", cell=lambda r: r.gpu_text,
       snapshot=_S("gpu_index", "integer", own=True), doc="NVML index of the GPU"),
    _P("pid", "PID", "count", 7, ">", 0, False, doc="process id in the host's PID namespace",
       snapshot=_S("pid", "integer")),
    _P("user", "USER", "text", 10, "<", 1, False, doc="owner", snapshot=_S("user", "string", own=True)),
    _P("type", "TYPE", "text", 4, "<", 5, False, doc="C compute, G graphics, C+G both, M MPS",
       snapshot=_S("type", "string", own=True)),
    _P("gpu_memory", "GPU MEM", "B", 8, ">", 0, True, history=True, doc="GPU memory the process holds",
       snapshot=_S("used_gpu_memory", "integer", "MiB", SMI_MIB, aliases=("used_memory",)),
       prometheus=_E("gputui_process_gpu_memory_bytes", "gauge", "GPU memory held by the process.")),
    _P("sm_util", "SM%", "%", 4, ">", 0, True, history=True, doc="SM utilization of the process (sampled)",
       snapshot=_S("utilization.sm", "integer", "%", own=True, slow=True),
       prometheus=_E("gputui_process_sm_utilization_ratio", "gauge",
                     "SM utilization of the process (NVML sampled), 0-1.", as_ratio)),
    _P("mem_util", "MBW%", "%", 4, ">", 3, True, doc="memory bandwidth utilization of the process",
       snapshot=_S("utilization.memory", "integer", "%", own=True, slow=True)),
    _P("enc_util", "ENC%", "%", 4, ">", 6, True, doc="encoder utilization of the process",
       snapshot=_S("utilization.encoder", "integer", "%", own=True, slow=True)),
    _P("dec_util", "DEC%", "%", 4, ">", 6, True, doc="decoder utilization of the process",
       snapshot=_S("utilization.decoder", "integer", "%", own=True, slow=True)),
    _P("cpu_percent", "CPU%", "%", 5, ">", 2, True, host=True, doc="CPU use, percent of one core",
       snapshot=_S("cpu_percent", "number", "%", own=True, decimals=1),
       prometheus=_E("gputui_process_cpu_utilization_ratio", "gauge", "CPU used by the process, in cores.",
                     as_ratio)),
    _P("rss", "HOST MEM", "B", 8, ">", 4, True, host=True, doc="resident host memory (RSS)",
       snapshot=_S("host_memory", "integer", "MiB", per(MIB), own=True),
       prometheus=_E("gputui_process_resident_memory_bytes", "gauge",
                     "Host resident memory of the process.")),
    _P("elapsed", "TIME", "s", 6, ">", 2, True, field="create_time", host=True, inverted=True,
       doc="time since the process started",
       read=lambda r: r.elapsed,
       prometheus=_E("gputui_process_start_time_seconds", "gauge", "When the process started (Unix time).")),
    _P("job", "JOB", "text", 18, "<", 4, False, doc="the job, pod or container the process belongs to",
       read=lambda r: r.job, cell=lambda r: r.job, sort=lambda r: r.job.lower() or None),
    _P("command", "COMMAND", "command", 0, "<", 0, False, field="name", sort_names=("cmdline",),
       doc="the command line",
       read=lambda r: r.command),
)  # fmt: skip

PROCESS_METRIC: dict[str, ProcessMetric] = {m.key: m for m in PROCESS_METRICS}
PROCESS_HISTORY_FIELDS: tuple[str, ...] = tuple(m.attr for m in PROCESS_METRICS if m.history)
"""`GpuProcess` fields kept per process."""
SORT_KEYS: tuple[str, ...] = tuple(n for m in PROCESS_METRICS for n in m.config_names)
"""The config file's `default_sort` names (GpuProcess fields), in column order."""


def sort_field(name: str) -> tuple[ProcessMetric, bool] | None:
    """The column a `default_sort` name (a GpuProcess field or a column key) sorts by, and
    whether it runs the other way; None for a name that is no column."""
    for m in PROCESS_METRICS:
        if name in m.config_names:
            return m, m.inverted
        if name == m.key:
            return m, False
    return None
