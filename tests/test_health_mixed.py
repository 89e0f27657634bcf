"""Job verdicts with ranks in mixed states, and the edges of each rule (gputui.telemetry.verdicts.stuck).

Recordings: the REAL H100 gloo job (tests/fixtures/h100-health/jobrank-stopped.jsonl.gz: 3
ranks on GPU 0; rank 1, PID 1200, SIGSTOPped at tick 10; ranks 0 and 2 blocked in the
all_reduce from tick 11) and the REAL 2-rank NCCL jobs of the 4x H100 matrix
(tests/fixtures/h100-x4-matrix).  Each test DERIVES from them only the states, CPU figures
or stacks it names (dataclasses.replace), and says so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
from matrix_support import CFG as MATRIX_CFG
from matrix_support import job_in, judge, slot

from gputui.telemetry.health import STACK_KEEP, HealthEngine
from gputui.telemetry.health_config import HealthConfig
from gputui.telemetry.health_report import HealthReport, JobVerdict
from gputui.telemetry.model import GpuProcess, Snapshot
from gputui.telemetry.recording import read_recording
from gputui.telemetry.stack_evidence import RankWhere, StackEvidence
from gputui.telemetry.verdicts.stuck import part

GLOO = Path(__file__).parent / "fixtures" / "h100-health" / "jobrank-stopped.jsonl.gz"
CFG = HealthConfig(spin_seconds=30, stuck_seconds=30)
R0, R1, R2 = 1199, 1200, 1201
STOP_TICK = 10


def gloo(change: Callable[[int, GpuProcess], GpuProcess] | None = None) -> list[Snapshot]:
    snaps = read_recording(GLOO)[1]
    if change is None:
        return snaps
    return [
        dataclasses.replace(s, processes=tuple(change(k, p) for p in s.processes))
        for k, s in enumerate(snaps)
    ]


def last_verdict(snaps: list[Snapshot], cfg: HealthConfig = CFG) -> JobVerdict | None:
    engine = HealthEngine(cfg)
    for s in snaps:
        report = engine.update(s)
    (job,) = report.jobs
    return job.verdict


def from_stop(pid: int, **kw: object) -> Callable[[int, GpuProcess], GpuProcess]:
    """DERIVED: process `pid` with these fields from the stop's tick on."""
    return lambda k, p: dataclasses.replace(p, **kw) if p.pid == pid and k >= STOP_TICK else p  # type: ignore[arg-type]


def both(*fs: Callable[[int, GpuProcess], GpuProcess]) -> Callable[[int, GpuProcess], GpuProcess]:
    def change(k: int, p: GpuProcess) -> GpuProcess:
        for f in fs:
            p = f(k, p)
        return p

    return change


# --------------------------------------------------------------------------------------
# mixed states, three ranks
# --------------------------------------------------------------------------------------


def test_stopped_computing_and_waiting_names_the_stopped_one() -> None:
    """DERIVED: rank 2 busy on its host from the stop (state R, 100 %), stack unread: the
    stopped rank 1 is named (it cannot go on by itself); rank 2 is mentioned, not named."""
    v = last_verdict(gloo(from_stop(R2, state="R", cpu_percent=100.0)))
    assert v is not None and v.kind == "culprit" and v.pids == (R1,)
    assert v.short == "rank 1 (PID 1200, GPU 0) is the one the others wait for"
    assert "rank 2 (PID 1201, GPU 0) is still computing (state R, CPU 100 % over 5 s" in v.why
    assert "not named" in v.why and "1 other rank has waited" in v.why


def test_a_zombie_and_a_blocked_rank_name_the_zombie() -> None:
    """DERIVED: rank 1 a zombie (state Z) instead of stopped."""
    v = last_verdict(gloo(from_stop(R1, state="Z")))
    assert v is not None and v.kind == "culprit" and v.pids == (R1,)
    assert "rank 1 (PID 1200, GPU 0) has exited (a zombie since" in v.why


