"""The exporter's job-health series (gputui_job_stuck, gputui_gpu_spinning,
gputui_job_energy_joules), from the REAL H100 recordings of tests/fixtures/h100-health,
parsed back with prometheus_client's own parser."""

from __future__ import annotations

import dataclasses

from conftest import FIXTURES
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from gputui.export.prometheus import build_families
from gputui.telemetry.health import HealthEngine
from gputui.telemetry.health_config import HealthConfig
from gputui.telemetry.model import Job
from gputui.telemetry.recording import read_recording

HEALTH = FIXTURES / "h100-health"
FAST = HealthConfig(stuck_seconds=30, spin_seconds=30)


class _Fixed:
    def __init__(self, families) -> None:
        self.families = families

    def collect(self):
        yield from self.families


def scrape(path, upto: int | None = None, snaps=None) -> dict[str, list]:
    header, ticks = read_recording(path)
    ticks = snaps or ticks[:upto]
    engine = HealthEngine(FAST)
    for s in ticks:
        engine.update(s)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(build_families(header.machine, ticks[-1], health=engine.current)))
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s)
    return out


def test_job_stuck_is_1_once_the_stopped_rank_is_named_and_0_before() -> None:
    got = scrape(HEALTH / "jobrank-stopped.jsonl.gz")
    (s,) = got["gputui_job_stuck"]
    assert s.value == 1.0 and s.labels["job"] == "launcher:1013" and s.labels["launcher"] == "1013"
    assert s.labels["verdict"] == "culprit"
    (early,) = scrape(HEALTH / "jobrank-stopped.jsonl.gz", upto=20)["gputui_job_stuck"]
    assert early.value == 0.0 and early.labels["verdict"] == ""


def test_job_energy_in_joules() -> None:
    (e,) = scrape(HEALTH / "jobrank-stopped.jsonl.gz")["gputui_job_energy_joules"]
    assert e.labels["job"] == "launcher:1013" and abs(e.value - 4717.612) < 0.01


def test_gpu_spinning_gauge_from_the_real_spin() -> None:
    got = scrape(HEALTH / "spin.jsonl.gz")
    (s,) = got["gputui_gpu_spinning"]
    assert s.value == 1.0 and s.labels["gpu"] == "0"
    (secs,) = got["gputui_gpu_spinning_seconds"]
    assert 31 < secs.value < 33
    (idle,) = scrape(HEALTH / "idle.jsonl.gz")["gputui_gpu_spinning"]
    assert idle.value == 0.0
    (wide,) = scrape(HEALTH / "spin-wide.jsonl.gz")["gputui_gpu_spinning"]
    assert wide.value == 1.0  # SM 24 %, no arithmetic: NCCL's wait, one block per channel


def test_no_health_no_series() -> None:
    header, ticks = read_recording(HEALTH / "spin.jsonl.gz")
    names = {f.name for f in build_families(header.machine, ticks[-1])}
    assert not names & {"gputui_job_stuck", "gputui_gpu_spinning", "gputui_job_energy_joules"}


def test_a_hostile_job_id_goes_through_label_value() -> None:
    """DERIVED in the test: the real ranks in a Slurm job whose id carries an escape sequence
    (no launcher): the label value is escaped, never raw."""
    _header, ticks = read_recording(HEALTH / "jobrank-stopped.jsonl.gz")
    job = Job(kind="slurm", id="7\x1b]52;c;ZXZpbA==\x07", step="0")
    snaps = [
        dataclasses.replace(
            s, processes=tuple(dataclasses.replace(p, launcher=None, job=job) for p in s.processes)
        )
        for s in ticks
    ]
    (s,) = scrape(HEALTH / "jobrank-stopped.jsonl.gz", snaps=snaps)["gputui_job_stuck"]
    assert "\x1b" not in s.labels["job"] and "\\x1b" in s.labels["job"]
    assert s.labels["launcher"] == "" and s.value == 1.0
