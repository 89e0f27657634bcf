"""Ranks that wait, and what they wait for.

Once a rank has waited `stuck_seconds` (its GPU spinning, or blocked), each rank of the job
plays one part, from its condition and, where it was read, its stack (`RankHealth.where`):

  waits    its GPU spins; or its stack is inside a torch.distributed call; or it is blocked
           (state S, ~0 % CPU, GPU idle) and its stack does not say otherwise
  holds    stopped, a zombie, in D state for a while, or, by its stack, in its data loader,
           writing a checkpoint, elsewhere outside a collective, or in synchronize while its
           GPU computes: the others wait for it
  unclear  busy on its host with its GPU idle, its stack unread: it may busy-wait inside a
           collective itself (NCCL's connection setup does) or compute; never named on that.
           So is a blocked rank, its stack unread, that NCCL RAS holds behind the others
  unknown  its state is unknown (no verdict but the one on ranks that hold)

and the job gets one verdict:

  culprit    some ranks hold: they are named, with why (and the gone and unclear mentioned)
  exited     a rank has gone and every other rank waits
  stalled    some rank is unclear: nobody is named; the verdict says what could not be checked
  mismatch   every rank waits, and their stacks say at different calls
  all_wait   every rank waits at the same call (their stacks)
  stuck      every rank waits, where not (all) known
  nccl       every rank here waits, and NCCL RAS names a rank on another node (missing, or
             behind), or a rank reports an error (gputui.telemetry.verdicts.nccl)

NCCL RAS's findings go into every verdict's evidence.

A verdict that needs every rank to wait waits until each rank with a wait clock has waited
`stuck_seconds`.  A rank that waits is never named: neither its condition nor its stack puts
it among the ranks that hold.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from gputui.telemetry.health_config import HealthConfig
from gputui.telemetry.health_report import JobVerdict, RankHealth
from gputui.telemetry.job_energy import hms
from gputui.telemetry.nccl.findings import RasFinding
from gputui.telemetry.nccl.model import NcclView
from gputui.telemetry.verdicts import nccl
from gputui.telemetry.verdicts import words as w


def part(r: RankHealth, cfg: HealthConfig, doubt: Collection[int] = ()) -> str:
    """ "waits", "holds", "unclear" or "unknown" (the module docstring has the rule)."""
    c = r.condition
    if c in ("stopped", "zombie"):
        return "holds"
    if c == "spinning":
        return "waits"
    if c == "unknown":
        return "unknown"
    place = r.where.place if r.where is not None else None
    if place == "collective":
        return "waits"
    if place in ("loader", "io", "elsewhere"):
        return "holds"
    if place == "gpu_sync" and c == "computing" and r.util is not None and r.util > cfg.blocked_max_util:
        return "holds"  # its host waits for its own GPU, which computes
    if c == "blocked":
        # inferred; unless NCCL RAS holds it behind the collective the others wait in
        return "unclear" if r.pid in doubt and place is None else "waits"
    if c == "disk":
        return "holds"
    return "unclear"


def long_wait(ranks: Sequence[RankHealth], ts: float, cfg: HealthConfig) -> bool:
    """Some rank has waited `stuck_seconds`: a verdict may be due (else none: the common case)."""
    return any(r.waiting_since is not None and ts - r.waiting_since >= cfg.stuck_seconds for r in ranks)


def judge(
    ranks: Sequence[RankHealth],
    exited: Sequence[RankHealth],
    ts: float,
    cfg: HealthConfig,
    view: NcclView | None = None,
    found: Sequence[RasFinding] = (),
) -> JobVerdict | None:
    """The verdict of a job whose ranks wait; None while no rank has waited `stuck_seconds`
    or the evidence cannot tell.  `view`, `found`: NCCL RAS's view and the job's findings
    that count now (gputui.telemetry.verdicts.nccl)."""
    if not long_wait(ranks, ts, cfg):
        return None
    found = list(found) if view is not None else []
    v = _judge(ranks, exited, ts, cfg, nccl.doubted(found, ranks, view) if view is not None else set())
    if v is None or not found or view is None:
        return v
    if v.kind in ("stuck", "all_wait"):  # every rank here waits: RAS may say for whom
        own = nccl.own_verdict(found, ranks, view, v.since or ts, v.why)
        if own is not None:
            return own
    return replace(v, why=f"{v.why}; {nccl.evidence(found)}")


def _judge(
    ranks: Sequence[RankHealth], exited: Sequence[RankHealth], ts: float, cfg: HealthConfig, doubt: set[int]
) -> JobVerdict | None:
    parts = {r.pid: part(r, cfg, doubt) for r in ranks}
    holds = [r for r in ranks if parts[r.pid] == "holds"]
    waits = [r for r in ranks if parts[r.pid] == "waits"]
    long = [r for r in waits if r.waiting_since is not None and ts - r.waiting_since >= cfg.stuck_seconds]
    if not long:
        return None  # the rank that waited long turned out (by its stack) not to wait
    unclear = [r for r in ranks if parts[r.pid] == "unclear"]
    since = max(r.waiting_since for r in long if r.waiting_since is not None)
    waited = f"waited {w.duration(ts - since)} (since {hms(since)})"
    if holds:
        return _culprit(holds, long, waits, unclear, exited, waited, since, cfg)
    if any(p == "unknown" for p in parts.values()):
        return None
    if unclear:
        return _stalled(unclear, waits, exited, waited, since, cfg)
    if any(r.waiting_since is not None and r not in long for r in waits):
        return None  # every rank waits, some not long enough yet
    gone = [r for r in exited if r.exited_at is not None and ts - r.exited_at >= cfg.cpu_window_seconds]
    if exited and not gone:
        return None  # gone for a moment only: NVML's list may have missed it at one tick
    if gone:
        exited = gone
        last = exited[-1]
        names = ", ".join(r.who for r in exited)
        return JobVerdict(
            "exited",
            f"{last.who} has gone (at {hms(last.exited_at or ts)}) while the others wait",
            f"gone: {names} (exited or killed: its exit status is its parent's to see); "
            f"the {len(ranks)} remaining rank(s) have {waited}: {w.how_waiting(waits)}",
            last.exited_at,
            tuple(r.pid for r in exited),
        )
    return _every_rank_waits(waits, waited, since)


def _culprit(
    holds: list[RankHealth],
    long: list[RankHealth],
    waits: list[RankHealth],
    unclear: list[RankHealth],
    exited: Sequence[RankHealth],
    waited: str,
    since: float,
    cfg: HealthConfig,
) -> JobVerdict:
    window = cfg.cpu_window_seconds
    first = holds[0]
    place = first.where.place if first.where is not None else None
    if len(holds) > 1:
        short = " and ".join(r.who for r in holds) + " are the ones the others wait for"
    elif place == "io" and first.where is not None and first.condition not in ("stopped", "zombie"):
        call, at = w.shown(first.where.call), w.shown(first.where.at)
        short = f"{first.who} is writing a checkpoint? ({call} at {at})"
    elif place == "loader" and first.where is not None and first.condition not in ("stopped", "zombie"):
        at = w.shown(first.where.at)
        short = f"{first.who} is the one the others wait for: waiting for its data loader ({at})"
    else:
        short = f"{first.who} is the one the others wait for"
    why = [w.why_not_waiting(r, window) for r in holds]
    have = "has" if len(long) == 1 else "have"
    why.append(f"{w.count(len(long), 'other rank')} {have} {waited}: {w.how_waiting(long)}")
    later = [r for r in waits if r not in long]
    if later:
        why.append(f"{w.count(len(later), 'more')} waiting for less than {w.duration(cfg.stuck_seconds)}")
    why += [f"{w.why_not_waiting(r, window)}, not named: {w.unread(r)}" for r in unclear]
    if exited:
        why.append("gone: " + ", ".join(r.who for r in exited))
    abnormal = first.condition in ("stopped", "zombie", "disk") and first.state_since is not None
    return JobVerdict(
        "culprit",
        short,
        "; ".join(why),
        first.state_since if abnormal else since,
        tuple(r.pid for r in holds),
    )


def _stalled(
    unclear: list[RankHealth],
    waits: list[RankHealth],
    exited: Sequence[RankHealth],
    waited: str,
    since: float,
    cfg: HealthConfig,
) -> JobVerdict:
    window = cfg.cpu_window_seconds
    busy = "; ".join(
        f"{r.who} is busy on its host with its GPU idle ({w.cpu_words(r, window)}): it may wait inside "
        f"a collective itself or compute, so it is not named; {w.unread(r)}"
        for r in unclear
    )
    gone = ("; gone: " + ", ".join(r.who for r in exited)) if exited else ""
    return JobVerdict(
        "stalled",
        f"ranks wait since {hms(since)}; for what could not be checked",
        f"{len(waits)} rank(s) have {waited}: {w.how_waiting(waits)}; {busy}{gone}",
        since,
    )


def _every_rank_waits(waits: list[RankHealth], waited: str, since: float) -> JobVerdict:
    how = w.how_waiting(waits)
    read = [r for r in waits if r.where is not None and r.where.place != "unread"]
    if len(read) < len(waits):
        missing = "; ".join(w.unread(r) for r in waits if r not in read)
        return JobVerdict(
            "stuck",
            f"stuck in a collective since {hms(since)}",
            f"every rank has {waited}: {how}; {missing}",
            since,
        )
    groups: dict[str, list[RankHealth]] = {}
    for r in waits:
        groups.setdefault(w.in_call(r), []).append(r)
    frames = "; ".join(f"{r.who}: {w.frames(r)}" for r in waits)
    if len(groups) == 1:
        (where,) = groups
        return JobVerdict(
            "all_wait",
            f"all ranks wait in {where} since {hms(since)}",
            f"every rank has {waited}: {how}; each in {where} (a peer outside this machine, or a "
            f"collective some rank never reached, holds them); {frames}",
            since,
        )
    said = []
    for k, (where, rs) in enumerate(groups.items()):
        names = _rank_names(rs)
        verb = ("waits" if len(rs) == 1 else "wait") + " in " if k == 0 else "in "
        said.append(f"{names} {verb}{where}")
    return JobVerdict(
        "mismatch",
        "mismatched collectives: " + ", ".join(said),
        f"every rank has {waited}, each inside a different call: {how}; {frames}",
        since,
    )


def _rank_names(rs: Sequence[RankHealth]) -> str:
    if all(r.rank is not None for r in rs):
        nums = ", ".join(str(r.rank) for r in rs)
        return f"rank {nums}" if len(rs) == 1 else f"ranks {nums}"
    return ", ".join(r.who for r in rs)