def test_two_stopped_ranks_are_both_named() -> None:
    v = last_verdict(gloo(from_stop(R2, state="T", cpu_percent=0.0)))
    assert v is not None and v.kind == "culprit" and v.pids == (R1, R2)
    assert v.short.endswith("are the ones the others wait for")


def test_a_rank_of_unknown_state_beside_a_stopped_one() -> None:
    """DERIVED: rank 2's state and CPU unknown: the stopped rank is still named (nothing is
    read into the unknown one), and the verdict waits for no figure it lacks."""
    v = last_verdict(gloo(from_stop(R2, state=None, cpu_percent=None)))
    assert v is not None and v.pids == (R1,)


def test_a_rank_of_unknown_state_and_waiting_ranks_give_nothing() -> None:
    """DERIVED: rank 1 unknown (not stopped): the others wait, for what is not known."""
    v = last_verdict(gloo(from_stop(R1, state=None, cpu_percent=None)))
    assert v is None


def test_every_rank_waiting_needs_every_clock_past_the_threshold() -> None:
    """DERIVED: every rank blocked, rank 2's wait restarted at tick 30 (one busy tick): not
    "stuck" until rank 2 too has waited stuck_seconds."""
    change = both(
        from_stop(R1, state="S", cpu_percent=0.0),
        lambda k, p: dataclasses.replace(p, cpu_percent=50.0) if p.pid == R2 and k == 30 else p,
    )
    assert last_verdict(gloo(change)) is None
    assert last_verdict(gloo(from_stop(R1, state="S", cpu_percent=0.0))) is not None


# --------------------------------------------------------------------------------------
# 2-rank jobs (the REAL matrix: job b of slot 1, rank 1 (PID 1266) SIGSTOPped, rank 0 spinning)
# --------------------------------------------------------------------------------------


def matrix_job(
    change: Callable[[int, GpuProcess], GpuProcess], name: str = "1-healthy-stopped", job: str = "b"
):
    s = slot(name)
    snaps = [
        dataclasses.replace(t, processes=tuple(change(k, p) for p in t.processes))
        for k, t in enumerate(s.ticks)
    ]
    return s, snaps


def two_rank_verdict(change: Callable[[int, GpuProcess], GpuProcess]) -> JobVerdict | None:
    s, snaps = matrix_job(change)
    return job_in(judge(snaps)[-1], s.key("b")).verdict


STOPPED = 1266


@pytest.mark.parametrize(
    ("state", "cpu", "kind", "named"),
    [
        ("T", 0.0, "culprit", True),  # as recorded
        ("Z", 0.0, "culprit", True),
        ("D", 0.0, "culprit", True),  # held in D
        ("t", 0.0, "culprit", True),  # under a debugger, past the grace
        ("R", 100.0, "stalled", False),  # busy on its host, stack unread: not named
        ("S", 0.0, "stuck", False),  # blocked too: both wait
        (None, None, None, False),  # unknown: nothing
    ],
)
def test_the_other_rank_of_a_2_rank_job(
    state: str | None, cpu: float | None, kind: str | None, named: bool
) -> None:
    """DERIVED: the stopped rank's state replaced by each other state, from its stop on."""

    def change(k: int, p: GpuProcess) -> GpuProcess:
        if p.pid == STOPPED and p.state == "T":
            return dataclasses.replace(p, state=state, cpu_percent=cpu)
        return p

    v = two_rank_verdict(change)
    assert (v.kind if v else None) == kind
    if v is not None:
        assert v.pids == ((STOPPED,) if named else ())
        assert 1265 not in v.pids  # the rank that waits


