"""Issue 32's matrix judged live on 4 H100s with this tree's code (bench/device_matrix.sh
with CHECK=1; tests/fixtures/h100-x4-matrix-live/README.md): what the live run said, and
that a replay of each recording alone, with the stacks and NCCL RAS answers gputui recorded
in it, judges every job as the live run did."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest
from conftest import FIXTURES

from gputui.export.health_json import health_block
from gputui.telemetry.health import HealthEngine
from gputui.telemetry.health_config import HealthConfig
from gputui.telemetry.hub import Hub
from gputui.telemetry.recording import ReplaySource

LIVE = FIXTURES / "h100-x4-matrix-live"
SLOTS = sorted(p.name for p in LIVE.iterdir() if p.is_dir())
CFG = HealthConfig(stuck_seconds=30, straggler_seconds=30)
"""The live run's [health] (fast.toml beside the slots)."""


def matrix_check() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "bench" / "matrix_check.py"
    spec = importlib.util.spec_from_file_location("matrix_check", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_live_settings_are_the_ones_judged_here() -> None:
    text = (LIVE / "fast.toml").read_text()
    assert "stuck_seconds = 30" in text and "straggler_seconds = 30" in text


def test_every_slot_of_the_matrix_was_run() -> None:
    assert SLOTS == [
        "1-healthy-stopped",
        "2-exit-early-killed",
        "3-mismatch-slow-gpu",
        "4-slow-host-loader-stall",
        "5-checkpoint-healthy",
    ]


@pytest.mark.parametrize("name", SLOTS)
def test_the_live_run_named_the_right_rank_in_every_job(name: str) -> None:
    """The `snapshot --processes --json --watch 5` documents of the live run (10 of 10)."""
    with gzip.open(LIVE / name / "snapshots.jsonl.gz", "rt") as f:
        docs = [json.loads(line) for line in f if line.strip()]
    results = matrix_check().check_documents(name, (LIVE / name / "pids.txt").read_text(), docs)
    assert all(ok for ok, _ in results), results


@pytest.mark.parametrize("name", SLOTS)
def test_a_replay_of_the_recording_alone_judges_as_the_live_run(name: str) -> None:
    """Every tick of the recording through the Hub as `snapshot --replay` plays it, its
    recorded stacks and RAS views its only evidence: the same verdict for each job."""
    source = ReplaySource(LIVE / name / "recording.jsonl.gz")
    hub = Hub(capacity=4, health=HealthEngine(CFG))
    hub.set_info(source.open())
    hub.follow(source)
    docs = []
    first = None
    for _ in range(len(source.ticks)):
        snap = source.sample()
        first = snap.timestamp if first is None else first
        hub.publish(snap)
        report = hub.health_report()
        assert report is not None
        docs.append({"health": health_block(report, snap, CFG, snap.timestamp - first, hub.nccl_view())})
    results = matrix_check().check_documents(name, (LIVE / name / "pids.txt").read_text(), docs)
    assert all(ok for ok, _ in results), results


def test_the_recordings_hold_the_evidence_they_were_judged_on() -> None:
    """gputui record (with the run's [health]) kept the stacks it read and RAS's answers."""
    from gputui.telemetry.recording import read_recording

    for name in SLOTS:
        _, ticks = read_recording(LIVE / name / "recording.jsonl.gz")
        assert any(t.stacks is not None for t in ticks), name
        assert any(t.nccl is not None for t in ticks), name
