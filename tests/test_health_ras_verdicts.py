"""NCCL RAS's verdicts of its own (gputui.telemetry.verdicts.nccl): every rank on this machine
waits, and RAS names the rank on another node, or an error.

Recording: the REAL 4-rank NCCL job on 4 H200s (tests/fixtures/h200-x4-nccl: rank 1, PID
1129, SIGSTOPped at 8 s; ranks 0, 2, 3 spinning).  DERIVED in the test: rank 1 taken out of
the recording (as if it ran on another node), and RAS answers BUILT here (no RAS answer was
captured for that run; the real answers of the 4x H100 matrix are in test_health_matrix.py),
labelled so: they pin one rule each."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import FIXTURES

from gputui.telemetry.health import HealthEngine
from gputui.telemetry.health_config import HealthConfig
from gputui.telemetry.health_report import JobVerdict
from gputui.telemetry.model import Snapshot
from gputui.telemetry.nccl.model import NcclComm, NcclCount, NcclRank, NcclView, RasAnswer
from gputui.telemetry.recording import read_recording
from gputui.telemetry.verdicts import nccl

X4 = FIXTURES / "h200-x4-nccl" / "stopped.jsonl.gz"
CFG = HealthConfig(spin_seconds=30, stuck_seconds=30)
HERE, THERE = "192.0.2.2", "10.0.0.7"
LOCAL = {0: 1127, 2: 1130, 3: 1131}
REMOTE_PID = 1129


def _here_only() -> list[Snapshot]:
    """DERIVED: the real recording without rank 1 (it runs elsewhere)."""
    return [
        dataclasses.replace(s, processes=tuple(p for p in s.processes if p.pid != REMOTE_PID))
        for s in read_recording(X4)[1]
    ]


def _comm(remote: NcclRank | None = None, missing: NcclRank | None = None, lag: int = 0) -> NcclComm:
    """BUILT: the job's communicator as RAS would report it, ranks 0, 2, 3 here at 100 AllReduces."""
    ranks = [
        NcclRank(
            rank=r, host=HERE, pid=pid, init_state=0, async_error=0, counts=(NcclCount("AllReduce", 100),)
        )
        for r, pid in LOCAL.items()
    ]
    if remote is not None:
        ranks.append(remote)
    return NcclComm(
        "0x669d3f2a1b",
        size=4,
        ranks_count=len(ranks),
        missing_ranks_count=1 if missing is not None else 0,
        ranks=tuple(ranks),
        missing_ranks=(missing,) if missing is not None else (),
    )


def _judged(
    comm: NcclComm, since_offset: float | None = None, local: tuple[str, ...] = (HERE,)
) -> list[JobVerdict | None]:
    snaps = _here_only()
    stop = 10
    out: list[JobVerdict | None] = []
    engine = HealthEngine(CFG)
    for k, snap in enumerate(snaps):
        s = snap
        if k >= stop and k % 10 == 0:  # a round every 10 s
            c = comm
            if since_offset is not None:
                c = dataclasses.replace(comm, counts_since=snaps[stop].timestamp + since_offset)
            answer = RasAnswer(
                "localhost:28028", pids=tuple(LOCAL.values()), format="json", communicators=(c,)
            )
            s = dataclasses.replace(s, nccl=NcclView(s.timestamp, (answer,), local))
        (job,) = engine.update(s).jobs
        out.append(job.verdict)
    return out


def test_without_ras_every_rank_here_waits_stuck() -> None:
    v = _judged(_comm(), local=())[-1]
    assert v is not None and v.kind in ("stuck", "all_wait")


def test_a_rank_on_another_node_missing_is_named_by_node_rank_and_pid() -> None:
    gone = NcclRank(rank=1, host=THERE, pid=REMOTE_PID, unresponsive=True)
    v = _judged(_comm(missing=gone))[-1]
    assert v is not None and v.kind == "nccl" and v.pids == ()
    assert v.short.startswith(
        f"rank 1 on node {THERE} (PID {REMOTE_PID}) is missing from communicator 0x669d3f2a1b"
    )
    assert "spinning on its GPU" in v.why  # the ranks here, and why they wait


@pytest.mark.parametrize(("held", "named"), [(30.0, True), (29.0, False)])
def test_a_rank_on_another_node_behind_counts_once_held_stuck_seconds(held: float, named: bool) -> None:
    """Counts unchanged since 8 s before the stop... the boundary: held stuck_seconds at the
    last tick, or one second short of it."""
    snaps = _here_only()
    last = snaps[-1].timestamp
    behind = NcclRank(
        rank=1, host=THERE, pid=REMOTE_PID, init_state=0, async_error=0, counts=(NcclCount("AllReduce", 99),)
    )
    offset = last - held - snaps[10].timestamp
    v = _judged(_comm(remote=behind), since_offset=offset)[-1]
    assert v is not None
    if named:
        assert (
            v.kind == "nccl"
            and v.short
            == f"rank 1 on node {THERE} (PID {REMOTE_PID}) is one AllReduce behind (99; rank 0: 100)"
        )
    else:
        assert v.kind in ("stuck", "all_wait")


def test_an_async_error_is_said_and_nobody_here_is_named() -> None:
    erred = NcclRank(rank=1, host=THERE, pid=REMOTE_PID, init_state=0, async_error=6)
    v = _judged(_comm(remote=erred))[-1]
    assert v is not None and v.kind == "nccl" and v.pids == ()
    assert "reports an asynchronous error" in v.short


def test_a_stale_view_is_not_evidence() -> None:
    """A view older than nccl.KEEP (60 s) at the tick: as if none."""
    snaps = _here_only()
    gone = NcclRank(rank=1, host=THERE, pid=REMOTE_PID, unresponsive=True)
    answer = RasAnswer(
        "localhost:28028", pids=tuple(LOCAL.values()), format="json", communicators=(_comm(missing=gone),)
    )
    engine = HealthEngine(CFG)
    for k, snap in enumerate(snaps):
        s = snap
        if k == 10:
            s = dataclasses.replace(s, nccl=NcclView(s.timestamp - nccl.KEEP + 50, (answer,), (HERE,)))
        (job,) = engine.update(s).jobs
    assert snaps[-1].timestamp - snaps[10].timestamp > 50
    assert job.verdict is not None and job.verdict.kind in ("stuck", "all_wait")


def test_hostile_host_text_is_escaped() -> None:
    gone = NcclRank(rank=1, host="\x1b]0;owned\x07" + "h" * 500, pid=REMOTE_PID, unresponsive=True)
    v = _judged(_comm(missing=gone), local=(HERE,))[-1]
    assert v is not None and v.kind == "nccl"
    assert "\x1b" not in v.short + v.why and len(v.short) < 200  # clipped to 160, then escaped


def test_a_rank_here_that_ras_holds_behind_is_judged_on_its_own_evidence() -> None:
    """BUILT: rank 0 (here, spinning: it waits) one AllReduce behind for long: RAS does not
    override the GPU (it may wait in another collective); every rank here waits: stuck."""
    snaps = _here_only()
    behind = dataclasses.replace(
        _comm(),
        ranks=tuple(
            dataclasses.replace(r, counts=(NcclCount("AllReduce", 99),)) if r.rank == 0 else r
            for r in _comm().ranks
        ),
    )
    v = _judged(behind, since_offset=-30.0)[-1]
    assert v is not None and v.kind in ("stuck", "all_wait") and v.pids == ()
    assert "NCCL RAS: rank 0 (PID 1127) is one AllReduce behind (99; rank 2: 100)" in v.why
    assert snaps
