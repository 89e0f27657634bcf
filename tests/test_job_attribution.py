"""Job attribution that cannot be spoofed (issue 24, item 2): a Slurm or Kubernetes cgroup
path is believed only where the directories that name the job are owned by root; anything
else reads "unverified" and never shares a label (so never a group, a filter or an
exporter label) with the real job.  Digits are ASCII digits only.

The cgroup trees are real directories under a temporary root laid out as /sys/fs/cgroup
(cgroup v1 controllers, or v2's one hierarchy), owned as the kernel would show them: root's
for what slurmstepd and the kubelet make, an ordinary user's for a delegated subtree.  One
test also moves a real process into a real cgroup chowned to a user."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from gputui.telemetry.host import jobs
from gputui.telemetry.host.jobs import (
    exporter_labels,
    job_from_cgroup,
    job_from_environ,
    job_label,
    parse_environ,
    read_job,
    trusted,
)
from gputui.telemetry.model import Job

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
USER = 1000
"""An ordinary user's uid (no account is needed for a directory's owner)."""
POD = "c101fead-5fa2-4525-97af-5894973b336e"
CID = "2b7a2f7fb72575bb50a46d68cceaf43a12a597184714cb33af2f6420f5314293"
DELEGATION = "user.slice/user-1000.slice/user@1000.service"
"""Where systemd delegates a cgroup subtree to user 1000: it and everything below are theirs."""
DELEGATED = f"{DELEGATION}/app.slice"


def make(root: Path, rel: str, owner_from: str | None = None) -> Path:
    """mkdir -p root/rel; every directory from `owner_from` (a prefix of rel) down is
    chowned to USER, the rest stays root's."""
    d = root / rel
    d.mkdir(parents=True, exist_ok=True)
    if owner_from is not None:
        parts = Path(rel).parts
        start = len(Path(owner_from).parts)
        for i in range(start, len(parts) + 1):
            os.chown(root.joinpath(*parts[:i]), USER, USER)
    return d


@pytest.fixture
def v1(tmp_path):
    """A cgroup v1 layout: one directory per controller, as under /sys/fs/cgroup."""
    root = tmp_path / "cgroup"
    for c in ("memory", "cpu,cpuacct", "systemd"):
        (root / c).mkdir(parents=True)
    return root


@pytest.fixture
def v2(tmp_path):
    """A cgroup v2 layout: one hierarchy, cgroup.controllers at its top."""
    root = tmp_path / "cgroup2"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpu memory pids\n")
    return root


# ---- Slurm ------------------------------------------------------------------------------


@ROOT_ONLY
def test_roots_slurm_job_is_verified_and_a_users_lookalike_is_not(v1):
    make(v1, "memory/slurm/uid_0/job_555/step_0")
    real = job_from_cgroup("4:memory:/slurm/uid_0/job_555/step_0\n", v1)
    assert real == Job("slurm", "555", step="0") and trusted(real)
    assert job_label(real) == "slurm 555.0"
    # the same names, made by user 1000 in the subtree systemd delegated to them
    fake_path = f"{DELEGATED}/slurm/uid_0/job_555/step_0"
    make(v1, f"memory/{fake_path}", owner_from=f"memory/{DELEGATION}")
    fake = job_from_cgroup(f"4:memory:/{fake_path}\n", v1)
    assert fake is not None and fake.source == "unverified" and not trusted(fake)
    assert (fake.kind, fake.id, fake.step) == (
        "slurm",
        "555",
        "0",
    )  # what it claims, kept for the detail view
    assert job_label(fake) == "slurm 555.0 (unverified)" != job_label(real)  # never one group
    # and never published as the job's label to Prometheus
    assert exporter_labels(fake)["slurm_job"] == "" and exporter_labels(real)["slurm_job"] == "555"


