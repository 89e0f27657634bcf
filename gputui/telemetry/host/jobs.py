"""Which job a process belongs to: a Slurm job step, a Kubernetes pod, a container, a
systemd unit or a login session, read from /proc/PID/cgroup (cgroup v1 and v2) and, where
readable, the process's environment and the container runtime's metadata files.

No Textual, no psutil.  The parsing is pure (`job_from_cgroup`, `job_from_environ`); the
reading is cached per (PID, start time) by `JobCache`, so a process costs two small
/proc reads once in its life, not every tick.  Nothing is guessed: a pod's name and
namespace are filled only from the runtime's own files or the downward-API variables the
process really has; otherwise they stay None.  Every string is untrusted (the owner of a
job chooses unit names, container names and environment values): the UI shows them
through its one literal filter.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from gputui.telemetry.host.cgroup_trust import hierarchy, owned_by_root, rootless, user_name
from gputui.telemetry.model import Job

# --------------------------------------------------------------------------------------
# cgroup paths
# --------------------------------------------------------------------------------------

_HEX64 = re.compile(r"[0-9a-f]{64}")
_DIGITS = re.compile(r"[0-9]+")
"""ASCII digits: `\\d`, str.isdigit and int() also take "５５５", "٥" and "²"."""
_SLURM_JOB = re.compile(r"job_([0-9]+)")
_SLURM_STEP = re.compile(r"step_([A-Za-z0-9_]+)")
_SLUID = re.compile(r"s[0-9A-Za-z]{8,20}")
"""Slurm 26.05's cgroup v2 directories are keyed by SLUID ("s5K1KKYAYG5D00") by default."""
_POD_CGROUPFS = re.compile(r"pod([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32})")
_POD_SYSTEMD = re.compile(
    r"-pod([0-9a-f]{8}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{12}|[0-9a-f]{32})\.slice"
)
_QOS = ("besteffort", "burstable")
#: systemd scope prefixes of container runtimes -> (runtime, job kind outside a pod).
_SCOPES: tuple[tuple[str, str], ...] = (
    ("cri-containerd-", "containerd"),
    ("nerdctl-", "containerd"),
    ("crio-conmon-", ""),  # CRI-O's monitor process, not a container
    ("crio-", "cri-o"),
    ("libpod-conmon-", ""),  # podman's monitor process
    ("libpod-", "podman"),
    ("docker-", "docker"),
)
_RANK = {"slurm": 5, "pod": 4, "docker": 3, "containerd": 3, "cri-o": 3, "podman": 3, "unit": 1, "session": 2}


def parse_cgroup_file(text: str) -> list[tuple[str, str]]:
    """`/proc/PID/cgroup` as (controllers, path) pairs: v1 lines `ID:controllers:path`, the
    v2 line `0::path`.  Malformed lines are skipped."""
    out = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[2].startswith("/"):
            out.append((parts[1], parts[2]))
    return out


def _container_scope(segment: str) -> tuple[str, str] | None:
    """(runtime, id) of a systemd scope or cgroupfs directory naming a container."""
    if ":" in segment:  # containerd's cgroupfs-style name under a systemd parent: slice:runtime:id
        parts = segment.split(":")
        if len(parts) == 3 and _HEX64.fullmatch(parts[2]):
            runtime = {"cri-containerd": "containerd", "crio": "cri-o", "docker": "docker"}.get(parts[1])
            return (runtime, parts[2]) if runtime else None
        return None
    for prefix, runtime in _SCOPES:
        if segment.startswith(prefix) and segment.endswith(".scope"):
            cid = segment[len(prefix) : -len(".scope")]
            return (runtime, cid) if runtime and _HEX64.fullmatch(cid) else None
    return None


def job_from_path(path: str) -> Job | None:
    """The job one cgroup path names (None when it names none), from the text alone."""
    found = _parse_path([s for s in path.split("/") if s])
    return found[0] if found else None


