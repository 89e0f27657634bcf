"""Job verdicts on the REAL 4x H100 scenario matrix (tests/fixtures/h100-x4-matrix, issue 32):
two 2-rank NCCL jobs per recording, judged with the live run's settings (stuck_seconds = 30,
straggler_seconds = 30).  The truth of each job is in the fixture's README."""

from __future__ import annotations

import dataclasses

from matrix_support import CFG, job_in, judge, slot


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
