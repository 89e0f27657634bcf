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
    job_facts,
    job_from_cgroup,
    job_from_environ,
    job_label,
    parse_environ,
    read_job,
    trusted,
    verified,
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
    assert exporter_labels(job)["slurm_job"] == "" and exporter_labels(job)["slurm_job_env"] == "13759480_3"
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


# ---- containers: Docker, podman, containerd, CRI-O outside Kubernetes --------------------------

ROOTLESS = f"{DELEGATION}/user.slice/libpod-{CID}.scope"
"""Where rootless podman (crun, systemd cgroup manager) puts a container of user 1000."""


def _owner_name(uid: int) -> str:
    """What the label calls a rootless container's user: their name here, else their uid."""
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@ROOT_ONLY
def test_roots_docker_scope_is_verified_and_a_users_lookalike_is_not(v1, v2):
    make(v2, f"system.slice/docker-{CID}.scope")
    real = job_from_cgroup(f"0::/system.slice/docker-{CID}.scope\n", v2, uid=0)
    assert real == Job("docker", CID) and trusted(real)
    assert job_label(real) == "docker 2b7a2f7fb725" and exporter_labels(real)["container"] == "2b7a2f7fb725"
    # the same scope name, made by user 1000 under the subtree systemd delegated to them, for a
    # process that is not theirs (or whose owner could not be read): not a container of anyone's
    fake_path = f"{DELEGATED}/docker-{CID}.scope"
    make(v2, fake_path, owner_from=DELEGATION)
    for uid in (None, 0, 2000):
        fake = job_from_cgroup(f"0::/{fake_path}\n", v2, uid=uid)
        assert fake is not None and (fake.kind, fake.id, fake.source) == ("docker", CID, "unverified")
        assert job_label(fake) == "docker 2b7a2f7fb725 (unverified)" != job_label(real)  # never one group
        assert exporter_labels(fake) == {
            "pod": "",
            "namespace": "",
            "container": "",
            "slurm_job": "",
            "slurm_job_env": "",
        }
        assert (
            "verified",
            "no: its cgroup directories are not root's (anyone can name one so)",
        ) in job_facts(fake)
    # Docker's cgroupfs driver (v1: /docker/<id>) made by a user is no container either
    make(v1, f"memory/docker/{CID}")
    assert trusted(job_from_cgroup(f"4:memory:/docker/{CID}\n", v1))
    make(v1, f"memory/{DELEGATED}/docker/{CID}", owner_from=f"memory/{DELEGATION}")
    assert job_from_cgroup(f"4:memory:/{DELEGATED}/docker/{CID}\n", v1).source == "unverified"
    # nor a user-owned scope beside root's (chowned, or made in a delegated system unit)
    make(
        v2, f"system.slice/cri-containerd-{CID}.scope", owner_from=f"system.slice/cri-containerd-{CID}.scope"
    )
    assert job_from_cgroup(f"0::/system.slice/cri-containerd-{CID}.scope\n", v2).source == "unverified"


