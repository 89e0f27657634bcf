"""The straggler is the rank the others wait for (gputui.telemetry.verdicts.straggler), on the
REAL 4x H100 matrix (tests/fixtures/h100-x4-matrix): a slower GPU (rank 1 does 3x the
matmuls: the busiest rank) and a slower host (rank 1 sleeps 0.25 s a step: its GPU idles while
rank 0's spins).  Each boundary test DERIVES from them only what it names, and says so."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
from matrix_support import CFG, job_in, judge, slot

from gputui.telemetry.health_config import HealthConfig
from gputui.telemetry.health_report import JobVerdict
from gputui.telemetry.model import GpuProcess, GpuSample, Snapshot
from gputui.telemetry.verdicts.straggler import MIN_ARITH, median

SLOW_GPU = ("3-mismatch-slow-gpu", "b", 2266, 2267)
SLOW_HOST = ("4-slow-host-loader-stall", "a", 2718, 2719)


def verdicts(snaps, name: str, job: str, cfg: HealthConfig = CFG) -> list[tuple[float, JobVerdict | None]]:
    s = slot(name)
    return [(r.timestamp, job_in(r, s.key(job)).verdict) for r in judge(snaps, cfg)]


def gpus_changed(name: str, change: Callable[[GpuSample], GpuSample]) -> list[Snapshot]:
    return [dataclasses.replace(t, gpus=tuple(change(g) for g in t.gpus)) for t in slot(name).ticks]


@pytest.mark.parametrize(
    ("case", "share", "words"), [(SLOW_GPU, 74, "computes all the time"), (SLOW_HOST, 81, "idles")]
)
def test_the_rank_the_others_wait_for_is_named_with_the_figure(case, share: int, words: str) -> None:
    name, job, _waiter, slow = case
    got = verdicts(slot(name).ticks, name, job)
    named = [(t, v) for t, v in got if v is not None]
    assert named and all(v.kind == "straggler" and v.pids == (slow,) for _, v in named)
    _t, v = named[-1]
    assert (
        v.short
        == f"the others wait ~{share} % of each step for rank 1 (PID {slow}, GPU {1 if job == 'a' else 3})"
    )
    assert words in v.why
    # held straggler_seconds (30) from when it began, and from then on every tick
    assert named[0][0] - named[0][1].since >= CFG.straggler_seconds
    assert [t for t, _ in named] == [t for t, _ in got if t >= named[0][0]]


@pytest.mark.parametrize("case", [SLOW_GPU, SLOW_HOST], ids=["slow-gpu", "slow-host"])
def test_the_waiting_ranks_share_is_what_the_others_wait(case) -> None:
    name, job, waiter, slow = case
    s = slot(name)
    r = judge(s.ticks)[-1]
    ranks = {x.pid: x for x in job_in(r, s.key(job)).ranks}
    assert ranks[slow].wait_share == 0.0
    assert 0.7 < (ranks[waiter].wait_share or 0) < 0.85


def test_under_the_default_straggler_seconds_nothing_yet() -> None:
    name, job, *_ = SLOW_GPU
    assert all(v is None for _, v in verdicts(slot(name).ticks, name, job, HealthConfig()))


@pytest.mark.parametrize(
    "change",
    [
        lambda g: dataclasses.replace(g, gpm=None),
        lambda g: dataclasses.replace(g, gpm=dataclasses.replace(g.gpm, tensor_active=None)) if g.gpm else g,
        lambda g: (
            dataclasses.replace(g, gpm=dataclasses.replace(g.gpm, graphics_active=None)) if g.gpm else g
        ),
        # the slow rank's tensor figure alone missing: read as 0, it would look like the waiter
        lambda g: (
            dataclasses.replace(g, gpm=dataclasses.replace(g.gpm, tensor_active=None))
            if g.gpm and g.index == 3
            else g
        ),
    ],
    ids=["no-gpm", "a-pipe-missing", "engine-missing", "the-slow-ranks-pipe-missing"],
)
def test_missing_figures_say_nothing(change) -> None:
    """DERIVED: the slow-GPU job's GPUs without GPM, or a figure missing (None is not 0)."""
    name, job, *_ = SLOW_GPU
    assert all(v is None for _, v in verdicts(gpus_changed(name, change), name, job))


