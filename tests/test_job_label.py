"""One job label (issue 31, the house): a job of ranks is named by the verdict line, the job
view, the stacks screen and the job_stuck alert with the text its ranks' JOB column shows
(`gputui.telemetry.host.jobs.job_label`), never with another spelling of the same job.

Recording: the REAL H100 torchrun job of tests/fixtures/h100-health (rank 1 SIGSTOPped), its
ranks put in a Slurm array task or a pod here (DERIVED in the test: the recording has no
scheduler) so that the job is keyed by its Slurm step or pod, not its launcher."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import FIXTURES

from gputui.telemetry.alerts import AlertEngine
from gputui.telemetry.alerts import job_label as alert_label
from gputui.telemetry.health import HealthEngine
from gputui.telemetry.health_config import HealthConfig
from gputui.telemetry.host.jobs import job_label
from gputui.telemetry.model import Job, Snapshot
from gputui.telemetry.recording import read_recording
from gputui.ui.processes.job_view import job_lines, verdict_lines

STOPPED = FIXTURES / "h100-health" / "jobrank-stopped.jsonl.gz"
REAL_CFG = HealthConfig(spin_seconds=30, stuck_seconds=30)

JOBS = {
    "slurm array task": Job("slurm", "48213", step="0", array="48200_3"),
    "slurm from the environment": Job("slurm", "555", step="0", source="environment"),
    "pod": Job("pod", "1e597579-7a0c-4d8e-9d2b-0123456789ab", name="trainer-0", namespace="ml"),
    "unverified pod": Job("pod", "1e597579-7a0c-4d8e-9d2b-0123456789ab", source="unverified"),
}


def as_job(job: Job) -> list[Snapshot]:
    _, snaps = read_recording(STOPPED)
    return [
        dataclasses.replace(
            s, processes=tuple(dataclasses.replace(p, launcher=None, job=job) for p in s.processes)
        )
        for s in snaps
    ]


@pytest.mark.parametrize("name", list(JOBS))
def test_every_place_names_a_job_as_its_ranks_job_column_does(name) -> None:
    job = JOBS[name]
    column = job_label(job)
    engine = HealthEngine(REAL_CFG)
    snaps = as_job(job)
    reports = [engine.update(s) for s in snaps]
    report = reports[-1]
    (health,) = report.jobs
    assert health.verdict is not None and health.verdict.kind == "culprit"
    assert alert_label(health) == column
    pids = {r.pid for r in health.ranks}
    (line,) = verdict_lines(report, pids, 200)
    assert "".join(t for t, _ in line).startswith(f" ⚠ {column}: stuck: rank 1")
    title = "".join(t for t, _ in job_lines(health, report.timestamp, 200)[0])
    assert title.startswith(f" {column}  ")
    header, _ = read_recording(STOPPED)
    alerts = AlertEngine(health=REAL_CFG)
    fired = [e.alert for s in snaps for e in alerts.update(header.machine, s) if e.alert.kind == "job_stuck"]
    assert fired and all(a.message.startswith(f"{column}: rank 1 ") for a in fired)


def test_a_launchers_job_is_named_by_its_launcher() -> None:
    _, snaps = read_recording(STOPPED)
    report = HealthEngine(REAL_CFG).update(snaps[-1])
    (health,) = report.jobs
    assert alert_label(health) == "job of launcher PID 1013"


def test_a_job_id_with_an_escape_is_escaped_in_the_label() -> None:
    job = Job("slurm", "555\x1b[31m", step="0")
    report = [HealthEngine(REAL_CFG).update(s) for s in as_job(job)][-1]
    (health,) = report.jobs
    assert alert_label(health) == "slurm 555\\x1b[31m.0"


@pytest.mark.parametrize(
    ("key", "want"),
    [
        (("slurm", "555", "0"), "slurm 555.0"),
        (("slurm", "555", ""), "slurm 555"),
        (("slurm", "555", "0", "environment"), "slurm 555.0 (env)"),
        (("pod", "1e597579-7a0c", "", "unverified"), "pod 1e597579… (unverified)"),
    ],
)
def test_a_report_without_its_ranks_job_is_named_from_its_key(key, want) -> None:
    """A JobHealth made without `job` (an older caller): the key's kind, id, step and source."""
    from gputui.telemetry.health_report import JobHealth

    assert alert_label(JobHealth(key, None, (), (), None)) == want