def test_a_moment_in_d_state_is_io_not_a_hang() -> None:
    """DERIVED: rank 1 in D at every other tick (a checkpoint's writes), R between: never
    held in D the CPU window, so it is busy on its host (not named without its stack)."""

    def change(k: int, p: GpuProcess) -> GpuProcess:
        if p.pid == STOPPED and p.state == "T":
            return dataclasses.replace(p, state="D" if k % 2 else "R", cpu_percent=50.0)
        return p

    s, snaps = matrix_job(change)
    for r in judge(snaps):
        j = job_in(r, s.key("b"))
        assert j is not None
        if j.verdict is not None:
            assert j.verdict.kind == "stalled" and j.verdict.pids == ()
        assert all(x.condition != "disk" for x in j.ranks)


def test_d_state_counts_once_held_the_cpu_window() -> None:
    """DERIVED: rank 1 in D from its stop: "disk" from the tick it has been in D for
    cpu_window_seconds (5 s), not before."""
    s, snaps = matrix_job(
        lambda k, p: dataclasses.replace(p, state="D") if p.pid == STOPPED and p.state == "T" else p
    )
    reports = judge(snaps)
    start = next(t.timestamp for t in snaps if any(p.pid == STOPPED and p.state == "D" for p in t.processes))
    for r in reports:
        x = next((x for x in job_in(r, s.key("b")).ranks if x.pid == STOPPED), None)
        if x is not None and r.timestamp >= start:
            assert (x.condition == "disk") == (r.timestamp - start >= MATRIX_CFG.cpu_window_seconds), (
                r.timestamp - start
            )


# --------------------------------------------------------------------------------------
# the stack evidence's edges
# --------------------------------------------------------------------------------------


def _busy(k: int, p: GpuProcess) -> GpuProcess:
    """DERIVED: the stopped rank busy on its host instead (state R, 100 %)."""
    if p.pid == STOPPED and p.state == "T":
        return dataclasses.replace(p, state="R", cpu_percent=100.0)
    return p


def _with_where(snaps: list[Snapshot], k: int, **kw: object) -> list[Snapshot]:
    p = next(p for p in snaps[k].processes if p.pid == STOPPED)
    fields: dict[str, object] = {
        "create_time": p.create_time,
        "place": "elsewhere",
        "call": "step",
        "at": "t.py:3",
    }
    fields.update(kw)
    w = RankWhere(STOPPED, **fields)  # type: ignore[arg-type]
    out = list(snaps)
    out[k] = dataclasses.replace(out[k], stacks=StackEvidence((w,)))
    return out


def _verdicts_with(
    taken_offset: float, at_tick: int = 40, **kw: object
) -> list[tuple[float, JobVerdict | None]]:
    s, snaps = matrix_job(_busy)
    reports = judge(snaps)
    waits = job_in(reports[at_tick], s.key("b")).ranks[0].waiting_since
    assert waits is not None
    snaps = _with_where(snaps, at_tick, taken=waits + taken_offset, **kw)
    return [(r.timestamp, job_in(r, s.key("b")).verdict) for r in judge(snaps)]


def test_a_stack_read_during_the_wait_is_used_and_one_from_before_is_not() -> None:
    at = _verdicts_with(0.0)[-1][1]
    assert at is not None and at.kind == "culprit" and at.pids == (STOPPED,)
    before = _verdicts_with(-0.01)[-1][1]
    assert before is not None and before.kind == "stalled"


def test_a_stack_is_evidence_for_stack_keep_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """With STACK_KEEP at 15 s (the recording is 61 s; it is 120 s): the stack read at tick
    40 names the rank up to 15 s later, not after."""
    from gputui.telemetry import health

    assert STACK_KEEP == 120.0
    monkeypatch.setattr(health, "STACK_KEEP", 15.0)
    s, snaps = matrix_job(_busy)
    taken = snaps[40].timestamp
    got = [(r.timestamp, job_in(r, s.key("b")).verdict) for r in judge(_with_where(snaps, 40, taken=taken))]
    seen = [(ts, v.kind) for ts, v in got if v is not None and ts >= taken]
    assert seen and all(kind == ("culprit" if ts - taken <= 15.0 else "stalled") for ts, kind in seen)
    assert {kind for _, kind in seen} == {"culprit", "stalled"}