def test_too_little_arithmetic_to_compare_says_nothing() -> None:
    """DERIVED: every pipe figure scaled so the busiest rank does just under MIN_ARITH."""
    name, job, *_ = SLOW_GPU

    def scale(g: GpuSample) -> GpuSample:
        a = g.gpm
        if a is None or a.tensor_active is None:
            return g
        f = (MIN_ARITH - 0.01) / 93.2
        return dataclasses.replace(g, gpm=dataclasses.replace(a, tensor_active=a.tensor_active * f))

    assert all(v is None for _, v in verdicts(gpus_changed(name, scale), name, job))


def _procs_changed(name: str, change: Callable[[Snapshot], tuple[GpuProcess, ...]]) -> list[Snapshot]:
    return [dataclasses.replace(t, processes=change(t)) for t in slot(name).ticks]


def test_a_gpu_shared_with_another_process_says_nothing() -> None:
    """DERIVED: a bystander (another process, no job) holding memory on the slow rank's GPU."""
    name, job, _waiter, slow = SLOW_GPU

    def add(t: Snapshot) -> tuple[GpuProcess, ...]:
        p = next((p for p in t.processes if p.pid == slow), None)
        extra = (
            ()
            if p is None
            else (dataclasses.replace(p, pid=4242, launcher=None, rank=None, create_time=1.0),)
        )
        return t.processes + extra

    assert all(v is None for _, v in verdicts(_procs_changed(name, add), name, job))


def test_ranks_sharing_a_gpu_say_nothing() -> None:
    """DERIVED: both ranks put on one GPU (their figures would be the same GPU's)."""
    name, job, _waiter, slow = SLOW_GPU

    def same(t: Snapshot) -> tuple[GpuProcess, ...]:
        return tuple(dataclasses.replace(p, gpu_index=2) if p.pid == slow else p for p in t.processes)

    assert all(v is None for _, v in verdicts(_procs_changed(name, same), name, job))


def test_a_rank_that_stops_computing_breaks_the_hold() -> None:
    """DERIVED: rank 1 stopped (state T) for one tick at 40 s: not computing, so the straggle
    is timed afresh from the next tick."""
    name, job, _waiter, slow = SLOW_GPU
    s = slot(name)
    snaps = list(s.ticks)
    snaps[40] = dataclasses.replace(
        snaps[40],
        processes=tuple(
            dataclasses.replace(p, state="T") if p.pid == slow else p for p in snaps[40].processes
        ),
    )
    got = verdicts(snaps, name, job, dataclasses.replace(CFG, straggler_seconds=5))
    assert got[40][1] is None
    after = [v for t, v in got[41:] if v is not None]
    assert after and all(v.since == snaps[41].timestamp for v in after)


def test_median() -> None:
    assert median([3.0]) == 3.0 and median([1.0, 3.0]) == 2.0 and median([5.0, 1.0, 3.0]) == 3.0


# --------------------------------------------------------------------------------------
# the bounds of waited_for (pure: shares in, the ranks named out)
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shares", "named"),
    [
        ({1: 0.0, 2: 0.5}, (1,)),  # the others wait exactly straggler_wait: named
        ({1: 0.0, 2: 0.4999}, None),  # just under it: nobody
        ({1: 0.2499, 2: 0.6}, (1,)),  # it waits just under half of straggler_wait: named
        ({1: 0.25, 2: 0.6}, None),  # exactly half: it waits too much to be the cause
        ({1: 0.0, 2: 0.3, 3: 0.7}, None),  # a rank between the bounds: cannot tell
        ({1: 0.0, 2: 0.0, 3: 0.7}, None),  # two named for one waiting: not a straggler
        ({1: 0.0, 2: 0.0, 3: 0.7, 4: 0.6}, (1, 2)),  # two named for two waiting
        ({1: 0.9, 2: 0.8}, None),  # everybody waits: nobody named here
    ],
)
def test_waited_for_bounds(shares: dict[int, float], named: tuple[int, ...] | None) -> None:
    from gputui.telemetry.verdicts.straggler import waited_for

    got = waited_for(shares, HealthConfig(straggler_wait=50.0))
    assert (got[0] if got else None) == named


def test_a_config_file_of_the_old_straggler_rule_still_loads() -> None:
    from gputui.config import parse

    cfg, errors = parse(
        "[health]\nstraggler_ratio = 0.9\nstraggler_busy_util = 40\nstraggler_wait = 60\n", "c.toml"
    )
    assert errors == [] and cfg.health.straggler_wait == 60.0
