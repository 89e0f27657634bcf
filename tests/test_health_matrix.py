"""Job verdicts on the REAL 4x H100 scenario matrix (tests/fixtures/h100-x4-matrix, issue 32):
two 2-rank NCCL jobs per recording, judged with the live run's settings (stuck_seconds = 30,
straggler_seconds = 30).  The truth of each job is in the fixture's README."""

from __future__ import annotations

import dataclasses

import pytest
from matrix_support import CFG, job_in, judge, slot, with_ras, with_stacks

from gputui.telemetry.health_report import JobVerdict


def test_the_fixture_is_real() -> None:
    from matrix_support import MATRIX, SLOTS

    from gputui.telemetry.recording import read_recording

    for name in SLOTS:
        header = read_recording(MATRIX / name / "recording.jsonl.gz")[0]
        assert header.derived is None and header.note.startswith("real NVIDIA H100 80GB HBM3 x4")


# --------------------------------------------------------------------------------------
# a rank that has gone (exit-early and killed: tests/fixtures/h100-x4-matrix/2-exit-early-killed)
# --------------------------------------------------------------------------------------


def test_a_killed_rank_has_gone_while_the_other_spins() -> None:
    """Job b: rank 1 (PID 1488) SIGKILLed under a stand-in srun that leaves rank 0 running:
    rank 0's GPU spins from 3 s after the kill.  Once it has spun stuck_seconds, rank 1 is
    named as gone, with when.  (At 79fe210 there was no verdict: py-spy, run beside the
    recording 35 s in, stopped rank 0 for a moment (state t) and that tick restarted its wait.)"""
    s = slot("2-exit-early-killed")
    kill = s.fault("b")
    assert kill is not None
    reports = judge(s.ticks)
    named = [(r.timestamp, job_in(r, s.key("b"))) for r in reports]
    named = [(t, j.verdict) for t, j in named if j is not None and j.verdict is not None]
    assert named, "no verdict for the killed rank"
    t0, v = named[0]
    assert v.kind == "exited" and v.pids == (s.ranks["b"][1],)
    assert "rank 1 (PID 1488, GPU 3) has gone" in v.short and "while the others wait" in v.short
    assert 30 <= t0 - kill <= 30 + 5, t0 - kill
    assert [t for t, _ in named] == [r.timestamp for r in reports if r.timestamp >= t0]


def test_a_rank_that_exits_early_has_gone_while_the_other_spins() -> None:
    """Job a: rank 1 leaves its loop and exits 0; rank 0 waits in its next all_reduce."""
    s = slot("2-exit-early-killed")
    v = job_in(judge(s.ticks)[-1], s.key("a")).verdict
    assert v is not None and v.kind == "exited" and v.pids == (s.ranks["a"][1],)
    assert v.short.startswith("rank 1 (PID 1790, GPU 1) has gone")


def test_a_rank_read_by_py_spy_for_a_moment_keeps_waiting() -> None:
    """The real tick 35 s into the killed slot: rank 0 (PID 1487) is in state t while py-spy
    reads it.  Its wait goes on from where it began, not from that tick."""
    s = slot("2-exit-early-killed")
    k = next(k for k, t in enumerate(s.ticks) for p in t.processes if p.pid == 1487 and p.state == "t")
    reports = judge(s.ticks[: k + 2])
    before, during, after = (job_in(r, s.key("b")).ranks[0] for r in reports[k - 1 : k + 2])
    assert before.condition == during.condition == after.condition == "spinning"
    assert before.waiting_since == during.waiting_since == after.waiting_since is not None


def test_a_rank_held_in_state_t_past_the_grace_is_stopped() -> None:
    """DERIVED in the test: the same rank held in state t (a debugger at a breakpoint) from
    that tick on: once past the grace it counts as stopped, not as waiting."""
    from gputui.telemetry.health import TRACED_GRACE

    s = slot("2-exit-early-killed")
    k = next(k for k, t in enumerate(s.ticks) for p in t.processes if p.pid == 1487 and p.state == "t")
    snaps = list(s.ticks[:k]) + [
        dataclasses.replace(
            t,
            processes=tuple(dataclasses.replace(p, state="t") if p.pid == 1487 else p for p in t.processes),
        )
        for t in s.ticks[k:]
    ]
    reports = judge(snaps)
    t_start = snaps[k].timestamp
    for r in reports[k:]:
        rank0 = job_in(r, s.key("b")).ranks[0]
        held = r.timestamp - t_start
        want = "spinning" if held < TRACED_GRACE else "stopped"
        assert rank0.condition == want, (held, rank0.condition)
    assert CFG.stuck_seconds == 30


# --------------------------------------------------------------------------------------
# look before blaming: the stacks captured beside the recordings, injected at their tick
# --------------------------------------------------------------------------------------