@ROOT_ONLY
def test_a_user_owned_job_directory_under_roots_slurm_tree_is_unverified(v2):
    """cgroup v2: slurmstepd.scope is root's; a job directory owned by a user (made in a
    subtree delegated to them, or chowned) is not Slurm's."""
    make(v2, "system.slice/slurmstepd.scope/job_4749/step_0/user/task_0")
    ok = job_from_cgroup("0::/system.slice/slurmstepd.scope/job_4749/step_0/user/task_0\n", v2)
    assert ok == Job("slurm", "4749", step="0")
    make(
        v2,
        "system.slice/slurmstepd.scope/job_4750/step_0",
        owner_from="system.slice/slurmstepd.scope/job_4750",
    )
    bad = job_from_cgroup("0::/system.slice/slurmstepd.scope/job_4750/step_0\n", v2)
    assert bad is not None and bad.source == "unverified"


@ROOT_ONLY
def test_a_step_directory_owned_by_the_jobs_user_is_still_slurms(v1):
    """Slurm's cgroup/v1 plugin creates uid_U and job_J as root and the step as the job's
    user (xcgroup_create_hierarchy): the step's owner is not a reason to doubt the job."""
    make(
        v1,
        "memory/slurm/uid_1000/job_13759490/step_batch/task_0",
        owner_from="memory/slurm/uid_1000/job_13759490/step_batch",
    )
    job = job_from_cgroup("10:memory:/slurm/uid_1000/job_13759490/step_batch/task_0\n", v1)
    assert job == Job("slurm", "13759490", step="batch")


def test_a_path_that_cannot_be_checked_is_unverified(v1, v2):
    # no such directory (another cgroup namespace, a process gone, /sys/fs/cgroup not mounted)
    assert job_from_cgroup("4:memory:/slurm/uid_0/job_1/step_0\n", v1).source == "unverified"
    assert job_from_cgroup("0::/system.slice/slurmstepd.scope/job_1/step_0\n", v2).source == "unverified"
    # a path outside gputui's cgroup namespace climbs out of it: never followed
    make(v2.parent, "slurm/uid_0/job_2/step_0")
    assert job_from_cgroup("0::/../slurm/uid_0/job_2/step_0\n", v2).source == "unverified"
    # a symlink where a directory should be is not a directory
    make(v2, "slurm/uid_0/job_2/step_0")
    if os.geteuid() == 0:  # (made by root: the real directory is Slurm's; as a user, no path is)
        assert trusted(job_from_cgroup("0::/slurm/uid_0/job_2/step_0\n", v2))
    (v2 / "slurm_x").symlink_to(v2 / "slurm")
    assert job_from_cgroup("0::/slurm_x/uid_0/job_2/step_0\n", v2).source == "unverified"


def test_without_a_cgroup_root_the_text_alone_is_parsed_and_read_job_always_checks(
    monkeypatch, tmp_path, children
):
    """job_from_cgroup(text) is the parser alone (the recorded cgroup contents of
    test_jobs.py); read_job, what the live view uses, always checks the directories."""
    assert trusted(job_from_cgroup("4:memory:/slurm/uid_0/job_7/step_0\n"))
    proc = tmp_path / "proc"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    children.append(child)
    d = proc / str(child.pid)
    d.mkdir(parents=True)
    (d / "cgroup").write_text("4:memory:/slurm/uid_0/job_7/step_0\n")
    monkeypatch.setattr(jobs, "CGROUP_ROOT", tmp_path / "no-cgroup-here")
    job = read_job(child.pid, str(proc))
    assert job is not None and job.source == "unverified"


# ---- Kubernetes -------------------------------------------------------------------------