@ROOT_ONLY
def test_a_rootless_container_is_its_users_and_never_merged_with_roots(v2):
    """Rootless podman puts a user's container in the user's own delegated subtree: for a
    process of that user it is their container, labelled as theirs; never root's container
    of the same id (its label, group and exporter series), never another user's."""
    make(v2, f"machine.slice/libpod-{CID}.scope")
    real = job_from_cgroup(f"0::/machine.slice/libpod-{CID}.scope\n", v2)
    assert real == Job("podman", CID) and job_label(real) == "podman 2b7a2f7fb725"
    make(v2, f"{ROOTLESS}/container", owner_from=DELEGATION)
    mine = job_from_cgroup(f"0::/{ROOTLESS}/container\n", v2, uid=USER)
    name = _owner_name(USER)
    assert mine == Job("podman", CID, source="rootless", owner=name)
    assert not trusted(mine) and verified(mine)
    assert job_label(mine) == f"podman 2b7a2f7fb725 (rootless, user {name})" != job_label(real)
    assert exporter_labels(mine)["container"] == ""
    facts = dict(job_facts(mine))
    assert facts["verified"].startswith(f"as user {name}'s own") and facts["container"] == f"podman {CID}"
    # the same path for a process of another user, or of root: not that user's container
    for uid in (None, 0, 2000):
        assert job_from_cgroup(f"0::/{ROOTLESS}/container\n", v2, uid=uid).source == "unverified"
    # user 2000's delegated subtree made by (or chowned to) user 1000: not user 2000's, nor 1000's
    other = f"user.slice/user-2000.slice/user@2000.service/user.slice/libpod-{CID}.scope"
    make(v2, other, owner_from="user.slice/user-2000.slice/user@2000.service")
    for uid in (USER, 2000):
        assert job_from_cgroup(f"0::/{other}\n", v2, uid=uid).source == "unverified"
    # a user@1000.service made by user 2000 in their own subtree (chowned back to 2000 first)
    # is user 2000's, never 1000's
    mine2000 = f"user.slice/user-2000.slice/user@2000.service/x/user@1000.service/libpod-{CID}.scope"
    for i in range(3, len(mine2000.split("/")) + 1):
        d = v2.joinpath(*mine2000.split("/")[:i])
        d.mkdir(exist_ok=True)
        os.chown(d, 2000, 2000)
    assert job_from_cgroup(f"0::/{mine2000}\n", v2, uid=USER).source == "unverified"
    assert job_from_cgroup(f"0::/{mine2000}\n", v2, uid=2000).source == "rootless"
    # user@1000.service made by the user in a system unit delegated to them (Delegate=yes,
    # User=1000): above it is the user's, not root's, so it is no user@ subtree of systemd's
    unit = f"system.slice/ci-runner.service/user@1000.service/libpod-{CID}.scope"
    make(v2, unit, owner_from="system.slice/ci-runner.service")
    assert job_from_cgroup(f"0::/{unit}\n", v2, uid=USER).source == "unverified"
    # a directory below the user's own that is root's is not the user's (nor root's) container
    rootish = f"{DELEGATION}/root.slice/libpod-{CID}.scope"
    make(v2, rootish, owner_from=DELEGATION)
    os.chown(v2 / rootish, 0, 0)
    assert job_from_cgroup(f"0::/{rootish}\n", v2, uid=USER).source == "unverified"
    # a Slurm job or a pod in the user's subtree is never "rootless": only containers are
    slurm = f"{DELEGATED}/slurm/uid_0/job_555/step_0"
    make(v2, slurm, owner_from=DELEGATION)
    assert job_from_cgroup(f"0::/{slurm}\n", v2, uid=USER).source == "unverified"


@ROOT_ONLY
def test_a_verified_root_container_wins_over_a_rootless_claim_and_a_rootless_one_over_a_unit(v1):
    make(v1, f"memory/docker/{CID}")
    make(v1, f"unified/{ROOTLESS}", owner_from=f"unified/{DELEGATION}")
    job = job_from_cgroup(f"0::/{ROOTLESS}\n4:memory:/docker/{CID}\n", v1, uid=USER)
    assert job == Job("docker", CID)
    make(v1, "systemd/user.slice/user-1000.slice/session-3.scope")
    text = f"1:name=systemd:/user.slice/user-1000.slice/session-3.scope\n0::/{ROOTLESS}\n"
    assert job_from_cgroup(text, v1, uid=USER).source == "rootless"


def test_a_symlink_in_a_container_path_is_not_a_directory(v2):
    make(v2, f"system.slice/docker-{CID}.scope")
    (v2 / "system_x.slice").symlink_to(v2 / "system.slice")
    assert job_from_cgroup(f"0::/system_x.slice/docker-{CID}.scope\n", v2).source == "unverified"
    other = "0" * 64
    (v2 / "system.slice" / f"docker-{other}.scope").symlink_to(v2 / "system.slice" / f"docker-{CID}.scope")
    assert job_from_cgroup(f"0::/system.slice/docker-{other}.scope\n", v2).source == "unverified"
    # and in a rootless path
    make(v2, ROOTLESS)
    (v2 / "user.slice" / "user-1000.slice" / "user@1001.service").symlink_to(v2 / DELEGATION)
    link = ROOTLESS.replace("user@1000.service", "user@1001.service")
    assert job_from_cgroup(f"0::/{link}\n", v2, uid=1001).source == "unverified"
    # gone or outside gputui's cgroup namespace: not checkable
    assert job_from_cgroup(f"0::/system.slice/docker-{'1' * 64}.scope\n", v2).source == "unverified"
    make(v2.parent, f"system.slice/docker-{CID}.scope")
    assert job_from_cgroup(f"0::/../system.slice/docker-{CID}.scope\n", v2).source == "unverified"


FULLWIDTH = str.maketrans("0123456789", "０１２３４５６７８９")


