"""What NCCL's RAS answers say is wrong, per communicator (pure: a function of an `NcclView`).

Kinds of `RasFinding`:
  missing      a rank RAS could not hear from (its process does not answer, is dead, or
               answers without the communicator), named by host, rank and PID; ranks the
               answer counts as missing but does not list are one finding without a rank
  behind       a rank has launched fewer operations of a collective than the most advanced
               rank: "rank 1 (PID 2227) is one AllReduce behind (150; rank 0: 151)".  A
               rank behind is not waiting in that collective yet: it is busy elsewhere (slow,
               stopped, stuck in another call such as a send/recv that RAS does not count) or
               has not caught up at the instant of the answer (a healthy job is often one
               behind for a moment: `since` says how long the counts have not moved).  Where
               more than half the ranks are behind, one finding without a rank says so.
  async_error  a rank reports an asynchronous NCCL error
  abort        a rank has aborted the communicator
  init         a rank has not finished initialising it, or failed to
  mismatch     the ranks are in different states (running, finalizing, aborted)

A rank's count that is not reported is unknown, not 0: it is never "behind".  Each finding's
`detail` is one line of numbers and fixed words, and the host as the answer gave it (untrusted:
shown through `gputui.untrusted` like every other field).

`comms_of` maps communicators to a local job: those with a rank whose PID is one of the job's
and whose host is this machine's (`NcclView.local_hosts`; any host where those are not known).
Their other ranks, on other nodes, belong to the same job and are named by host, rank and PID.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from gputui.telemetry.nccl.model import (
    IN_PROGRESS,
    NO_JOB,
    NcclComm,
    NcclRank,
    NcclView,
    RasAnswer,
    result_name,
)

KINDS = ("missing", "behind", "async_error", "abort", "init", "mismatch")
MAX_PER_COMM = 32
"""Findings per communicator at most (a 1,000-rank job with every rank behind gives one)."""
MAX_FINDINGS = 256


@dataclass(frozen=True, slots=True)
class RasFinding:
    """One thing a RAS answer says is wrong."""

    kind: str
    """One of KINDS."""
    comm: str
    """The communicator's hash, "0xa46629a53c9b48c6"."""
    rank: int | None
    """None for a finding about several ranks or the communicator."""
    host: str | None
    """The rank's node as RAS gives it (untrusted text)."""
    pid: int | None
    """The rank's PID in its own PID namespace."""
    collective: str | None
    """"behind": the collective ("AllReduce")."""
    detail: str
    """One line: "rank 1 (PID 2227) is one AllReduce behind (150; rank 0: 151)"."""
    behind: int | None = None
    """"behind": how many operations fewer than the most advanced rank."""
    since: float | None = None
    """"behind": since when (Unix time) no rank's counts have moved (`NcclComm.counts_since`)."""


def is_local(host: str | None, local_hosts: Collection[str]) -> bool | None:
    """Whether a rank runs on this machine; None where not known."""
    if host is None or not local_hosts:
        return None
    return host in local_hosts


def rank_name(r: NcclRank, local_hosts: Collection[str] = ()) -> str:
    """ "rank 1 (PID 2227)" on this machine; "rank 5 on node 10.0.0.7 (PID 4411)" elsewhere."""
    rank = "rank ?" if r.rank is None else f"rank {r.rank}"
    pid = "PID ?" if r.pid is None else f"PID {r.pid}"
    if is_local(r.host, local_hosts):
        return f"{rank} ({pid})"
    return f"{rank} on node {r.host or '?'} ({pid})"


def _finding(
    kind: str,
    c: NcclComm,
    r: NcclRank | None,
    detail: str,
    collective: str | None = None,
    behind: int | None = None,
    since: float | None = None,
) -> RasFinding:
    if r is None:
        return RasFinding(kind, c.hash, None, None, None, collective, detail, behind, since)
    return RasFinding(kind, c.hash, r.rank, r.host, r.pid, collective, detail, behind, since)


