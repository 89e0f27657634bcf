"""The metric registry: one entry per quantity gputui samples, and everything that shows,
keeps or exports it derived from that entry.

A GPU quantity (`GpuMetric`) or a process column (`ProcessMetric`) is declared here once,
with its label, unit, whether it is kept in history, offered as a card chart or info item,
sorted on, and its names in `gputui snapshot` (nvidia-smi's `--query-gpu` names) and on
`/metrics` (dcgm-exporter's `DCGM_FI_*`).  The config file's choices and their help, the
history's series, the card's items and charts, the process table's columns and sort keys,
the snapshot fields and the exporter's families are all read off these tables.  Adding an
NVML quantity takes its field on `GpuSample`, an entry here, and its read in `nvml/source.py`.

No Textual, no Rich: how a unit is drawn is the UI's business (`ui/render.py` and
`ui/process_lines.py` map each `Unit` to its text, tested complete), so a new entry with a
known unit needs no UI change.

To add, for example:
- a process column (a Slurm job, a pod): the `GpuProcess` field, filled where it is read
  (`host/processes.py`), and `ProcessMetric("job", "JOB", "text", 12, "<", 3, False, host=True,
  doc="...", snapshot=Smi("job", "string", own=True))` — the column, its cell (escaped as
  untrusted text), its sort key and `default_sort` name, its `gputui snapshot` field;
- an NVML GPM quantity (SM active, tensor active, DRAM active, ...): the `GpuSample` field,
  filled by its sampler, and a `GpuMetric` with `prometheus=Export("DCGM_FI_PROF_SM_ACTIVE",
  "gauge", "...", as_ratio)` (DCGM's PROF fields are ratios 0-1), `history`/`chart` to draw
  it on cards, `snapshot=Smi(...)` for `gputui snapshot`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from gputui.telemetry.model import DeviceInfo, GpuProcess, GpuSample

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
    """Whole units of `divisor` (bytes to MiB, bytes/s to KB/s), as nvidia-smi and DCGM count;
    `undo` goes back (the cluster view reads /metrics into samples)."""

    __slots__ = ("divisor",)

    def __init__(self, divisor: int) -> None:
        self.divisor = divisor

    def __call__(self, v: Any) -> int:
        return int(v) // self.divisor

    def undo(self, v: float) -> int:
        return round(v * self.divisor)


def per(divisor: int) -> Per:
    return Per(divisor)


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


_ECC = "nvmlDeviceGetTotalEccErrors"
_CORRECTED, _UNCORRECTED = "NVML_MEMORY_ERROR_TYPE_CORRECTED", "NVML_MEMORY_ERROR_TYPE_UNCORRECTED"
_PCIE = "nvmlDeviceGetPcieThroughput"


def _kib(v: Any) -> int:
    return int(v) * 1024


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


# --------------------------------------------------------------------------------------
# GPU quantities
# --------------------------------------------------------------------------------------


def _full_percent(dev: DeviceInfo, g: GpuSample) -> float | None:
    return 100.0


def temp_scale(dev: DeviceInfo | None) -> int:
    """The temperature a full bar or chart stands for: the slowdown threshold where known."""
    if dev and dev.temp_slowdown:
        return dev.temp_slowdown
    return 90


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


def _xid_errors(g: GpuSample) -> int | None:
    # dcgm-exporter's XID_ERRORS is the last Xid's code, 0 while none was seen
    return None if g.xid_count is None else (g.xid_last or 0)


def _gpm(name: str) -> Callable[[GpuSample], Any]:
    """A GPM figure of the sample (its `activity`), None where GPM measured nothing."""

    def read(g: GpuSample) -> Any:
        w = g.activity
        return None if w is None else getattr(w, name)

    return read


def _pstate_name(v: int) -> str:
    return f"P{v}"


def _mask_hex(v: int) -> str:
    return f"0x{v:016x}"


def _memory_total(dev: DeviceInfo, g: GpuSample) -> float | None:
    return float(dev.memory_total or 0) or None


def _power_scale(dev: DeviceInfo, g: GpuSample) -> float | None:
    return float(g.power_limit or dev.power_limit or 0) or None


def _temp_scale(dev: DeviceInfo, g: GpuSample) -> float | None:
    return float(temp_scale(dev))


def _max_sm(dev: DeviceInfo, g: GpuSample) -> float | None:
    return float(dev.max_sm_clock or 0) or None


def _max_mem(dev: DeviceInfo, g: GpuSample) -> float | None:
    return float(dev.max_mem_clock or 0) or None


_M = GpuMetric
_E = Export
_S = Smi


def _G(
    figure: str,
    metric_id: int,
    label: str,
    name: str,
    doc: str,
    tint: Tint,
    dcgm: str,
    help: str,
    *,
    key: str | None = None,
    rate: bool = False,
) -> GpuMetric:
    """A GPM figure: read by the GPM sampler (`metric_id`), kept in history and offered as a
    chart, a `gpm.*` snapshot field and a DCGM_FI_PROF_* family (the _ACTIVE ones as ratios
    0-1).  A percentage, or with `rate` bytes per second (NVML gives MiB/s).  `key` (and its
    series' name): where the figure's name is a GpuSample field's already (GPM's pcie_rx is
    not NVML's)."""
    unit: Literal["%", "B/s"] = "B/s" if rate else "%"
    return GpuMetric(
        key or figure, key or figure, label, unit, doc, history=True, chart=True, tint=tint,
        full_scale=None if rate else _full_percent, read=_gpm(figure),
        gpm=GpmRead(figure, metric_id, name, unit, MIB if rate else 1.0),
        snapshot=Smi(f"gpm.{figure}", "integer" if rate else "number", unit, own=True, slow=True,
                     window=True),
        prometheus=Export(dcgm, "gauge", help, float if rate else as_ratio),
    )  # fmt: skip


#: Every GPU quantity, in the order cards, the config file's choices, snapshots and
#: /metrics list them.
GPU_METRICS: tuple[GpuMetric, ...] = (
    _M("util", "gpu_util", "UTIL", "%", "percent of time a kernel ran (last sample period)",
       history=True, chart=True, tint="util", full_scale=_full_percent,
       snapshot=_S("utilization.gpu", "integer", "%"),
       prometheus=_E("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
       nvml=NvmlRead("nvmlDeviceGetUtilizationRates", part="gpu")),
    _M("mem", "mem_used", "MEM", "B", "memory used (not counting the driver's reserve)",
       history=True, chart=True, tint="mem", full_scale=_memory_total,
       snapshot=_S("memory.used", "integer", "MiB", per(MIB)),
       prometheus=_E("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", per(MIB)),
       nvml=NvmlRead("nvmlDeviceGetMemoryInfo", part="used")),
    _M("mem_free", "mem_free", "FREE", "B", "memory free",
       snapshot=_S("memory.free", "integer", "MiB", per(MIB)),
       prometheus=_E("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", per(MIB)),
       nvml=NvmlRead("nvmlDeviceGetMemoryInfo", part="free")),
    _M("mem_reserved", "mem_reserved", "RSVD", "B", "memory the driver reserves",
       snapshot=_S("memory.reserved", "integer", "MiB", per(MIB)),
       prometheus=_E("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB).",
                     per(MIB)),
       nvml=NvmlRead("nvmlDeviceGetMemoryInfo", part="reserved")),
    _M("power", "power_draw", "PWR", "W", "power draw",
       history=True, chart=True, tint="power", full_scale=_power_scale,
       snapshot=_S("power.draw", "number", "W", decimals=2),
       prometheus=_E("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
       nvml=NvmlRead("nvmlDeviceGetPowerUsage", convert=watts)),
    _M("power_limit", "power_limit", "LIMIT", "W", "power limit the driver enforces now",
       prometheus=_E("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "gauge", "Power limit the driver enforces (in W)."),
       nvml=NvmlRead("nvmlDeviceGetEnforcedPowerLimit", convert=watts)),
    _M("temp", "temperature", "TEMP", "°C", "GPU core temperature, °C",
       history=True, chart=True, tint="temp", full_scale=_temp_scale,
       snapshot=_S("temperature.gpu", "integer"),
       prometheus=_E("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
       nvml=NvmlRead("nvmlDeviceGetTemperature", ("NVML_TEMPERATURE_GPU",))),
    _M("mem_temp", "memory_temperature", "MTEMP", "°C", "memory (HBM) temperature, °C",
       history=True, chart=True, tint="temp", full_scale=_temp_scale,
       card="mem_temp", card_shown=False,
       snapshot=_S("temperature.memory", "integer"),
       prometheus=_E("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
       nvml=NvmlRead(field_id=82)),
    _M("sm_clock", "sm_clock", "SMCLK", "MHz", "SM clock",
       history=True, chart=True, tint="clock", full_scale=_max_sm,
       snapshot=_S("clocks.current.sm", "integer", "MHz", aliases=("clocks.sm",)),
       prometheus=_E("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
       nvml=NvmlRead("nvmlDeviceGetClockInfo", ("NVML_CLOCK_SM",))),
    _M("mem_clock", "mem_clock", "MCLK", "MHz", "memory clock",
       history=True, chart=True, tint="clock", full_scale=_max_mem,
       snapshot=_S("clocks.current.memory", "integer", "MHz", aliases=("clocks.mem", "clocks.memory")),
       prometheus=_E("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
       nvml=NvmlRead("nvmlDeviceGetClockInfo", ("NVML_CLOCK_MEM",))),
    _M("graphics_clock", "graphics_clock", "GCLK", "MHz", "graphics clock",
       snapshot=_S("clocks.current.graphics", "integer", "MHz", aliases=("clocks.gr", "clocks.graphics")),
       nvml=NvmlRead("nvmlDeviceGetClockInfo", ("NVML_CLOCK_GRAPHICS",))),
    _M("video_clock", "video_clock", "VCLK", "MHz", "video (encoder/decoder) clock",
       snapshot=_S("clocks.current.video", "integer", "MHz", aliases=("clocks.video",)),
       prometheus=_E("DCGM_FI_DEV_VIDEO_CLOCK", "gauge", "Video encoder/decoder clock frequency (in MHz)."),
       nvml=NvmlRead("nvmlDeviceGetClockInfo", ("NVML_CLOCK_VIDEO",))),
    _M("mem_util", "mem_util", "MBW", "%", "percent of time device memory was read or written",
       history=True, chart=True, tint="mem", full_scale=_full_percent,
       snapshot=_S("utilization.memory", "integer", "%"),
       prometheus=_E("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
       nvml=NvmlRead("nvmlDeviceGetUtilizationRates", part="memory")),
    _M("pstate", "pstate", "P-state", "pstate", "performance state, P0 (fastest) to P15", card="pstate",
       snapshot=_S("pstate", "string", convert=_pstate_name),
       prometheus=_E("gputui_gpu_pstate", "gauge", "Performance state, 0 (fastest) to 15."),
       nvml=NvmlRead("nvmlDeviceGetPerformanceState")),
    _M("pcie_gen", "pcie_gen", "PCIe", "count", "PCIe generation now (drops at idle)", card="pcie",
       snapshot=_S("pcie.link.gen.current", "integer", aliases=("pcie.link.gen.gpucurrent",)),
       prometheus=_E("DCGM_FI_DEV_PCIE_LINK_GEN", "gauge", "PCIe link generation now."),
       nvml=NvmlRead("nvmlDeviceGetCurrPcieLinkGeneration")),
    _M("pcie_width", "pcie_width", "LANES", "count", "PCIe lanes now",
       snapshot=_S("pcie.link.width.current", "integer"),
       prometheus=_E("DCGM_FI_DEV_PCIE_LINK_WIDTH", "gauge", "PCIe link width now (lanes)."),
       nvml=NvmlRead("nvmlDeviceGetCurrPcieLinkWidth")),
    _M("pcie_rx", "pcie_rx", "RX", "B/s", "PCIe receive throughput (NVML, 20 ms window)",
       history=True, chart=True, tint="io", card="rx",
       snapshot=_S("pcie.throughput.rx", "integer", "KB/s", per(1024), own=True, slow=True),
       prometheus=_E("DCGM_FI_DEV_PCIE_RX_THROUGHPUT", "unknown",
                     "Total number of bytes received through PCIe RX (in KB) via NVML.", per(1024)),
       nvml=NvmlRead(_PCIE, ("NVML_PCIE_UTIL_RX_BYTES",), convert=_kib, cadence="slow")),
    _M("pcie_tx", "pcie_tx", "TX", "B/s", "PCIe transmit throughput (NVML, 20 ms window)",
       history=True, chart=True, tint="io", card="tx",
       snapshot=_S("pcie.throughput.tx", "integer", "KB/s", per(1024), own=True, slow=True),
       prometheus=_E("DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "unknown",
                     "Total number of bytes transmitted through PCIe TX (in KB) via NVML.", per(1024)),
       nvml=NvmlRead(_PCIE, ("NVML_PCIE_UTIL_TX_BYTES",), convert=_kib, cadence="slow")),
    # GPM (gputui/telemetry/nvml/gpm.py samples every entry with `gpm`): GpuSample.activity, None
    # where not measured
    _G("sm_active", 2, "SMACT", "SM active", "percent of SM cycles with a warp resident (GPM)", "util",
       "DCGM_FI_PROF_SM_ACTIVE", "The ratio of cycles an SM has at least 1 warp assigned."),
    _G("tensor_active", 5, "TENSR", "tensor (any)", "percent of cycles a tensor pipe was active (GPM)",
       "util", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles any tensor pipe is active."),
    _G("dram_active", 10, "DRAM", "DRAM bandwidth", "device memory bandwidth used, percent (GPM)", "mem",
       "DCGM_FI_PROF_DRAM_ACTIVE",
       "Ratio of cycles the device memory interface is active sending or receiving data."),
    _G("sm_occupancy", 3, "OCC", "SM occupancy", "warps resident on the SMs, percent of the most (GPM)",
       "util", "DCGM_FI_PROF_SM_OCCUPANCY", "The ratio of number of warps resident on an SM."),
    _G("fp32_active", 12, "FP32", "FP32 pipe", "percent of cycles the FP32 pipes were active (GPM)",
       "power", "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "Ratio of cycles the fp32 pipes are active."),
    _G("fp16_active", 13, "FP16", "FP16 pipe", "percent of cycles the FP16 pipes were active (GPM)",
       "power", "DCGM_FI_PROF_PIPE_FP16_ACTIVE", "Ratio of cycles the fp16 pipes are active."),
    _G("fp64_active", 11, "FP64", "FP64 pipe", "percent of cycles the FP64 pipes were active (GPM)",
       "power", "DCGM_FI_PROF_PIPE_FP64_ACTIVE", "Ratio of cycles the fp64 pipes are active."),
    _G("graphics_active", 1, "GR", "engine active", "percent of time the graphics engine was busy (GPM)",
       "util", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active."),
    _G("tensor_hmma_active", 7, "HMMA", "tensor HMMA",
       "percent of cycles the tensor pipes did half-precision MMA (GPM)", "util",
       "DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active."),
    _G("tensor_imma_active", 9, "IMMA", "tensor IMMA",
       "percent of cycles the tensor pipes did integer MMA (GPM)", "util",
       "DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE", "Ratio of cycles the integer tensor (IMMA) pipe is active."),
    _G("tensor_dfma_active", 6, "DFMA", "tensor DFMA",
       "percent of cycles the tensor pipes did FP64 MMA (GPM)", "util",
       "DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE", "Ratio of cycles the FP64 tensor (DFMA) pipe is active."),
    _G("pcie_rx", 21, "PCIRX", "PCIe RX", "PCIe bytes received per second, GPM's counter", "io",
       "DCGM_FI_PROF_PCIE_RX_BYTES",
       "The rate of data received over the PCIe bus - including both protocol headers "
       "and data payloads - in bytes per second.", key="gpm_pcie_rx", rate=True),
    _G("pcie_tx", 20, "PCITX", "PCIe TX", "PCIe bytes sent per second, GPM's counter", "io",
       "DCGM_FI_PROF_PCIE_TX_BYTES",
       "The rate of data transmitted over the PCIe bus - including both protocol headers "
       "and data payloads - in bytes per second.", key="gpm_pcie_tx", rate=True),
    _G("nvlink_rx", 60, "NVLRX", "NVLink RX", "NVLink bytes received per second, all links (GPM)", "io",
       "DCGM_FI_PROF_NVLINK_RX_BYTES",
       "The rate of data received over NVLink, not including protocol headers, in bytes per second.",
       key="gpm_nvlink_rx", rate=True),
    _G("nvlink_tx", 61, "NVLTX", "NVLink TX", "NVLink bytes sent per second, all links (GPM)", "io",
       "DCGM_FI_PROF_NVLINK_TX_BYTES",
       "The rate of data transmitted over NVLink, not including protocol headers, in bytes per second.",
       key="gpm_nvlink_tx", rate=True),
    _M("enc", "encoder_util", "ENC", "%", "video encoder utilization", card="enc",
       snapshot=_S("utilization.encoder", "integer", "%"),
       prometheus=_E("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %)."),
       nvml=NvmlRead("nvmlDeviceGetEncoderUtilization", part=0)),
    _M("dec", "decoder_util", "DEC", "%", "video decoder utilization", card="dec",
       snapshot=_S("utilization.decoder", "integer", "%"),
       prometheus=_E("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."),
       nvml=NvmlRead("nvmlDeviceGetDecoderUtilization", part=0)),
    _M("fan", "fan_speed", "FAN", "%", "fan speed, percent of its maximum", card="fan",
       snapshot=_S("fan.speed", "integer", "%"),
       prometheus=_E("DCGM_FI_DEV_FAN_SPEED", "gauge", "Fan speed (in %)."),
       nvml=NvmlRead("nvmlDeviceGetFanSpeed")),
    _M("ecc", "ecc_volatile_uncorrected", "ECC", "count", "uncorrected ECC errors since the driver loaded",
       card="ecc", alarm=True,
       snapshot=_S("ecc.errors.uncorrected.volatile.total", "integer"),
       prometheus=_E("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "unknown",
                     "Total number of double-bit volatile ECC errors."),
       nvml=NvmlRead(_ECC, (_UNCORRECTED, "NVML_VOLATILE_ECC"))),
    _M("ecc_corrected", "ecc_volatile_corrected", "ECC CORR", "count",
       "corrected ECC errors since the driver loaded",
       snapshot=_S("ecc.errors.corrected.volatile.total", "integer"),
       prometheus=_E("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "unknown",
                     "Total number of single-bit volatile ECC errors."),
       nvml=NvmlRead(_ECC, (_CORRECTED, "NVML_VOLATILE_ECC"))),
    _M("ecc_aggregate_corrected", "ecc_aggregate_corrected", "ECC CORR", "count",
       "corrected ECC errors, lifetime",
       snapshot=_S("ecc.errors.corrected.aggregate.total", "integer"),
       prometheus=_E("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "unknown",
                     "Total number of single-bit persistent ECC errors."),
       nvml=NvmlRead(_ECC, (_CORRECTED, "NVML_AGGREGATE_ECC"))),
    _M("ecc_aggregate_uncorrected", "ecc_aggregate_uncorrected", "ECC", "count",
       "uncorrected ECC errors, lifetime",
       snapshot=_S("ecc.errors.uncorrected.aggregate.total", "integer"),
       prometheus=_E("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "unknown",
                     "Total number of double-bit persistent ECC errors."),
       nvml=NvmlRead(_ECC, (_UNCORRECTED, "NVML_AGGREGATE_ECC"))),
    _M("clock_events", "clock_event_reasons", "CLOCKS", "mask", "NVML clock-event reason bit mask, hex",
       snapshot=_S("clocks_event_reasons.active", "string", convert=_mask_hex,
                   aliases=("clocks_throttle_reasons.active",)),
       prometheus=_E("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge",
                     "Current clock event (throttle) reasons, NVML bit mask.",
                     aliases=("DCGM_FI_DEV_CLOCKS_EVENT_REASONS",)),
       nvml=NvmlRead("nvmlDeviceGetCurrentClocksEventReasons",
                     fallback="nvmlDeviceGetCurrentClocksThrottleReasons")),  # (alias: dcgm-exporter 3.3+)
    _M("energy", "energy", "ENERGY", "mJ", "energy used since the driver loaded",
       snapshot=_S("energy.consumption", "integer", "mJ", own=True, slow=True),
       prometheus=_E("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "unknown",
                     "Total energy consumption since boot (in mJ)."),
       nvml=NvmlRead("nvmlDeviceGetTotalEnergyConsumption", cadence="rare")),
    # memory and link health (NVML's slow cadence: absent until its first pass)
    _M("pcie_replays", "pcie_replay_counter", "REPLAYS", "count", "PCIe replays since the driver loaded",
       prometheus=_E("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "unknown", "Total number of PCIe retries."),
       nvml=NvmlRead("nvmlDeviceGetPcieReplayCounter", cadence="rare")),
    _M("remapped_uncorrected", "remapped_rows_uncorrected", "REMAP", "count",
       "memory rows remapped after uncorrectable errors",
       prometheus=_E("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "unknown",
                     "Number of remapped rows for uncorrectable errors"),
       nvml=NvmlRead("nvmlDeviceGetRemappedRows", part=1, cadence="rare")),
    _M("remapped_corrected", "remapped_rows_corrected", "REMAP", "count",
       "memory rows remapped after correctable errors",
       prometheus=_E("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "unknown",
                     "Number of remapped rows for correctable errors"),
       nvml=NvmlRead("nvmlDeviceGetRemappedRows", part=0, cadence="rare")),
    _M("remap_failure", "remapped_rows_failure", "REMAP FAIL", "flag", "a row remap failed",
       prometheus=_E("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
       nvml=NvmlRead("nvmlDeviceGetRemappedRows", part=3, convert=bool, cadence="rare")),
    _M("xid", "xid_last", "XID", "count", "the code of the last Xid event (0: none seen)", read=_xid_errors,
       prometheus=_E("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.")),
    _M("retired_sbe", "retired_pages_sbe", "RETIRED", "count", "pages retired after single-bit errors",
       prometheus=_E("DCGM_FI_DEV_RETIRED_SBE", "unknown",
                     "Total number of retired pages due to single-bit errors."),
       nvml=NvmlRead("nvmlDeviceGetRetiredPages", (0,), convert=len, cadence="rare")),
    _M("retired_dbe", "retired_pages_dbe", "RETIRED", "count", "pages retired after double-bit errors",
       prometheus=_E("DCGM_FI_DEV_RETIRED_DBE", "unknown",
                     "Total number of retired pages due to double-bit errors."),
       nvml=NvmlRead("nvmlDeviceGetRetiredPages", (1,), convert=len, cadence="rare")),
    _M("retired_pending", "retired_pages_pending", "RETIRE PENDING", "flag",
       "retired pages wait for the next GPU reset (pre-Ampere GPUs)",
       nvml=NvmlRead("nvmlDeviceGetRetiredPagesPendingStatus", convert=bool, cadence="rare")),
    # gputui's own (dcgm-exporter has no such quantity)
    _M("remap_pending", "remapped_rows_pending", "REMAP PENDING", "flag",
       "a memory row remap waits for the next GPU reset",
       prometheus=_E("gputui_gpu_row_remap_pending", "gauge",
                     "1 when a memory row remap waits for the next GPU reset "
                     "(the bad row is in use until then)."),
       nvml=NvmlRead("nvmlDeviceGetRemappedRows", part=2, convert=bool, cadence="rare")),
    _M("xid_count", "xid_count", "XIDS", "count", "Xid events since gputui began watching",
       prometheus=_E("gputui_gpu_xid_events", "gauge",
                     "Xid events (driver-reported critical errors) of the GPU "
                     "since gputui started watching.")),
    _M("nvlink_rx", "nvlink_rx", "NVL RX", "B/s", "data received over all NVLinks, bytes per second",
       prometheus=_E("gputui_gpu_nvlink_receive_bytes_per_second", "gauge",
                     "Data received over all NVLinks of the GPU, bytes per second "
                     "(NVML throughput counters).")),
    _M("nvlink_tx", "nvlink_tx", "NVL TX", "B/s", "data sent over all NVLinks, bytes per second",
       prometheus=_E("gputui_gpu_nvlink_transmit_bytes_per_second", "gauge",
                     "Data sent over all NVLinks of the GPU, bytes per second "
                     "(NVML throughput counters).")),
)  # fmt: skip

GPU_METRIC: dict[str, GpuMetric] = {m.key: m for m in GPU_METRICS}
GPM_METRICS: tuple[GpuMetric, ...] = tuple(m for m in GPU_METRICS if m.gpm is not None)
NVML_READS: dict[Cadence, tuple[tuple[str, NvmlRead], ...]] = {
    cadence: tuple((m.field, m.nvml) for m in GPU_METRICS if m.nvml is not None and m.nvml.cadence == cadence)
    for cadence in ("tick", "slow", "rare")
}
"""(GpuSample field, its read) for each cadence: what NvmlSource asks NVML for."""
"""The GPM figures, in the order GPM_READS asks NVML for them."""
GPM_READS: tuple[GpmRead, ...] = tuple(m.gpm for m in GPM_METRICS if m.gpm is not None)
HISTORY_FIELDS: tuple[str, ...] = tuple(m.field for m in GPU_METRICS if m.history)
"""`GpuSample` fields kept in history."""
CARD_CHARTS: tuple[str, ...] = tuple(m.key for m in GPU_METRICS if m.chart)
"""The config file's [cards] sparklines choices."""
CARD_ITEMS: dict[str, GpuMetric] = {m.card: m for m in GPU_METRICS if m.card is not None}
"""[cards] info item name -> its quantity (the card composes the PCIe item: generation and
width, against their maximum)."""
CARD_DEFAULT_ITEMS: tuple[str, ...] = tuple(
    m.card for m in GPU_METRICS if m.card is not None and m.card_shown
)

#: Per-GPU families of /metrics that are not a `GpuSample` quantity above.
FB_TOTAL = Export("DCGM_FI_DEV_FB_TOTAL", "gauge", "Framebuffer memory total (in MiB).", per(MIB))
"""From the GPU's static facts (dcgm-exporter's default set does not have it)."""
GPU_LOST = Export("gputui_gpu_lost", "gauge", "1 when NVML reports the GPU fell off the bus.")
GPU_PROCESSES = Export("gputui_gpu_processes", "gauge", "Processes using the GPU.")


# --------------------------------------------------------------------------------------
# process columns
# --------------------------------------------------------------------------------------


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
       snapshot=_S("used_gpu_memory", "integer", "MiB", per(MIB), aliases=("used_memory",)),
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