def _parse_path(segs: list[str]) -> tuple[Job, int] | None:
    """The job the path's segments name, and for a Slurm job, a pod or a container how
    many leading segments lead to the directory that names it (0 for the others: a unit or
    session is not checked)."""
    if not segs:
        return None
    # Slurm: .../slurm[_node]/uid_U/job_J/step_S/... (v1), .../[node_]slurmstepd.scope/job_J/step_S/... (v2)
    for i, seg in enumerate(segs):
        if seg == "slurm" or seg.startswith("slurm_") or seg.endswith("slurmstepd.scope"):
            rest = segs[i + 1 :]
            job = step = None
            depth = 0
            for k, r in enumerate(rest):
                m = _SLURM_JOB.fullmatch(r)
                if m:
                    job, depth = m.group(1), i + k + 2
                    continue
                m = _SLURM_STEP.fullmatch(r)
                if m and job is not None:
                    step = m.group(1)
                    break
            if job is None and seg.endswith("slurmstepd.scope") and rest and _SLUID.fullmatch(rest[0]):
                job, depth = rest[0], i + 2
                step_m = _SLURM_STEP.fullmatch(rest[1]) if len(rest) > 1 else None
                step = step_m.group(1) if step_m else None
            if job is not None:
                return Job("slurm", job, step=step), depth
    # Kubernetes: kubepods[/qos]/pod<uid>/<cid> (cgroupfs),
    # or kubepods[-qos]-pod<uid>.slice/<runtime>-<cid>.scope (systemd)
    start = next((i for i, s in enumerate(segs) if "kubepods" in s), None)
    if start is not None:
        for i in range(start, len(segs)):
            seg = segs[i]
            head = seg.split(":")[0]
            m = _POD_SYSTEMD.search(head) or (
                _POD_CGROUPFS.fullmatch(head) if head.startswith("pod") else None
            )
            if not m:
                continue
            uid = m.group(1).replace("_", "-")
            qos = next((q for q in _QOS if q in head or (i > 0 and q in segs[i - 1])), "guaranteed")
            runtime = cid = None
            scoped = _container_scope(seg) if ":" in seg else None
            if scoped is None and i + 1 < len(segs):
                nxt = segs[i + 1]
                scoped = _container_scope(nxt)
                if scoped is None and _HEX64.fullmatch(nxt):
                    cid = nxt
            if scoped is not None:
                runtime, cid = scoped
            return Job("pod", uid, container_id=cid, runtime=runtime, qos=qos), i + 1
    # a container outside Kubernetes
    for i, seg in enumerate(segs):
        scoped = _container_scope(seg)
        if scoped:
            return Job(scoped[0], scoped[1]), i + 1
        if seg in ("docker", "libpod_parent") and i + 1 < len(segs):
            nxt = segs[i + 1].removeprefix("libpod-")
            if _HEX64.fullmatch(nxt):
                return Job("docker" if seg == "docker" else "podman", nxt), i + 2
    # systemd: the last unit of the path (a session scope, or a service / scope)
    last = segs[-1]
    m = re.fullmatch(r"session-([A-Za-z0-9]+)\.scope", last)
    if m:
        return Job("session", m.group(1)), 0
    if last.endswith((".service", ".scope")) and last != "init.scope":
        return Job("unit", last), 0
    return None


CGROUP_ROOT = Path("/sys/fs/cgroup")
"""Where the cgroup hierarchies are mounted (v2's one, or v1's one per controller, with
v2's beside them as `unified` on hybrid systems); tests point this elsewhere."""


def trusted(job: Job | None) -> bool:
    """Whether the job's identity can be believed as root's: its cgroup directories are
    root's (or, for the kinds nobody impersonates this way, its cgroup names it).  An
    "unverified" job (a Slurm, pod or container path made by a user), a "rootless" one (a
    user's own container) and an "environment" one (the process's own claim) are not: they
    are shown as such, never grouped with the real job and never published as it."""
    return job is not None and job.source == "cgroup"


def verified(job: Job | None) -> bool:
    """Whether the job is what its cgroup says: root's (`trusted`), or a rootless container
    in its own user's subtree (that user's, labelled so)."""
    return job is not None and job.source in ("cgroup", "rootless")


