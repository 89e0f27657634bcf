"""NVML GPM (GPU Performance Monitoring): what the SMs, tensor cores and memory really did.

NVML's "utilization" is the share of time in which any kernel ran: 100 % for a loop of tiny
kernels that leaves 131 of 132 SMs idle, and for a float32 run that never touches the tensor
cores.  GPM (Hopper and newer) counts the real activity.  `GpmSampler` takes one GPM sample
per GPU on NvmlSource's slow cadence and turns each pair of samples into a `GpmSample`
(`nvmlGpmMetricsGet` over the window between them); per GPU instance through
`nvmlGpmMigSampleGet` when MIG is on.  Where GPM cannot be read the sample says why
(`GpmSample.unavailable`), never a 0.

Which figures it asks NVML for is the metric registry's business: every `GpuMetric` with a
`GpmRead` (gputui/telemetry/metrics.py, `GPM_READS`: NVML's metric id, the GpmSample field,
its unit), where its label, snapshot field and dcgm-exporter name live too.
No pynvml import here: the sampler is handed `Nvml` (gputui.telemetry.nvml.query).
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gputui.telemetry.gpm_check import checked, invalid_reason
from gputui.telemetry.metrics import GPM_READS
from gputui.telemetry.model import GpmSample

if TYPE_CHECKING:
    from gputui.telemetry.nvml.query import Nvml

__all__ = ["GpmSampler", "checked", "invalid_reason"]


# NVML return codes (nvml.h)
_NOT_SUPPORTED = 3
_NO_PERMISSION = 4
_FUNCTION_NOT_FOUND = 13
_METRICS_GET_VERSION = 1
_SUPPORT_VERSION = 1
_MAX_METRICS = 1024
"""Entries in our metrics-get struct (40 KB, made for each window's figures: the GPUs of a
one-shot snapshot close their windows at once).  NVML reads `numMetrics` of them
(we ask for 15); the C struct's array is NVML_GPM_METRIC_MAX long (477 in driver 580, and
it grows), so the room is generous in case a driver clears its own full length."""

HOPPER = 9
"""nvmlDeviceGetArchitecture's value for Hopper, the first architecture with GPM."""

NO_BINDINGS = "these nvidia-ml-py bindings have no GPM functions (upgrade nvidia-ml-py)"
NO_DRIVER = "this driver has no GPM (nvmlGpmQueryDeviceSupport is missing: a driver older than 520?)"
NO_PERMISSION = (
    "no permission to read GPM counters (the driver restricts profiling to root: "
    "NVreg_RestrictProfilingToAdminUsers)"
)
MIG_WITHOUT_CALL = "MIG is on and this driver has no per-instance GPM (nvmlGpmMigSampleGet)"


def not_supported_reason(architecture: str | None, arch_code: int | None) -> str:
    """Why nvmlGpmQueryDeviceSupport said no: the GPU's age, or (Hopper and newer) the
    setup — virtual GPUs without profiling enabled are the common case."""
    if arch_code is not None and arch_code < HOPPER:
        return f"GPM needs a Hopper or newer GPU (this one is {architecture or 'older'})"
    return "the driver reports no GPM support for this GPU (a virtual GPU without profiling?)"


class _Metric(ctypes.Structure):
    _fields_ = [
        ("metricId", ctypes.c_uint),
        ("nvmlReturn", ctypes.c_uint),
        ("value", ctypes.c_double),
        ("shortName", ctypes.c_char_p),
        ("longName", ctypes.c_char_p),
        ("unit", ctypes.c_char_p),
    ]


class _MetricsGet(ctypes.Structure):
    """nvmlGpmMetricsGet_t with room for `_MAX_METRICS` entries (NVML reads `numMetrics`)."""

    _fields_ = [
        ("version", ctypes.c_uint),
        ("numMetrics", ctypes.c_uint),
        ("sample1", ctypes.c_void_p),
        ("sample2", ctypes.c_void_p),
        ("metrics", _Metric * _MAX_METRICS),
    ]


