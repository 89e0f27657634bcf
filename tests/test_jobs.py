"""Job attribution from /proc/PID/cgroup and the environment, on real cgroup contents as
Slurm, Kubernetes, Docker, containerd, CRI-O and podman users posted them (each quoted
with its source), and on real processes of this machine."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from gputui.telemetry.host import jobs
from gputui.telemetry.host.jobs import (
    JobCache,
    job_from_cgroup,
    job_from_environ,
    job_label,
    parse_environ,
    read_job,
    with_names,
)
from gputui.telemetry.model import Job

# ---- Slurm ------------------------------------------------------------------------------

# cgroup v1, task/cgroup: the path posted in rstudio/rstudio#13690 ("e.g.
# `/slurm/uid_2687/job_13759490/step_batch/task_0`"), as the memory controller's line.
SLURM_V1 = (
    "10:memory:/slurm/uid_2687/job_13759490/step_batch/task_0\n"
    "9:cpuset:/slurm/uid_2687/job_13759490/step_batch\n"
)
# cgroup v2 with --enable-multiple-slurmd: NVIDIA/enroot#169, a task's cgroup on the host:
# /sys/fs/cgroup/system.slice/slurm-worker-1_slurmstepd.scope/job_4749/step_0/user/task_0
SLURM_V2 = "0::/system.slice/slurm-worker-1_slurmstepd.scope/job_4749/step_0/user/task_0\n"
# cgroup v2, Slurm 26.05 keyed by SLUID: guilbaults/slurm-job-exporter#66 quoting the docs,
# /sys/fs/cgroup/system.slice/slurmstepd.scope/s5K1KKYAYG5D00/
SLURM_V2_SLUID = "0::/system.slice/slurmstepd.scope/s5K1KKYAYG5D00/step_0/user/task_0\n"
# no cgroup plugin (proctrack/linuxproc): galaxyproject/galaxy#4862, `srun --pty /bin/bash`
# then `cat /proc/$$/cgroup`: the job runs in slurmd's own unit.
SLURM_NO_PLUGIN = "10:perf_event:/\n9:cpuset:/\n8:memory:/system.slice/slurmd.service\n7:freezer:/\n"


def test_slurm_cgroup_v1_job_and_step():
    job = job_from_cgroup(SLURM_V1)
    assert job == Job("slurm", "13759490", step="batch")
    assert job_label(job) == "slurm 13759490.batch"


def test_slurm_cgroup_v2_job_and_step():
    job = job_from_cgroup(SLURM_V2)
    assert job == Job("slurm", "4749", step="0")
    assert job_label(job) == "slurm 4749.0"


def test_slurm_cgroup_v2_keyed_by_sluid():
    assert job_from_cgroup(SLURM_V2_SLUID) == Job("slurm", "s5K1KKYAYG5D00", step="0")


def test_slurm_without_cgroup_plugin_is_the_unit_until_the_environment_says_more():
    assert job_from_cgroup(SLURM_NO_PLUGIN) == Job("unit", "slurmd.service")
    env = {"SLURM_JOB_ID": "48213", "SLURM_STEP_ID": "0"}
    assert job_from_environ(env, None) == Job("slurm", "48213", step="0", source="environment")


def test_slurm_array_task_from_the_environment():
    env = parse_environ(
        b"PATH=/usr/bin\0SLURM_JOB_ID=13759490\0SLURM_ARRAY_JOB_ID=13759480\0SLURM_ARRAY_TASK_ID=3\0HOME=/x\0"
    )
    assert env == {"SLURM_JOB_ID": "13759490", "SLURM_ARRAY_JOB_ID": "13759480", "SLURM_ARRAY_TASK_ID": "3"}
    job = job_from_environ(env, job_from_cgroup(SLURM_V1))
    assert job is not None and job.array == "13759480_3" and job.source == "cgroup"
    assert job_label(job) == "slurm 13759480_3.batch"
    # an environment that disagrees with the cgroup (a user's own export) is not believed
    other = job_from_environ({**env, "SLURM_JOB_ID": "1"}, job_from_cgroup(SLURM_V1))
    assert other == Job("slurm", "13759490", step="batch")


# ---- Kubernetes -------------------------------------------------------------------------

# cgroupfs driver, cgroup v1, burstable, Docker: duckdb/duckdb#16608 ("on a kubernetes pod with docker")
K8S_CGROUPFS_V1 = (
    "12:rdma:/\n"
    "11:freezer:/kubepods/burstable/podc101fead-5fa2-4525-97af-5894973b336e/"
    "2b7a2f7fb72575bb50a46d68cceaf43a12a597184714cb33af2f6420f5314293\n"
    "10:pids:/kubepods/burstable/podc101fead-5fa2-4525-97af-5894973b336e/"
    "2b7a2f7fb72575bb50a46d68cceaf43a12a597184714cb33af2f6420f5314293\n"
)
# cgroupfs driver, v1, besteffort: Homebrew/brew#6191 (`cat /proc/1/cgroup` in a pod)
K8S_BESTEFFORT_V1 = (
    "11:devices:/kubepods/besteffort/podc072e428-830d-11e9-9979-02dce0d67d6a/"
    "a6ebc1887d3fc237d5151e7a20bc888a560b47f69fc14e80d29275bd87cb1042\n"
)
# systemd driver, v1, CRI-O: opencontainers/runc#4620 (`cat /proc/21689/cgroup`)
K8S_SYSTEMD_CRIO_V1 = (
    "13:freezer:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-poda5c1f8d5_1919_434d_add7_"
    "4afaafdaef89.slice/crio-5eed917563583925ffdbd40a64efb2aaffe58638e57add8becaf460fe74f5b1c.scope\n"
    "11:files:/\n"
)
# systemd driver, v1, Docker: lxc/lxc#3890
K8S_SYSTEMD_DOCKER_V1 = (
    "12:rdma:/\n"
    "11:freezer:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7d4424e6_bb13_42f4_a47a_"
    "45a4828bf54d.slice/docker-d0b3604b67ac7930dd34ba3a796627e3e4717d12309e90a4afe3f38b6816ac98.scope\n"
)
# containerd with SystemdCgroup, v1 as the container saw it: open-telemetry/opentelemetry-java#4507
K8S_CONTAINERD_COLON_V1 = (
    "11:perf_event:/kubepods-besteffort-pod0125ec2f_b64a_4868_8f5b_94b56cbab864.slice:cri-containerd:"
    "ee4b20e90ac7f42a10bd004d05646b13d8ab5e2c5e7cbc01abf8006bac016459\n"
)
# systemd driver, cgroup v2, containerd (kind): containerd/nri#227, the container's absolute path
# /sys/fs/cgroup/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/
# kubelet-kubepods-besteffort-pod1e597579_417e_482f_bf65_5fe170c3aebd.slice/cri-containerd-a09b....scope
K8S_SYSTEMD_V2 = (
    "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
    "kubelet-kubepods-besteffort-pod1e597579_417e_482f_bf65_5fe170c3aebd.slice/"
    "cri-containerd-a09bc17f5aa29b0dbdec9ede5f46cf1396d2405917ab02e6f1eb1019f388396e.scope\n"
)
# cgroupfs driver, cgroup v2: google/gvisor#8269, the pod's cgroup
# /sys/fs/cgroup/kubepods/besteffort/pod88bcf96e-7b92-4ce5-a3c0-2a6d098a1c33/ (a container below it)
K8S_CGROUPFS_V2 = (
    "0::/kubepods/besteffort/pod88bcf96e-7b92-4ce5-a3c0-2a6d098a1c33/"
    "ee4b20e90ac7f42a10bd004d05646b13d8ab5e2c5e7cbc01abf8006bac016459\n"
)
# guaranteed QoS has no QoS level in the path: crun#729's mountinfo shows the besteffort
# form /kubepods/besteffort/pod85401dd3-...; a guaranteed pod sits directly under /kubepods.
K8S_GUARANTEED_V1 = (
    "4:memory:/kubepods/pod85401dd3-38cd-47b6-a90a-e16c0e1c06e6/"
    "dbc9f149296cec5d12b78385eb5b2c0cfe20b476f117c15c76d981cff44053c1\n"
)


@pytest.mark.parametrize(
    ("text", "uid", "qos", "runtime", "cid"),
    [
        (K8S_CGROUPFS_V1, "c101fead-5fa2-4525-97af-5894973b336e", "burstable", None, "2b7a2f7fb725"),
        (K8S_BESTEFFORT_V1, "c072e428-830d-11e9-9979-02dce0d67d6a", "besteffort", None, "a6ebc1887d3f"),
        (K8S_SYSTEMD_CRIO_V1, "a5c1f8d5-1919-434d-add7-4afaafdaef89", "burstable", "cri-o", "5eed91756358"),
        (
            K8S_SYSTEMD_DOCKER_V1,
            "7d4424e6-bb13-42f4-a47a-45a4828bf54d",
            "burstable",
            "docker",
            "d0b3604b67ac",
        ),
        (
            K8S_CONTAINERD_COLON_V1,
            "0125ec2f-b64a-4868-8f5b-94b56cbab864",
            "besteffort",
            "containerd",
            "ee4b20e90ac7",
        ),
        (K8S_SYSTEMD_V2, "1e597579-417e-482f-bf65-5fe170c3aebd", "besteffort", "containerd", "a09bc17f5aa2"),
        (K8S_CGROUPFS_V2, "88bcf96e-7b92-4ce5-a3c0-2a6d098a1c33", "besteffort", None, "ee4b20e90ac7"),
        (K8S_GUARANTEED_V1, "85401dd3-38cd-47b6-a90a-e16c0e1c06e6", "guaranteed", None, "dbc9f149296c"),
    ],
)
def test_kubernetes_pod_uid_qos_and_container(text, uid, qos, runtime, cid):
    job = job_from_cgroup(text)
    assert job is not None and job.kind == "pod"
    assert (job.id, job.qos, job.runtime) == (uid, qos, runtime)
    assert job.container_id is not None and job.container_id.startswith(cid) and len(job.container_id) == 64
    # no name is guessed: the label shows the UID's start until the runtime's metadata says more
    assert job.name is None and job.namespace is None
    assert job_label(job) == f"pod {uid[:8]}…"


def test_pod_name_from_the_downward_api_only_inside_kubernetes():
    pod = job_from_cgroup(K8S_SYSTEMD_V2)
    env = {"POD_NAME": "trainer-0", "POD_NAMESPACE": "ml"}
    assert job_from_environ(env, pod) == pod  # no KUBERNETES_SERVICE_HOST: not believed
    named = job_from_environ({**env, "KUBERNETES_SERVICE_HOST": "10.96.0.1"}, pod)
    assert named is not None and (named.name, named.namespace) == ("trainer-0", "ml")
    assert job_label(named) == "pod ml/trainer-0 (env)" and named.source == "environment"  # its own claim
    # and never on something that is not a pod
    assert job_from_environ({**env, "KUBERNETES_SERVICE_HOST": "x"}, None) is None


def test_pod_names_from_containerd_and_crio_metadata(tmp_path, monkeypatch):
    # containerd's OCI bundle carries the CRI annotations (names as containerd's CRI plugin writes them)
    bundle = (
        tmp_path / "tasks" / "k8s.io" / ("a09bc17f5aa29b0dbdec9ede5f46cf1396d2405917ab02e6f1eb1019f388396e")
    )
    bundle.mkdir(parents=True)
    (bundle / "config.json").write_text(
        json.dumps(
            {
                "ociVersion": "1.1.0",
                "annotations": {
                    "io.kubernetes.cri.container-name": "trainer",
                    "io.kubernetes.cri.sandbox-name": "llm-0",
                    "io.kubernetes.cri.sandbox-namespace": "research",
                },
            }
        )
    )
    monkeypatch.setattr(jobs, "CONTAINERD_TASKS", tmp_path / "tasks")
    job = with_names(job_from_cgroup(K8S_SYSTEMD_V2))
    assert job is not None and (job.namespace, job.name, job.container) == ("research", "llm-0", "trainer")
    assert job_label(job) == "pod research/llm-0"
    # CRI-O's userdata/config.json
    cid = "5eed917563583925ffdbd40a64efb2aaffe58638e57add8becaf460fe74f5b1c"
    userdata = tmp_path / "storage" / "overlay-containers" / cid / "userdata"
    userdata.mkdir(parents=True)
    (userdata / "config.json").write_text(
        json.dumps(
            {
                "annotations": {
                    "io.kubernetes.pod.name": "calico-node-hx7cw",
                    "io.kubernetes.pod.namespace": "kube-system",
                    "io.kubernetes.container.name": "calico-node",
                }
            }
        )
    )
    monkeypatch.setattr(jobs, "CONTAINERS_STORAGE", (tmp_path / "storage",))
    job = with_names(job_from_cgroup(K8S_SYSTEMD_CRIO_V1))
    assert job is not None and job_label(job) == "pod kube-system/calico-node-hx7cw"
    assert job.container == "calico-node"
    # unreadable or malformed metadata leaves the names empty, never an exception
    (userdata / "config.json").write_text("{not json")
    job = with_names(job_from_cgroup(K8S_SYSTEMD_CRIO_V1))
    assert job is not None and job.name is None


# ---- containers outside Kubernetes --------------------------------------------------------

# Docker, cgroupfs driver, v1: moby/moby#33352
DOCKER_CGROUPFS_V1 = (
    "13:pids:/\n12:hugetlb:/\n"
    "10:perf_event:/docker/5dace3de0735f73d2b5048f12d41a71741a02e49668de921fdae62f7e65dc498\n"
    "1:name=systemd:/\n"
)
# Docker, systemd driver, v1: moby/moby#9365
DOCKER_SYSTEMD_V1 = (
    "8:blkio:/system.slice/docker-0bd31f558c426d46f30778cefbc727282e4f257537b42b361ea5d03a44f4febe.scope\n"
    "7:net_cls:/\n"
)
# Docker, cgroup v2 (systemd driver), the host's view: earthly/earthly#1533
# /sys/fs/cgroup/system.slice/docker-2a55517bd2c9f85d2e1911cb4cd0840a4aa299513af411fb437c0661dd88d11b.scope
DOCKER_V2 = "0::/system.slice/docker-2a55517bd2c9f85d2e1911cb4cd0840a4aa299513af411fb437c0661dd88d11b.scope\n"
# hybrid host: v1 lines in Docker's cgroup, the v2 line in containerd's unit: ctrsploit/ctrsploit#280
DOCKER_HYBRID = (
    "1:name=systemd:/docker/2403ccfe427f1dc7b6120dccb9ac58c2f8456950380d587a9f33ea7f00dd303d\n"
    "0::/system.slice/containerd.service\n"
)
# podman (root, systemd): podman-container-tools/podman#507, systemd-cgls under machine.slice
PODMAN_V2 = (
    "0::/machine.slice/libpod-0411a2a82311fbc65b137ca550d5f7e6b6863bc734759be2f515b0b67062d49a.scope\n"
)
PODMAN_CONMON = (
    "0::/machine.slice/libpod-conmon-0411a2a82311fbc65b137ca550d5f7e6b6863bc734759be2f515b0b67062d49a.scope\n"
)
# CRI-O outside a pod slice (minikube in Docker): kubernetes/minikube#11280's crio-<id>.scope
CRIO_V2 = "0::/system.slice/crio-89e8f450417b56acf3089925dfd8f050dd50e950e18cfe83ea923269df601102.scope\n"
# containerd via nerdctl, systemd driver: nerdctl-<id>.scope (nerdctl's cgroup naming)
NERDCTL_V2 = (
    "0::/system.slice/nerdctl-ee4b20e90ac7f42a10bd004d05646b13d8ab5e2c5e7cbc01abf8006bac016459.scope\n"
)


@pytest.mark.parametrize(
    ("text", "kind", "cid", "label"),
    [
        (DOCKER_CGROUPFS_V1, "docker", "5dace3de0735", "docker 5dace3de0735"),
        (DOCKER_SYSTEMD_V1, "docker", "0bd31f558c42", "docker 0bd31f558c42"),
        (DOCKER_V2, "docker", "2a55517bd2c9", "docker 2a55517bd2c9"),
        (DOCKER_HYBRID, "docker", "2403ccfe427f", "docker 2403ccfe427f"),
        (PODMAN_V2, "podman", "0411a2a82311", "podman 0411a2a82311"),
        (CRIO_V2, "cri-o", "89e8f450417b", "crio 89e8f450417b"),
        (NERDCTL_V2, "containerd", "ee4b20e90ac7", "ctr ee4b20e90ac7"),
    ],
)
def test_containers(text, kind, cid, label):
    job = job_from_cgroup(text)
    assert job is not None and job.kind == kind and job.id.startswith(cid) and len(job.id) == 64
    assert job_label(job) == label


def test_a_container_monitor_is_not_the_container():
    # conmon runs in its own scope beside the container: it is podman's, not the workload
    assert job_from_cgroup(PODMAN_CONMON) == Job("unit", PODMAN_CONMON.rsplit("/", maxsplit=1)[-1].strip())


def test_container_names_from_docker_and_podman_metadata(tmp_path, monkeypatch):
    cid = "2a55517bd2c9f85d2e1911cb4cd0840a4aa299513af411fb437c0661dd88d11b"
    (tmp_path / "docker" / cid).mkdir(parents=True)
    (tmp_path / "docker" / cid / "config.v2.json").write_text(
        json.dumps({"ID": cid, "Name": "/earthly-buildkitd"})
    )
    monkeypatch.setattr(jobs, "DOCKER_ROOT", tmp_path / "docker")
    job = with_names(job_from_cgroup(DOCKER_V2))
    assert job is not None and job_label(job) == "docker earthly-buildkitd"
    pid = "0411a2a82311fbc65b137ca550d5f7e6b6863bc734759be2f515b0b67062d49a"
    store = tmp_path / "storage" / "overlay-containers"
    store.mkdir(parents=True)
    (store / "containers.json").write_text(json.dumps([{"id": pid, "names": ["redis"]}]))
    monkeypatch.setattr(jobs, "CONTAINERS_STORAGE", (tmp_path / "storage",))
    assert job_label(with_names(job_from_cgroup(PODMAN_V2))) == "podman redis"


# ---- systemd units and sessions ------------------------------------------------------------

# podman unshare: crun#376, `0::/user.slice/user-1000.slice/user@1000.service/user.slice/podman-6696.scope`
USER_SCOPE = "0::/user.slice/user-1000.slice/user@1000.service/user.slice/podman-6696.scope\n"
# kubelet's own unit on a CentOS host: kontena/pharos-cluster#440 (v1, name=systemd line)
SYSTEM_SLICE = "1:name=systemd:/system.slice\n"


def test_units_sessions_and_nothing():
    assert job_from_cgroup(USER_SCOPE) == Job("unit", "podman-6696.scope")
    assert job_from_cgroup("0::/user.slice/user-1000.slice/session-3.scope\n") == Job("session", "3")
    assert job_label(Job("session", "3")) == "session 3"
    assert job_from_cgroup(SYSTEM_SLICE) is None  # a slice is not a job
    assert job_from_cgroup("0::/\n") is None  # a container with its own cgroup namespace, seen from inside
    assert job_from_cgroup("garbage\n\n1:x\n") is None


def test_untrusted_paths_never_raise():
    # a unit name is the unit owner's choice: odd bytes survive as text, to be escaped by the UI
    job = job_from_cgroup("0::/system.slice/evil\x1b[2J.service\n")
    assert job == Job("unit", "evil\x1b[2J.service")
    assert job_from_cgroup("0::/kubepods/burstable/podnot-a-uid/xyz\n") is None


# ---- real processes of this machine -----------------------------------------------------


def test_a_real_process_reads_as_its_cgroup_file_says():
    with open("/proc/self/cgroup") as f:
        expected = job_from_cgroup(f.read())
    assert read_job(os.getpid()) == expected


def _writable_v1_cgroup() -> Path | None:
    """A cgroup directory of this process that the test may create children in (root)."""
    with open("/proc/self/cgroup") as f:
        lines = jobs.parse_cgroup_file(f.read())
    for controllers, path in lines:
        names = [c for c in controllers.split(",") if c and "=" not in c]
        bases = [Path("/sys/fs/cgroup") / c for c in names] if controllers else [Path("/sys/fs/cgroup")]
        for base in bases:
            d = base / path.lstrip("/")
            if (d / "cgroup.procs").exists() and os.access(d, os.W_OK):
                return d
    return None


def test_a_real_process_moved_into_a_slurm_like_cgroup_is_attributed(children):
    """A real child moved into a cgroup laid out as Slurm's (slurm/uid_U/job_J/step_S) reads as
    that job step; and the cache reads it once."""
    base = _writable_v1_cgroup()
    if base is None:
        pytest.skip("no writable cgroup directory here (needs root)")
    top = base / f"slurm_gputui{uuid.uuid4().hex[:6]}"
    leaf = top / "uid_0" / "job_48213" / "step_0"
    try:
        leaf.mkdir(parents=True)
    except OSError as exc:
        pytest.skip(f"cannot create a cgroup here: {exc}")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    children.append(child)
    try:
        (leaf / "cgroup.procs").write_text(str(child.pid))
        job = read_job(child.pid)
        assert job == Job("slurm", "48213", step="0")
        cache = JobCache()
        assert cache.get(child.pid, 1.0) == job and cache.get(child.pid, 1.0) == job
        assert cache.reads == 1
        assert cache.get(child.pid, 2.0) == job and cache.reads == 2  # another start time: another process
    finally:
        child.kill()
        child.wait()
        for d in (leaf, leaf.parent, leaf.parent.parent, top):
            with contextlib.suppress(OSError):
                d.rmdir()


# ---- where the job goes: snapshot --processes fields and the exporter's labels ---------------


def _with_jobs():
    from conftest import H200_X2

    from gputui.telemetry.recording import read_recording

    header, snaps = read_recording(H200_X2)
    snap = snaps[60]
    pod = with_names(job_from_cgroup(K8S_SYSTEMD_V2))
    pod = Job(
        "pod", pod.id, name="llm-0", namespace="research", container="trainer", container_id=pod.container_id
    )
    slurm = job_from_environ(
        {"SLURM_ARRAY_JOB_ID": "48200", "SLURM_ARRAY_TASK_ID": "3", "SLURM_JOB_ID": "4749"},
        job_from_cgroup(SLURM_V2),
    )
    import dataclasses

    procs = list(snap.processes)
    procs[0] = dataclasses.replace(procs[0], job=pod)
    procs[1] = dataclasses.replace(procs[1], job=slurm)
    return header.machine, dataclasses.replace(snap, processes=tuple(procs)), procs


def test_snapshot_processes_fields_carry_the_job():
    from gputui.export.snapshot import document

    info, snap, procs = _with_jobs()
    doc = document(info, snap, processes=True)
    rows = {(p["gpu_index"], p["pid"]): p for p in doc["processes"]}
    a = rows[(procs[0].gpu_index, procs[0].pid)]
    assert (a["job"], a["job.kind"], a["pod"], a["namespace"], a["container"]) == (
        "pod research/llm-0",
        "pod",
        "llm-0",
        "research",
        "trainer",
    )
    b = rows[(procs[1].gpu_index, procs[1].pid)]
    assert (b["job"], b["slurm_job"], b["slurm_step"], b["pod"]) == ("slurm 48200_3.0", "48200_3", "0", None)


def test_exporter_labels_use_dcgm_exporter_names():
    from gputui.export.prometheus import build_families

    info, snap, procs = _with_jobs()
    fams = {f.name: f for f in build_families(info, snap)}
    samples = fams["gputui_process_gpu_memory_bytes"].samples
    by_pid = {s.labels["pid"]: s.labels for s in samples}
    a, b = by_pid[str(procs[0].pid)], by_pid[str(procs[1].pid)]
    assert (a["pod"], a["namespace"], a["container"], a["slurm_job"]) == ("llm-0", "research", "trainer", "")
    assert (b["pod"], b["namespace"], b["container"], b["slurm_job"]) == ("", "", "", "48200_3")
