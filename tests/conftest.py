"""Shared helpers: paths of the real recordings, and driving the app tick by tick."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gpu_children import children  # noqa: F401  (fixture: real child processes, reaped after the test)

from gputui.telemetry.model import Snapshot
from gputui.telemetry.recording import RecordingHeader, read_recording

# Deterministic rendering: a replay shows recorded times in UTC; make local time UTC too.
os.environ["TZ"] = "UTC"
time.tzset()

FIXTURES = Path(__file__).parent / "fixtures"
H200_X2 = FIXTURES / "h200-x2" / "recording.jsonl.gz"
H200_X1 = FIXTURES / "h200-x1-v2" / "recording.jsonl.gz"
H200_X2_V2 = FIXTURES / "h200-x2-v2" / "recording.jsonl.gz"
"""2x H200 under DDP, with the slow-cadence values (NVLink throughput, PCIe replays, remapped rows)."""
H100_GPM = FIXTURES / "h100-gpm" / "recording.jsonl.gz"
"""1x H100 with GPM, known loads one after another (phases.json beside it says when)."""
NOGPU = FIXTURES / "nogpu" / "recording.jsonl.gz"
DERIVED = FIXTURES / "derived"
X8_240 = DERIVED / "h200x8-nvswitch-240procs.jsonl.gz"
X16_256 = DERIVED / "h200x16-nvswitch-256procs.jsonl.gz"
H100_JOB = FIXTURES / "h100-x1-job" / "recording.jsonl.gz"
"""1x H100: a torchrun-like job of 3 ranks under its launcher, a bystander, a holder in a
Slurm-like cgroup (bench/device_jobs.py)."""

#: So long that only the first tick arrives by itself; tests step the rest.
FROZEN = 3600.0


def gputui(*args: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess[str]:
    """Run `python -m gputui ARGS` as a user would (a real process), capturing its output."""
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        **kw,
    )


def fresh_python(code: str, *args: str, tests_importable: bool = False, timeout: float = 60):
    """Run `code` in a fresh interpreter, gputui importable (and tests/ if asked): for what
    must not see this process's threads or imports.  Returns the CompletedProcess."""
    root = Path(__file__).resolve().parents[1]
    path = [str(root), str(root / "tests")] if tests_importable else [str(root)]
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=root,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(path)},
    )


def replay_app(path: Path, **kwargs: object):
    from gputui.telemetry.recording import ReplaySource
    from gputui.ui.app import GpuTuiApp

    return GpuTuiApp(source=ReplaySource(path), interval=FROZEN, watch_terminal=False, **kwargs)


async def wait_for(pilot, predicate, timeout: float = 10.0) -> None:
    """Let the app process messages until `predicate()` holds (fail after `timeout`)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await pilot.pause(0.02)


async def run_to_tick(pilot, tick: int) -> None:
    """Advance a frozen replay app to recorded tick `tick` (1-based), one step at a time."""
    app = pilot.app
    await wait_for(pilot, lambda: app.snapshot is not None)
    current = app.query_one("HeaderBar").position[0]
    for _ in range(tick - current):
        app.poller.step(1)
    await wait_for(pilot, lambda: app.query_one("HeaderBar").position[0] == tick)
    await pilot.pause()
    overview = app.query_one("#overview")
    if app.info is not None and app.info.devices and overview.display:
        # the Overview's process list is mounted right after the first frame
        await wait_for(pilot, lambda: overview.processes is not None)
        await pilot.pause()


def screen_lines(app) -> list[str]:
    """The whole screen as plain text lines."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


# ---- the real recordings, loaded once (telemetry tests) ----------------------------------

X2_RECORDING = H200_X2
"""2x H200, NVML v2 memory: idle, DDP training over NCCL plus an idle 8 GiB holder, idle."""
X1_RECORDING = FIXTURES / "h200-x1" / "recording-v1mem.jsonl.gz"
"""1x H200, NVML v1 memory: idle, a 12 GiB holder, a training-like job with pauses, idle."""


@pytest.fixture(scope="session")
def x2_recording() -> tuple[RecordingHeader, list[Snapshot]]:
    return read_recording(X2_RECORDING)


@pytest.fixture(scope="session")
def x1_recording() -> tuple[RecordingHeader, list[Snapshot]]:
    return read_recording(X1_RECORDING)


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path_factory, monkeypatch):
    """Saved settings (gputui/state.py) go to a fresh directory per test, never the user's."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
