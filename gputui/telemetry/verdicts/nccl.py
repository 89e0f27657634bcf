"""NCCL RAS's view of a job (gputui.telemetry.nccl) as verdict evidence, and as verdicts of its
own where the ranks on this machine cannot tell.

RAS answers for every rank of every communicator, on any node: which ranks it cannot hear from
(`missing`), how many operations of each collective each rank has launched (`behind`: fewer
than the most advanced rank), asynchronous errors and aborts.  Here:

- A finding goes into the verdict's evidence ("NCCL RAS: rank 1 (PID 1266) is missing from
  communicator 0x…").  A `behind` finding counts only once the communicator's counts have not
  moved for `stuck_seconds` (a healthy job is one behind for a moment at every step).
- A rank on this machine that RAS holds behind for that long, and whose wait was only inferred
  (blocked: state S, ~0 % CPU, GPU idle; its stack not read), is no longer counted as waiting:
  it has not reached the collective the others wait in.  It is not named on that alone either:
  behind in AllReduce is also what a rank waiting in a send/recv (which RAS does not count)
  looks like (the real mismatch of tests/fixtures/h100-x4-matrix).  Its stack decides.
- When every rank on this machine waits, RAS can say for what: a rank on another node that is
  missing or held behind, or any rank reporting an asynchronous error or an abort.  That is the
  verdict ("nccl"), naming the rank by node, rank and PID (no rank here is named as the cause:
  a rank that reports an error may be the one that saw a peer fail).

The hosts in RAS's answers are untrusted text: shown through `words.shown`.
"""

from __future__ import annotations

from collections.abc import Sequence

from gputui.telemetry.health_config import HealthConfig
from gputui.telemetry.health_report import JobVerdict, RankHealth
from gputui.telemetry.nccl.findings import RasFinding, is_local
from gputui.telemetry.nccl.model import NcclView
from gputui.telemetry.verdicts import words as w

KEEP = 60.0
"""Seconds a RAS view stays evidence (RAS is asked every 10 s while a job runs)."""
SHOWN = 3
"""Findings quoted in a verdict's evidence."""
OWN = ("missing", "behind", "async_error", "abort")
"""The kinds that make a verdict of their own (when every rank here waits)."""


def held(found: Sequence[RasFinding], ts: float, cfg: HealthConfig) -> list[RasFinding]:
    """The findings that count at `ts`: a `behind` only once the counts stood still for
    `stuck_seconds`; the others as they are."""
    return [
        f for f in found if f.kind != "behind" or (f.since is not None and ts - f.since >= cfg.stuck_seconds)
    ]


def local_pid(f: RasFinding, ranks: Sequence[RankHealth], view: NcclView) -> int | None:
    """The PID of the rank on this machine a finding is about, where it is one of `ranks`."""
    if f.pid is None or is_local(f.host, view.local_hosts) is False:
        return None
    return f.pid if any(r.pid == f.pid for r in ranks) else None


def doubted(found: Sequence[RasFinding], ranks: Sequence[RankHealth], view: NcclView) -> set[int]:
    """PIDs of ranks here that RAS holds behind: their inferred wait is in doubt."""
    return {pid for f in found if f.kind == "behind" and (pid := local_pid(f, ranks, view)) is not None}


def evidence(found: Sequence[RasFinding]) -> str:
    """ "NCCL RAS: …; …" for a verdict's why ("" when nothing counts)."""
    if not found:
        return ""
    said = "; ".join(w.shown(f.detail, 200) for f in found[:SHOWN])
    more = f"; {len(found) - SHOWN} more" if len(found) > SHOWN else ""
    return f"NCCL RAS: {said}{more}"


def own_verdict(
    found: Sequence[RasFinding], ranks: Sequence[RankHealth], view: NcclView, since: float, why: str
) -> JobVerdict | None:
    """Every rank here waits: the rank RAS names for it, on another node, or with an error."""
    for f in found:
        if f.kind not in OWN:
            continue
        here = local_pid(f, ranks, view) is not None
        if f.kind in ("missing", "behind") and (here or f.rank is None):
            continue  # a rank here is judged on its own evidence; an unnamed count names nobody
        return JobVerdict("nccl", w.shown(f.detail, 160), f"{why}; {evidence(found)}", since)
    return None
