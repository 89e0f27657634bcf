"""A replay's verdicts, alerts and hints are a function of the recording up to the tick on
screen, whatever was watched, stepped back, stepped forward or skipped (issue 31).

Read from the REAL two-H200 NCCL job of tests/fixtures/h200-x2-nccl (rank 1 SIGSTOPped 8 s
in, rank 0's GPU spinning from 10 s).  The reference is the recording played from its first
tick in order, through the same engines; every path must agree with it: the TUI played,
stepped back (`,`) and forward (`.`) with real key presses, the TUI started with `--start`,
and `gputui snapshot --replay F --tick N`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, FROZEN, gputui, screen_lines, wait_for

from gputui.commands.common import open_replay
from gputui.config import Config, load
from gputui.telemetry.alerts import AlertEngine
from gputui.telemetry.health import HealthEngine
from gputui.telemetry.hints import HintEngine
from gputui.telemetry.hub import Hub
from gputui.telemetry.recording import ReplaySource, read_recording
from gputui.ui.app import GpuTuiApp

STOPPED = FIXTURES / "h200-x2-nccl" / "stopped.jsonl.gz"
SETTINGS = "[health]\nstuck_seconds = 30\nspin_seconds = 30\n"
CULPRIT = "rank 1 (PID 815, GPU 1) is the one the others wait for"


@pytest.fixture(scope="module")
def config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cfg") / "config.toml"
    path.write_text(SETTINGS)
    return path


@pytest.fixture(scope="module")
def config(config_file: Path) -> Config:
    loaded = load(config_file)
    assert not loaded.errors
    return loaded.config


def hub_for(config: Config) -> Hub:
    """The engines the TUI runs, with the same settings."""
    return Hub(
        alerts=AlertEngine(config.alerts, config.hints, config.health),
        hints=HintEngine(config.hints),
        health=HealthEngine(config.health),
    )


def judged(hub: Hub) -> tuple[Any, ...]:
    """Everything the engines say at the hub's latest tick."""
    return hub.health_report(), hub.active_alerts(), hub.hints_by_gpu()


@pytest.fixture(scope="module")
def in_order(config: Config) -> dict[int, tuple[Any, ...]]:
    """Tick (1-based) -> what the engines say there, the recording played from its start."""
    header, ticks = read_recording(STOPPED)
    hub = hub_for(config)
    hub.set_info(header.machine)
    out = {}
    for n, snap in enumerate(ticks, 1):
        hub.publish(snap)
        out[n] = judged(hub)
    return out


def verdict(report: Any) -> tuple[str, str, str, float | None, tuple[int, ...]] | None:
    (job,) = report.jobs
    v = job.verdict
    return None if v is None else (v.kind, v.short, v.why, v.since, v.pids)


def run(coro: Any) -> None:
    asyncio.run(coro)


async def at_tick(pilot: Any, tick: int) -> None:
    await wait_for(pilot, lambda: pilot.app.query_one("HeaderBar").position == (tick, 76))
    await pilot.pause()


def test_the_reference_has_a_verdict_an_alert_and_a_spinning_gpu_at_tick_50(in_order) -> None:
    """(What the comparisons below rest on: at tick 50 the recording shows all three.)"""
    report, alerts, _ = in_order[50]
    assert verdict(report)[:2] == ("culprit", CULPRIT)
    assert any(a.kind == "job_stuck" for a in alerts.values())
    assert report.gpus[0].waiting
    assert verdict(in_order[20][0]) is None