def job_from_cgroup(text: str, root: Path | None = None, uid: int | None = None) -> Job | None:
    """The most specific job any line of a `/proc/PID/cgroup` names (a Slurm step before a
    pod, a pod before a container, a container before a systemd unit): hybrid systems put
    the container in v1 lines and the runtime's service in the v2 line.

    With `root` (where the hierarchies are mounted: CGROUP_ROOT), a Slurm job, pod or
    container is believed only where the directories down to the one naming it are root's.
    A container whose directories are instead those of the process's own user (`uid`, its
    real uid) in their delegated subtree is "rootless", with that user as `owner`.
    Anything else is "unverified"; a verified job of any kind wins over it, and root's
    over a rootless one of the same rank.  Without `root` the text alone is parsed
    (recorded cgroup contents); `read_job` always checks."""
    best: Job | None = None
    seen: set[tuple[str, str]] = set()
    for controllers, path in parse_cgroup_file(text):
        if (controllers, path) in seen:
            continue
        seen.add((controllers, path))
        segs = [s for s in path.split("/") if s]
        found = _parse_path(segs)
        if found is None:
            continue
        job, depth = found
        if root is not None and depth:
            base = hierarchy(controllers, root)
            if owned_by_root(base, segs, depth):
                pass
            elif job.kind in CONTAINER_KINDS and rootless(base, segs, depth, uid):
                job = replace(job, source="rootless", owner=user_name(uid) if uid is not None else None)
            else:
                job = replace(job, source="unverified")
        if best is None or _order(job) > _order(best):
            best = job
    return best


def _order(job: Job) -> tuple[bool, int, bool]:
    """Which of two jobs of a process wins: verified first, then the more specific kind,
    then root's over a user's."""
    return (verified(job), _RANK[job.kind], trusted(job))


# --------------------------------------------------------------------------------------
# the environment
# --------------------------------------------------------------------------------------

#: The variables read from a process's environment (nothing else is kept).
ENV_KEYS = (
    "SLURM_JOB_ID",
    "SLURM_JOBID",
    "SLURM_STEP_ID",
    "SLURM_STEPID",
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "KUBERNETES_SERVICE_HOST",
    "POD_NAME",
    "POD_NAMESPACE",
    "MY_POD_NAME",
    "MY_POD_NAMESPACE",
)


def parse_environ(data: bytes) -> dict[str, str]:
    """The ENV_KEYS present in a `/proc/PID/environ` (NUL-separated), undecodable bytes
    replaced."""
    out = {}
    for item in data.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            name = key.decode("ascii", "replace")
            if name in ENV_KEYS:
                out[name] = value.decode("utf-8", "replace")
    return out


def _number(value: str | None) -> str | None:
    """The value when it is ASCII digits, else None."""
    return value if value and _DIGITS.fullmatch(value) else None


