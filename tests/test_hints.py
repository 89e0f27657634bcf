"""Efficiency hints, read from real recordings: the H100 under known loads (GPM) and the H200
with a process holding memory while the GPU idles."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import X1_RECORDING
from gpm_support import ALL, BF16, COPIES, FP32, IDLE, IDLE_HOLDING, TINY, TINY_SYNC, h100_ticks, phase_ticks

from gputui import config
from gputui.telemetry.hints import HintConfig, HintEngine, gpu_hints
from gputui.telemetry.recording import read_recording

EXPECTED = {
    IDLE: set(),
    BF16: set(),
    FP32: {"fp32_no_tensor"},
    COPIES: {"dram_bound"},
    TINY_SYNC: {"tiny_kernels"},
    TINY: {"tiny_kernels"},
    IDLE_HOLDING: set(),  # 16 s of idling is not "minutes"
}


@pytest.mark.parametrize("phase", ALL)
def test_each_known_load_gives_its_hint_and_no_other(phase: str) -> None:
    engine = HintEngine()
    got: dict[int, set[str]] = {}
    for t in h100_ticks():
        hints = engine.update(t)
        if t in phase_ticks(phase):
            got[t.seq] = {h.kind for h in hints.get(0, ())}
    assert got, phase
    assert all(kinds == EXPECTED[phase] for kinds in got.values()), (phase, got)


def test_the_float32_hint_names_tf32_and_autocast_with_the_numbers_behind_it() -> None:
    t = phase_ticks(FP32)[3]
    (hint,) = gpu_hints(t.gpus[0], HintConfig())
    assert hint.kind == "fp32_no_tensor"
    assert "TF32" in hint.short and "bf16" in hint.short
    text = " ".join(hint.remedies)
    assert "torch.backends.cuda.matmul.allow_tf32 = True" in text
    assert 'torch.set_float32_matmul_precision("high")' in text
    assert "torch.autocast" in text
    w = t.gpus[0].gpm
    assert w is not None
    assert f"tensor cores {w.tensor_active:.1f}%" in hint.evidence
    assert f"FP32 pipe {w.fp32_active:.1f}%" in hint.evidence
    assert f"utilization {t.gpus[0].gpu_util}%" in hint.evidence


def test_tiny_kernels_hint_suggests_batches_workers_pinned_memory_and_cuda_graphs() -> None:
    (hint,) = gpu_hints(phase_ticks(TINY)[2].gpus[0], HintConfig())
    text = " ".join(hint.remedies)
    for word in ("larger batches", "num_workers", "pin_memory", "CUDA graphs"):
        assert word in text


def test_thresholds_come_from_the_config() -> None:
    t = phase_ticks(COPIES)[2]
    dram = t.gpus[0].gpm.dram_active  # type: ignore[union-attr]
    assert dram is not None
    assert [h.kind for h in gpu_hints(t.gpus[0], HintConfig(dram_bound_above=dram - 1))] == ["dram_bound"]
    assert gpu_hints(t.gpus[0], HintConfig(dram_bound_above=dram + 1)) == ()
    assert gpu_hints(t.gpus[0], HintConfig(enabled=False)) == ()
    parsed, errors = config.parse("[hints]\ndram_bound_above = 95.0\nbusy_util = 101\n")
    assert errors == ["config.toml:3: hints.busy_util: must be at most 100, got 101"]
    parsed, errors = config.parse("[hints]\ndram_bound_above = 95.0\n")
    assert errors == [] and parsed.hints.dram_bound_above == 95.0


def test_without_gpm_there_is_no_gpm_hint() -> None:
    """A version-1 recording (no GPM) and a GPU whose GPM is unavailable give no GPM hint:
    no figures, no guess."""
    t = phase_ticks(FP32)[3]
    g = t.gpus[0]
    assert gpu_hints(dataclasses.replace(g, gpm=None), HintConfig()) == ()
    unavailable = dataclasses.replace(g.gpm, unavailable="no permission") if g.gpm else None
    assert gpu_hints(dataclasses.replace(g, gpm=unavailable), HintConfig()) == ()


def test_memory_held_while_idle_for_minutes() -> None:
    """The H200 recording: a process holds 12 GiB while the GPU is idle (before the
    training job starts); with idle_minutes = 0.2 the hint appears after 12 s of it and goes
    when the GPU works."""
    _, ticks = read_recording(X1_RECORDING)
    cfg = HintConfig(idle_minutes=0.2)
    engine = HintEngine(cfg)
    first: float | None = None
    shown = []
    for t in ticks:
        g = t.gpus[0]
        held = (g.mem_used or 0) >= cfg.idle_min_memory_mib * 2**20 and g.gpu_util == 0
        if held and first is None:
            first = t.timestamp
        if not held:
            first = None
        kinds = [h for h in engine.update(t).get(0, ()) if h.kind == "idle_memory"]
        assert bool(kinds) == (first is not None and t.timestamp - first >= 12.0), t.seq
        shown += kinds
    assert shown, "the recording has an idle stretch with memory held"
    assert "GiB" in shown[0].short and "empty_cache" in " ".join(shown[0].remedies)


def test_efficiency_alert_fires_when_a_hint_holds_and_clears_when_it_ends() -> None:
    """[alerts.efficiency] on the H100 recording: the float32 phase's hint held for 6 s fires
    once; the bf16 phase before it raises nothing; each alert clears when its load ends."""
    from gputui.telemetry.alert_config import AlertConfig, EfficiencyRule
    from gputui.telemetry.alerts import AlertEngine, short_text

    engine = AlertEngine(AlertConfig(efficiency=EfficiencyRule(True, 0.1)), HintConfig(enabled=False))
    fired, resolved = [], []
    machine = read_recording_header().machine
    for t in h100_ticks():
        for e in engine.update(machine, t):
            (fired if e.state == "firing" else resolved).append((t, e.alert))
    kinds = [a.key.rsplit(":", 1)[-1] for _, a in fired]
    # tiny kernels twice: with and without synchronize, 4 idle seconds between them
    assert kinds == ["fp32_no_tensor", "dram_bound", "tiny_kernels", "tiny_kernels"], kinds
    fp32_tick, fp32 = fired[0]
    assert phase_ticks(FP32)[0].timestamp - 10 <= fp32_tick.timestamp <= phase_ticks(FP32)[-1].timestamp
    assert fp32.kind == "efficiency" and "TF32" in fp32.message and "FP32 pipe" in fp32.message
    assert short_text(fp32) == "no tensor cores"
    assert [a.key for _, a in resolved] == [a.key for _, a in fired]
    assert not [a for t, a in fired if t in phase_ticks(BF16)]


def read_recording_header():  # type: ignore[no-untyped-def]
    from conftest import H100_GPM

    return read_recording(H100_GPM)[0]


def test_the_hub_evaluates_hints_on_every_published_tick() -> None:
    from gputui.telemetry.hub import Hub

    hub = Hub(capacity=4, hints=HintEngine())
    assert hub.hints_by_gpu() == {}
    hub.publish(phase_ticks(FP32)[3])
    assert [h.kind for h in hub.hints_by_gpu()[0]] == ["fp32_no_tensor"]
    hub.publish(phase_ticks(BF16)[3])
    assert hub.hints_by_gpu() == {}
    hub.publish(phase_ticks(COPIES)[3])
    hub.reset()
    assert hub.hints_by_gpu() == {}
    assert Hub().hints_by_gpu() == {}  # headless consumers without hints