@dataclass
class _Stream:
    """Two GPM sample buffers of one GPU (or one GPU instance), used in turn."""

    samples: list[Any]
    gpu_instance_id: int | None = None
    taken: float | None = None
    """time.monotonic() of the buffer holding the previous sample; None before the first."""
    current: int = 0
    """Which buffer the previous sample is in."""


@dataclass
class _GpuState:
    unavailable: str | None = None
    """Set once GPM is known not to work for this GPU (asked once, not every pass)."""
    streams: dict[int | None, _Stream] = field(default_factory=dict)
    """GPU instance id (None: the whole GPU) -> its sample pair."""


@dataclass
class GpmCost:
    """What the last pass cost, for benchmarks (bench/gpm_cost.py)."""

    sample_get_s: list[float] = field(default_factory=list)
    metrics_get_s: list[float] = field(default_factory=list)


class GpmSampler:
    """GPM for every GPU of one NVML session; `sample(i, handle, ...)` on each slow pass."""

    def __init__(self, nvml: Nvml) -> None:
        self._nv = nvml
        self._gpus: dict[int, _GpuState] = {}
        self.cost = GpmCost()

    # ---- support ----------------------------------------------------------------------

    def _call(self, fn: str, *args: Any, device: int) -> tuple[Any, int | None]:
        value, code, _ = self._nv.attempt(fn, *args, device=device)
        return value, code

    def _support(self, i: int, h: Any, architecture: str | None, arch_code: int | None) -> str | None:
        """None when GPM works on GPU i, else why not (asked once per GPU)."""
        lib = self._nv.lib
        if getattr(lib, "nvmlGpmSampleAlloc", None) is None:
            return NO_BINDINGS
        support, code = self._call("nvmlGpmQueryDeviceSupport", h, device=i)
        if code == _FUNCTION_NOT_FOUND:
            return NO_DRIVER
        if code == _NO_PERMISSION:
            return NO_PERMISSION
        if code is not None or not getattr(support, "isSupportedDevice", 0):
            return not_supported_reason(architecture, arch_code)
        return None

    def _stream(self, state: _GpuState, i: int, gi: int | None) -> _Stream | str:
        stream = state.streams.get(gi)
        if stream is not None:
            return stream
        samples: list[Any] = []
        for _ in range(2):
            s, code = self._call("nvmlGpmSampleAlloc", device=i)
            if code is not None:
                for done in samples:
                    self._call("nvmlGpmSampleFree", done, device=i)
                return f"nvmlGpmSampleAlloc failed (NVML error {code})"
            samples.append(s)
        stream = state.streams[gi] = _Stream(samples, gi)
        return stream

    # ---- one slow pass ----------------------------------------------------------------

    def sample(
        self,
        i: int,
        h: Any,
        *,
        architecture: str | None = None,
        arch_code: int | None = None,
        mig_instances: tuple[int, ...] | None = None,
    ) -> GpmSample | None:
        """Take GPU i's next GPM sample; the figures over the window since its last one.

        None on the first pass (no window yet).  `mig_instances`: the GPU instance ids when
        MIG is on (None: MIG off).  Raises GpuLost when the GPU has fallen off the bus."""
        state = self._gpus.get(i)
        if state is None:
            state = self._gpus[i] = _GpuState(self._support(i, h, architecture, arch_code))
        if state.unavailable is not None:
            return GpmSample(unavailable=state.unavailable)
        if mig_instances is None:
            return self._window(state, i, h, None)
        if getattr(self._nv.lib, "nvmlGpmMigSampleGet", None) is None:
            return GpmSample(unavailable=MIG_WITHOUT_CALL)
        for gone in [gi for gi in state.streams if gi not in mig_instances]:
            self._free(i, state.streams.pop(gone))
        parts = [self._window(state, i, h, gi) for gi in mig_instances]
        if any(p is None for p in parts):
            return None
        done = tuple(p for p in parts if p is not None)
        reasons = {p.unavailable for p in done}
        if done and len(reasons) == 1 and None not in reasons:
            return GpmSample(unavailable=next(iter(reasons)))
        return GpmSample(
            unavailable="MIG is on: GPM is measured per GPU instance (the detail view)",
            mig=done,
        )

    def _window(self, state: _GpuState, i: int, h: Any, gi: int | None) -> GpmSample | None:
        stream = self._stream(state, i, gi)
        if isinstance(stream, str):
            state.unavailable = stream
            return GpmSample(unavailable=stream, gpu_instance_id=gi)
        nxt = 1 - stream.current if stream.taken is not None else stream.current
        t0 = time.perf_counter()
        if gi is None:
            _, code = self._call("nvmlGpmSampleGet", h, stream.samples[nxt], device=i)
        else:
            _, code = self._call("nvmlGpmMigSampleGet", h, gi, stream.samples[nxt], device=i)
        self.cost.sample_get_s.append(time.perf_counter() - t0)
        now = time.monotonic()
        if code is not None:
            reason = self._failure(code, "nvmlGpmSampleGet" if gi is None else "nvmlGpmMigSampleGet")
            if gi is None:
                state.unavailable = reason
            stream.taken = None
            return GpmSample(unavailable=reason, gpu_instance_id=gi)
        prev_taken = stream.taken
        prev = stream.current
        stream.current, stream.taken = nxt, now
        if prev_taken is None:
            return None
        return self._figures(i, stream.samples[prev], stream.samples[nxt], now - prev_taken, gi)

    def _failure(self, code: int, fn: str) -> str:
        if code == _NO_PERMISSION:
            return NO_PERMISSION
        if code == _NOT_SUPPORTED:
            return f"{fn}: not supported for this GPU"
        if code == _FUNCTION_NOT_FOUND:
            return NO_DRIVER
        return f"{fn} failed (NVML error {code})"

    def _figures(self, i: int, first: Any, second: Any, window: float, gi: int | None) -> GpmSample:
        get = _MetricsGet()
        get.version = _METRICS_GET_VERSION
        get.numMetrics = len(GPM_READS)
        get.sample1 = ctypes.cast(first, ctypes.c_void_p).value
        get.sample2 = ctypes.cast(second, ctypes.c_void_p).value
        for k, m in enumerate(GPM_READS):
            get.metrics[k].metricId = m.metric_id
            get.metrics[k].nvmlReturn = 0
            get.metrics[k].value = 0.0
        t0 = time.perf_counter()
        _, code = self._call("nvmlGpmMetricsGet", get, device=i)
        self.cost.metrics_get_s.append(time.perf_counter() - t0)
        if code is not None:
            return GpmSample(unavailable=self._failure(code, "nvmlGpmMetricsGet"), gpu_instance_id=gi)
        values: dict[str, Any] = {}
        for k, m in enumerate(GPM_READS):
            entry = get.metrics[k]
            if entry.nvmlReturn != 0 or entry.value != entry.value:  # an error, or NaN
                continue
            v = entry.value * m.scale
            if m.unit == "%":
                values[m.figure] = round(v, 2) + 0.0  # (+ 0.0: -0.004 is 0, not "-0")
            else:
                values[m.figure] = round(v) if math.isfinite(v) else v
        return checked(GpmSample(window=round(window, 3), gpu_instance_id=gi, **values))

    # ---- cleanup ----------------------------------------------------------------------

    def _free(self, i: int, stream: _Stream) -> None:
        for s in stream.samples:
            with contextlib.suppress(Exception):  # a lost GPU: nothing left to free
                self._call("nvmlGpmSampleFree", s, device=i)

    def close(self) -> None:
        for i, state in self._gpus.items():
            for stream in state.streams.values():
                self._free(i, stream)
        self._gpus.clear()
