"""The `job_stuck` alert rule and the job-health outputs outside the TUI (`gputui watch`),
read from the REAL H100 torchrun recording with rank 1 SIGSTOPped
(tests/fixtures/h100-health/jobrank-stopped.jsonl.gz, 45 s: thresholds of 30 s)."""

from __future__ import annotations

import dataclasses
import json

from conftest import FIXTURES, gputui

from gputui.telemetry.alert_config import AlertConfig, Switch
from gputui.telemetry.alerts import AlertEngine, event_json, short_text
from gputui.telemetry.health_config import HealthConfig
from gputui.telemetry.hints import HintConfig
from gputui.telemetry.recording import read_recording

STOPPED = FIXTURES / "h100-health" / "jobrank-stopped.jsonl.gz"
FAST = HealthConfig(stuck_seconds=30, spin_seconds=30)


def _events(cfg: AlertConfig | None = None, health: HealthConfig = FAST, snaps=None):
    header, ticks = read_recording(STOPPED)
    engine = AlertEngine(cfg or AlertConfig(), HintConfig(), health)
    out = []
    for s in snaps or ticks:
        out += [(s, e) for e in engine.update(header.machine, s) if e.alert.kind == "job_stuck"]
    return header, engine, out


def test_job_stuck_is_on_by_default() -> None:
    assert AlertConfig().job_stuck.enabled


def test_job_stuck_fires_once_naming_the_stopped_rank() -> None:
    header, engine, events = _events()
    assert [e.state for _, e in events] == ["firing"]
    snap, e = events[0]
    a = e.alert
    stop_ts = next(
        s.timestamp for s in read_recording(STOPPED)[1] if any(p.state == "T" for p in s.processes)
    )
    # the threshold, + up to the CPU window: the others count as blocked once their 5 s mean is under 2 %
    assert 30 <= snap.timestamp - stop_ts <= 30 + 5 + 1
    assert a.key == "job_stuck:launcher:1013" and a.pid == 1200 and a.gpu == 0
    assert a.since == stop_ts and a.threshold == 30 and a.unit == "s"
    assert a.message == "job of launcher PID 1013: rank 1 (PID 1200, GPU 0) is the one the others wait for"
    assert short_text(a) == "job stuck"
    assert engine.active  # still firing at the end
    doc = event_json(e, header.machine)
    assert doc["kind"] == "job_stuck" and doc["state"] == "firing" and doc["process"]["pid"] == 1200
    assert set(doc) == set(event_json(e, None))  # the same shape as every alert


def test_job_stuck_waits_for_the_health_threshold() -> None:
    """Under the default 2 minutes the 35 s of waiting in the recording fire nothing."""
    assert _events(health=HealthConfig())[2] == []


def test_job_stuck_switched_off_fires_nothing() -> None:
    cfg = dataclasses.replace(AlertConfig(), job_stuck=Switch(False))
    assert _events(cfg)[2] == []


def test_job_stuck_resolves_when_the_rank_resumes() -> None:
    """DERIVED in the test: one more tick with every rank running again."""
    ticks = read_recording(STOPPED)[1]
    resumed = dataclasses.replace(
        ticks[-1],
        timestamp=ticks[-1].timestamp + 1,
        processes=tuple(dataclasses.replace(p, state="R", cpu_percent=100.0) for p in ticks[-1].processes),
    )
    events = _events(snaps=[*ticks, resumed])[2]
    assert [e.state for _, e in events] == ["firing", "resolved"]


def test_gputui_watch_prints_the_job_stuck_alert_as_a_json_line(tmp_path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[health]\nstuck_seconds = 30\n")
    r = gputui("watch", "--config", str(cfg), "--replay", str(STOPPED), "--interval", "0.001")
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    stuck = [d for d in lines if d["kind"] == "job_stuck"]
    assert len(stuck) == 1 and stuck[0]["format"] == "gputui-alert" and stuck[0]["state"] == "firing"
    assert "rank 1 (PID 1200, GPU 0) is the one the others wait for" in stuck[0]["message"]