def test_a_stack_of_another_process_with_the_same_pid_is_not_used() -> None:
    """DERIVED: the stack's process started later (a reused PID)."""
    s, snaps = matrix_job(_busy)
    p = next(p for p in snaps[40].processes if p.pid == STOPPED)
    assert p.create_time is not None
    waits = job_in(judge(snaps)[40], s.key("b")).ranks[0].waiting_since
    snaps = _with_where(snaps, 40, taken=waits + 1, create_time=p.create_time + 1.0)
    v = job_in(judge(snaps)[-1], s.key("b")).verdict
    assert v is not None and v.kind == "stalled"


def test_a_stack_inside_a_collective_makes_a_busy_rank_wait_too() -> None:
    """DERIVED: the busy rank's stack is in all_reduce: both wait; every stack read: where."""
    s, snaps = matrix_job(_busy)
    waits = job_in(judge(snaps)[40], s.key("b")).ranks[0].waiting_since
    snaps = _with_where(snaps, 40, taken=waits + 1, place="collective", call="all_reduce", at="t.py:9")
    v = job_in(judge(snaps)[-1], s.key("b")).verdict
    assert v is not None and v.kind == "stuck" and v.pids == ()  # rank 0's stack was not read
    assert "where rank 0 (PID 1265, GPU 2) is was not read" in v.why


def test_hostile_stack_text_is_escaped_and_clipped() -> None:
    s, snaps = matrix_job(_busy)
    waits = job_in(judge(snaps)[40], s.key("b")).ranks[0].waiting_since
    evil = "\x1b]52;c;ZXZpbA==\x07" + "x" * 5000
    snaps = _with_where(snaps, 40, taken=waits + 1, place="loader", call=evil, at=evil, frames=(evil,) * 50)
    v = job_in(judge(snaps)[-1], s.key("b")).verdict
    assert v is not None and v.kind == "culprit"
    assert "\x1b" not in v.short + v.why and "\x07" not in v.why
    assert len(v.short) < 300 and len(v.why) < 2000


def test_unread_stacks_say_why_and_name_nobody() -> None:
    s, snaps = matrix_job(_busy)
    waits = job_in(judge(snaps)[40], s.key("b")).ranks[0].waiting_since
    snaps = _with_where(
        snaps,
        40,
        taken=waits + 1,
        place="unread",
        call=None,
        at=None,
        reason="no-py-spy",
        message="py-spy is not installed",
    )
    v = job_in(judge(snaps)[-1], s.key("b")).verdict
    assert v is not None and v.kind == "stalled" and v.pids == ()
    assert "could not be read: py-spy is not installed (pip install 'gputui[stacks]')" in v.why


# --------------------------------------------------------------------------------------
# part(): a rank that waits is never among the ranks that hold
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("place", ["collective", "gpu_sync", "loader", "io", "elsewhere", "unread", None])
@pytest.mark.parametrize(
    "condition", ["spinning", "blocked", "computing", "disk", "stopped", "zombie", "unknown"]
)
def test_the_part_a_rank_plays(condition: str, place: str | None) -> None:
    report: HealthReport = judge(slot("1-healthy-stopped").ticks[:1])[0]
    base = report.jobs[0].ranks[0]
    where = None if place is None else RankWhere(base.pid, 1.0, base.create_time, place)
    r = dataclasses.replace(base, condition=condition, where=where, util=0.0)
    got = part(r, MATRIX_CFG)
    if condition == "spinning":
        assert got == "waits"  # the GPU says so, whatever the host's stack
    elif condition in ("stopped", "zombie"):
        assert got == "holds"
    elif condition == "unknown":
        assert got == "unknown"
    elif place == "collective":
        assert got == "waits"
    elif place in ("loader", "io", "elsewhere"):
        assert got == "holds"
    else:  # gpu_sync on an idle GPU, unread, not read: the condition decides
        assert got == {"blocked": "waits", "disk": "holds", "computing": "unclear"}[condition]


