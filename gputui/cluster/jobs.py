"""The fleet's stuck jobs: what each exporter says of its jobs, merged across nodes.

Each `gputui export` publishes its jobs' verdicts (`gputui_job_stuck`, and
`gputui_job_verdict_info`: the rank, PID and GPU to look at, the verdict's one line, the job's
identity) and what NCCL's RAS service says of ranks anywhere in the job
(`gputui_nccl_rank_problem`, `gputui_nccl_comm_ranks`, `gputui_nccl_comm_missing_ranks`).  A
job spread over nodes is one line here: its nodes merged by an identity that cannot be
claimed (see `merge`), worst first, naming where to look.

Pure: series in, frozen data out.  Every label is untrusted text, kept as sent (the UI draws
it through the one filter); numbers that must be numbers (rank, PID, GPU) are kept only when
they are; everything held is capped per host and per fleet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from gputui.telemetry.health_config import STUCK_VERDICTS

STUCK = "gputui_job_stuck"
VERDICT_INFO = "gputui_job_verdict_info"
NCCL_PROBLEM = "gputui_nccl_rank_problem"
NCCL_RANKS = "gputui_nccl_comm_ranks"
NCCL_MISSING = "gputui_nccl_comm_missing_ranks"
NCCL_DROPPED = "gputui_nccl_rank_problems_dropped"
JOB_SERIES: tuple[str, ...] = (STUCK, VERDICT_INFO, NCCL_PROBLEM, NCCL_RANKS, NCCL_MISSING, NCCL_DROPPED)
"""The series the cluster view reads of jobs (INTERFACES.md's names; the exporter writes the
first two, gputui/export/prometheus.py, and the NCCL RAS view the others)."""

MAX_JOBS_PER_HOST = 256
"""Jobs kept of one host (a node runs a few; an exporter sending more is cut, and says so)."""
MAX_PROBLEMS_PER_HOST = 64
"""RAS findings kept of one host (the exporter itself publishes at most 64)."""
MAX_COMMS_PER_HOST = 64
"""Communicators kept of one host."""
MAX_FLEET_JOBS = 8192
"""Jobs of all hosts merged at most (64 per host on 128 hosts); the rest are counted."""

SOURCE_MARKS = {"environment": "env", "unverified": "unverified", "rootless": "rootless"}
"""A job key's fourth part (gputui/telemetry/health.py `_job_key`): the job is the process's
own claim, never root's job of that id."""

RANKED = 0
"""Severity: stuck, and a verdict names the rank the job waits for."""
STUCK_ALL = 1
"""Stuck, no rank named (every rank waits)."""
RAS_ONLY = 2
"""No verdict, but NCCL's RAS reports a problem with a rank."""
SLOW = 3
"""A verdict that is not stuck (a straggler)."""
NONE = 9


def _digits(text: str) -> str:
    """`text` when it is a small ASCII number, else "" (never show a label as a PID)."""
    return text if 0 < len(text) <= 10 and text.isascii() and text.isdigit() else ""


@dataclass(frozen=True, slots=True)
class NodeJob:
    """One job as one exporter judges it (the part of the job on that node)."""

    host: str
    """Its host's key (HostState.key)."""
    host_name: str
    job: str
    """The exporter's job key: "launcher:943", "slurm:4242:0", "slurm:555:0:environment"."""
    verdict: str = ""
    """The verdict's kind ("culprit", "stuck", "exited", "straggler"...); "" for none."""
    stuck: bool | None = None
    """gputui_job_stuck == 1; None where the exporter did not say."""
    rank: str = ""
    pid: str = ""
    gpu: str = ""
    summary: str = ""
    """The verdict's one line (the exporter's words)."""
    launcher: str = ""
    slurm_job: str = ""
    """Only as root's cgroup says it (the exporter publishes no other)."""
    pod: str = ""
    namespace: str = ""
    comms: tuple[str, ...] = ()
    """NCCL communicators its ranks are in (RAS's hashes)."""
    cluster: str = ""
    """The cluster label of its series ([cluster.labels] cluster): Slurm ids are per cluster."""
    stale: bool = False
    """Its host is down: as last seen."""

    @property
    def claimed(self) -> bool:
        """The job's id is the processes' own claim (environment, a user's cgroup path or
        container): never merged by that id, never with a verified job."""
        parts = self.job.split(":")
        return len(parts) >= 4 and parts[0] in ("slurm", "pod")

    @property
    def severity(self) -> int:
        """The exporter's gputui_job_stuck says whether it is stuck; without it, the verdict's kind."""
        if self.stuck or (self.stuck is None and self.verdict in STUCK_VERDICTS):
            return RANKED if self.pid else STUCK_ALL
        return SLOW if self.verdict else NONE

    @property
    def identity(self) -> tuple[str, ...] | None:
        """What makes two nodes' parts one job: a verified Slurm job or pod, in its cluster."""
        if self.claimed:
            return None
        if self.slurm_job:
            return ("slurm", self.cluster, self.slurm_job)
        if self.pod:
            return ("pod", self.cluster, self.namespace, self.pod)
        return None


