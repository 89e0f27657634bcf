"""The verdict line above the process list fits its width: who and what first, the job's
label and the `J` hint only where they fit (issue 31: at 80x24 the rank was cut off).
Read from the real stuck NCCL job (the `--demo-job` recording, judged as it says)."""

from __future__ import annotations

import pytest

from gputui.cli import DEMO_JOB_RECORDING, DEMO_JOB_START
from gputui.telemetry.health import HealthEngine
from gputui.telemetry.health_config import HealthConfig
from gputui.telemetry.recording import read_recording
from gputui.ui.processes.job_view import verdict_lines

WHO_WHAT = "rank 1 (PID 815, GPU 1) is the one the others wait for"


@pytest.fixture(scope="module")
def report():
    header, ticks = read_recording(DEMO_JOB_RECORDING)
    assert header.settings is not None
    engine = HealthEngine(HealthConfig(**header.settings["health"]))
    for snap in ticks[:DEMO_JOB_START]:
        engine.update(snap)
    return engine.current


def text(line) -> str:
    return "".join(t for t, _ in line)


@pytest.mark.parametrize("width", [160, 120, 100, 80, 79])
def test_who_and_what_are_whole_at_any_usual_width(report, width) -> None:
    (line,) = verdict_lines(report, {814, 815}, width)
    shown = text(line)
    assert len(shown) <= width - 1  # (a cell for the scroll bar's side)
    assert WHO_WHAT in shown and shown.startswith(" ⚠ ")
    if width >= 120:
        assert "job of launcher PID 654" in shown and shown.endswith("J: job view")


def test_narrower_the_verdict_is_cut_last(report) -> None:
    (line,) = verdict_lines(report, {814, 815}, 50)
    shown = text(line)
    assert len(shown) <= 49 and shown.startswith(" ⚠ stuck: rank 1 (PID 815, GPU 1)")
    assert shown.endswith("…")