def _missing(c: NcclComm, local: Collection[str]) -> list[RasFinding]:
    out = []
    for r in c.missing_ranks:
        if r.considered_dead:
            why = "RAS considers its process dead"
        elif r.unresponsive is False:
            why = "its process answers but no longer reports it (destroyed or aborted it?)"
        elif r.unresponsive:
            why = "its process does not answer"
        else:
            why = "RAS has no data from it"
        out.append(
            _finding("missing", c, r, f"{rank_name(r, local)} is missing from communicator {c.hash}: {why}")
        )
    listed = len(c.missing_ranks)
    unnamed = (c.missing_ranks_count or 0) - listed
    if unnamed > 0:
        out.append(
            _finding(
                "missing",
                c,
                None,
                f"{unnamed} more rank{'s' if unnamed > 1 else ''} missing from communicator {c.hash} "
                f"(the answer counts {c.missing_ranks_count}, names {listed})",
            )
        )
    return out


def _ops(n: int, collective: str) -> str:
    return f"one {collective}" if n == 1 else f"{n} {collective} operations"


def _behind(c: NcclComm, local: Collection[str]) -> list[RasFinding]:
    out = []
    collectives = list(dict.fromkeys(x.collective for r in c.ranks for x in r.counts))
    for coll in collectives:
        known = [(r, n) for r in c.ranks if (n := r.count(coll)) is not None]
        if len(known) < 2:
            continue
        lead = max(n for _, n in known)
        leader = next(r for r, n in known if n == lead)
        behind = [(r, n) for r, n in known if n < lead]
        if not behind:
            continue
        who = "rank ?" if leader.rank is None else f"rank {leader.rank}"
        if len(behind) * 2 > len(known):
            low = min(n for _, n in behind)
            out.append(
                _finding(
                    "behind",
                    c,
                    None,
                    f"{len(behind)} of {len(known)} ranks of communicator {c.hash} are behind in {coll} "
                    f"(from {low} to {lead} launched)",
                    collective=coll,
                    behind=lead - low,
                    since=c.counts_since,
                )
            )
            continue
        for r, n in sorted(behind, key=lambda x: (x[1], -1 if x[0].rank is None else x[0].rank)):
            out.append(
                _finding(
                    "behind",
                    c,
                    r,
                    f"{rank_name(r, local)} is {_ops(lead - n, coll)} behind ({n}; {who}: {lead})",
                    collective=coll,
                    behind=lead - n,
                    since=c.counts_since,
                )
            )
    return out


def _state(r: NcclRank) -> str | None:
    """NCCL's word for a rank's state (client_support.cc): ABORT, FINALIZE, RUNNING, INIT."""
    if r.abort_flag:
        return "ABORT"
    if r.finalize_called or r.destroy_flag:
        return "FINALIZE"
    if r.init_state is None:
        return None
    return "RUNNING" if r.init_state == 0 else "INIT"


def _errors(c: NcclComm, local: Collection[str]) -> list[RasFinding]:
    out = []
    for r in c.ranks:
        name = rank_name(r, local)
        if r.async_error not in (None, 0, IN_PROGRESS):
            assert r.async_error is not None
            err = result_name(r.async_error)
            out.append(_finding("async_error", c, r, f"{name} reports an asynchronous error: {err}"))
        if r.abort_flag:
            out.append(_finding("abort", c, r, f"{name} has aborted communicator {c.hash}"))
        if r.init_state == IN_PROGRESS:
            out.append(_finding("init", c, r, f"{name} has not finished initialising communicator {c.hash}"))
        elif r.init_state not in (None, 0):
            assert r.init_state is not None
            err = result_name(r.init_state)
            out.append(_finding("init", c, r, f"{name} failed to initialise communicator {c.hash}: {err}"))
    states = Counter(s for r in c.ranks if (s := _state(r)) is not None)
    if len(states) > 1:
        words = ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
        out.append(
            _finding("mismatch", c, None, f"the ranks of communicator {c.hash} differ in state: {words}")
        )
    return out


def comm_findings(c: NcclComm, local_hosts: Collection[str] = ()) -> list[RasFinding]:
    """Every finding about one communicator, at most MAX_PER_COMM."""
    found = _missing(c, local_hosts) + _behind(c, local_hosts) + _errors(c, local_hosts)
    if not found and any(p.startswith("MISMATCH") for p in c.problems):
        # the text form's MISMATCH about something not parsed into ranks
        found.append(_finding("mismatch", c, None, f"NCCL reports a mismatch in communicator {c.hash}"))
    found.sort(key=lambda f: (KINDS.index(f.kind), -1 if f.rank is None else f.rank))
    return found[:MAX_PER_COMM]