@dataclass(frozen=True, slots=True)
class RankProblem:
    """What NCCL's RAS says of one rank, as one exporter asked it."""

    reported_by: str
    """The host key of the exporter that asked."""
    job: str
    """That exporter's job key for the ranks it asked for."""
    comm: str
    rank: str
    host: str
    """Where the rank runs, as RAS says (any node of the job)."""
    pid: str
    problem: str
    """"missing", "behind", "async_error", "abort", "init", "mismatch"."""
    collective: str = ""


@dataclass(frozen=True, slots=True)
class CommInfo:
    reported_by: str
    job: str
    comm: str
    ranks: int | None
    missing: int | None


@dataclass(frozen=True, slots=True)
class HostJobs:
    """The job series of one host, parsed."""

    jobs: tuple[NodeJob, ...] = ()
    problems: tuple[RankProblem, ...] = ()
    comms: tuple[CommInfo, ...] = ()
    dropped: int = 0
    """Series over the caps, and the exporter's own count of RAS findings it left out."""


@dataclass(frozen=True, slots=True)
class FleetJob:
    """One job, its nodes merged."""

    key: str
    """Stable across refreshes (the UI keeps its cursor on it)."""
    title: str
    nodes: tuple[NodeJob, ...]
    """Worst first."""
    problems: tuple[RankProblem, ...] = ()
    comms: tuple[CommInfo, ...] = ()
    severity: int = NONE

    @property
    def stuck(self) -> bool:
        return self.severity in (RANKED, STUCK_ALL)

    @property
    def worst(self) -> NodeJob:
        return self.nodes[0]

    def look_at(self) -> tuple[str, str, str, str] | None:
        """(rank, host, PID, GPU) to look at first: the worst verdict's named rank, else the
        first rank RAS reports a problem with (GPU unknown); None when nothing names one."""
        for n in self.nodes:
            if n.pid and n.severity <= SLOW:
                return n.rank, n.host_name, n.pid, n.gpu
        for p in self.problems:
            if p.rank or p.pid:
                return p.rank, p.host, p.pid, ""
        return None


# --------------------------------------------------------------------------------------
# series -> one host's jobs
# --------------------------------------------------------------------------------------


def exporter_job(labels: Mapping[str, str]) -> str:
    """The exporter's `job` label: Prometheus renames it `exported_job` when its own scrape
    job label takes the name (honor_labels off, the default)."""
    return labels.get("exported_job") or labels.get("job", "")


@dataclass
class _Partial:
    job: str
    labels: dict[str, str] = field(default_factory=dict)
    stuck: bool | None = None
    info: Mapping[str, str] | None = None