@ROOT_ONLY
def test_a_user_made_kubepods_tree_is_not_a_pod(v1, v2):
    make(v1, f"memory/kubepods/burstable/pod{POD}/{CID}")
    real = job_from_cgroup(f"10:memory:/kubepods/burstable/pod{POD}/{CID}\n", v1)
    assert real is not None and real.kind == "pod" and trusted(real)
    fake_path = f"{DELEGATED}/kubepods/burstable/pod{POD}/{CID}"
    make(v2, fake_path, owner_from=DELEGATION)
    fake = job_from_cgroup(f"0::/{fake_path}\n", v2)
    assert fake is not None and fake.kind == "pod" and fake.source == "unverified"
    assert job_label(fake) != job_label(real) and "unverified" in job_label(fake)
    assert exporter_labels(fake)["pod"] == exporter_labels(fake)["namespace"] == ""
    # systemd's driver: the pod's slice made by the user's own systemd
    pod_slice = f"kubepods-burstable-pod{POD.replace('-', '_')}.slice"
    sd = f"{DELEGATED}/kubepods.slice/kubepods-burstable.slice/{pod_slice}"
    make(v2, sd, owner_from=DELEGATION)
    assert job_from_cgroup(f"0::/{sd}/cri-containerd-{CID}.scope\n", v2).source == "unverified"


@ROOT_ONLY
def test_a_verified_job_on_one_line_wins_over_an_unverified_claim_on_another(v1):
    """Hybrid hierarchies: v1 lines from the kubelet (root's), the v2 line from a delegated
    subtree the user filled with a more specific claim (a Slurm step outranks a pod): the
    verified pod is the job."""
    make(v1, f"memory/kubepods/pod{POD}/{CID}")
    fake = f"{DELEGATED}/slurm/uid_0/job_555/step_0"
    make(v1, f"unified/{fake}", owner_from=f"unified/{DELEGATION}")
    text = f"4:memory:/kubepods/pod{POD}/{CID}\n0::/{fake}\n"
    job = job_from_cgroup(text, v1)
    assert job is not None and (job.kind, job.id, job.source) == ("pod", POD, "cgroup")
    # with nothing verified, the claim is shown as what it is
    only = job_from_cgroup(f"0::/{fake}\n", v1)
    assert only is not None and only.kind == "slurm" and only.source == "unverified"


# ---- ASCII digits only -------------------------------------------------------------------


@pytest.mark.parametrize("digits", ["５５５", "٥٥٥", "५५५", "55²", "𝟓𝟓𝟓"])
def test_digits_are_ascii_digits_only(digits):
    # a cgroup directory name
    assert job_from_cgroup(f"4:memory:/slurm/uid_0/job_{digits}/step_0\n") is None
    # the environment: the job, the step, the array task
    assert job_from_environ({"SLURM_JOB_ID": digits}, None) is None
    assert job_from_environ({"SLURM_JOBID": digits}, None) is None
    job = job_from_environ({"SLURM_JOB_ID": "48213", "SLURM_STEP_ID": digits}, None)
    assert job is not None and job.step is None
    job = job_from_environ(
        {"SLURM_JOB_ID": "48213", "SLURM_ARRAY_JOB_ID": digits, "SLURM_ARRAY_TASK_ID": "3"}, None
    )
    assert job is not None and job.array is None
    job = job_from_environ(
        {"SLURM_JOB_ID": "48213", "SLURM_ARRAY_JOB_ID": "48200", "SLURM_ARRAY_TASK_ID": digits}, None
    )
    assert job is not None and job.array is None


# ---- Slurm array tasks from the environment alone ------------------------------------------