def _comms(view: NcclView) -> Iterable[tuple[RasAnswer, NcclComm]]:
    seen: set[str] = set()
    for a in view.answers:
        for c in a.communicators:
            if c.hash not in seen:  # two addresses of one job report its communicators twice
                seen.add(c.hash)
                yield a, c


def _ours(r: NcclRank, pids: Collection[int], local: Collection[str]) -> bool:
    return r.pid is not None and r.pid in pids and is_local(r.host, local) is not False


def comms_of(view: NcclView | None, pids: Collection[int]) -> tuple[NcclComm, ...]:
    """The communicators of the job whose local ranks are `pids`: those with a rank of one of
    these PIDs on this machine."""
    if view is None:
        return ()
    local = view.local_hosts
    return tuple(
        c for _, c in _comms(view) if any(_ours(r, pids, local) for r in (*c.ranks, *c.missing_ranks))
    )


def answers_of(view: NcclView | None, pids: Collection[int]) -> tuple[RasAnswer, ...]:
    """The answers asked for these PIDs (those whose environment named the address)."""
    if view is None:
        return ()
    return tuple(a for a in view.answers if any(p in pids for p in a.pids))


def findings(view: NcclView | None, pids: Collection[int] | None = None) -> tuple[RasFinding, ...]:
    """The findings of every communicator in `view` (of the job of `pids` when given)."""
    if view is None:
        return ()
    comms = comms_of(view, pids) if pids is not None else tuple(c for _, c in _comms(view))
    out: list[RasFinding] = []
    for c in comms:
        out += comm_findings(c, view.local_hosts)
        if len(out) >= MAX_FINDINGS:
            break
    return tuple(out[:MAX_FINDINGS])


# --------------------------------------------------------------------------------------
# One job: what the job view and `snapshot --json` show
# --------------------------------------------------------------------------------------

NOT_ASKED = "no RAS answer yet"
NOT_RECORDED = "not in this recording (it holds no NCCL RAS answer)"
"""A replay's `job_nccl` reason where the recording holds no RAS view at all (format 6 and
older, or recorded without one): no answer will come (gputui.telemetry.hub `nccl_absent`)."""
NO_COMM = (
    "RAS answered, but none of its communicators has a rank with this job's PIDs (ranks in a "
    "container report their own PIDs)"
)


def text_only(version: str | None) -> str:
    return (
        f"NCCL {version or '?'} answers in text only (older than 2.28): only the communicators it "
        "reports a problem for"
    )


@dataclass(frozen=True, slots=True)
class JobNccl:
    """What RAS says about one local job (`job_nccl`)."""

    comms: tuple[NcclComm, ...]
    findings: tuple[RasFinding, ...]
    reason: str | None
    """Why there is nothing, or only part (off, unreachable, an older NCCL): said once."""
    version: str | None
    asked_at: float | None
    local_hosts: tuple[str, ...] = ()


def job_nccl(view: NcclView | None, pids: Collection[int], absent: str = NOT_ASKED) -> JobNccl:
    """The communicators and findings of the job whose local ranks are `pids`, and the one
    reason to say where RAS gives nothing or only part; `absent`: the reason where there is
    no view (live: NOT_ASKED; a replay of a recording that holds none: NOT_RECORDED)."""
    if view is None or view.reason == NO_JOB:  # (a view before this job began)
        return JobNccl((), (), absent, None, None)
    if view.reason is not None:
        return JobNccl((), (), view.reason, None, view.asked_at)
    asked = answers_of(view, pids)
    comms = comms_of(view, pids)
    found = findings(view, pids) if comms else ()
    answered = [a for a in asked if a.format is not None and a.reason is None]
    version = next((a.nccl_version for a in answered if a.nccl_version), None)
    if any(a.format == "text" for a in answered):
        reason: str | None = text_only(version)
    elif comms:
        reason = None
    elif failed := [a.reason for a in asked if a.reason]:
        reason = failed[0]
    else:
        reason = NO_COMM if answered else NOT_ASKED
    return JobNccl(comms, found, reason, version, view.asked_at, view.local_hosts)