NEVER_NAMED = {
    # (slot, job): the ranks that wait, by the truth: never the cause
    ("1-healthy-stopped", "b"): (1265,),
    ("3-mismatch-slow-gpu", "a"): (2226, 2227),
    ("3-mismatch-slow-gpu", "b"): (2266,),
    ("4-slow-host-loader-stall", "a"): (2718,),
    ("4-slow-host-loader-stall", "b"): (2732,),
    ("5-checkpoint-healthy", "a"): (3209,),
}


@pytest.mark.parametrize("stacks", [False, True], ids=["recording", "with-stacks"])
@pytest.mark.parametrize(("name", "job"), sorted(NEVER_NAMED))
def test_a_rank_that_waits_is_never_named(name: str, job: str, stacks: bool) -> None:
    s = slot(name)
    for r in judge(with_stacks(s) if stacks else s.ticks):
        j = job_in(r, s.key(job))
        if j is not None and j.verdict is not None:
            assert not set(j.verdict.pids) & set(NEVER_NAMED[(name, job)]), (r.timestamp, j.verdict)


@pytest.mark.parametrize("stacks", [False, True], ids=["recording", "with-stacks"])
@pytest.mark.parametrize(("name", "job"), [("1-healthy-stopped", "a"), ("5-checkpoint-healthy", "b")])
def test_a_healthy_job_never_gets_a_verdict(name: str, job: str, stacks: bool) -> None:
    s = slot(name)
    for r in judge(with_stacks(s) if stacks else s.ticks):
        j = job_in(r, s.key(job))
        assert j is not None and j.verdict is None, (r.timestamp, j)


def _verdicts(name: str, job: str, stacks: bool) -> list[tuple[float, JobVerdict]]:
    s = slot(name)
    out = []
    for r in judge(with_stacks(s) if stacks else s.ticks):
        j = job_in(r, s.key(job))
        if j is not None and j.verdict is not None:
            out.append((r.timestamp, j.verdict))
    return out


def test_mismatched_collectives_by_the_stacks() -> None:
    """Rank 0 all_reduces, rank 1 recv(src=0): rank 0's GPU spins, rank 1's host busy-waits
    in NCCL's connection setup (state R, 99 % CPU, GPU idle).  Its stack says recv: it waits
    too, and the verdict says where each waits."""
    got = _verdicts("3-mismatch-slow-gpu", "a", stacks=True)
    assert got
    v = got[-1][1]
    assert v.kind == "mismatch" and v.pids == ()
    assert v.short == (
        "mismatched collectives: rank 0 waits in synchronize (scenario.py:128), "
        "rank 1 in recv (scenario.py:124)"
    )
    assert "irecv (torch/distributed/distributed_c10d.py:2597) ← recv" in v.why
    fault = slot("3-mismatch-slow-gpu").fault("a")
    assert fault is not None and got[0][0] - fault <= 30 + 5 + 2  # stuck_seconds after the wait began
    assert {v.kind for _, v in got} <= {"stalled", "mismatch"}  # before the stack came: nobody named


def test_mismatch_without_stacks_names_nobody_and_says_what_was_not_read() -> None:
    """As at 79fe210 the recording alone: rank 1 busy on its host is not named on its CPU."""
    (_, v), *_ = reversed(_verdicts("3-mismatch-slow-gpu", "a", stacks=False))
    assert v.kind == "stalled" and v.pids == ()
    assert "rank 1 (PID 2227, GPU 1) is busy on its host with its GPU idle (state R, CPU 99 %" in v.why
    assert "was not read" in v.why


def test_a_data_loader_stall_names_the_rank_in_its_loader() -> None:
    """Job b: rank 1's DataLoader workers stall 45 s; rank 1 sleeps on its loader's queue
    (state S, 0 % CPU, GPU idle: it reads as blocked), rank 0's GPU spins.  By its stack,
    rank 1 is the one the others wait for."""
    got = _verdicts("4-slow-host-loader-stall", "b", stacks=True)
    v = got[-1][1]
    assert v.kind == "culprit" and v.pids == (2733,)
    assert v.short == (
        "rank 1 (PID 2733, GPU 3) is the one the others wait for: "
        "waiting for its data loader (scenario.py:110)"
    )
    assert "Queue.get (multiprocessing/queues.py:113)" in v.why
    # without the stacks it reads as every rank waiting: stuck, saying where was not read
    plain = _verdicts("4-slow-host-loader-stall", "b", stacks=False)
    assert plain and all(v.kind == "stuck" and "was not read" in v.why for _, v in plain)


def test_a_checkpoint_is_said_or_said_to_be_unknown() -> None:
    """Job a: rank 0 writes a checkpoint 45 s (torch.save in a loop: states D, R, S, ~50 %
    CPU, GPU idle) while rank 1 waits in a barrier (its GPU spinning).  With its stack: "is
    writing a checkpoint?"; without: nobody named, and the verdict says it cannot tell."""
    v = _verdicts("5-checkpoint-healthy", "a", stacks=True)[-1][1]
    assert v.kind == "culprit" and v.pids == (3208,)
    assert v.short == "rank 0 (PID 3208, GPU 0) is writing a checkpoint? (torch.save at scenario.py:70)"
    plain = _verdicts("5-checkpoint-healthy", "a", stacks=False)
    assert plain and all(v.kind == "stalled" and v.pids == () for _, v in plain)


