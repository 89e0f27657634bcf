"""The job view's NCCL section (gputui/ui/processes/nccl_lines.py): in the app, on the real
deadlock of the h100-x4-matrix (its recording with the RAS answers captured beside it merged
in, labelled derived), with real key presses; and the line builder on hostile answers."""

from __future__ import annotations

import asyncio

import pytest
from conftest import FIXTURES, replay_app, run_to_tick, screen_lines, wait_for
from ras_support import MATRIX, with_ras

from gputui.telemetry.nccl.findings import NOT_RECORDED
from gputui.telemetry.nccl.model import NcclComm, NcclCount, NcclRank, NcclView, RasAnswer
from gputui.ui.processes.job_view import JobScreen
from gputui.ui.processes.nccl_lines import nccl_lines

STOPPED_GLOO = FIXTURES / "h100-health" / "jobrank-stopped.jsonl.gz"
DEMO_JOB = FIXTURES.parents[1] / "gputui" / "data" / "demo-job.jsonl.gz"
DEADLOCK = "rank 1 (PID 2227) is one AllReduce behind (150; rank 0: 151) · counts unchanged for"


def text(lines) -> list[str]:
    return ["".join(t for t, _ in line) for line in lines]


async def job_view(pilot, tick: int) -> str:
    app = pilot.app
    await run_to_tick(pilot, tick)
    await pilot.press("tab")  # into the Overview's process list (its first row: job a's rank 0)
    await pilot.pause()
    await pilot.press("J")
    await wait_for(pilot, lambda: isinstance(app.screen, JobScreen))
    await pilot.pause()
    return "\n".join(screen_lines(app))


def test_the_job_view_shows_the_deadlock_as_nccl_sees_it(tmp_path):
    path = with_ras("3-mismatch-slow-gpu", tmp_path / "mismatch-ras.jsonl.gz")

    async def go():
        app = replay_app(path)
        async with app.run_test(size=(160, 50)) as pilot:
            shown = await job_view(pilot, 45)
            assert "NCCL RAS  NCCL 2.28.9  asked" in shown
            assert "communicator 0xa253901d5e78fc46: 2 of 2 ranks answer · 1 node: 192.0.2.2 ×2" in shown
            assert DEADLOCK in shown
            assert "AllReduce 150 (rank 1) · 151 (rank 0)" in shown
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, JobScreen))

    asyncio.run(go())


@pytest.mark.parametrize(
    "path",
    [
        MATRIX / "3-mismatch-slow-gpu" / "recording.jsonl.gz",  # format 6: before RAS answers
        STOPPED_GLOO,  # format 3, a gloo job: no NCCL at all
        DEMO_JOB,  # format 7, recorded with no RAS answer
    ],
    ids=["format-6", "gloo-format-3", "demo-job-format-7"],
)
def test_a_recording_without_answers_says_so_once(path):
    """A replay is no live view waiting for an answer: "not in this recording", never "no RAS
    answer yet" (review of issue 31)."""

    async def go():
        app = replay_app(path)
        async with app.run_test(size=(160, 50)) as pilot:
            shown = await job_view(pilot, 45)
            assert shown.count(NOT_RECORDED) == 1, shown
            assert "no RAS answer yet" not in shown
            assert "communicator" not in shown

    asyncio.run(go())


# --------------------------------------------------------------------------------------
# the line builder
# --------------------------------------------------------------------------------------


def view(*comms: NcclComm, **kw) -> NcclView:
    return NcclView(
        100.0, (RasAnswer("localhost:28028", pids=(1,), format="json", communicators=comms, **kw),), ()
    )


def test_escape_sequences_from_an_answer_are_shown_escaped():
    evil = "\x1b[2J\x1b]0;owned\x07"
    comm = NcclComm(
        "0x1",
        ranks=(NcclRank(0, evil, 1, counts=(NcclCount("AllReduce", 5),)),),
        missing_ranks=(NcclRank(1, evil, 2, unresponsive=True),),
        missing_ranks_count=1,
    )
    lines = text(nccl_lines(view(comm, nccl_version="2.28\x9b31m"), {1}, 100.0, 200))
    joined = "\n".join(lines)
    assert "\x1b" not in joined and "\x07" not in joined and "\x9b" not in joined
    assert "rank 1 on node \\x1b[2J\\x1b]0;owned\\x07 (PID 2) is missing" in joined
    assert "NCCL 2.28\\x9b31m" in joined


def test_many_ranks_and_communicators_stay_a_few_lines():
    ranks = tuple(
        NcclRank(k, f"10.0.{k // 8}.1", k, counts=(NcclCount("AllReduce", 10 + k % 5),)) for k in range(64)
    )
    comms = [
        NcclComm(f"0x{c + 1:x}", size=64, ranks_count=64, missing_ranks_count=0, ranks=ranks)
        for c in range(10)
    ]
    lines = text(nccl_lines(view(*comms), {1}, 100.0, 160))
    assert len(lines) < 60
    assert all(len(line) <= 160 for line in lines)
    assert "8 nodes: 10.0.0.1 ×8, 10.0.1.1 ×8, 10.0.2.1 ×8, 10.0.3.1 ×8 +4 more" in "\n".join(lines)
    assert " + 4 more communicators" in lines
    assert any("AllReduce 10 (ranks 0,5,10,15,20,25,30,35 +5) · 11 (" in line for line in lines)


def test_unused_collectives_are_not_listed_and_a_quiet_job_says_no_problem():
    r = (NcclCount("Broadcast", 0), NcclCount("AllReduce", 7))
    comm = NcclComm(
        "0x1",
        size=2,
        ranks_count=2,
        missing_ranks_count=0,
        ranks=(NcclRank(0, pid=1, counts=r), NcclRank(1, pid=2, counts=r)),
    )
    lines = text(nccl_lines(view(comm), {1}, 100.0, 160))
    assert "   AllReduce 7 on all 2 ranks" in lines
    assert not any("Broadcast" in line for line in lines)
    assert " RAS reports no problem in these communicators" in lines