def host_jobs(
    host: str,
    host_name: str,
    series: Iterable[tuple[str, Mapping[str, str], float]],
    cluster_label: str = "cluster",
) -> HostJobs:
    """The jobs, RAS findings and communicators in one host's series (others are skipped)."""
    jobs: dict[str, _Partial] = {}
    problems: list[RankProblem] = []
    comms: list[CommInfo] = []
    dropped = 0
    for name, labels, value in series:
        if name in (STUCK, VERDICT_INFO):
            key = exporter_job(labels)
            if not key:
                continue
            part = jobs.get(key)
            if part is None:
                if len(jobs) >= MAX_JOBS_PER_HOST:
                    dropped += name == STUCK  # one a job: each has one gputui_job_stuck
                    continue
                part = jobs[key] = _Partial(key, dict(labels))
            if name == STUCK:
                part.stuck = value == 1
                if not part.labels.get("verdict"):
                    part.labels["verdict"] = labels.get("verdict", "")
            elif value == 1:
                part.info = labels
        elif name == NCCL_PROBLEM:
            if value != 1:
                continue
            if len(problems) >= MAX_PROBLEMS_PER_HOST:
                dropped += 1
                continue
            problems.append(
                RankProblem(
                    host,
                    exporter_job(labels),
                    labels.get("comm", ""),
                    _digits(labels.get("rank", "")),
                    labels.get("host", ""),
                    _digits(labels.get("pid", "")),
                    labels.get("problem", ""),
                    labels.get("collective", ""),
                )
            )
        elif name in (NCCL_RANKS, NCCL_MISSING):
            comm, job = labels.get("comm", ""), exporter_job(labels)
            if not comm:
                continue
            found = next((i for i, c in enumerate(comms) if c.comm == comm and c.job == job), None)
            count = round(value) if 0 <= value < 1e9 else None  # NaN, absurd: unknown
            if found is None:
                if len(comms) >= MAX_COMMS_PER_HOST:
                    dropped += 1
                    continue
                comms.append(CommInfo(host, job, comm, None, None))
                found = len(comms) - 1
            c = comms[found]
            comms[found] = CommInfo(
                host,
                job,
                comm,
                count if name == NCCL_RANKS else c.ranks,
                count if name == NCCL_MISSING else c.missing,
            )
        elif name == NCCL_DROPPED and 0 < value < 1e9:
            dropped += round(value)
    out: list[NodeJob] = []
    for part in jobs.values():
        lab = {**part.labels, **(part.info or {})}
        job_comms = {c.comm for c in comms if c.job == part.job} | {
            p.comm for p in problems if p.job == part.job
        }
        if lab.get("comm"):
            job_comms.add(lab["comm"])
        out.append(
            NodeJob(
                host=host,
                host_name=host_name,
                job=part.job,
                verdict=lab.get("verdict", ""),
                stuck=part.stuck,
                rank=_digits(lab.get("rank", "")),
                pid=_digits(lab.get("pid", "")),
                gpu=_digits(lab.get("gpu", "")),
                summary=lab.get("summary", "") if part.info is not None else "",
                launcher=_digits(lab.get("launcher", "")),
                slurm_job=lab.get("slurm_job", "") if part.info is not None else "",
                pod=lab.get("pod", "") if part.info is not None else "",
                namespace=lab.get("namespace", "") if part.info is not None else "",
                comms=tuple(sorted(c for c in job_comms if c)),
                cluster=lab.get(cluster_label, ""),
            )
        )
    return HostJobs(tuple(out), tuple(problems), tuple(comms), dropped)


def stale_jobs(hj: HostJobs) -> HostJobs:
    """A down host's jobs as last seen (marked so)."""
    return replace(hj, jobs=tuple(replace(n, stale=True) for n in hj.jobs))


# --------------------------------------------------------------------------------------
# many hosts -> the fleet's jobs
# --------------------------------------------------------------------------------------