def test_the_stopped_rank_is_named_with_or_without_stacks() -> None:
    for stacks in (False, True):
        v = _verdicts("1-healthy-stopped", "b", stacks)[-1][1]
        assert v.kind == "culprit" and v.pids == (1266,)
        assert v.short == "rank 1 (PID 1266, GPU 3) is the one the others wait for"


def test_the_verdict_asks_for_the_stacks_of_a_suspected_jobs_ranks() -> None:
    """Half of stuck_seconds into the wait, the engine wants the job's ranks' stacks (the
    stopped rank's not: py-spy cannot read a stopped process); never a healthy job's."""
    s = slot("1-healthy-stopped")
    reports = judge(s.ticks)
    fault = s.fault("b")
    assert fault is not None
    asked = [r for r in reports if r.wanted]
    assert asked and all({pid for pid, _ in r.wanted} == {1265} for r in asked)
    first = asked[0].timestamp
    waits = job_in(asked[0], s.key("b")).ranks[0].waiting_since
    assert waits is not None and 15 <= first - waits < 17  # the first tick at or past 15 s
    assert all(not r.wanted for r in reports if r.timestamp < first)


# --------------------------------------------------------------------------------------
# NCCL RAS's view: the real answers captured beside the recordings, at their tick
# --------------------------------------------------------------------------------------


def _last(name: str, job: str, ras: bool, stacks: bool) -> JobVerdict | None:
    s = slot(name)
    ticks = with_stacks(s) if stacks else s.ticks
    if ras:
        ticks = with_ras(s, ticks)
    got = [job_in(r, s.key(job)).verdict for r in judge(ticks)]
    named = [v for v in got if v is not None]
    return named[-1] if named else None


@pytest.mark.parametrize(
    ("name", "job", "kind", "pids", "says"),
    [
        (
            "1-healthy-stopped",
            "b",
            "culprit",
            (1266,),
            "NCCL RAS: rank 1 (PID 1266) is missing from communicator 0x",
        ),
        (
            "2-exit-early-killed",
            "b",
            "exited",
            (1488,),
            "NCCL RAS: rank 1 (PID 1488) is missing from communicator 0x",
        ),
        (
            "2-exit-early-killed",
            "a",
            "exited",
            (1790,),
            "NCCL RAS: rank 1 (PID 1790) is missing from communicator 0x",
        ),
        (
            "3-mismatch-slow-gpu",
            "a",
            "mismatch",
            (),
            "NCCL RAS: rank 1 (PID 2227) is one AllReduce behind (150; rank 0: 151)",
        ),
        (
            "4-slow-host-loader-stall",
            "b",
            "culprit",
            (2733,),
            "NCCL RAS: rank 1 (PID 2733) is one AllReduce behind",
        ),
        (
            "5-checkpoint-healthy",
            "a",
            "culprit",
            (3208,),
            "NCCL RAS: rank 0 (PID 3208) is one AllReduce behind",
        ),
    ],
)
def test_nccl_ras_is_evidence_in_the_verdict(name: str, job: str, kind: str, pids: tuple, says: str) -> None:
    v = _last(name, job, ras=True, stacks=True)
    assert v is not None and (v.kind, v.pids) == (kind, pids)
    assert says in v.why


def test_ras_behind_puts_an_inferred_wait_in_doubt_and_names_nobody() -> None:
    """The loader stall without stacks: rank 1 sleeps (state S, 0 %, GPU idle: it would read
    as waiting too, "stuck"), but RAS has held it one AllReduce behind for stuck_seconds: it
    has not reached the collective rank 0 waits in.  Not named on that alone (a rank in a
    recv looks the same to RAS): nobody is named, and the verdict says so."""
    v = _last("4-slow-host-loader-stall", "b", ras=True, stacks=False)
    assert v is not None and v.kind == "stalled" and v.pids == ()
    assert "rank 1 (PID 2733) is one AllReduce behind" in v.why


@pytest.mark.parametrize(("name", "job"), [("1-healthy-stopped", "a"), ("5-checkpoint-healthy", "b")])
def test_a_healthy_job_with_ras_gets_no_verdict(name: str, job: str) -> None:
    assert _last(name, job, ras=True, stacks=True) is None


def test_the_stragglers_are_unchanged_by_ras() -> None:
    """RAS holds the slow host's rank behind for a moment each step (its counts move)."""
    v = _last("4-slow-host-loader-stall", "a", ras=True, stacks=True)
    assert v is not None and v.kind == "straggler" and v.pids == (2719,)