def test_a_rank_missing_from_one_tick_and_back_is_not_gone() -> None:
    """DERIVED: every rank blocked (rank 1 in state S), rank 2 missing from NVML's list at one
    tick mid-wait (a glitch), then listed again: it is a rank again, not one that has gone,
    and the verdict never names it (it waits)."""
    snaps = gloo(from_stop(R1, state="S", cpu_percent=0.0))
    snaps[25] = dataclasses.replace(snaps[25], processes=tuple(p for p in snaps[25].processes if p.pid != R2))
    engine = HealthEngine(CFG)
    for s in snaps:
        report = engine.update(s)
        for j in report.jobs:
            assert not any(r.pid in {x.pid for x in j.exited} for r in j.ranks), s.timestamp
            if j.verdict is not None:
                assert R2 not in j.verdict.pids
    (job,) = report.jobs
    assert job.exited == ()


@pytest.mark.parametrize(("window", "named"), [(5.0, False), (0.0, True)])
def test_a_rank_gone_is_named_once_gone_the_cpu_window(window: float, named: bool) -> None:
    """DERIVED: every rank blocked, rank 2 gone from tick 44 (the recording ends at 45): gone
    for 1 s it is not named yet with the 5 s window (it may be a glitch of NVML's list);
    with the window at 0, at once."""
    snaps = gloo(from_stop(R1, state="S", cpu_percent=0.0))
    for k in range(44, len(snaps)):
        snaps[k] = dataclasses.replace(
            snaps[k], processes=tuple(p for p in snaps[k].processes if p.pid != R2)
        )
    v = last_verdict(snaps, dataclasses.replace(CFG, cpu_window_seconds=window))
    if named:
        assert v is not None and v.kind == "exited" and v.pids == (R2,)
    else:
        assert v is None or v.kind != "exited"


def test_a_moment_in_d_at_no_cpu_is_host_work_not_unknown() -> None:
    """DERIVED: rank 1 in D at 0 % CPU with its GPU idle for its first ticks after the stop:
    computing (I/O on its host) until held the CPU window, then disk; never unknown."""
    s, snaps = matrix_job(
        lambda k, p: (
            dataclasses.replace(p, state="D", cpu_percent=0.0) if p.pid == STOPPED and p.state == "T" else p
        )
    )
    start = next(t.timestamp for t in snaps if any(p.pid == STOPPED and p.state == "D" for p in t.processes))
    for r in judge(snaps):
        x = next((x for x in job_in(r, s.key("b")).ranks if x.pid == STOPPED), None)
        if x is not None and r.timestamp >= start:
            want = "disk" if r.timestamp - start >= MATRIX_CFG.cpu_window_seconds else "computing"
            assert x.condition == want, (r.timestamp - start, x.condition)


@pytest.mark.parametrize(
    ("reason", "again"), [("py-spy-failed", 10.0), ("timeout", 10.0), ("no-py-spy", 30.0)]
)
def test_a_stack_that_could_not_be_read_is_wanted_again_sooner(reason: str, again: float) -> None:
    """DERIVED: rank 1 busy on its host, its stack unread at tick 40 (another tracer in the
    way, py-spy too slow: asked again after 10 s; py-spy missing: after 30 s, as a read one)."""
    _, snaps = matrix_job(_busy)
    snaps = _with_where(
        snaps, 40, taken=snaps[40].timestamp, place="unread", call=None, at=None, reason=reason
    )
    asked = [
        r.timestamp - snaps[40].timestamp for r in judge(snaps)[40:] if any(p == STOPPED for p, _ in r.wanted)
    ]
    first = asked[0] if asked else float("inf")  # the recording ends 20 s after the read
    assert again <= first and (first < again + 1.1 or again > 20)