def job_from_environ(env: Mapping[str, str], job: Job | None) -> Job | None:
    """Add what the environment says to the cgroup's job (call it after `with_names`): a
    Slurm step's array task (and the job itself where Slurm's cgroup plugins are not in use,
    a claim: source "environment"); a pod's name and namespace from the downward-API
    variables, only inside Kubernetes, only for a pod, and only where its runtime's files
    named it not (a claim too).  A Slurm job id in the environment that disagrees with the
    cgroup's is ignored."""
    slurm_id = _number(env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID"))
    step = _number(env.get("SLURM_STEP_ID") or env.get("SLURM_STEPID"))
    array_job, task = _number(env.get("SLURM_ARRAY_JOB_ID")), _number(env.get("SLURM_ARRAY_TASK_ID"))
    array = f"{array_job}_{task}" if array_job and task else None
    if job is None and slurm_id:
        return Job("slurm", slurm_id, step=step, array=array, source="environment")
    if job is not None and job.kind == "slurm" and array and job.id == slurm_id:
        return replace(job, array=array)
    if job is not None and job.kind == "pod" and env.get("KUBERNETES_SERVICE_HOST"):
        name = env.get("POD_NAME") or env.get("MY_POD_NAME")
        namespace = env.get("POD_NAMESPACE") or env.get("MY_POD_NAMESPACE")
        if (name or namespace) and job.name is None and job.namespace is None:
            # named by the process alone: its claim ("(env)"), never published as the pod
            return replace(job, name=name or None, namespace=namespace or None, source="environment")
    return job


# --------------------------------------------------------------------------------------
# container runtimes' metadata (names)
# --------------------------------------------------------------------------------------

#: Where each runtime keeps a container's metadata on the host; tests point these elsewhere.
DOCKER_ROOT = Path("/var/lib/docker/containers")
CONTAINERD_TASKS = Path("/run/containerd/io.containerd.runtime.v2.task")
CONTAINERS_STORAGE = (Path("/run/containers/storage"), Path("/var/lib/containers/storage"))
MAX_METADATA_BYTES = 4 << 20


def _load_json(path: Path) -> object | None:
    try:
        with path.open("rb") as f:
            data = f.read(MAX_METADATA_BYTES + 1)
        if len(data) > MAX_METADATA_BYTES:
            return None
        doc: object = json.loads(data)
        return doc
    except (OSError, ValueError):
        return None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _annotations(doc: object) -> dict[str, object]:
    if isinstance(doc, dict):
        ann = doc.get("annotations")
        if isinstance(ann, dict):
            return ann
    return {}


def container_names(runtime: str, cid: str) -> tuple[str | None, str | None, str | None]:
    """(container name, pod name, pod namespace) from the runtime's files on this host, each
    None where not readable:

    * Docker: `/var/lib/docker/containers/ID/config.v2.json` ("Name"; the kubelet's
      `io.kubernetes.*` labels for dockershim pods);
    * containerd: the OCI bundle `/run/containerd/io.containerd.runtime.v2.task/NS/ID/config.json`
      (CRI annotations `io.kubernetes.cri.sandbox-name`, `-namespace`, `container-name`;
      nerdctl's `nerdctl/name`);
    * CRI-O and podman: `.../containers/storage/overlay-containers/ID/userdata/config.json`
      (CRI-O's `io.kubernetes.pod.name`, `.namespace`, `io.kubernetes.container.name`;
      podman's name from `overlay-containers/containers.json`)."""
    if not _HEX64.fullmatch(cid):
        return None, None, None
    if runtime == "docker":
        doc = _load_json(DOCKER_ROOT / cid / "config.v2.json")
        if isinstance(doc, dict):
            name = _str(doc.get("Name"))
            config = doc.get("Config")
            labels = config.get("Labels") if isinstance(config, dict) else None
            labels = labels if isinstance(labels, dict) else {}
            return (
                _str(labels.get("io.kubernetes.container.name")) or (name.lstrip("/") if name else None),
                _str(labels.get("io.kubernetes.pod.name")),
                _str(labels.get("io.kubernetes.pod.namespace")),
            )
        return None, None, None
    if runtime == "containerd":
        try:
            namespaces = sorted(os.listdir(CONTAINERD_TASKS))
        except OSError:
            return None, None, None
        for ns in namespaces:
            ann = _annotations(_load_json(CONTAINERD_TASKS / ns / cid / "config.json"))
            if ann:
                return (
                    _str(ann.get("io.kubernetes.cri.container-name")) or _str(ann.get("nerdctl/name")),
                    _str(ann.get("io.kubernetes.cri.sandbox-name")),
                    _str(ann.get("io.kubernetes.cri.sandbox-namespace")),
                )
        return None, None, None
    if runtime in ("cri-o", "podman"):
        for root in CONTAINERS_STORAGE:
            base = root / "overlay-containers"
            ann = _annotations(_load_json(base / cid / "userdata" / "config.json"))
            pod = _str(ann.get("io.kubernetes.pod.name"))
            namespace = _str(ann.get("io.kubernetes.pod.namespace"))
            name = _str(ann.get("io.kubernetes.container.name"))
            if name is None:
                listing = _load_json(base / "containers.json")
                for entry in listing if isinstance(listing, list) else []:
                    if isinstance(entry, dict) and entry.get("id") == cid:
                        names = entry.get("names")
                        if isinstance(names, list) and names:
                            name = _str(names[0])
                        break
            if name or pod or namespace:
                return name, pod, namespace
    return None, None, None


def with_names(job: Job | None) -> Job | None:
    """The job with the names its runtime's metadata gives (unchanged where unreadable).
    Only for a job root's cgroup names: the runtime's files are root's, and a lookalike
    (or a user's rootless container, whose files are in their home) given the real
    container's id must not borrow its name."""
    if job is None or not trusted(job):
        return job
    if job.kind == "pod" and job.container_id and job.runtime:
        container, pod, namespace = container_names(job.runtime, job.container_id)
        return replace(
            job,
            name=job.name or pod,
            namespace=job.namespace or namespace,
            container=job.container or container,
        )
    if job.kind in ("docker", "containerd", "cri-o", "podman") and job.name is None:
        container, pod, namespace = container_names(job.kind, job.id)
        if pod:  # a CRI container seen without its kubepods path (e.g. a cgroup namespace)
            return replace(job, name=container, namespace=namespace)
        return replace(job, name=container) if container else job
    return job


# --------------------------------------------------------------------------------------
# reading a live process, cached
# --------------------------------------------------------------------------------------


def real_uid(status: str) -> int | None:
    """The real uid of a `/proc/PID/status` ("Uid:\treal\teffective\tsaved\tfs")."""
    for line in status.splitlines():
        if line.startswith("Uid:"):
            fields = line[4:].split()
            return int(fields[0]) if fields and _DIGITS.fullmatch(fields[0]) else None
    return None


def read_job(pid: int, proc: str = "/proc") -> Job | None:
    """The job of a live process: its cgroup (a Slurm job, pod or container checked against
    the owners of its directories under CGROUP_ROOT and the process's real uid), then its
    environment where readable (root, or the same user), then its runtime's names.
    Blocking; a few small reads."""
    try:
        with open(f"{proc}/{pid}/status", encoding="utf-8", errors="replace") as f:
            uid = real_uid(f.read(1 << 16))
    except OSError:
        uid = None
    try:
        with open(f"{proc}/{pid}/cgroup", encoding="utf-8", errors="replace") as f:
            job = job_from_cgroup(f.read(), CGROUP_ROOT, uid)
    except OSError:
        job = None
    try:
        with open(f"{proc}/{pid}/environ", "rb") as f:
            env = parse_environ(f.read(1 << 20))
    except OSError:
        env = {}
    job = with_names(job)  # root's runtime files first: the process's own claims only fill in
    return job_from_environ(env, job) if env else job


class JobCache:
    """`read_job` once per process: keyed by (PID, start time), so a reused PID is read
    afresh and a long-lived process is read once.  `prune` drops processes no longer seen."""

    def __init__(self, proc: str = "/proc") -> None:
        self.proc = proc
        self._jobs: dict[tuple[int, float], Job | None] = {}
        self.reads = 0
        """How many processes were read (for the benchmark)."""

    def get(self, pid: int, create_time: float | None) -> Job | None:
        if create_time is None:
            return None
        key = (pid, create_time)
        if key in self._jobs:
            return self._jobs[key]
        self.reads += 1
        job = self._jobs[key] = read_job(pid, self.proc)
        return job

    def prune(self, present: Iterable[tuple[int, float]]) -> None:
        keep = set(present)
        for key in [k for k in self._jobs if k not in keep]:
            del self._jobs[key]


# --------------------------------------------------------------------------------------
# display
# --------------------------------------------------------------------------------------

_RUNTIME_LABEL = {"docker": "docker", "containerd": "ctr", "cri-o": "crio", "podman": "podman"}
CONTAINER_KINDS = frozenset(_RUNTIME_LABEL)
"""Job kinds that are containers outside a pod."""


def exporter_labels(job: Job | None) -> dict[str, str]:
    """dcgm-exporter's label names for a process's pod (`pod`, `namespace`, `container`),
    plus `slurm_job`, and `slurm_job_env`; "" where unknown, unverified or a user's rootless
    container (a label is always present, so series keep one shape).  A job the process's
    own environment names is never published under the verified job's labels: a Slurm job
    so claimed goes to `slurm_job_env` alone, a pod so named to none (docs/exporter.md)."""
    claim = ""
    if job is not None and job.source == "environment" and job.kind == "slurm":
        claim = job.array or job.id  # the process's own word, under a label of its own
    if job is not None and job.source in UNPUBLISHED:
        job = None  # a claim, a user's lookalike path or own container: never published as root's
    pod = job is not None and job.kind == "pod"
    container = ""
    if job is not None:
        container = (
            (job.container or "") if pod else (job.name or job.id[:12]) if job.kind in CONTAINER_KINDS else ""
        )
    return {
        "pod": (job.name or "") if pod and job is not None else "",
        "namespace": (job.namespace or "") if pod and job is not None else "",
        "container": container,
        "slurm_job": (job.array or job.id) if job is not None and job.kind == "slurm" else "",
        "slurm_job_env": claim,
    }


def job_label(job: Job | None) -> str:
    """The JOB column: `slurm 48213.0`, `slurm 48200_3.batch`, `pod ns/name` (or the pod
    UID's start when its name is not readable), `docker 3f2a8b9c1d2e` (or the name),
    `unit foo.service`, `session 3`; "" for none.  A Slurm job or pod whose cgroup
    directories are not root's ends in " (unverified)", one read from the process's own
    environment in " (env)", a user's rootless container in " (rootless, user NAME)".
    Untrusted: pass through the literal filter."""
    if job is None:
        return ""
    if job.source == "rootless":
        return f"{_label(job)} (rootless, user {job.owner or '?'})"
    return _label(job) + _SOURCE_MARK.get(job.source, "")


_SOURCE_MARK = {"unverified": " (unverified)", "environment": " (env)"}
"""What a job that is not its cgroup's verified word carries in its label: never the same
text as the real job's, so never in its group, filter or exporter series."""
UNPUBLISHED = frozenset({"unverified", "rootless", "environment"})
"""Sources whose job is never published under the exporter's or the snapshot's pod,
namespace, container and Slurm fields (the `job` text says what it is; the exporter puts a
Slurm job the environment claims under `slurm_job_env`)."""


def _label(job: Job) -> str:
    if job.kind == "slurm":
        ident = job.array or job.id
        return f"slurm {ident}.{job.step}" if job.step else f"slurm {ident}"
    if job.kind == "pod":
        if job.name:
            return f"pod {job.namespace}/{job.name}" if job.namespace else f"pod {job.name}"
        return f"pod {job.id[:8]}…"
    if job.kind in _RUNTIME_LABEL:
        return f"{_RUNTIME_LABEL[job.kind]} {job.name or job.id[:12]}"
    return f"{job.kind} {job.id}"


def job_facts(job: Job | None) -> list[tuple[str, str]]:
    """(label, value) lines for the detail view: everything known about the job."""
    if job is None:
        return [("job", "none found (no Slurm, Kubernetes or container cgroup: docs/processes-and-jobs.md)")]
    out = [("job", job_label(job))]
    if job.source == "environment":
        out.append(("verified", "no: read from the process's own environment"))
    elif job.source == "unverified":
        out.append(("verified", "no: its cgroup directories are not root's (anyone can name one so)"))
    elif job.source == "rootless":
        out.append(
            (
                "verified",
                f"as user {job.owner or '?'}'s own: a rootless container, in the cgroup subtree"
                " systemd gave that user (not root's container of this id)",
            )
        )
    if job.kind == "slurm":
        out.append(("slurm job", job.id + (f", array task {job.array}" if job.array else "")))
        if job.step:
            out.append(("slurm step", job.step))
    elif job.kind == "pod":
        out.append(("pod UID", job.id))
        out.append(
            (
                "pod",
                f"{job.namespace or '?'}/{job.name or '?'}"
                if job.name or job.namespace
                else "name not readable",
            )
        )
        if job.container or job.container_id:
            cid = (job.container_id or "")[:12]
            out.append(
                (
                    "container",
                    " ".join(x for x in (job.container, cid and f"({job.runtime or '?'} {cid})") if x),
                )
            )
        if job.qos:
            out.append(("QoS class", job.qos))
    elif job.kind in _RUNTIME_LABEL:
        out.append(("container", f"{job.kind} {job.id}"))
        if job.name:
            out.append(("name", job.name))
    return out
