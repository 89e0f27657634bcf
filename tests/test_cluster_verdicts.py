"""What the exporter publishes of a job's verdict for the cluster view (issue 32, item 4):
`gputui_job_verdict_info{job,launcher,Hostname,verdict,rank,pid,gpu,slurm_job,pod,namespace,
comm,summary} 1`, one series per job with a verdict, judged by the real engine over the REAL
4-rank NCCL recording tests/fixtures/h200-x4-nccl/stopped.jsonl.gz (rank 1 SIGSTOPped), parsed
back with prometheus_client's own parser.

Where a test gives the ranks a Slurm job or a pod (the real run was torchrun outside Slurm),
it says so: DERIVED in the test."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from conftest import FIXTURES
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from gputui.export.prometheus import build_families
from gputui.telemetry.health import HealthEngine
from gputui.telemetry.health_config import HealthConfig
from gputui.telemetry.model import Job, Snapshot
from gputui.telemetry.recording import read_recording

STOPPED_X4 = FIXTURES / "h200-x4-nccl" / "stopped.jsonl.gz"
FAST = HealthConfig(stuck_seconds=30, spin_seconds=30)
INFO = "gputui_job_verdict_info"


class _Fixed:
    def __init__(self, families) -> None:
        self.families = families

    def collect(self):
        yield from self.families


def exposition(path: Path, upto: int | None = None, job: Job | None = None, launcher: bool = True) -> str:
    header, ticks = read_recording(path)
    ticks = ticks[:upto]
    if job is not None or not launcher:
        ticks = [with_job(s, job, launcher) for s in ticks]
    engine = HealthEngine(FAST)
    for s in ticks:
        engine.update(s)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(build_families(header.machine, ticks[-1], health=engine.current)))
    return generate_latest(registry).decode()


def with_job(s: Snapshot, job: Job | None, launcher: bool) -> Snapshot:
    """DERIVED: every rank of the real snapshot in `job` (and without its launcher)."""
    procs = tuple(
        dataclasses.replace(p, job=job or p.job, launcher=p.launcher if launcher else None)
        for p in s.processes
    )
    return dataclasses.replace(s, processes=procs)


def samples(text: str, name: str) -> list:
    return [s for fam in text_string_to_metric_families(text) for s in fam.samples if s.name == name]


def test_the_verdict_names_the_rank_pid_and_gpu_to_look_at():
    text = exposition(STOPPED_X4)
    (s,) = samples(text, INFO)
    assert s.value == 1.0
    labels = s.labels
    assert labels["job"] == "launcher:943" and labels["launcher"] == "943" and labels["Hostname"] == "vm"
    assert labels["verdict"] == "culprit"
    assert (labels["rank"], labels["pid"], labels["gpu"]) == ("1", "1129", "1")
    assert labels["summary"] == "rank 1 (PID 1129, GPU 1) is the one the others wait for"
    # no job identity the cluster view could merge on: torchrun ran outside Slurm and pods
    assert labels["slurm_job"] == "" and labels["pod"] == "" and labels["namespace"] == ""
    assert labels["comm"] == ""
    (stuck,) = samples(text, "gputui_job_stuck")
    assert stuck.value == 1.0 and stuck.labels["verdict"] == "culprit"


def test_no_verdict_no_series_and_the_stuck_gauge_reads_0():
    text = exposition(STOPPED_X4, upto=20)
    assert samples(text, INFO) == []
    (stuck,) = samples(text, "gputui_job_stuck")
    assert stuck.value == 0.0


def test_a_verdict_naming_no_rank_leaves_rank_pid_and_gpu_empty():
    """DERIVED: the waiting half of the job alone (ranks 2 and 3: "stuck", every rank waits)."""
    header, ticks = read_recording(STOPPED_X4)
    half = [
        dataclasses.replace(s, processes=tuple(p for p in s.processes if p.gpu_index in (2, 3)))
        for s in ticks
    ]
    engine = HealthEngine(FAST)
    for s in half:
        engine.update(s)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(build_families(header.machine, half[-1], health=engine.current)))
    (s,) = samples(generate_latest(registry).decode(), INFO)
    assert s.labels["verdict"] == "stuck"
    assert (s.labels["rank"], s.labels["pid"], s.labels["gpu"]) == ("", "", "")


def test_a_slurm_job_is_published_only_as_the_cgroup_says_it():
    """DERIVED: the real ranks in Slurm job 4242, as root's cgroup names it, then as each
    process's own SLURM_JOB_ID says (what any user can set): the first is the job's
    identity for the cluster view; the second never is (its job key says "environment")."""
    (real,) = samples(exposition(STOPPED_X4, job=Job("slurm", "4242", step="0")), INFO)
    assert real.labels["slurm_job"] == "4242" and real.labels["job"] == "launcher:943"
    claimed = Job("slurm", "4242", step="0", source="environment")
    (env,) = samples(exposition(STOPPED_X4, job=claimed), INFO)
    assert env.labels["slurm_job"] == ""
    (env_only,) = samples(exposition(STOPPED_X4, job=claimed, launcher=False), INFO)
    assert env_only.labels["slurm_job"] == "" and env_only.labels["job"] == "slurm:4242:0:environment"
    for source in ("unverified", "rootless"):
        (other,) = samples(exposition(STOPPED_X4, job=dataclasses.replace(claimed, source=source)), INFO)
        assert other.labels["slurm_job"] == "", source


def test_an_array_task_is_published_as_slurm_writes_it():
    """DERIVED: the ranks in array task 48200_3 (job id 48213): the label is the array's id,
    as the per-process series' slurm_job."""
    job = Job("slurm", "48213", step="0", array="48200_3")
    (s,) = samples(exposition(STOPPED_X4, job=job), INFO)
    assert s.labels["slurm_job"] == "48200_3"


def test_a_pod_is_published_with_its_namespace():
    """DERIVED: the ranks in pod train-0 of namespace ml (root's cgroup, names from the runtime)."""
    pod = Job("pod", "0f1e2d3c-0000-4000-8000-00000000abcd", name="train-0", namespace="ml")
    (s,) = samples(exposition(STOPPED_X4, job=pod), INFO)
    assert (s.labels["pod"], s.labels["namespace"], s.labels["slurm_job"]) == ("train-0", "ml", "")
    unnamed = dataclasses.replace(pod, name=None, namespace=None)
    (u,) = samples(exposition(STOPPED_X4, job=unnamed), INFO)
    assert u.labels["pod"] == "0f1e2d3c-0000-4000-8000-00000000abcd" and u.labels["namespace"] == ""


def test_hostile_ids_reach_the_labels_escaped():
    """DERIVED: a Slurm id and a pod name carrying terminal escapes: escaped, never raw."""
    evil = Job("slurm", "7\x1b]52;c;ZXZpbA==\x07", step="0")
    (s,) = samples(exposition(STOPPED_X4, job=evil, launcher=False), INFO)
    for value in s.labels.values():
        assert "\x1b" not in value and "\x07" not in value
    assert "\\x1b" in s.labels["slurm_job"] and "\\x1b" in s.labels["job"]