def test_container_ids_are_ascii_hex_only():
    wide = CID.translate(FULLWIDTH)
    assert job_from_cgroup(f"0::/system.slice/docker-{wide}.scope\n") == Job("unit", f"docker-{wide}.scope")
    assert job_from_cgroup(f"4:memory:/docker/{wide}\n") is None
    assert job_from_cgroup(f"0::/machine.slice/libpod-{wide}.scope\n").kind == "unit"
    assert job_from_cgroup(f"4:memory:/docker/{CID.upper()}\n") is None  # Docker writes lower case


@ROOT_ONLY
def test_a_rootless_uid_is_ascii_digits_only(v2):
    """user@１０００.service is no user's delegated subtree (int() would read it as 1000)."""
    wide = f"user.slice/user-1000.slice/user@{'1000'.translate(FULLWIDTH)}.service"
    make(v2, f"{wide}/user.slice/libpod-{CID}.scope", owner_from=wide)
    job = job_from_cgroup(f"0::/{wide}/user.slice/libpod-{CID}.scope\n", v2, uid=USER)
    assert job is not None and job.source == "unverified"


@ROOT_ONLY
def test_read_job_reads_the_process_owner_and_lends_no_real_name_to_a_lookalike(
    monkeypatch, tmp_path, children
):
    """The live path: /proc/PID/status's real uid decides a rootless container; the runtime's
    names (root's /var/lib/docker) are looked up only for a root-verified container, so a
    lookalike never shows the real container's name."""
    import json

    root = tmp_path / "cgroup2"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpu memory\n")
    monkeypatch.setattr(jobs, "CGROUP_ROOT", root)
    (tmp_path / "docker" / CID).mkdir(parents=True)
    (tmp_path / "docker" / CID / "config.v2.json").write_text(json.dumps({"Name": "/prod-db"}))
    monkeypatch.setattr(jobs, "DOCKER_ROOT", tmp_path / "docker")
    make(root, f"system.slice/docker-{CID}.scope")
    fake = f"{DELEGATION}/user.slice/docker-{CID}.scope"
    make(root, fake, owner_from=DELEGATION)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    children.append(child)
    proc = tmp_path / "proc"
    d = proc / str(child.pid)
    d.mkdir(parents=True)

    def job(path: str, uid: int | None) -> Job | None:
        (d / "cgroup").write_text(f"0::/{path}\n")
        (d / "status").write_text(
            "Name:\tpython3\nState:\tS (sleeping)\n"
            + (
                f"Uid:\t{uid}\t{uid}\t{uid}\t{uid}\nGid:\t{uid}\t{uid}\t{uid}\t{uid}\n"
                if uid is not None
                else ""
            )
        )
        return read_job(child.pid, str(proc))

    assert job(f"system.slice/docker-{CID}.scope", 0) == Job("docker", CID, name="prod-db")
    assert job_label(job(fake, USER)) == f"docker 2b7a2f7fb725 (rootless, user {_owner_name(USER)})"
    assert job_label(job(fake, 2000)) == "docker 2b7a2f7fb725 (unverified)"
    assert job_label(job(fake, None)) == "docker 2b7a2f7fb725 (unverified)"  # no Uid line: not theirs
    # the real uid is the owner (a set-uid program of user 1000 is still user 1000's process)
    (d / "status").write_text("Uid:\t1000\t0\t0\t0\n")
    (d / "cgroup").write_text(f"0::/{fake}\n")
    assert read_job(child.pid, str(proc)).source == "rootless"
    (d / "status").write_text("Uid:\t2000\t1000\t1000\t1000\n")
    assert read_job(child.pid, str(proc)).source == "unverified"


def test_snapshot_fields_of_a_rootless_container_name_no_container():
    import dataclasses

    from conftest import H200_X2

    from gputui.export.snapshot import document
    from gputui.telemetry.recording import read_recording

    header, snaps = read_recording(H200_X2)
    snap = snaps[60]
    procs = list(snap.processes)
    procs[0] = dataclasses.replace(
        procs[0], job=Job("podman", CID, name="web", source="rootless", owner="alice")
    )
    procs[1] = dataclasses.replace(procs[1], job=Job("podman", CID, name="web"))
    doc = document(header.machine, dataclasses.replace(snap, processes=tuple(procs)), processes=True)
    rows = {(p["gpu_index"], p["pid"]): p for p in doc["processes"]}
    mine = rows[(procs[0].gpu_index, procs[0].pid)]
    real = rows[(procs[1].gpu_index, procs[1].pid)]
    assert (real["job"], real["container"]) == ("podman web", "web")
    assert (mine["job"], mine["container"]) == ("podman web (rootless, user alice)", None)
