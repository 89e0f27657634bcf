"""`gputui snapshot --processes --json`: the job-health block (jobs with their ranks and
verdict, spinning GPUs with their numbers, the thresholds, energy per job), read from the
REAL H100 recordings of tests/fixtures/h100-health and validated against the committed
schema."""

from __future__ import annotations

import json

import jsonschema
import pytest
from conftest import FIXTURES, gputui

from gputui.rules.timestamps import iso_utc
from gputui.telemetry.recording import read_recording

HEALTH = FIXTURES / "h100-health"
STOPPED = HEALTH / "jobrank-stopped.jsonl.gz"
SPIN = HEALTH / "spin.jsonl.gz"
SCHEMA_FILE = FIXTURES.parents[1] / "gputui" / "schemas" / "snapshot-v1.json"
NEEDS = "needs watching over time (gputui watch / export)"


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(SCHEMA_FILE.read_text())
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


@pytest.fixture
def fast(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[health]\nstuck_seconds = 30\nspin_seconds = 30\n")
    return str(cfg)


def snapshot(path, tick: int, *extra: str) -> dict:
    r = gputui("snapshot", "--replay", str(path), "--tick", str(tick), "--json", "--processes", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_the_stopped_rank_is_named_in_the_snapshot(validator, fast) -> None:
    doc = snapshot(STOPPED, 46, "--config", fast)
    validator.validate(doc)
    h = doc["health"]
    assert h["thresholds"]["stuck_seconds"] == 30.0 and h["thresholds"]["spin_max_sm"] == 50.0
    assert h["watched_seconds"] == pytest.approx(45, abs=0.1)
    (job,) = h["jobs"]
    assert job["key"] == ["launcher", "1013"] and job["launcher"] == 1013
    assert [(r["rank"], r["pid"], r["state"], r["condition"]) for r in job["ranks"]] == [
        (0, 1199, "S", "blocked"),
        (1, 1200, "T", "stopped"),
        (2, 1201, "S", "blocked"),
    ]
    v = job["verdict"]
    assert v["kind"] == "culprit" and v["text"] == "rank 1 (PID 1200, GPU 0) is the one the others wait for"
    assert v["culprits"] == [{"pid": 1200, "rank": 1, "gpu": 0}]
    stop_ts = next(
        s.timestamp for s in read_recording(STOPPED)[1] if any(p.state == "T" for p in s.processes)
    )
    assert v["since"] == stop_ts and v["since_time"] == iso_utc(stop_ts) and "SIGCONT" in v["why"]
    assert job["note"] is None
    e = job["energy"]
    assert e["joules"] == pytest.approx(4717.612) and e["wh"] == pytest.approx(1.3104, abs=1e-4)
    assert e["gpus"] == [0] and e["shared"] == []


def test_before_the_threshold_no_verdict_and_it_says_it_needs_watching(validator, fast) -> None:
    doc = snapshot(STOPPED, 20, "--config", fast)
    validator.validate(doc)
    (job,) = doc["health"]["jobs"]
    assert job["verdict"] is None and job["note"] == NEEDS


def test_a_one_shot_snapshot_has_no_history(validator) -> None:
    """The first tick alone (as a live one-shot snapshot): ranks and states, no verdict, and
    the note instead of one; energy not known from one reading."""
    doc = snapshot(STOPPED, 1)
    validator.validate(doc)
    h = doc["health"]
    assert h["watched_seconds"] == 0 and h["note"] == NEEDS
    (job,) = h["jobs"]
    assert job["verdict"] is None and job["note"] == NEEDS
    assert job["energy"]["joules"] is None and job["energy"]["unknown"] == [0]


def test_the_spinning_gpu_with_its_numbers(validator, fast) -> None:
    doc = snapshot(SPIN, 46, "--config", fast)
    validator.validate(doc)
    (g,) = doc["health"]["gpus"]
    assert g["index"] == 0 and g["waiting"] is True and g["certain"] is True
    assert g["text"] == "waiting in a collective for 32 s?"
    assert g["gr_engine_active"] == 100.0 and g["sm_active"] == 0.76 and g["dram_active"] == 0.0
    assert g["power"] == pytest.approx(118.363) and g["idle_power_max"] == pytest.approx(140.0, abs=0.6)
    assert doc["health"]["jobs"] == []


def test_the_wide_spin_is_claimed(validator, fast) -> None:
    """32 blocks x 512 threads polling a flag (SM 24 %, no arithmetic): NCCL's wait shape."""
    doc = snapshot(HEALTH / "spin-wide.jsonl.gz", 46, "--config", fast)
    validator.validate(doc)
    (g,) = doc["health"]["gpus"]
    assert g["index"] == 0 and g["certain"] is True
    assert g["sm_active"] == pytest.approx(24.24, abs=0.01) and g["arithmetic_active"] == 0.0


def test_without_processes_no_health_block() -> None:
    r = gputui("snapshot", "--replay", str(STOPPED), "--tick", "46", "--json")
    assert "health" not in json.loads(r.stdout)


def test_the_mismatch_and_where_each_rank_was_in_the_snapshot(validator, tmp_path) -> None:
    """The real 4x H100 deadlock with the stacks captured beside it in the recording (derived):
    replayed to 50 s, the snapshot says both ranks wait, where, and (the straggler job beside
    it) each rank's waiting share."""
    from matrix_support import slot, with_stacks

    from gputui.telemetry.recording import RecordingWriter

    s = slot("3-mismatch-slow-gpu")
    path = tmp_path / "mismatch-stacks.jsonl.gz"
    header = read_recording(s.path / "recording.jsonl.gz")[0]
    with RecordingWriter(path, header.machine, header.interval, note=header.note) as w:
        for t in with_stacks(s):
            w.write(t)
    cfg = tmp_path / "m.toml"
    cfg.write_text("[health]\nstuck_seconds = 30\nstraggler_seconds = 30\n")
    doc = snapshot(path, 50, "--config", str(cfg))
    validator.validate(doc)
    jobs = {tuple(j["key"]): j for j in doc["health"]["jobs"]}
    a, b = jobs[("launcher", "2010")], jobs[("launcher", "2012")]
    assert a["verdict"]["kind"] == "mismatch" and a["verdict"]["culprits"] == []
    where = {r["pid"]: r["where"] for r in a["ranks"]}
    assert (where[2227]["place"], where[2227]["call"], where[2227]["at"]) == (
        "collective",
        "recv",
        "scenario.py:124",
    )
    assert where[2226]["frames"][0] == "synchronize (torch/cuda/__init__.py:1162)"
    shares = {r["pid"]: r["wait_share"] for r in b["ranks"]}
    assert shares[2267] == 0.0 and 0.7 < shares[2266] < 0.8
    assert b["verdict"]["kind"] == "straggler" and b["verdict"]["culprits"][0]["pid"] == 2267
