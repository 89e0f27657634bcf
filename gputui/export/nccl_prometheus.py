"""NCCL RAS's view as exporter series (docs/job-health.md, "NCCL RAS"; names agreed for the
cluster view: /work/notes/INTERFACES.md):

    gputui_nccl_comm_ranks{comm,Hostname,job}            ranks RAS heard from (ranks_count)
    gputui_nccl_comm_missing_ranks{comm,Hostname,job}    ranks it could not hear from
    gputui_nccl_rank_problem{comm,rank,host,pid,problem,collective,Hostname,job} 1
                                                         one per finding (problem = its kind)
    gputui_nccl_rank_problems_dropped{Hostname}          findings beyond MAX_PROBLEM_SERIES

`comm` is RAS's communicator hash ("0xa46629a53c9b48c6"); `job` the job's key as
`gputui_job_stuck` has it ("launcher:1013"), so the cluster view merges a job's nodes by it or
by comm.  A communicator of no job gputui follows here (health off) has job "".  Every label
value passes the exporter's one filter (the family factory prometheus.py hands in): hosts come
from RAS answers and job keys from cgroups, both untrusted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client.metrics_core import Metric

from gputui.telemetry.health_report import HealthReport
from gputui.telemetry.nccl.findings import comm_findings, comms_of
from gputui.telemetry.nccl.model import NcclComm, NcclView

MAX_PROBLEM_SERIES = 64
"""gputui_nccl_rank_problem series per scrape at most (a 1,000-rank job stuck is one line of
its verdict, not 1,000 series); the rest are counted in gputui_nccl_rank_problems_dropped."""


def _job_comms(view: NcclView, health: HealthReport | None) -> Iterable[tuple[str, NcclComm]]:
    if health is None:
        seen: set[str] = set()
        for a in view.answers:
            for c in a.communicators:
                if c.hash not in seen:
                    seen.add(c.hash)
                    yield "", c
        return
    for job in health.jobs:
        pids = {r.pid for r in (*job.ranks, *job.exited)}
        for c in comms_of(view, pids):
            yield ":".join(job.key), c


def nccl_families(
    family: Callable[[str, str, str], Metric],
    hostname: str,
    view: NcclView | None,
    health: HealthReport | None,
) -> list[Metric]:
    """The families of `view` (none before RAS was first asked)."""
    if view is None:
        return []
    ranks = family("gputui_nccl_comm_ranks", "Ranks of the NCCL communicator that RAS heard from.", "gauge")
    missing = family(
        "gputui_nccl_comm_missing_ranks",
        "Ranks of the NCCL communicator that RAS could not hear from.",
        "gauge",
    )
    problem = family(
        "gputui_nccl_rank_problem",
        "1 for each problem NCCL RAS reports (problem: missing, behind, async_error, abort, init, "
        "mismatch); rank, host and pid name the rank where one is named.",
        "gauge",
    )
    dropped = family(
        "gputui_nccl_rank_problems_dropped",
        f"gputui_nccl_rank_problem series left out of this scrape (over {MAX_PROBLEM_SERIES}).",
        "gauge",
    )
    shown: set[tuple[str, ...]] = set()
    left_out = 0
    for job, c in _job_comms(view, health):
        base = {"comm": c.hash, "Hostname": hostname, "job": job}
        if c.ranks_count is not None:
            ranks.add_sample(ranks.name, base, float(c.ranks_count))
        if c.missing_ranks_count is not None:
            missing.add_sample(missing.name, base, float(c.missing_ranks_count))
        for f in comm_findings(c, view.local_hosts):
            labels = {
                **base,
                "rank": "" if f.rank is None else str(f.rank),
                "host": f.host or "",
                "pid": "" if f.pid is None else str(f.pid),
                "problem": f.kind,
                "collective": f.collective or "",
            }
            key = tuple(labels.values())
            if key in shown:
                continue
            if len(shown) >= MAX_PROBLEM_SERIES:
                left_out += 1
                continue
            shown.add(key)
            problem.add_sample(problem.name, labels, 1.0)
    dropped.add_sample(dropped.name, {"Hostname": hostname}, float(left_out))
    return [ranks, missing, problem, dropped]
