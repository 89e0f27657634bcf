"""The straggler: in a synchronous job the ranks step together, so the rank the job waits for is
the one that waits least, not the one whose SMs are least busy (a slower GPU, or more work,
is the busiest rank).

Each rank's GPU, at each tick (GPM): its engine is busy a share `busy` of the time (graphics
activity), and does arithmetic a share `arith` (the busiest tensor/FP pipe).  A rank that waits
in a collective keeps its engine busy without arithmetic (NCCL's spin), or, waiting on its
host, leaves it idle.  With the same kernels on every rank (data parallel), arithmetic per busy
second `arith / busy` is the same for ranks that only compute; the rank with the most is the
reference (it waits least), and each rank's waiting share is

    wait = busy x (1 - (arith / busy) / (arith_ref / busy_ref))

the part of its busy time without the reference's arithmetic.  Measured on 4 H100s (issue 32,
tests/fixtures/h100-x4-matrix, 2-rank NCCL jobs, bf16 matmuls + all_reduce each step):

  healthy                      both ranks 0-4 %
  rank 1 does 3x the matmuls   rank 0 73-75 % (busy 100 %, tensor 24 %), rank 1 0 (tensor 93 %)
  rank 1's host sleeps 0.25 s  rank 0 79-83 % (busy 100 %, tensor 14 %), rank 1 0 (busy 19 %,
                               tensor 14 %: its GPU idles while rank 0's spins)
  two unrelated trainings      24 % (bf16 against float32 on 2 H200s: different kernels, not a
  under one launcher           straggler)

so `straggler_wait` (50 %) lies between the most an unrelated pair showed and the least a real
straggler made the others wait; a rank is named when every other rank waits at least that
share and it waits under half of it, held `straggler_seconds`.  Nothing is said where the
figures cannot tell: a GPU without GPM or a figure missing, ranks sharing a GPU or a GPU
shared with another process, the reference rank doing under `MIN_ARITH` arithmetic (nothing
to compare), or a rank between the two bounds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gputui.telemetry.health_config import HealthConfig
from gputui.telemetry.health_report import JobVerdict, RankHealth
from gputui.telemetry.job_energy import hms
from gputui.telemetry.model import GpuSample
from gputui.telemetry.verdicts import words as w

MIN_ARITH = 5.0
"""Percent: the reference rank's arithmetic must be at least this for the shares to mean
anything (a spinning or idle GPU reads 0-1 %; the slowest real straggler's, 14 %)."""


def wait_shares(
    ranks: Sequence[RankHealth], gpus: Mapping[int, GpuSample], shared: set[int]
) -> dict[int, float] | None:
    """PID -> the share (0-1) of the time each rank waits at this tick; None where the
    figures cannot tell (the module docstring says when)."""
    if len(ranks) < 2 or len({r.gpu for r in ranks}) < len(ranks):
        return None  # ranks sharing a GPU share its figures
    figures: list[tuple[int, float, float]] = []
    for r in ranks:
        g = gpus.get(r.gpu)
        if r.condition != "computing" or g is None or len(r.gpus) > 1 or r.gpu in shared:
            return None
        a = g.activity
        if a is None:
            return None
        busy = a.graphics_active
        pipes = (a.tensor_active, a.fp64_active, a.fp32_active, a.fp16_active)
        if busy is None or any(v is None for v in pipes):
            return None
        arith = max(v for v in pipes if v is not None)
        figures.append((r.pid, busy, arith))
    ref = max(figures, key=lambda f: f[2] / f[1] if f[1] > 0 else 0.0)
    if ref[2] < MIN_ARITH or ref[1] <= 0:
        return None
    density = ref[2] / ref[1]
    out = {}
    for pid, busy, arith in figures:
        own = arith / busy if busy > 0 else 0.0
        out[pid] = min(1.0, max(0.0, busy / 100 * (1 - own / density)))
    return out


def median(values: Sequence[float]) -> float:
    """The median of a few numbers (statistics is not imported for it: start-up time)."""
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def waited_for(shares: Mapping[int, float], cfg: HealthConfig) -> tuple[tuple[int, ...], list[float]] | None:
    """(the PIDs the others wait for, the others' shares) at this tick, or None."""
    bound = cfg.straggler_wait / 100
    named = tuple(pid for pid, s in shares.items() if s < bound / 2)
    waiting = [s for s in shares.values() if s >= bound]
    if not named or not waiting or len(named) + len(waiting) < len(shares) or len(named) > len(waiting):
        return None
    return named, waiting


def verdict(
    ranks: Sequence[RankHealth], named: tuple[int, ...], share: float, since: float, ts: float
) -> JobVerdict:
    """The straggler verdict: the others have waited `share` (0-1) of each step since `since`."""
    who = [r for r in ranks if r.pid in named]
    names = " and ".join(r.who for r in who)
    short = f"the others wait ~{share * 100:.0f} % of each step for {names}"
    why = []
    for r in who:
        busy = r.util if r.util is not None else None
        if r.sm is not None and r.tensor is not None and busy is not None and busy >= 90:
            why.append(
                f"{r.who} waits least: its GPU computes all the time (SM {w.pct(r.sm)}, tensor "
                f"{w.pct(r.tensor)}): its work takes longer (more of it, or a slower GPU)"
            )
        else:
            why.append(
                f"{r.who} waits least: its GPU idles much of each step (utilization {w.pct(r.util)}) "
                f"while the others' spin, its host CPU {w.pct(r.cpu_percent)}: the time goes on its "
                "host (input, a slow CPU, a sleep)"
            )
    others = [r for r in ranks if r.pid not in named]
    shares = ", ".join(f"{r.who} {r.wait_share * 100:.0f} %" for r in others if r.wait_share is not None)
    why.append(
        f"the others wait (their GPUs busy without the arithmetic it does): {shares} at this tick, "
        f"~{share * 100:.0f} % since {hms(since)} ({w.duration(ts - since)})"
    )
    return JobVerdict("straggler", short, "; ".join(why), since, tuple(r.pid for r in who))
