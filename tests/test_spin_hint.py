"""A spinning GPU's hint is right from its first tick (issue 31): a GR engine ~100 % busy
while the SMs do no arithmetic is one kernel polling (NCCL waiting for a peer), never "SMs
idle: tiny kernels", at any age.  Its age decides the wording ("one kernel spinning for
12 s", then "waiting in a collective for 3 min?"), not the kind.

The rule is the spinning signature's (`health.polling_kernel`), shared by the hints, the
alerts' efficiency rule and the job-health engine.  Read from REAL recordings:
tests/fixtures/h100-health (spin: one block polling, GR 100 %, SM 0.76 %; spin-wide: 32
blocks, SM 24 %; tiny: 64x64 float32 matmuls with a synchronize after each, GR ~20 %) and
tests/fixtures/h200-x2-nccl (a real NCCL wait on two H200s, SM 16.7 %)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from conftest import FIXTURES, FROZEN, screen_lines, wait_for

from gputui.config import Config
from gputui.export.prometheus import build_families
from gputui.telemetry.alert_config import AlertConfig, EfficiencyRule
from gputui.telemetry.alerts import AlertEngine
from gputui.telemetry.health import HealthEngine, polling_kernel
from gputui.telemetry.health_config import HealthConfig
from gputui.telemetry.hints import HintConfig, HintEngine, gpu_hints
from gputui.telemetry.hub import Hub
from gputui.telemetry.model import GpuSample
from gputui.telemetry.recording import ReplaySource, read_recording
from gputui.ui.app import GpuTuiApp

HEALTH = FIXTURES / "h100-health"
SPIN = HEALTH / "spin.jsonl.gz"
SPIN_WIDE = HEALTH / "spin-wide.jsonl.gz"
TINY = HEALTH / "tiny.jsonl.gz"
NCCL = FIXTURES / "h200-x2-nccl" / "stopped.jsonl.gz"
HC = HealthConfig()


def hub_for(health: HealthConfig = HC, hints: HintConfig | None = None) -> Hub:
    hints = hints or HintConfig()
    return Hub(
        alerts=AlertEngine(AlertConfig(), hints, health),
        hints=HintEngine(hints, health),
        health=HealthEngine(health),
    )


def played(path: Any, hub: Hub) -> list[tuple[Any, ...]]:
    """(tick, hints, health report) at each tick, played in order."""
    header, ticks = read_recording(path)
    hub.set_info(header.machine)
    out = []
    for snap in ticks:
        hub.publish(snap)
        out.append((snap, hub.hints_by_gpu(), hub.health_report()))
    return out


@pytest.mark.parametrize("path", [SPIN, SPIN_WIDE, NCCL])
def test_a_polling_kernel_is_never_tiny_kernels_at_any_age(path: Any) -> None:
    spinning = 0
    for snap, hints, report in played(path, hub_for()):
        for g in snap.gpus:
            if polling_kernel(g, HC):
                spinning += 1
                assert "tiny_kernels" not in {h.kind for h in hints.get(g.index, ())}, snap.seq
                # job health says what it is from the first tick: a kernel spinning
                assert report is not None and report.gpus[g.index].certain
    assert spinning >= 20


def test_tiny_kernels_still_are_tiny_kernels() -> None:
    """The real tiny-kernel load: GR engine ~20 %, not a polling kernel."""
    seen = 0
    for snap, hints, _ in played(TINY, hub_for()):
        g = snap.gpus[0]
        if g.gpm is not None and g.gpm.sm_active and g.gpu_util and g.gpu_util >= 10:
            seen += 1
            assert polling_kernel(g, HC) is False
            assert "tiny_kernels" in {h.kind for h in hints.get(0, ())}
    assert seen >= 20


def spin_gpu(**gpm: float | None) -> GpuSample:
    """GPU 0 of a real tick of spin.jsonl.gz (one block polling), GPM figures replaced."""
    snap = read_recording(SPIN)[1][30]
    g = snap.gpus[0]
    assert g.gpm is not None
    return dataclasses.replace(g, gpm=dataclasses.replace(g.gpm, **gpm))


@pytest.mark.parametrize(
    ("change", "polls"),
    [
        ({}, True),
        ({"graphics_active": HC.spin_min_util}, True),  # at "at or above": polling
        ({"graphics_active": HC.spin_min_util - 0.01}, False),
        ({"sm_active": HC.spin_max_sm - 0.01}, True),
        ({"sm_active": HC.spin_max_sm}, False),  # "below": strict
        ({"fp32_active": HC.spin_max_pipe - 0.01}, True),
        ({"fp32_active": HC.spin_max_pipe}, False),  # arithmetic: work, not a poll
        ({"tensor_active": HC.spin_max_pipe}, False),
        ({"dram_active": HC.spin_max_dram}, False),
        ({"fp16_active": None}, None),  # a pipe not measured is not a pipe at 0
        ({"sm_active": None}, None),
    ],
)
def test_the_polling_kernel_at_its_boundaries_and_the_hint_follows(change: dict, polls: bool | None) -> None:
    g = spin_gpu(**change)
    assert polling_kernel(g, HC) is polls
    tiny = "tiny_kernels" in {h.kind for h in gpu_hints(g, HintConfig(), spin=HC)}
    sm = g.gpm.sm_active if g.gpm is not None else None
    tiny_figures = sm is not None and g.gpu_util is not None and sm < 0.25 * g.gpu_util
    # unknown evidence is never read as a poll: the tiny-kernels rule applies as before
    assert tiny is (tiny_figures and polls is not True)


def test_the_health_settings_decide_what_polls() -> None:
    g = spin_gpu()
    assert polling_kernel(g, HC) is True
    strict = dataclasses.replace(HC, spin_max_sm=0.5)  # SM 0.76 % is over it
    assert polling_kernel(g, strict) is False
    assert "tiny_kernels" in {h.kind for h in gpu_hints(g, HintConfig(), spin=strict)}


def test_no_tiny_kernels_alert_for_a_polling_kernel() -> None:
    """The efficiency alert reads the same hints: never active while the GPU polls.  (At
    the one tick where NVML already sees the kernel and GPM's window does not yet, GR 0 %
    and SM 0 %, the GPU is not polling by GPM's figures: the hint follows the figures.)"""
    alerts = AlertConfig(efficiency=EfficiencyRule(True, 0.0))
    hub = Hub(alerts=AlertEngine(alerts, HintConfig(), HC), health=HealthEngine(HC))
    header, ticks = read_recording(SPIN)
    hub.set_info(header.machine)
    polled = 0
    for snap in ticks:
        hub.publish(snap)
        if polling_kernel(snap.gpus[0], HC):
            polled += 1
            assert "efficiency:gpu0:tiny_kernels" not in hub.active_alerts(), snap.seq
    assert polled >= 20


def test_metrics_never_say_tiny_kernels_beside_the_culprit() -> None:
    """The issue's /metrics: `gputui_job_stuck{verdict="culprit"} 1` beside
    `gputui_gpu_efficiency_hint{hint="tiny_kernels"} 1` on the spinning GPU.  (Ticks 10-11,
    where NVML sees the wait begin and GPM's 2 s window still holds the time before it,
    GR 8 %, SM 1.3 %, are not the signature: the hint follows those figures.)"""
    health = dataclasses.replace(HC, stuck_seconds=30)
    hub = hub_for(health)
    header, ticks = read_recording(NCCL)
    hub.set_info(header.machine)
    culprit = 0
    for snap in ticks:
        hub.publish(snap)
        families = build_families(
            header.machine,
            snap,
            alerts=list(hub.active_alerts().values()),
            hints=hub.hints_by_gpu(),
            health=hub.health_report(),
        )
        samples = [s for f in families for s in f.samples]
        stuck = [s for s in samples if s.name == "gputui_job_stuck" and s.value == 1]
        culprit += bool(stuck)
        if stuck or polling_kernel(snap.gpus[0], HC):
            assert not [s for s in samples if s.labels.get("hint") == "tiny_kernels"], snap.seq
    assert culprit >= 10


@pytest.mark.parametrize(
    ("tick", "words"), [(20, "one kernel spinning for "), (46, "one kernel spinning for ")]
)
def test_the_card_says_a_kernel_spins_from_its_first_tick(tick: int, words: str) -> None:
    """spin.jsonl.gz on the Overview: the card's hint line names the spinning kernel (with
    default settings, spin_seconds 120, it never waits long enough for "collective")."""

    async def go() -> list[str]:
        app = GpuTuiApp(ReplaySource(SPIN), interval=FROZEN, watch_terminal=False, config=Config())
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_for(pilot, lambda: app.snapshot is not None)
            await pilot.press("space")
            for _ in range(tick - 1):
                await pilot.press("full_stop")
            await wait_for(pilot, lambda: app.query_one("HeaderBar").position[0] == tick)
            await pilot.pause()
            return screen_lines(app)

    text = "\n".join(asyncio.run(go()))
    assert words in text
    assert "tiny kernels" not in text
