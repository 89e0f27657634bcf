"""The stuck-job demo shows its verdict with the defaults (issue 31).

The real stuck NCCL job (tests/fixtures/h200-x2-nccl/stopped.jsonl.gz, 76 s) is shorter than
the default `[health] stuck_seconds` (120 s): played as it is, it never shows a verdict.
`gputui --demo-job` plays gputui/data/demo-job.jsonl.gz: the same ticks, line for line,
whose header carries the settings it is judged with (`settings`: stuck_seconds and
spin_seconds 30).  Every replay of it applies them (the TUI, snapshot, watch, export) and
says so; a key the user's own config file sets is never overridden, and that is said too."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, FROZEN, gputui, screen_lines, wait_for

from gputui.config import Config, LoadedConfig
from gputui.recording_settings import applied
from gputui.telemetry.recording import RecordingError, ReplaySource, read_recording
from gputui.ui.app import GpuTuiApp

STOPPED = FIXTURES / "h200-x2-nccl" / "stopped.jsonl.gz"
DEMO_JOB = Path(__file__).resolve().parents[1] / "gputui" / "data" / "demo-job.jsonl.gz"
CULPRIT = "rank 1 (PID 815, GPU 1) is the one the others wait for"
SAID = "judged with this recording's [health] stuck_seconds = 30, spin_seconds = 30"


@pytest.fixture
def no_config(tmp_path: Path) -> dict[str, str]:
    """A new user's environment: no config file."""
    return {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config"), "HOME": str(tmp_path)}


def lines(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def test_the_demo_is_the_real_recording_with_its_settings_in_the_header() -> None:
    demo, real = lines(DEMO_JOB), lines(STOPPED)
    assert demo[1:] == real[1:]  # every tick, byte for byte
    head, real_head = json.loads(demo[0]), json.loads(real[0])
    assert head["settings"] == {"health": {"stuck_seconds": 30, "spin_seconds": 30}}
    assert head["machine"] == real_head["machine"] and head["created"] == real_head["created"]
    assert head["derived"] is None  # real GPUs, nothing derived
    assert DEMO_JOB.stat().st_size < 32 * 1024
    header, _ = read_recording(DEMO_JOB)
    assert header.settings == {"health": {"stuck_seconds": 30.0, "spin_seconds": 30.0}}


def test_snapshot_of_the_demo_shows_the_verdict_with_the_defaults(no_config: dict[str, str]) -> None:
    r = gputui("--demo-job", "snapshot", "--json", "--processes", "--tick", "50", env=no_config)
    assert r.returncode == 0, r.stderr
    h = json.loads(r.stdout)["health"]
    assert h["thresholds"]["stuck_seconds"] == 30 and h["thresholds"]["spin_seconds"] == 30
    (job,) = h["jobs"]
    assert job["verdict"]["text"] == CULPRIT
    assert r.stderr == f"gputui snapshot: {SAID}\n"


def test_the_users_own_setting_wins_and_that_is_said(no_config: dict[str, str], tmp_path: Path) -> None:
    cfg = tmp_path / "config" / "gputui" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("[health]\nstuck_seconds = 300\n")
    cfg.chmod(0o600)
    r = gputui("--demo-job", "snapshot", "--json", "--processes", "--tick", "50", env=no_config)
    assert r.returncode == 0, r.stderr
    h = json.loads(r.stdout)["health"]
    assert h["thresholds"]["stuck_seconds"] == 300 and h["thresholds"]["spin_seconds"] == 30
    assert h["jobs"][0]["verdict"] is None
    assert "stuck_seconds = 300 from your config kept" in r.stderr


def test_a_recording_without_settings_changes_nothing_and_says_nothing(no_config: dict[str, str]) -> None:
    r = gputui("snapshot", "--replay", str(STOPPED), "--json", "--processes", "--tick", "50", env=no_config)
    assert r.returncode == 0 and r.stderr == ""
    h = json.loads(r.stdout)["health"]
    assert h["thresholds"]["stuck_seconds"] == 120 and h["jobs"][0]["verdict"] is None


def test_watch_and_export_of_the_demo_judge_with_its_settings(no_config: dict[str, str]) -> None:
    r = gputui("--demo-job", "watch", "--interval", "0.001", env=no_config)
    assert r.returncode == 0, r.stderr
    assert SAID in r.stderr
    fired = [json.loads(line) for line in r.stdout.splitlines()]
    assert any(a["kind"] == "job_stuck" and a["state"] == "firing" for a in fired)


def test_the_tui_shows_the_verdict_and_says_which_settings() -> None:
    """As `gputui --demo-job` opens it (cli.open_tui_replay), with no config file: the first
    frame is at a tick with the verdict, and the banner says how it is judged."""
    from gputui.cli import DEMO_JOB_START, open_tui_replay

    opened = open_tui_replay(str(DEMO_JOB), DEMO_JOB_START, LoadedConfig(Config(), None))
    assert opened is not None
    source, config, note = opened
    assert note == "waits from the recording: stuck_seconds 30, spin_seconds 30"

    async def go() -> str:
        app = GpuTuiApp(source, interval=FROZEN, watch_terminal=False, config=config, judged_with=note)
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_for(pilot, lambda: app.query_one("HeaderBar").position == (DEMO_JOB_START, 76))
            await wait_for(pilot, lambda: CULPRIT in "\n".join(screen_lines(app)))
            return "\n".join(screen_lines(app))

    text = asyncio.run(go())
    assert "waits from the recording: stuck_seconds 30, spin_seconds 30" in text
    assert "waiting in a collective" in text


def test_the_bundled_demo_says_how_to_see_a_stuck_job() -> None:
    from gputui.ui.context import DEMO_RECORDING

    async def go() -> str:
        app = GpuTuiApp(ReplaySource(DEMO_RECORDING), interval=FROZEN, watch_terminal=False, demo=True)
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_for(pilot, lambda: app.snapshot is not None)
            await pilot.pause()
            return "\n".join(screen_lines(app))

    assert "a stuck job: gputui --demo-job" in asyncio.run(go())


def header_with(tmp_path: Path, settings: Any) -> Path:
    demo = lines(DEMO_JOB)
    head = json.loads(demo[0])
    head["settings"] = settings
    path = tmp_path / "hostile.jsonl"
    path.write_text("\n".join([json.dumps(head), *demo[1:3]]) + "\n")
    return path


@pytest.mark.parametrize(
    ("settings", "why"),
    [
        ({"health": {"enabled": False}}, "settings: health.enabled: a recording may set only"),
        ({"alerts": {}}, "settings: alerts: a recording may set only [health]"),
        ({"health": {"stuck_seconds": -1}}, "settings: health.stuck_seconds: must be at least 0"),
        ({"health": {"stuck_seconds": "30"}}, "settings: health.stuck_seconds: expected a number"),
        ({"health": {"stuck_seconds": True}}, "settings: health.stuck_seconds: expected a number"),
        ({"health": {"stuck_seconds": 1e400}}, "settings: health.stuck_seconds: must be a finite number"),
        ({"health": []}, "settings: health: expected an object"),
        ([], "settings: expected an object or null"),
        ({"health": {"spin\u202e": 1}}, "settings: health.spin\\u202e: a recording may set only"),
    ],
)
def test_a_recordings_settings_are_checked_in_one_line(tmp_path: Path, settings: Any, why: str) -> None:
    path = header_with(tmp_path, settings)
    with pytest.raises(RecordingError) as exc:
        read_recording(path)
    assert f"{path}:1: {why}" in str(exc.value)
    assert "\n" not in str(exc.value)
    r = gputui("snapshot", "--replay", str(path), "--json")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_applied_keeps_every_key_the_user_set() -> None:
    loaded = LoadedConfig(Config(), None, keys=frozenset({"health", "health.spin_seconds"}))
    config, note, banner = applied(loaded, {"health": {"stuck_seconds": 30.0, "spin_seconds": 30.0}})
    assert config.health.stuck_seconds == 30
    assert config.health.spin_seconds == loaded.config.health.spin_seconds
    assert note is not None and "spin_seconds = 120 from your config kept" in note
    assert banner == "waits from the recording: stuck_seconds 30 (yours: spin_seconds)"
    assert applied(loaded, None) == (loaded.config, None, None)


@pytest.mark.parametrize("size", [(80, 24), (160, 50)])
def test_the_verdict_lines_j_opens_the_job_view_from_the_first_screen(size) -> None:
    """The verdict line under the cards says "J: job view"; a new user presses J at once, the
    cards focused (review of issue 31: nothing happened; J worked only once `tab` had moved
    into the process list)."""
    from gputui.cli import DEMO_JOB_START, open_tui_replay
    from gputui.ui.processes.job_view import JobScreen

    opened = open_tui_replay(str(DEMO_JOB), DEMO_JOB_START, LoadedConfig(Config(), None))
    assert opened is not None
    source, config, note = opened

    async def go() -> str:
        app = GpuTuiApp(source, interval=FROZEN, watch_terminal=False, config=config, judged_with=note)
        async with app.run_test(size=size) as pilot:
            await wait_for(pilot, lambda: "J: job view" in "\n".join(screen_lines(app)))
            await pilot.press("J")
            await wait_for(pilot, lambda: isinstance(app.screen, JobScreen))
            await pilot.pause()
            return "\n".join(screen_lines(app))

    shown = asyncio.run(go())
    assert "815" in shown and "rank" in shown
