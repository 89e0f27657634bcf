"""The metric registry: one entry per quantity gputui samples, and everything that shows,
keeps or exports it derived from that entry.

A GPU quantity (`GpuMetric`, here) or a process column (`ProcessMetric`, in
process_metrics.py) is declared once; the kinds of entry are in metric_types.py.  Each has
its label, unit, whether it is kept in history, offered as a card chart or info item,
sorted on, and its names in `gputui snapshot` (nvidia-smi's `--query-gpu` names) and on
`/metrics` (dcgm-exporter's `DCGM_FI_*`).  The config file's choices and their help, the
history's series, the card's items and charts, the process table's columns and sort keys,
the snapshot fields and the exporter's families are all read off these tables.  Adding an
NVML quantity takes its field on `GpuSample`, an entry here, and its read in `nvml/source.py`.

No Textual, no Rich: how a unit is drawn is the UI's business (`ui/render.py` and
`ui/processes/lines.py` map each `Unit` to its text, tested complete), so a new entry with a
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
from typing import Any, Literal

from gputui.telemetry.metric_types import (
    MIB,
    SMI_MIB,
    Cadence,
    Export,
    GpmRead,
    GpuMetric,
    NvmlRead,
    Smi,
    Tint,
    as_ratio,
    per,
    watts,
)
from gputui.telemetry.model import DeviceInfo, GpuSample

_ECC = "nvmlDeviceGetTotalEccErrors"
_CORRECTED, _UNCORRECTED = "NVML_MEMORY_ERROR_TYPE_CORRECTED", "NVML_MEMORY_ERROR_TYPE_UNCORRECTED"
_PCIE = "nvmlDeviceGetPcieThroughput"


def _kib(v: Any) -> int:
    return int(v) * 1024


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
       snapshot=_S("memory.used", "integer", "MiB", SMI_MIB),
       prometheus=_E("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", per(MIB)),
       nvml=NvmlRead("nvmlDeviceGetMemoryInfo", part="used")),
    _M("mem_free", "mem_free", "FREE", "B", "memory free",
       snapshot=_S("memory.free", "integer", "MiB", SMI_MIB),
       prometheus=_E("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", per(MIB)),
       nvml=NvmlRead("nvmlDeviceGetMemoryInfo", part="free")),
    _M("mem_reserved", "mem_reserved", "RSVD", "B", "memory the driver reserves",
       snapshot=_S("memory.reserved", "integer", "MiB", SMI_MIB),
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
