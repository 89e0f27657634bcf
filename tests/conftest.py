"""Shared fixtures: the real recordings captured on H200 machines (tests/fixtures/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputui.telemetry.model import Snapshot
from gputui.telemetry.recording import RecordingHeader, read_recording

FIXTURES = Path(__file__).parent / "fixtures"
X2_RECORDING = FIXTURES / "h200-x2" / "recording.jsonl.gz"
"""2x H200, NVML v2 memory: idle, DDP training over NCCL plus an idle 8 GiB holder, idle."""
X1_RECORDING = FIXTURES / "h200-x1" / "recording-v1mem.jsonl.gz"
"""1x H200, NVML v1 memory: idle, a 12 GiB holder, a training-like job with pauses, idle."""


@pytest.fixture(scope="session")
def x2_recording() -> tuple[RecordingHeader, list[Snapshot]]:
    return read_recording(X2_RECORDING)


@pytest.fixture(scope="session")
def x1_recording() -> tuple[RecordingHeader, list[Snapshot]]:
    return read_recording(X1_RECORDING)
