"""GPM: the real H100 recording under known loads, checked against what each load does and
against nvidia-smi's own GPM view of the same run; the sampler's arithmetic and its reasons
for N/A, through a scripted stand-in for pynvml (ScriptedNvmlLib, not a GPU)."""

from __future__ import annotations

import ctypes
import math
import statistics
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest
from conftest import H100_GPM, X2_RECORDING
from gpm_support import (
    ALL,
    BF16,
    COPIES,
    FP32,
    IDLE,
    IDLE_HOLDING,
    TINY,
    TINY_SYNC,
    dmon_rows,
    h100_ticks,
    phase_ticks,
)
from test_nvml import Fail, ScriptedNvmlLib

from gputui.telemetry.metrics import GPM_READS as METRICS
from gputui.telemetry.model import GpmSample
from gputui.telemetry.nvml import gpm as gpm_module
from gputui.telemetry.nvml.gpm import GpmSampler
from gputui.telemetry.nvml.source import GpuLost, Nvml
from gputui.telemetry.recording import read_recording


def median(ticks: tuple[Any, ...], field: str) -> float:
    values = [getattr(t.gpus[0].gpm, field) for t in ticks]
    assert None not in values, field
    return statistics.median(values)


# --------------------------------------------------------------------------------------
# The recording: each load shows as it should
# --------------------------------------------------------------------------------------


def test_every_phase_has_several_gpm_windows_and_every_window_is_measured() -> None:
    for name in ALL:
        assert len(phase_ticks(name)) >= 8, name
    gpms = [t.gpus[0].gpm for t in h100_ticks()]
    assert gpms[0] is None  # before the first window
    measured = [g for g in gpms if g is not None]
    assert len(measured) >= len(gpms) - 3
    assert all(g.unavailable is None and g.window is not None for g in measured)
    assert all(1.8 <= (g.window or 0) <= 2.6 for g in measured)  # the 2 s slow cadence


def test_bf16_matmul_runs_on_the_tensor_cores() -> None:
    ticks = phase_ticks(BF16)
    assert median(ticks, "tensor_active") > 90
    assert median(ticks, "tensor_hmma_active") > 90
    assert median(ticks, "sm_active") > 90
    assert median(ticks, "fp32_active") < 1


def test_float32_matmul_without_tf32_leaves_the_tensor_cores_idle() -> None:
    ticks = phase_ticks(FP32)
    assert all(t.gpus[0].gpu_util == 100 for t in ticks)  # NVML: "100 % busy"
    assert median(ticks, "tensor_active") < 1
    assert median(ticks, "fp32_active") > 70
    assert median(ticks, "sm_active") > 90


def test_device_copies_are_dram_bound() -> None:
    ticks = phase_ticks(COPIES)
    assert median(ticks, "dram_active") > 80
    assert median(ticks, "tensor_active") < 1


@pytest.mark.parametrize("name", [TINY_SYNC, TINY])
def test_tiny_kernels_keep_the_sms_idle_while_nvml_reads_busy(name: str) -> None:
    ticks = phase_ticks(name)
    assert statistics.median(t.gpus[0].gpu_util or 0 for t in ticks) >= 20
    assert median(ticks, "sm_active") < 1


@pytest.mark.parametrize("name", [IDLE, IDLE_HOLDING])
def test_idle_reads_zero_activity(name: str) -> None:
    for t in phase_ticks(name):
        w = t.gpus[0].gpm
        assert w is not None
        assert (w.sm_active, w.tensor_active, w.dram_active) == (0.0, 0.0, 0.0)


def _dmon_rows() -> list[dict[str, float]]:
    """nvidia-smi dmon --gpm-metrics, logged over the same run (one row a second)."""
    rows = dmon_rows(H100_GPM.parent / "nvidia-smi-dmon-gpm.txt.gz")
    return rows[: len(h100_ticks())]  # after the recording, the cost benchmark's load ran


