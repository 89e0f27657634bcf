"""The kinds of entry the metric registry (metrics.py, process_metrics.py) is made of: a GPU
quantity (`GpuMetric`), how it is read (`NvmlRead`, `GpmRead`), published on /metrics
(`Export`, with `Per`/`Ratio` conversions) and named in `gputui snapshot` (`Smi`), and the
units and tints the UI maps to text and colours."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from gputui.telemetry.model import DeviceInfo, GpuSample

MIB = 2**20

Unit = Literal[
    "%", "B", "B/s", "W", "MHz", "°C", "mJ", "count", "pstate", "mask", "flag", "s", "text", "command"
]
"""How a value reads: percent, bytes, bytes per second, watts, MHz, °C, millijoules, a
count, a performance state (0-15), a bit mask, a yes/no flag, seconds, untrusted text, and
the process table's command line (already escaped)."""

Tint = Literal["util", "mem", "power", "temp", "clock", "io"]
"""The chart colour a quantity is drawn in (the UI maps each to a theme colour)."""

PromType = Literal["gauge", "unknown"]


@dataclass(frozen=True, slots=True)
class Export:
    """How `/metrics` publishes a quantity."""

    name: str
    type: PromType
    """gauge, or unknown (untyped) for dcgm-exporter's suffix-less counters."""
    help: str
    convert: Per | Callable[[Any], float] = float
    """From the sample's value (known, not None) to the exported number."""
    aliases: tuple[str, ...] = ()
    """The same series' names in other dcgm-exporter versions (read by the cluster view,
    never written)."""


@dataclass(frozen=True, slots=True)
class Smi:
    """How `gputui snapshot` (CSV and JSON) names and writes a quantity."""

    name: str
    kind: Literal["integer", "number", "string", "boolean"]
    unit: str = ""
    """As nvidia-smi heads the CSV column ("MiB", "%", "W", "MHz", "KB/s")."""
    convert: Callable[[Any], Any] | None = None
    """From the sample's value (known, not None) to the written one; None: as it is."""
    own: bool = False
    """gputui's own field (nvidia-smi has no such query field)."""
    decimals: int | None = None
    aliases: tuple[str, ...] = ()
    slow: bool = False
    """Sampled on NVML's slow cadence: a single live snapshot must wait for it."""
    window: bool = False
    """Measured over a window between two slow passes (GPM): a single live snapshot waits
    for the second pass."""


class Per:
    """Whole units of `divisor` (bytes to MiB, bytes/s to KB/s), as DCGM counts (whole units
    down) or, `up`, as nvidia-smi prints memory (rounded up: `SMI_MIB`); `undo` goes back
    (the cluster view reads /metrics into samples)."""

    __slots__ = ("divisor", "up")

    def __init__(self, divisor: int, up: bool = False) -> None:
        self.divisor = divisor
        self.up = up

    def __call__(self, v: Any) -> int:
        return -(-int(v) // self.divisor) if self.up else int(v) // self.divisor

    def undo(self, v: float) -> int:
        return round(v * self.divisor)


def per(divisor: int) -> Per:
    return Per(divisor)


SMI_MIB = Per(MIB, up=True)
"""Bytes as nvidia-smi prints them in MiB: rounded up (20,726.375 MiB prints 20727, an idle
H100's 3.4 MiB prints 4, 0 prints 0; its own captures beside the recordings,
tests/test_nvidia_smi_agreement.py).  `gputui snapshot`'s memory fields use it."""


class Ratio:
    """Percent to a ratio 0-1 (DCGM's _ACTIVE fields); `undo` goes back."""

    __slots__ = ()

    def __call__(self, percent: Any) -> float:
        return float(percent) / 100.0

    def undo(self, v: float) -> float:
        return v * 100.0


as_ratio = Ratio()


Cadence = Literal["tick", "slow", "rare"]
"""When NvmlSource reads a quantity: every tick; on the slow thread's passes (2 s: NVML
samples it over a window); every RARE_EVERY-th slow pass (counters that change rarely)."""


@dataclass(frozen=True, slots=True)
class NvmlRead:
    """How NvmlSource reads a quantity: an nvmlDevice* function called with the GPU's handle
    and `args` (pynvml constants by name, or numbers), then a part of what it returns and a
    conversion; or one NVML field value (`field_id`).  One call serves every entry that reads
    the same function and arguments in one pass (utilization, memory info)."""

    fn: str = ""
    args: tuple[str | int, ...] = ()
    part: str | int | None = None
    """An attribute (or index) of the result; None: the result itself."""
    convert: Callable[[Any], Any] | None = None
    """From NVML's value (known) to the sample's unit."""
    fallback: str = ""
    """Asked with the same arguments when `fn` gives nothing (an older driver's name)."""
    field_id: int | None = None
    """nvmlDeviceGetFieldValues' field instead of `fn`."""
    cadence: Cadence = "tick"


def watts(milliwatts: Any) -> float:
    """NVML's milliwatts as watts (to the milliwatt)."""
    return round(float(milliwatts) / 1000.0, 3)


@dataclass(frozen=True, slots=True)
class GpmRead:
    """How a GPM figure is read (gputui/telemetry/nvml/gpm.py's sampler asks NVML for every
    entry that has one)."""

    figure: str
    """The `GpmSample` field it fills."""
    metric_id: int
    """NVML_GPM_METRIC_* (nvml.h; stable)."""
    name: str
    """The figure in a few words: the detail view's label, and in a reason ("SM active -50 %")."""
    unit: Literal["%", "B/s"] = "%"
    """Percent (0-100), or bytes per second."""
    scale: float = 1.0
    """NVML's value times this is in `unit` (NVML gives MiB/s for throughput)."""


@dataclass(frozen=True, slots=True)
class GpuMetric:
    """One quantity of a `GpuSample`."""

    key: str
    """Its name in the config file's [cards] sparklines (and in code)."""
    field: str
    """The `GpuSample` attribute that holds it, and its history series' name; with `read`
    (a value inside a nested structure, such as GPM's figures), just the series' name."""
    label: str
    """Short label on cards and charts ("UTIL", "TEMP")."""
    unit: Unit
    doc: str
    history: bool = False
    """Kept in history (ring buffers, 1 hour): needed for a chart."""
    chart: bool = False
    """Offered as a card sparkline ([cards] sparklines)."""
    tint: Tint = "util"
    full_scale: Callable[[DeviceInfo, GpuSample], float | None] | None = None
    """What a full bar or chart stands for on this GPU; None: the largest value seen."""
    card: str | None = None
    """Its name in [cards] info, where it may be shown on the card's info line."""
    card_shown: bool = True
    """Shown on the info line unless [cards] info says otherwise."""
    alarm: bool = False
    """Any non-zero value is bad news (shown in the error colour)."""
    snapshot: Smi | None = None
    prometheus: Export | None = None
    read: Callable[[GpuSample], Any] | None = None
    """Where the value is not just `field` (derived from several fields)."""
    gpm: GpmRead | None = None
    """A GPM figure: how it is read; the value comes from `GpuSample.activity`."""
    nvml: NvmlRead | None = None
    """How NvmlSource reads it into `field` (None: composed or read elsewhere: GPM, NVLink
    counters, Xids)."""

    def value(self, g: GpuSample) -> Any:
        return self.read(g) if self.read is not None else getattr(g, self.field)