class _Groups:
    """Union-find over node jobs, each group remembering whether it has a verified identity."""

    def __init__(self, nodes: Sequence[NodeJob]) -> None:
        self.parent = list(range(len(nodes)))
        self.ids: list[bool] = [n.identity is not None for n in nodes]

    def find(self, k: int) -> int:
        while self.parent[k] != k:
            self.parent[k] = self.parent[self.parent[k]]
            k = self.parent[k]
        return k

    def join(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        self.parent[rb] = ra
        self.ids[ra] = self.ids[ra] or self.ids[rb]


def merge(hosts: Iterable[tuple[str, HostJobs]]) -> tuple[tuple[FleetJob, ...], int]:
    """The fleet's jobs with a verdict or a RAS problem, worst first, and how many node jobs
    were left out (over MAX_FLEET_JOBS).

    One job's nodes are merged when they share a verified identity: the same Slurm job (as
    root's cgroup says it: the exporter publishes no other) or pod, in the same cluster (the
    `cluster` label: Slurm ids are per cluster).  Jobs without one — launcher-keyed
    ("launcher:943": a PID, per host) or claimed (a process's own SLURM_JOB_ID, a user's
    cgroup path or rootless container: never merged by the id they claim) — merge by an
    NCCL communicator they share, and only with each other: RAS's hashes come from the
    ranks' own RAS service, which a user can stand in for, so a communicator never joins a
    job to a verified one."""
    nodes: list[NodeJob] = []
    problems: list[RankProblem] = []
    comms: list[CommInfo] = []
    left_out = 0
    for _host, hj in hosts:
        room = MAX_FLEET_JOBS - len(nodes)
        nodes.extend(hj.jobs[: max(0, room)])
        left_out += max(0, len(hj.jobs) - max(0, room))
        problems.extend(hj.problems)
        comms.extend(hj.comms)
    groups = _Groups(nodes)
    by_identity: dict[tuple[str, ...], int] = {}
    for k, n in enumerate(nodes):
        ident = n.identity
        if ident is not None:
            first = by_identity.setdefault(ident, k)
            groups.join(first, k)
    by_comm: dict[str, list[int]] = {}
    for k, n in enumerate(nodes):
        for comm in n.comms:
            by_comm.setdefault(comm, []).append(k)
    for ks in by_comm.values():  # only jobs without a verified identity join by a communicator
        free = [k for k in ks if not groups.ids[groups.find(k)]]
        for k in free[1:]:
            groups.join(free[0], k)
    members: dict[int, list[int]] = {}
    for k in range(len(nodes)):
        members.setdefault(groups.find(k), []).append(k)
    node_of = {(n.host, n.job): groups.find(k) for k, n in enumerate(nodes)}
    group_problems: dict[int, list[RankProblem]] = {}
    for p in problems:
        g = node_of.get((p.reported_by, p.job))
        if g is not None:
            group_problems.setdefault(g, []).append(p)
    group_comms: dict[int, list[CommInfo]] = {}
    for c in comms:
        g = node_of.get((c.reported_by, c.job))
        if g is not None:
            group_comms.setdefault(g, []).append(c)
    out: list[FleetJob] = []
    for root, ks in members.items():
        part = sorted((nodes[k] for k in ks), key=lambda n: (n.severity, n.host_name, n.job))
        probs = tuple(group_problems.get(root, ()))
        severity = part[0].severity
        if severity == NONE and probs:
            severity = RAS_ONLY
        if severity == NONE:
            continue  # healthy everywhere: nothing to show
        out.append(
            FleetJob(
                key=_key(part),
                title=job_title(part),
                nodes=tuple(part),
                problems=probs,
                comms=tuple(group_comms.get(root, ())),
                severity=severity,
            )
        )
    out.sort(key=lambda j: (j.severity, -len(j.nodes), j.title, j.key))
    return tuple(out), left_out


def _key(part: Sequence[NodeJob]) -> str:
    ids = sorted(n.identity for n in part if n.identity is not None)
    if ids:
        return "\0".join(ids[0])
    return min(f"node\0{n.host}\0{n.job}" for n in part)


def job_text(job: str) -> str:
    """An exporter's job key as words: "slurm 4242.0", "slurm 555.0 (env)", "pod UID",
    "launcher 943"."""
    parts = job.split(":")
    kind = parts[0]
    if kind == "launcher" and len(parts) == 2:
        return f"launcher {parts[1]}"
    if kind in ("slurm", "pod") and len(parts) >= 3:
        ident = f"{parts[1]}.{parts[2]}" if kind == "slurm" and parts[2] else parts[1]
        mark = SOURCE_MARKS.get(parts[3], parts[3]) if len(parts) >= 4 else ""
        return f"{kind} {ident}" + (f" ({mark})" if mark else "")
    return job


def job_title(part: Sequence[NodeJob]) -> str:
    """What the job is called: its verified identity, else its job key and host."""
    for n in part:
        ident = n.identity
        if ident is None:
            continue
        where = f" ({ident[1]})" if ident[1] else ""
        if ident[0] == "slurm":
            return f"slurm {ident[2]}{where}"
        return f"pod {ident[2]}/{ident[3]}{where}" if ident[2] else f"pod {ident[3]}{where}"
    first = part[0]
    return f"{job_text(first.job)} on {first.host_name}"