@pytest.mark.parametrize(
    ("phase", "pick", "pairs"),
    [
        (BF16, lambda r: r["hmmat"] >= 50, [("smutil", "sm_active"), ("hmmat", "tensor_hmma_active"),
                                           ("dram", "dram_active")]),
        (FP32, lambda r: r["fp32"] >= 50 and r["mmaact"] < 5,
         [("smutil", "sm_active"), ("fp32", "fp32_active"), ("mmaact", "tensor_active")]),
        (COPIES, lambda r: r["dram"] >= 50, [("dram", "dram_active"), ("smocc", "sm_occupancy")]),
    ],
    ids=["bf16", "fp32", "copies"],
)  # fmt: skip
def test_agrees_with_nvidia_smi_dmon_gpm(
    phase: str, pick: Callable[[dict[str, float]], bool], pairs: list[tuple[str, str]]
) -> None:
    rows = [r for r in _dmon_rows() if pick(r)]
    assert len(rows) >= 8, phase
    ours = phase_ticks(phase)
    for dmon_name, field in pairs:
        theirs = statistics.median(r[dmon_name] for r in rows)
        assert abs(theirs - median(ours, field)) <= 2.0, (phase, dmon_name, theirs, median(ours, field))


def test_version_1_recordings_have_no_gpm() -> None:
    _, ticks = read_recording(X2_RECORDING)
    assert {g.gpm for t in ticks for g in t.gpus} == {None}


# --------------------------------------------------------------------------------------
# The sampler, through a scripted pynvml
# --------------------------------------------------------------------------------------


