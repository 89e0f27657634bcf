"""A job read from the process's own environment never reaches /metrics under the label of a
verified job (issue 31, attribution): a user's own `SLURM_JOB_ID=555` was published as
`slurm_job="555"`, the label of root's real job 555.  Now the claim goes to `slurm_job_env`
and `slurm_job` stays empty; a pod named only by its own POD_NAME publishes no pod name.

Through a real `gputui export --replay` of the real H100 job recording
(tests/fixtures/h100-x1-job), whose processes are given the jobs below (DERIVED in the test:
the recording's node had one real Slurm job, 48213), scraped over HTTP."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from cluster_support import exporters
from conftest import FIXTURES
from prometheus_client.parser import text_string_to_metric_families

from gputui.telemetry.host.jobs import exporter_labels, job_from_environ, job_label
from gputui.telemetry.model import Job

JOB_REC = FIXTURES / "h100-x1-job" / "recording.jsonl.gz"
REAL = {"kind": "slurm", "id": "555", "step": "0"}  # root's cgroup names it: verified
CLAIM = {"kind": "slurm", "id": "555", "step": "0", "source": "environment"}  # SLURM_JOB_ID=555
POD_CLAIM = {"kind": "pod", "id": "0f0e0d0c-aaaa-bbbb-cccc-000000000001", "name": "train-0",
             "namespace": "ml", "source": "environment"}  # fmt: skip
JOBS = {460: REAL, 458: CLAIM, 459: POD_CLAIM}


def recording(tmp_path: Path) -> Path:
    with gzip.open(JOB_REC, "rt") as f:
        lines = f.read().splitlines()
    out = [lines[0]]
    for line in lines[1:]:
        tick = json.loads(line)
        for p in tick.get("processes", []):
            if p["pid"] in JOBS:
                p["job"] = JOBS[p["pid"]]
        out.append(json.dumps(tick))
    path = tmp_path / "jobs.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write("\n".join(out) + "\n")
    return path


def test_an_environment_claim_never_gets_the_verified_jobs_label(tmp_path) -> None:
    with exporters((recording(tmp_path),)) as (exp,):
        import urllib.request

        with urllib.request.urlopen(f"http://{exp.target}/metrics", timeout=10) as resp:
            text = resp.read().decode()
    by_pid: dict[int, dict[str, str]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name.startswith("gputui_process_") and int(s.labels.get("pid", "0")) in JOBS:
                by_pid[int(s.labels["pid"])] = s.labels
    assert set(by_pid) == set(JOBS)
    assert (by_pid[460]["slurm_job"], by_pid[460]["slurm_job_env"]) == ("555", "")
    assert (by_pid[458]["slurm_job"], by_pid[458]["slurm_job_env"]) == ("", "555")
    assert (by_pid[459]["pod"], by_pid[459]["namespace"], by_pid[459]["slurm_job_env"]) == ("", "", "")
    # `slurm_job="555"` selects root's job alone
    assert [pid for pid, labels in by_pid.items() if labels["slurm_job"] == "555"] == [460]


def test_every_source_has_one_label_shape() -> None:
    shapes = {
        tuple(exporter_labels(job))
        for job in (
            None,
            Job("slurm", "555", step="0"),
            Job("slurm", "555", step="0", source="environment"),
            Job("slurm", "555", step="0", source="unverified"),
            Job("pod", "0f0e", name="a", namespace="b", source="environment"),
            Job("docker", "3f2a" * 16, source="rootless", owner="alice"),
        )
    }
    assert shapes == {("pod", "namespace", "container", "slurm_job", "slurm_job_env")}


def test_an_array_task_claimed_by_the_environment_keeps_its_array_form() -> None:
    claim = job_from_environ(
        {"SLURM_JOB_ID": "13759490", "SLURM_ARRAY_JOB_ID": "13759480", "SLURM_ARRAY_TASK_ID": "3"}, None
    )
    assert claim is not None and claim.source == "environment"
    assert (
        exporter_labels(claim)["slurm_job"] == "" and exporter_labels(claim)["slurm_job_env"] == "13759480_3"
    )


def test_a_pod_named_only_by_its_environment_is_a_claim(tmp_path, monkeypatch) -> None:
    """The pod's UID is root's cgroup's word; its name from POD_NAME is the process's own: the
    runtime's name (root's files) wins where readable, and a name from the environment alone
    marks the job "(env)", never published as `pod`.  Read as a live process is (`read_job`:
    its status, cgroup and environment files; the cgroup's verdict and the runtime's files
    stand in for a node's)."""
    from gputui.telemetry.host import jobs

    proc = tmp_path / "proc"
    (proc / "42").mkdir(parents=True)
    (proc / "42" / "status").write_text("Name:\tpython\nUid:\t1000\t1000\t1000\t1000\n")
    (proc / "42" / "cgroup").write_text("0::/kubepods.slice/...\n")
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "POD_NAME": "other-pod", "POD_NAMESPACE": "other-ns"}
    (proc / "42" / "environ").write_bytes(b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items()))
    pod = Job("pod", "0f0e0d0c-aaaa", container_id="c" * 64, runtime="containerd")
    monkeypatch.setattr(jobs, "job_from_cgroup", lambda text, root=None, uid=None: pod)
    monkeypatch.setattr(jobs, "container_names", lambda runtime, cid: ("trainer", "real-pod", "ml"))
    named = jobs.read_job(42, str(proc))
    assert named is not None and (named.name, named.namespace, named.source) == ("real-pod", "ml", "cgroup")
    assert exporter_labels(named)["pod"] == "real-pod"
    monkeypatch.setattr(jobs, "container_names", lambda runtime, cid: (None, None, None))
    claimed = jobs.read_job(42, str(proc))
    assert claimed is not None and (claimed.name, claimed.source) == ("other-pod", "environment")
    assert job_label(claimed) == "pod other-ns/other-pod (env)"
    assert exporter_labels(claimed)["pod"] == exporter_labels(claimed)["namespace"] == ""