def test_play_step_back_and_forth_and_start_agree_with_the_recording_and_snapshot(
    config: Config, config_file: Path, in_order: dict[int, tuple[Any, ...]]
) -> None:
    seen: dict[str, Any] = {}

    async def played() -> None:
        app = GpuTuiApp(ReplaySource(STOPPED), interval=FROZEN, watch_terminal=False, config=config)
        async with app.run_test(size=(160, 50)) as pilot:
            await at_tick(pilot, 1)
            await pilot.press("space")  # pause: . and , step
            for _ in range(49):
                await pilot.press("full_stop")
            await at_tick(pilot, 50)
            assert judged(app.hub) == in_order[50]
            await pilot.press("comma")
            await at_tick(pilot, 49)
            assert judged(app.hub) == in_order[49]
            await pilot.press("full_stop")
            await at_tick(pilot, 50)
            assert judged(app.hub) == in_order[50]
            text = "\n".join(screen_lines(app))
            assert CULPRIT in text  # the verdict line above the processes
            assert "waiting in a collective" in text  # GPU 0's card
            for _ in range(6):
                await pilot.press("comma")
            await at_tick(pilot, 44)
            assert judged(app.hub) == in_order[44]
            for _ in range(3):
                await pilot.press("full_stop")
            await at_tick(pilot, 47)
            assert judged(app.hub) == in_order[47]
            seen["played"] = True

    async def started() -> None:
        # as `gputui --replay F --start 60` opens it
        source = open_replay("gputui", str(STOPPED), 60, option="--start")
        assert source is not None
        app = GpuTuiApp(source, interval=FROZEN, watch_terminal=False, config=config)
        async with app.run_test(size=(160, 50)) as pilot:
            await at_tick(pilot, 60)
            assert judged(app.hub) == in_order[60]
            seen["start60"] = verdict(app.hub.health_report())
            assert CULPRIT in "\n".join(screen_lines(app))
            await pilot.press("space")
            await pilot.press("comma")
            await at_tick(pilot, 59)
            assert judged(app.hub) == in_order[59]

    run(played())
    run(started())
    assert seen["played"]
    tick60 = ("--replay", str(STOPPED), "--tick", "60", "--json", "--processes")
    r = gputui("snapshot", *tick60, "--config", str(config_file))
    assert r.returncode == 0, r.stderr
    (job,) = json.loads(r.stdout)["health"]["jobs"]
    v = job["verdict"]
    pids = tuple(c["pid"] for c in v["culprits"])
    assert (v["kind"], v["text"], v["why"], v["since"], pids) == seen["start60"]
    assert seen["start60"] == verdict(in_order[60][0])


def test_seeks_in_any_order_judge_as_the_recording_played_in_order(
    config: Config, in_order: dict[int, tuple[Any, ...]]
) -> None:
    """Through the checkpoints (one every 4 ticks here) and the ticks after them: steps back,
    jumps forward and back, the same tick twice, a loop to the first tick.  Each seek after
    the first pass replays at most `every` ticks."""
    source = ReplaySource(STOPPED)
    hub = hub_for(config)
    hub.set_info(source.open())
    hub.follow(source, every=4)
    judge = hub.judge
    assert judge is not None
    visited = []
    for tick in (60, 61, 62, 59, 40, 41, 75, 76, 1, 2, 33, 33, 70, 12, 50, 49, 50):
        source.seek(tick - 2)
        before = judge.replayed
        hub.publish(source.sample())
        assert judged(hub) == in_order[tick], tick
        visited.append(tick)
        if len(visited) > 1 and tick <= 60:  # the first seek (to 60) judged ticks 1-59 once
            assert judge.replayed - before <= 4, (tick, judge.replayed - before)
    # the charts' history ends at the tick on screen, without a gap
    _, ticks = read_recording(STOPPED)
    assert hub.history.timestamps.last() == [s.timestamp for s in ticks[:50]]
    # played on in order from there: no catch-up
    before = judge.replayed
    for tick in range(51, 77):
        hub.publish(source.sample())
        assert judged(hub) == in_order[tick]
    assert judge.replayed == before
    # the loop: tick 1 again, judged as the recording's first tick
    hub.publish(source.sample())
    assert source.position == 0 and judged(hub) == in_order[1]


def test_a_snapshot_changed_by_its_source_is_judged_as_live_data(config: Config) -> None:
    """Not the recording's tick itself (a wrapper changed it): no catch-up from the file."""
    import dataclasses

    source = ReplaySource(STOPPED)
    hub = hub_for(config)
    hub.set_info(source.open())
    hub.follow(source)
    source.seek(48)
    hub.publish(dataclasses.replace(source.sample()))
    assert hub.judge is not None and hub.judge.replayed == 0 and hub.judge.last is None