def recorded_window(name: str) -> GpmSample:
    w = phase_ticks(name)[len(phase_ticks(name)) // 2].gpus[0].gpm
    assert w is not None
    return w


def raw_values(w: GpmSample) -> dict[int, float]:
    """What nvmlGpmMetricsGet returned for a recorded window: percent as is, MiB/s (NVML's
    unit for throughput, nvml.h)."""
    return {m.metric_id: getattr(w, m.figure) / (2**20 if m.unit == "B/s" else 1) for m in METRICS}


def gpm_lib(values: dict[int, float], *, errors: tuple[int, ...] = (), **overrides: Any) -> ScriptedNvmlLib:
    """GPM functions as pynvml has them; nvmlGpmMetricsGet fills in `values` (an id in
    `errors` gets an NVML error instead)."""

    def metrics_get(get: Any) -> Any:
        for k in range(get.numMetrics):
            entry = get.metrics[k]
            if entry.metricId in errors:
                entry.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
            else:
                entry.value = values[entry.metricId]
        return get

    functions: dict[str, Any] = {
        "nvmlGpmQueryDeviceSupport": SimpleNamespace(isSupportedDevice=1),
        "nvmlGpmSampleAlloc": lambda: ctypes.pointer(ctypes.c_int(0)),
        "nvmlGpmSampleGet": lambda h, s: s,
        "nvmlGpmMigSampleGet": lambda h, gi, s: s,
        "nvmlGpmSampleFree": None,
        **overrides,
    }
    lib = ScriptedNvmlLib(**{k: v for k, v in functions.items() if v is not None})
    lib.nvmlGpmMetricsGet = metrics_get  # (its argument is a ctypes struct: not counted)
    if "nvmlGpmSampleFree" not in overrides:
        lib.nvmlGpmSampleFree = lambda s: None
    return lib


def test_a_window_needs_two_samples_and_gives_nvmls_figures_in_our_units() -> None:
    recorded = recorded_window(FP32)
    sampler = GpmSampler(Nvml(lib=gpm_lib(raw_values(recorded))))
    assert sampler.sample(0, "h0", architecture="Hopper", arch_code=9) is None  # first sample
    got = sampler.sample(0, "h0", architecture="Hopper", arch_code=9)
    assert got is not None and got.unavailable is None
    for m in METRICS:
        assert getattr(got, m.figure) == pytest.approx(getattr(recorded, m.figure), abs=1), m.figure
    assert isinstance(got.pcie_rx, int) and got.pcie_rx > 2**20  # bytes/s, not MiB/s
    assert sampler.cost.sample_get_s and sampler.cost.metrics_get_s


def test_a_metric_nvml_cannot_give_is_none_not_zero() -> None:
    recorded = recorded_window(BF16)
    values = raw_values(recorded) | {2: math.nan}
    sampler = GpmSampler(Nvml(lib=gpm_lib(values, errors=(5,))))
    sampler.sample(0, "h0", arch_code=9)
    got = sampler.sample(0, "h0", arch_code=9)
    assert got is not None
    assert got.tensor_active is None  # NVML's per-metric error
    assert got.sm_active is None  # NaN
    assert got.dram_active == pytest.approx(recorded.dram_active, abs=0.01)


@pytest.mark.parametrize(
    ("overrides", "arch", "code", "reason"),
    [
        ({"nvmlGpmQueryDeviceSupport": SimpleNamespace(isSupportedDevice=0)}, "Ampere", 7,
         "GPM needs a Hopper or newer GPU (this one is Ampere)"),
        ({"nvmlGpmQueryDeviceSupport": SimpleNamespace(isSupportedDevice=0)}, "Hopper", 9,
         "the driver reports no GPM support for this GPU (a virtual GPU without profiling?)"),
        ({"nvmlGpmQueryDeviceSupport": Fail(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)}, "Hopper", 9,
         gpm_module.NO_DRIVER),
        ({"nvmlGpmQueryDeviceSupport": Fail(pynvml.NVML_ERROR_NO_PERMISSION)}, "Hopper", 9,
         gpm_module.NO_PERMISSION),
        ({"nvmlGpmSampleGet": lambda h, s: Fail(pynvml.NVML_ERROR_NO_PERMISSION)}, "Hopper", 9,
         gpm_module.NO_PERMISSION),
    ],
    ids=["pre-hopper", "vgpu", "old-driver", "no-permission-support", "no-permission-sample"],
)  # fmt: skip
def test_unavailable_says_why_and_is_asked_once(
    overrides: dict[str, Any], arch: str, code: int, reason: str
) -> None:
    lib = gpm_lib({}, **overrides)
    sampler = GpmSampler(Nvml(lib=lib))
    for _ in range(3):
        got = sampler.sample(0, "h0", architecture=arch, arch_code=code)
        assert got == GpmSample(unavailable=reason)
    assert lib.calls[("nvmlGpmQueryDeviceSupport", "h0")] == 1
    assert lib.calls[("nvmlGpmSampleGet", "h0")] <= 1


def test_bindings_without_gpm() -> None:
    sampler = GpmSampler(Nvml(lib=ScriptedNvmlLib()))
    assert sampler.sample(0, "h0", arch_code=9) == GpmSample(unavailable=gpm_module.NO_BINDINGS)


def test_mig_uses_the_per_instance_call_or_says_it_cannot() -> None:
    recorded = recorded_window(BF16)
    lib = gpm_lib(raw_values(recorded))
    sampler = GpmSampler(Nvml(lib=lib))
    assert sampler.sample(0, "h0", arch_code=9, mig_instances=(1, 2)) is None
    got = sampler.sample(0, "h0", arch_code=9, mig_instances=(1, 2))
    assert got is not None and got.unavailable is not None and "per GPU instance" in got.unavailable
    assert got.sm_active is None  # the whole GPU is not measured: N/A, not 0
    assert [m.gpu_instance_id for m in got.mig] == [1, 2]
    assert got.mig[0].tensor_active == pytest.approx(recorded.tensor_active, abs=0.01)
    assert lib.calls[("nvmlGpmMigSampleGet", "h0")] == 4
    assert lib.calls[("nvmlGpmSampleGet", "h0")] == 0

    old = gpm_lib(raw_values(recorded))
    del old.nvmlGpmMigSampleGet
    sampler = GpmSampler(Nvml(lib=old))
    assert sampler.sample(0, "h0", arch_code=9, mig_instances=(1,)) == GpmSample(
        unavailable=gpm_module.MIG_WITHOUT_CALL
    )


def test_a_lost_gpu_raises_for_the_slow_thread_to_mark_it() -> None:
    lib = gpm_lib({}, nvmlGpmSampleGet=lambda h, s: Fail(pynvml.NVML_ERROR_GPU_IS_LOST))
    sampler = GpmSampler(Nvml(lib=lib))
    with pytest.raises(GpuLost):
        sampler.sample(3, "h3", arch_code=9)
    sampler.close()  # frees what it allocated without raising