def test_an_array_task_from_the_environment_alone(children):
    """No Slurm cgroup (proctrack/linuxproc): a real process's own environment names the job
    and its array task; the label says it is the process's own claim."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin"),
        "SLURM_JOB_ID": "13759490",
        "SLURM_ARRAY_JOB_ID": "13759480",
        "SLURM_ARRAY_TASK_ID": "3",
        "SLURM_STEP_ID": "0",
    }
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; print(1, flush=True); time.sleep(60)"],
        env=env,
        stdout=subprocess.PIPE,
    )
    children.append(child)
    assert child.stdout is not None and child.stdout.readline().strip() == b"1"
    with open(f"/proc/{child.pid}/environ", "rb") as f:
        seen = parse_environ(f.read())
    job = job_from_environ(seen, None)
    assert job == Job("slurm", "13759490", step="0", array="13759480_3", source="environment")
    assert job_label(job) == "slurm 13759480_3.0 (env)"
    assert exporter_labels(job)["slurm_job"] == "13759480_3"
    # an array job id without its task id (or the reverse) is no array task
    assert job_from_environ({**seen, "SLURM_ARRAY_TASK_ID": ""}, None).array is None
    assert job_from_environ({k: v for k, v in seen.items() if k != "SLURM_ARRAY_JOB_ID"}, None).array is None


def test_an_environment_claim_never_shares_a_label_with_the_cgroups_job():
    from_cgroup = job_from_cgroup("4:memory:/slurm/uid_0/job_555/step_0\n")
    claim = job_from_environ({"SLURM_JOB_ID": "555", "SLURM_STEP_ID": "0"}, None)
    assert claim is not None and job_label(claim) != job_label(from_cgroup)


# ---- a real process in a real cgroup owned by a user --------------------------------------


def _writable_v1_memory() -> tuple[Path, str] | None:
    """(hierarchy, this process's cgroup path in it) for a v1 memory hierarchy root can write."""
    with open("/proc/self/cgroup") as f:
        for controllers, path in jobs.parse_cgroup_file(f.read()):
            if "memory" in controllers.split(","):
                base = Path("/sys/fs/cgroup") / controllers
                d = base / path.lstrip("/")
                if (d / "cgroup.procs").exists() and os.access(d, os.W_OK):
                    return base, path
    return None


@ROOT_ONLY
def test_a_real_process_in_a_user_owned_slurm_lookalike_cgroup_reads_unverified(children):
    found = _writable_v1_memory()
    if found is None:
        pytest.skip("no writable cgroup v1 memory hierarchy here")
    base, own = found
    top = base / own.lstrip("/") / f"gputui{uuid.uuid4().hex[:6]}"
    leaf = top / "slurm" / "uid_0" / "job_555" / "step_0"
    try:
        leaf.mkdir(parents=True)
    except OSError as exc:
        pytest.skip(f"cannot create a cgroup here: {exc}")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    children.append(child)
    try:
        (leaf / "cgroup.procs").write_text(str(child.pid))
        assert read_job(child.pid) == Job("slurm", "555", step="0")  # root made it: believed
        for d in (top, top / "slurm", top / "slurm" / "uid_0", top / "slurm" / "uid_0" / "job_555"):
            os.chown(d, USER, USER)  # as if made by user 1000 in a delegated subtree
        job = read_job(child.pid)
        assert job is not None and job.source == "unverified" and job_label(job) == "slurm 555.0 (unverified)"
    finally:
        child.kill()
        child.wait()
        for d in (leaf, leaf.parent, leaf.parent.parent, leaf.parent.parent.parent, top):
            with contextlib.suppress(OSError):
                d.rmdir()


def test_snapshot_fields_of_an_unverified_job_say_what_it_claims_and_name_no_job():
    """`gputui snapshot --processes`: the job field carries the mark; slurm_job, slurm_step,
    pod, namespace and container stay null (a query on them finds only the real job)."""
    import dataclasses

    from conftest import H200_X2

    from gputui.export.snapshot import document
    from gputui.telemetry.recording import read_recording

    header, snaps = read_recording(H200_X2)
    snap = snaps[60]
    procs = list(snap.processes)
    real = Job("slurm", "555", step="0")
    procs[0] = dataclasses.replace(procs[0], job=dataclasses.replace(real, source="unverified"))
    procs[1] = dataclasses.replace(procs[1], job=real)
    doc = document(header.machine, dataclasses.replace(snap, processes=tuple(procs)), processes=True)
    rows = {(p["gpu_index"], p["pid"]): p for p in doc["processes"]}
    fake = rows[(procs[0].gpu_index, procs[0].pid)]
    ok = rows[(procs[1].gpu_index, procs[1].pid)]
    assert (ok["job"], ok["slurm_job"], ok["slurm_step"]) == ("slurm 555.0", "555", "0")
    assert fake["job"] == "slurm 555.0 (unverified)" and fake["job.kind"] == "slurm"
    assert (fake["slurm_job"], fake["slurm_step"], fake["pod"], fake["container"]) == (None, None, None, None)
