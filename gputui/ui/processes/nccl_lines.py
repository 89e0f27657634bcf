"""The job view's NCCL section: what NCCL's RAS service says of the job's communicators (pure
line builders, no Textual).  Per communicator: how many ranks RAS heard from and on which
nodes, each finding (a missing rank, a rank behind in a collective, errors, aborts), the
operation counts per collective.  Where RAS is off, unreachable, older or not asked yet: one
line saying so.  Hosts and the text form's lines come from RAS answers: escaped
(`gputui.untrusted.literal`), never markup."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection

from gputui.telemetry.nccl.findings import NOT_ASKED, RasFinding, job_nccl
from gputui.telemetry.nccl.model import NcclComm, NcclView
from gputui.telemetry.verdicts.words import duration
from gputui.ui.render import Line, S, fit
from gputui.untrusted import literal

MAX_COMMS = 6
"""Communicators shown; the rest are counted."""
MAX_NODES = 4
MAX_FINDINGS = 6
"""Findings shown per communicator; the rest are counted."""
MAX_VALUES = 3
"""Distinct counts of one collective shown (the lowest first: the ranks behind)."""
MAX_RANKS = 8
"""Ranks named per count."""
MAX_PROBLEMS = 4


def _ranks(ranks: list[int | None]) -> str:
    names = ["?" if r is None else str(r) for r in sorted(ranks, key=lambda r: -1 if r is None else r)]
    more = f" +{len(names) - MAX_RANKS}" if len(names) > MAX_RANKS else ""
    return ("rank " if len(names) == 1 else "ranks ") + ",".join(names[:MAX_RANKS]) + more


def _counts(c: NcclComm) -> list[str]:
    """ "AllReduce 151 on all 2 ranks" or "AllReduce 150 (rank 1) · 151 (rank 0)"."""
    out = []
    for coll in dict.fromkeys(x.collective for r in c.ranks for x in r.counts):
        by: dict[int, list[int | None]] = {}
        for r in c.ranks:
            n = r.count(coll)
            if n is not None:
                by.setdefault(n, []).append(r.rank)
        if not by or (len(by) == 1 and 0 in by):
            continue  # never used: no news
        if len(by) == 1:
            ((n, ranks),) = by.items()
            out.append(f"{coll} {n} on all {len(ranks)} ranks")
            continue
        values = sorted(by)
        shown = [f"{n} ({_ranks(by[n])})" for n in values[:MAX_VALUES]]
        more = f" · {len(values) - MAX_VALUES} more counts" if len(values) > MAX_VALUES else ""
        out.append(f"{coll} " + " · ".join(shown) + more)
    return out


def _nodes(c: NcclComm) -> str:
    nodes = Counter(literal(r.host) if r.host else "?" for r in c.ranks)
    shown = [f"{h} ×{n}" for h, n in sorted(nodes.items())[:MAX_NODES]]
    more = f" +{len(nodes) - MAX_NODES} more" if len(nodes) > MAX_NODES else ""
    word = "node" if len(nodes) == 1 else "nodes"
    return f"{len(nodes)} {word}: " + ", ".join(shown) + more


def _heard(c: NcclComm) -> str:
    heard = len(c.ranks) if c.ranks_count is None else c.ranks_count
    of = "" if c.size is None else f" of {c.size}"
    missing = c.missing_ranks_count if c.missing_ranks_count is not None else len(c.missing_ranks)
    verb = "named" if c.ranks_count is None else "answer"  # the text form names only some
    return f"{heard}{of} ranks {verb}" + (f", {missing} missing" if missing else "")


def _finding(f: RasFinding, now: float) -> str:
    text = literal(f.detail)
    if f.kind == "behind" and f.since is not None and now - f.since >= 1:
        text += f" · counts unchanged for {duration(now - f.since)}"
    return text


def _comm(c: NcclComm, found: list[RasFinding], now: float, width: int) -> list[Line]:
    w = max(10, width - 6)
    head = f" communicator {c.hash}: {_heard(c)} · {_nodes(c)}" if c.ranks else f" communicator {c.hash}"
    lines: list[Line] = [[(fit(head, width - 1), S.text)]]
    for f in found[:MAX_FINDINGS]:
        lines.append([("   ⚠ " + fit(_finding(f, now), w), S.warn)])
    if len(found) > MAX_FINDINGS:
        lines.append([(f"   + {len(found) - MAX_FINDINGS} more", S.warn)])
    for text in _counts(c):
        lines.append([("   " + fit(text, w), S.label)])
    if not c.ranks:  # the text form: its own lines about the communicator
        for p in c.problems[:MAX_PROBLEMS]:
            lines.append([("   " + fit(literal(p), w), S.dim)])
    if c.dropped:
        lines.append([(f"   {c.dropped} rank entries over gputui's cap: not shown", S.dim)])
    return lines


def nccl_lines(
    view: NcclView | None, pids: Collection[int], now: float, width: int, absent: str = NOT_ASKED
) -> list[Line]:
    """The NCCL section of the job whose ranks (here) are `pids`; `now`: the tick's time;
    `absent`: what to say where there is no view (gputui.telemetry.hub `nccl_absent`)."""
    j = job_nccl(view, pids, absent)
    title: Line = [(" NCCL RAS", S.title)]
    if j.version:
        title.append((f"  NCCL {literal(j.version)}", S.label))
    if j.asked_at is not None:
        title.append((f"  asked {duration(max(0.0, now - j.asked_at))} ago", S.label))
    lines: list[Line] = [[], title]
    if j.reason is not None:
        lines.append([(" " + fit(literal(j.reason), max(10, width - 2)), S.dim)])
    by_comm: dict[str, list[RasFinding]] = {}
    for f in j.findings:
        by_comm.setdefault(f.comm, []).append(f)
    for c in j.comms[:MAX_COMMS]:
        lines += _comm(c, by_comm.get(c.hash, []), now, width)
    if len(j.comms) > MAX_COMMS:
        lines.append([(f" + {len(j.comms) - MAX_COMMS} more communicators", S.label)])
    if j.comms and not j.findings and j.reason is None:
        lines.append([(" RAS reports no problem in these communicators", S.ok)])
    return lines
