"""The efficiency hints at their thresholds' exact values, and on a measured GPM window that
lacks one figure (a hint never fires on missing evidence).  Each case starts from a real
window of the H100 GPM recording (tests/fixtures/h100-gpm) and moves one figure to the
threshold, a hair below or a hair above (issue 24, "tests that let dangerous bugs through").

The config's words are the rule: "at or above" is >=, "below" is <, "at or below" is <=."""

from __future__ import annotations

import dataclasses

import pytest
from gpm_support import COPIES, FP32, TINY, phase_ticks

from gputui.telemetry.hints import MIB, HintConfig, HintEngine, gpu_hints
from gputui.telemetry.model import GpuSample, Snapshot

CFG = HintConfig()
EPS = 0.01  # figures are kept to 0.01 %


def gpu(phase: str, util: int | None = None, **gpm: float | None) -> GpuSample:
    """GPU 0 of a real tick of `phase` with NVML's utilization and GPM figures replaced."""
    g = phase_ticks(phase)[3].gpus[0]
    assert g.gpm is not None and g.gpm.unavailable is None
    w = dataclasses.replace(g.gpm, **gpm)
    return dataclasses.replace(g, gpm=w, gpu_util=g.gpu_util if util is None else util)


def kinds(g: GpuSample, cfg: HintConfig = CFG) -> set[str]:
    return {h.kind for h in gpu_hints(g, cfg)}


def test_the_real_ticks_give_their_hint() -> None:
    assert kinds(gpu(FP32)) == {"fp32_no_tensor"}
    assert kinds(gpu(COPIES)) == {"dram_bound"}
    assert kinds(gpu(TINY)) == {"tiny_kernels"}


# ---- fp32_no_tensor: util >= busy_util, tensor < tensor_idle_below, fp32 >= fp32_active_above


@pytest.mark.parametrize(
    ("util", "tensor", "fp32", "fires"),
    [
        (CFG.busy_util, 0.0, 77.0, True),  # utilization exactly at "busy"
        (CFG.busy_util - 1, 0.0, 77.0, False),
        (100, CFG.tensor_idle_below - EPS, 77.0, True),
        (100, CFG.tensor_idle_below, 77.0, False),  # tensor exactly at the limit: not idle
        (100, 0.0, CFG.fp32_active_above, True),  # FP32 exactly at "the work"
        (100, 0.0, CFG.fp32_active_above - EPS, False),
    ],
)
def test_fp32_no_tensor_at_its_thresholds(util: int, tensor: float, fp32: float, fires: bool) -> None:
    g = gpu(FP32, util, tensor_active=tensor, fp32_active=fp32, sm_active=90.0, dram_active=10.0)
    assert ("fp32_no_tensor" in kinds(g)) is fires


# ---- tiny_kernels: util >= tiny_kernels_min_util and sm < tiny_kernels_sm_ratio * util -----


@pytest.mark.parametrize(
    ("util", "sm", "fires"),
    [
        (CFG.tiny_kernels_min_util, 0.0, True),  # utilization exactly at the minimum
        (CFG.tiny_kernels_min_util - 1, 0.0, False),
        (80, CFG.tiny_kernels_sm_ratio * 80 - EPS, True),
        (80, CFG.tiny_kernels_sm_ratio * 80, False),  # SM exactly at the ratio: not "below"
    ],
)
def test_tiny_kernels_at_its_thresholds(util: int, sm: float, fires: bool) -> None:
    g = gpu(TINY, util, sm_active=sm, tensor_active=0.0, fp32_active=0.0, dram_active=0.0)
    assert ("tiny_kernels" in kinds(g)) is fires


# ---- dram_bound: dram >= dram_bound_above --------------------------------------------------


@pytest.mark.parametrize(
    ("dram", "fires"), [(CFG.dram_bound_above, True), (CFG.dram_bound_above - EPS, False)]
)
def test_dram_bound_at_its_threshold(dram: float, fires: bool) -> None:
    assert ("dram_bound" in kinds(gpu(COPIES, dram_active=dram))) is fires


# ---- idle_memory: idle for >= idle_minutes, util <= idle_max_util, memory >= the minimum ---


def idle_ticks(util: int, mem_mib: int, seconds: float) -> list[Snapshot]:
    """Two ticks `seconds` apart of the real GPU, idle as given."""
    base = phase_ticks(FP32)[3]
    g = dataclasses.replace(base.gpus[0], gpu_util=util, mem_used=mem_mib * MIB, gpm=None)
    return [dataclasses.replace(base, timestamp=base.timestamp + dt, gpus=(g,)) for dt in (0.0, seconds)]


@pytest.mark.parametrize(
    ("util", "mem_mib", "seconds", "fires"),
    [
        (CFG.idle_max_util, CFG.idle_min_memory_mib, CFG.idle_minutes * 60, True),  # every one exact
        (CFG.idle_max_util, CFG.idle_min_memory_mib, CFG.idle_minutes * 60 - 0.5, False),
        (CFG.idle_max_util + 1, CFG.idle_min_memory_mib, CFG.idle_minutes * 60, False),
        (CFG.idle_max_util, CFG.idle_min_memory_mib - 1, CFG.idle_minutes * 60, False),
    ],
)
def test_idle_memory_at_its_thresholds(util: int, mem_mib: int, seconds: float, fires: bool) -> None:
    engine = HintEngine()
    out = {}
    for t in idle_ticks(util, mem_mib, seconds):
        out = engine.update(t)
    assert ("idle_memory" in {h.kind for h in out.get(0, ())}) is fires


# ---- a measured window with one figure missing ----------------------------------------------


@pytest.mark.parametrize(
    ("phase", "missing", "kind"),
    [
        (FP32, "tensor_active", "fp32_no_tensor"),  # the idle tensor cores are the evidence
        (FP32, "fp32_active", "fp32_no_tensor"),
        (TINY, "sm_active", "tiny_kernels"),
        (COPIES, "dram_active", "dram_bound"),
    ],
)
def test_a_missing_figure_is_no_evidence(phase: str, missing: str, kind: str) -> None:
    """The window is measured (`unavailable` is None) but NVML gave no value for one figure
    (its per-metric error): None is not 0, so a hint that needs it stays silent."""
    assert kind in kinds(gpu(phase))
    g = gpu(phase, **{missing: None})
    assert g.activity is not None  # still a measured window
    assert kind not in kinds(g)


def test_missing_utilization_is_no_evidence() -> None:
    g = dataclasses.replace(gpu(FP32), gpu_util=None)
    assert kinds(g) - {"dram_bound"} == set()
