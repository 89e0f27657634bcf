"""Job health: a GPU spinning in a collective, a stuck job, the rank the others wait for,
a rank that exited, a straggler.

Pure data, like the hint and alert engines: `HealthEngine.update(snapshot)` gives a
`HealthReport` for that tick.  Time is the snapshots' own, so a replay gives the verdicts
the live run gave.  Thresholds are the config file's `[health]` table (`HealthConfig`).

The spinning signature (per GPU).  A rank waiting in an NCCL collective runs a kernel
that polls a flag in memory, one block per channel: the graphics engine is busy all the
time (GPM's graphics_active, and NVML's utilization, ~100 %) while a few SMs poll and none
computes (SM active under `spin_max_sm`, 50 %: measured 16.7 % for a real NCCL wait on two
H200s, 0.8 % for one block; the tensor, FP64, FP32 and FP16 pipes all under
`spin_max_pipe`, 1 %), DRAM is idle and the power is near the GPU's idle power (an H100:
100 % utilization at 131 W, idle 131 W, busy 700 W; the NCCL wait: 152 W, idle 121 W).
Held longer than `spin_seconds`, a GPU is "waiting in a collective".  Without GPM only
utilization and power are known: 100 % utilization at idle power is a spinning kernel or a
stream of tiny kernels, and that is what is said.

Idle power: the lowest power gputui has seen on the GPU, but never more than
`idle_power_fraction` of its power limit (a GPU busy since gputui started has never shown
its idle power).  Power counts as idle up to `idle_power_margin` of the power limit above
that (an H100 reads 70 W without a CUDA context, 120-131 W with one idling or spinning).
Unknown power limit or power: the signature is not claimed.

The job's health.  The GPU processes of one job (one launcher such as torchrun, else one
Slurm job step or pod) are its ranks.  Each rank is, at each tick: "stopped" (state T, or t
held past TRACED_GRACE: a moment in t is py-spy reading it, and the rank stays what it
was), "disk" (state D held `cpu_window_seconds`), "zombie" (Z), "spinning" (its GPU shows
the signature), "blocked" (state S, its CPU under `blocked_max_cpu` %, its GPU idle: gloo,
or a CPU-side wait), "computing", or "unknown" (the evidence is missing: None is never read
as 0).  Spinning and blocked ranks wait, and their wait is timed.

The evidence this engine keeps across ticks, beside the conditions: where each rank's stack
was (`Snapshot.stacks`, while read during the job's current wait and for STACK_KEEP at most;
`HealthReport.wanted` asks for the ranks of a job one of whose ranks has waited half of
`stuck_seconds`), NCCL RAS's latest view (`Snapshot.nccl`, for `verdicts.nccl.KEEP`), each
rank's waiting share and how long a straggler has held.  The rules are in
gputui.telemetry.verdicts: `stuck` (once a rank has waited `stuck_seconds`: culprit,
exited, mismatch, all_wait, stuck, stalled, nccl), `straggler` (the rank the others wait
for, from each GPU's busy time without arithmetic), `nccl` (RAS's findings as evidence).

"rank N" comes from the process's environment (RANK, as torchrun sets it; `GpuProcess.rank`),
else its command line (`--rank N`, `--local-rank N`); where neither gives one the rank is
named by its PID and GPU.

A rank's CPU, for "blocked" and "computing", is the mean of its CPU figures of the last
`cpu_window_seconds` (default 5 s; the snapshots' time, so a replay judges alike; a tick
that many seconds old, give or take `TICK_JITTER`, has left the window).  A waiting rank's
torch threads wake now and then: at 1 s ticks one such tick reads 2-3 %, which under a
per-tick rule restarted the wait's clock, so the verdict depended on the tick rate (a 5 s
tick's figure is a 5 s mean already).  A rank that really computes lifts the mean over the
threshold at once (50 % for one tick: 10 % over 5 s).  The price: a rank counts as blocked
only once its mean has fallen under the threshold, up to the window after it stopped
computing.  Ticks without a figure are skipped; a window with none is unknown, never 0 %.
The window is kept per process, (PID, create_time): a reused PID starts an empty one.

Every text here is built from numbers and fixed words, and, in the verdicts, the function
and file names of a rank's stack and the hosts of RAS's answers: clipped and escaped
(`verdicts.words.shown`).  Nothing else from a process (names, command lines, job ids).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import replace

from gputui.telemetry.health_config import HealthConfig
from gputui.telemetry.health_report import WAITING, GpuHealth, HealthReport, JobHealth, JobVerdict, RankHealth
from gputui.telemetry.job_energy import EnergyMeter, hms
from gputui.telemetry.model import GpmSample, GpuProcess, GpuSample, Snapshot
from gputui.telemetry.nccl.findings import RasFinding, findings
from gputui.telemetry.nccl.model import NcclView
from gputui.telemetry.stack_evidence import RankWhere
from gputui.telemetry.verdicts import nccl, straggler, stuck
from gputui.telemetry.verdicts.words import duration
from gputui.telemetry.verdicts.words import pct as _pct

# --------------------------------------------------------------------------------------
# Pure parts
# --------------------------------------------------------------------------------------


RANK_FLAGS = ("--rank", "--local-rank", "--local_rank", "--node-rank")


def rank_number(cmdline: Sequence[str] | None) -> int | None:
    """`--rank N`, `--rank=N`, `--local-rank N`, `--local_rank=N` of a command line."""
    if not cmdline:
        return None
    for k, arg in enumerate(cmdline):
        flag, eq, value = arg.partition("=")
        if flag not in RANK_FLAGS[:3]:
            continue
        if not eq:
            value = cmdline[k + 1] if k + 1 < len(cmdline) else ""
        if value.isascii() and value.isdigit() and len(value) < 7:
            return int(value)
    return None


def idle_power(lowest: float | None, limit: float | None, cfg: HealthConfig) -> float | None:
    """The power that counts as idle for a GPU (the module docstring has the rule)."""
    if limit is None or limit <= 0:
        return None
    cap = limit * cfg.idle_power_fraction
    base = cap if lowest is None else min(lowest, cap)
    return base + limit * cfg.idle_power_margin


def arithmetic_active(w: GpmSample | None) -> float | None:
    """The busiest of GPM's tensor, FP64, FP32 and FP16 pipes [%]; None where any is unknown
    (a pipe not measured is not a pipe at 0)."""
    if w is None:
        return None
    pipes = (w.tensor_active, w.fp64_active, w.fp32_active, w.fp16_active)
    known = [v for v in pipes if v is not None]
    return max(known) if len(known) == len(pipes) else None


def polling_kernel(g: GpuSample, cfg: HealthConfig) -> bool | None:
    """GPM's part of the spinning signature: the graphics engine busy while a few SMs poll
    and none computes, DRAM idle (the module docstring).  None: GPM did not measure it, or
    a figure is missing (never read as 0).  The efficiency hints read it too: such a GPU is
    never "tiny kernels", however long it has spun."""
    w = g.activity
    if w is None:
        return None
    busy = w.graphics_active if w.graphics_active is not None else g.gpu_util
    sm, dram = w.sm_active, w.dram_active
    pipes = arithmetic_active(w)
    if busy is None or sm is None or dram is None or pipes is None:
        return None
    return (
        busy >= cfg.spin_min_util
        and sm < cfg.spin_max_sm
        and dram < cfg.spin_max_dram
        and pipes < cfg.spin_max_pipe
    )


def spin_signature(g: GpuSample, idle_max: float | None, cfg: HealthConfig) -> bool | None:
    """True: the GPU shows the spinning signature now (GPM says so); None: it might (no GPM:
    utilization ~100 % at idle power, which tiny kernels also give); False: it does not, or
    the evidence is missing."""
    if g.lost or g.power_draw is None or idle_max is None or g.power_draw > idle_max:
        return False
    if g.activity is not None:
        return polling_kernel(g, cfg) is True
    if g.gpu_util is not None and g.gpu_util >= cfg.spin_min_util:
        return None
    return False


def _job_key(p: GpuProcess) -> tuple[str, ...] | None:
    """The job a rank belongs to: its launcher, else its Slurm job step or pod.  A Slurm job
    or pod that is not root's cgroup word for it (unverified, rootless, or read from the
    process's own environment) carries its source in the key, so it is never merged with the
    real job of that id (its verdict, energy and exporter series stay its own)."""
    if p.launcher is not None:
        return ("launcher", str(p.launcher))
    j = p.job
    if j is not None and j.kind in ("slurm", "pod"):
        if j.source != "cgroup":  # not root's word for it: never merged with the real job
            return (j.kind, j.id, j.step or "", j.source)
        return (j.kind, j.id, j.step or "")
    return None


# --------------------------------------------------------------------------------------
# The engine: what must be remembered across ticks
# --------------------------------------------------------------------------------------

Ident = tuple[int, float | None]
TICK_JITTER = 0.1
"""Seconds: a tick `cpu_window_seconds` old, give or take the timer's jitter, has left the window
(at 1 s ticks and a 5 s window, always the last 5 ticks)."""
STACK_KEEP = 120.0
"""Seconds a rank's stack stays evidence for the verdicts (and only while it was read during
the job's current wait)."""
STACK_REFRESH = 30.0
"""Seconds after which a suspected job's rank's stack is wanted again."""
STACK_RETRY = 10.0
"""Seconds after which a stack that could not be read is wanted again, unless it never can be
(no py-spy, not Python, stopped): another tracer (a second py-spy) or a slow moment may have
stood in the way."""
FINAL_REASONS = ("no-py-spy", "not-python", "stopped")
SAME_PROCESS = 0.005
"""Start times closer than this are the same process (gputui.stacks.dump compares alike)."""
TRACED_GRACE = 10.0
"""Seconds a rank may be in state t (stopped by a tracer) and still count as what it was
before: `py-spy dump` stops the process it reads for a moment (gputui's own stack reads
included, bounded well under this), and a tick that lands then must not restart a wait or
name a rank "stopped by a debugger".  Held longer, it is stopped (a debugger's breakpoint)."""


class HealthEngine:
    """Keeps when each signature, state and wait began; `update` gives the report."""

    def __init__(self, config: HealthConfig | None = None) -> None:
        self.config = config or HealthConfig()
        self.reset()

    def reset(self) -> None:
        self._last_ts: float | None = None
        self._lowest_power: dict[int, float] = {}
        self._spin_since: dict[int, float] = {}
        self._state: dict[Ident, tuple[str, float]] = {}
        self._cond: dict[Ident, str] = {}
        self._where: dict[int, RankWhere] = {}
        self._nccl: NcclView | None = None
        """NCCL RAS's latest view (snapshots carry one on the tick after each round)."""
        self._ras: dict[tuple[str, ...], tuple[NcclView, tuple[int, ...], tuple[RasFinding, ...]]] = {}
        self._wait_since: dict[Ident, float] = {}
        self._cpu: dict[Ident, tuple[deque[float], deque[float]]] = {}
        self._slow: dict[tuple[str, ...], tuple[tuple[int, ...], float, float, int]] = {}
        """Per job: the ranks the others wait for, since when, the sum and count of their shares."""
        self._ranks: dict[Ident, int | None] = {}
        self._members: dict[tuple[str, ...], dict[Ident, RankHealth]] = {}
        self._exited: dict[tuple[str, ...], dict[Ident, RankHealth]] = {}
        self._energy = EnergyMeter()
        self.current = HealthReport(0.0, {}, ())

    def update(self, snap: Snapshot) -> HealthReport:
        ts = snap.timestamp
        if self._last_ts is not None and ts < self._last_ts:
            self.reset()  # a replay looped
        self._last_ts = ts
        cfg = self.config
        if not cfg.enabled:
            self.current = HealthReport(ts, {}, ())
            return self.current
        if snap.nccl is not None:
            self._nccl = snap.nccl
        if snap.stacks is not None:
            for w in snap.stacks.ranks:
                old = self._where.get(w.pid)
                if old is None or w.taken >= old.taken:
                    self._where[w.pid] = w
        spins = self._gpus(snap.gpus, ts)
        wanted: list[tuple[int, float | None]] = []
        jobs = self._jobs(snap, ts, spins[1], wanted)
        self.current = HealthReport(ts, spins[0], jobs, tuple(wanted))
        return self.current

    # ---- GPUs ----

    def _gpus(
        self, gpus: Iterable[GpuSample], ts: float
    ) -> tuple[dict[int, GpuHealth], dict[int, bool | None]]:
        cfg = self.config
        out: dict[int, GpuHealth] = {}
        now: dict[int, bool | None] = {}
        for g in gpus:
            i = g.index
            p = g.power_draw
            if p is not None and p > 0 and not g.lost:
                low = self._lowest_power.get(i)
                if low is None or p < low:
                    self._lowest_power[i] = p
            idle_max = idle_power(self._lowest_power.get(i), g.power_limit, cfg)
            sig = spin_signature(g, idle_max, cfg)
            now[i] = sig
            if sig is False:
                self._spin_since.pop(i, None)
                continue
            since = self._spin_since.setdefault(i, ts)
            seconds = ts - since
            waiting = seconds >= cfg.spin_seconds
            w = g.activity
            power = f"power {g.power_draw:.0f} W (idle up to {idle_max:.0f} W)"
            if sig:
                assert w is not None
                short = (
                    f"waiting in a collective for {duration(seconds)}?"
                    if waiting
                    else f"one kernel spinning for {duration(seconds)}"
                )
                evidence = (
                    f"GR engine {_pct(w.graphics_active)} · SM {_pct(w.sm_active)}, no arithmetic · "
                    f"DRAM {_pct(w.dram_active)} · {power} since {hms(since)}: a kernel polls while "
                    "nothing computes (NCCL waiting for a peer looks like this)"
                )
            else:
                short = (
                    f"spinning or tiny kernels for {duration(seconds)}?"
                    if waiting
                    else f"busy at idle power for {duration(seconds)}"
                )
                evidence = (
                    f"utilization {_pct(g.gpu_util)} · {power} since {hms(since)}: a kernel spinning "
                    "(a collective waiting for a peer) or tiny kernels; without GPM (Hopper and "
                    "newer) the two cannot be told apart"
                )
            out[i] = GpuHealth(i, bool(sig), since, seconds, waiting, short, evidence, idle_max)
        return out, now

    # ---- jobs ----

    def _jobs(
        self, snap: Snapshot, ts: float, spin: dict[int, bool | None], wanted: list[tuple[int, float | None]]
    ) -> tuple[JobHealth, ...]:
        gpus = {g.index: g for g in snap.gpus}
        by_job: dict[tuple[str, ...], dict[int, list[GpuProcess]]] = {}
        holders: dict[int, set[tuple[str, ...]]] = {}
        for p in snap.processes:
            key = _job_key(p)
            holders.setdefault(p.gpu_index, set()).add(key or ("pid", str(p.pid)))
            if key is not None:
                by_job.setdefault(key, {}).setdefault(p.pid, []).append(p)
        energy = {i: g.energy for i, g in gpus.items()}
        seen: set[Ident] = set()
        out = []
        for key, procs in by_job.items():
            ranks = [self._rank(rows, gpus, spin, ts) for rows in procs.values()]
            seen.update((r.pid, r.create_time) for r in ranks)
            members = {(r.pid, r.create_time): r for r in ranks}
            exited = self._exited.setdefault(key, {})
            for ident, old in self._members.get(key, {}).items():
                if ident not in members and ident not in exited:
                    exited[ident] = _gone(old, ts)
            for ident in [i for i in exited if i in members]:
                del exited[ident]  # missing from one tick's list (a glitch) and back: not gone
            self._members[key] = members
            if len(ranks) + len(exited) < 2:
                continue
            ranks.sort(key=lambda r: (r.rank if r.rank is not None else 1 << 30, r.gpu, r.pid))
            held = {g for r in ranks for g in r.gpus}
            ranks = self._placed(ranks, ts, wanted)
            shares = straggler.wait_shares(ranks, gpus, {g for g in held if len(holders.get(g, ())) > 1})
            if shares is not None:
                ranks = [replace(r, wait_share=shares.get(r.pid)) for r in ranks]
            gone = tuple(sorted(exited.values(), key=lambda r: r.exited_at or 0.0))
            first = procs[next(iter(procs))][0]
            shared = [g for g in held if len(holders.get(g, ())) > 1]
            used = self._energy.update(key, held, energy, shared, ts)
            verdict = self._verdict(key, ranks, gone, ts)
            out.append(JobHealth(key, first.launcher, tuple(ranks), gone, verdict, used, first.job))
        self._energy.forget(by_job)
        for key in [k for k in self._slow if k not in by_job]:
            del self._slow[key]
        for key in [k for k in self._ras if k not in by_job]:
            del self._ras[key]
        for key in [k for k in self._members if k not in by_job]:
            del self._members[key]  # the job has ended: every rank gone
            self._exited.pop(key, None)
        for d in (self._state, self._cond, self._wait_since, self._cpu, self._ranks):
            for ident in [k for k in d if k not in seen]:
                del d[ident]
        if self._where:
            pids = {pid for pid, _ in seen}
            for pid in [pid for pid in self._where if pid not in pids]:
                del self._where[pid]
        out.sort(key=lambda j: j.key)
        return tuple(out)

    def _rank(
        self, rows: list[GpuProcess], gpus: dict[int, GpuSample], spin: dict[int, bool | None], ts: float
    ) -> RankHealth:
        cfg = self.config
        if len(rows) > 1:
            rows = sorted(rows, key=lambda r: r.gpu_index)
        p = rows[0]
        ident = (p.pid, p.create_time)
        rank = self._ranks.get(ident, -1)
        if rank == -1:
            rank = self._ranks[ident] = p.rank if p.rank is not None else rank_number(p.cmdline)
        g = gpus.get(p.gpu_index)
        w = g.activity if g is not None else None
        util = p.sm_util if p.sm_util is not None else (g.gpu_util if g is not None else None)
        gpu_util = g.gpu_util if g is not None else None
        state_since: float | None = None
        if p.state is not None:
            prev = self._state.get(ident)
            state_since = prev[1] if prev is not None and prev[0] == p.state else ts
            self._state[ident] = (p.state, state_since)
        else:
            self._state.pop(ident, None)
        cpu = self._cpu_mean(ident, p.cpu_percent, ts)
        if p.state in ("T", "t"):
            cond = "stopped"
        elif p.state == "D" and state_since is not None and ts - state_since >= cfg.cpu_window_seconds:
            cond = "disk"  # held: a moment in D is I/O (a checkpoint's writes), not a hang
        elif p.state == "Z":
            cond = "zombie"
        elif spin.get(p.gpu_index) is not False and p.gpu_index in spin:
            cond = "spinning"
        elif (
            p.state == "S"
            and cpu is not None
            and cpu < cfg.blocked_max_cpu
            and util is not None
            and util <= cfg.blocked_max_util
        ):
            cond = "blocked"
        elif (
            p.state in ("R", "D")  # D not held yet: I/O (a checkpoint's writes) is work on the host
            or (cpu is not None and cpu >= cfg.blocked_max_cpu)
            or (gpu_util is not None and gpu_util > cfg.blocked_max_util)
        ):
            cond = "computing"
        else:
            cond = "unknown"
        if p.state == "t" and state_since is not None and ts - state_since < TRACED_GRACE:
            cond = self._cond.get(ident, "unknown")  # a tracer reads it for a moment: as it was
        self._cond[ident] = cond
        if cond in WAITING:
            waiting_since: float | None = self._wait_since.setdefault(ident, ts)
        else:
            self._wait_since.pop(ident, None)
            waiting_since = None
        return RankHealth(
            pid=p.pid,
            create_time=p.create_time,
            gpu=p.gpu_index,
            gpus=tuple(r.gpu_index for r in rows),
            rank=rank,
            util=gpu_util,
            sm=w.sm_active if w is not None else None,
            tensor=w.tensor_active if w is not None else None,
            memory=p.gpu_memory if len(rows) == 1 else _total(r.gpu_memory for r in rows),
            power=g.power_draw if g is not None else None,
            state=p.state,
            cpu_percent=cpu,
            state_since=state_since,
            condition=cond,
            waiting_since=waiting_since,
        )

    def _cpu_mean(self, ident: Ident, cpu: float | None, ts: float) -> float | None:
        """The process's mean CPU over its ticks of the last `cpu_window_seconds` (this tick
        always among them); ticks without a figure are skipped; none at all: None."""
        window = self._cpu.get(ident)
        if window is None:
            window = self._cpu[ident] = (deque(), deque())
        times, values = window  # two deques: sum() of floats, no tuple unpacking per tick
        if cpu is not None:
            times.append(ts)
            values.append(cpu)
        edge = ts - self.config.cpu_window_seconds + TICK_JITTER
        while times and times[0] < ts and times[0] <= edge:
            times.popleft()
            values.popleft()
        n = len(values)
        return sum(values) / n if n else None

    def _placed(
        self, ranks: list[RankHealth], ts: float, wanted: list[tuple[int, float | None]]
    ) -> list[RankHealth]:
        """The ranks with where their stacks were, where read during the job's current wait
        (and not older than STACK_KEEP); and, once a rank has waited half of `stuck_seconds`
        (a suspected job), the ranks whose stacks the verdict wants read (again)."""
        stall = min((r.waiting_since for r in ranks if r.waiting_since is not None), default=None)
        if stall is None:
            return ranks
        out = []
        for r in ranks:
            w = self._where.get(r.pid)
            same = w is not None and (
                w.create_time is not None
                and r.create_time is not None
                and abs(w.create_time - r.create_time) <= SAME_PROCESS
            )
            fresh = w is not None and same and w.taken >= stall and ts - w.taken <= STACK_KEEP
            out.append(replace(r, where=w) if fresh else r)
        if ts - stall >= self.config.stuck_seconds / 2:
            ask = [
                r
                for r in out
                if r.condition not in ("stopped", "zombie")
                and (r.where is None or ts - r.where.taken >= _refresh(r.where))
            ]
            ask.sort(key=lambda r: r.condition == "spinning")  # the ranks to place first
            wanted.extend((r.pid, r.create_time) for r in ask)
        return out

    def _verdict(
        self, key: tuple[str, ...], ranks: list[RankHealth], exited: tuple[RankHealth, ...], ts: float
    ) -> JobVerdict | None:
        found = None
        if stuck.long_wait(ranks, ts, self.config):
            view = self._nccl
            if view is not None and ts - view.asked_at > nccl.KEEP:
                view = None
            ras = nccl.held(self._findings(key, view, ranks), ts, self.config) if view else []
            found = stuck.judge(ranks, exited, ts, self.config, view, ras)
        if found is not None:
            self._slow.pop(key, None)
            return found
        return self._straggler(key, ranks, ts)

    def _findings(
        self, key: tuple[str, ...], view: NcclView, ranks: list[RankHealth]
    ) -> tuple[RasFinding, ...]:
        """The job's RAS findings in `view`, computed once per view (a round every 10 s)."""
        pids = tuple(r.pid for r in ranks)
        got = self._ras.get(key)
        if got is None or got[0] is not view or got[1] != pids:
            got = self._ras[key] = (view, pids, findings(view, pids))
        return got[2]

    def _straggler(self, key: tuple[str, ...], ranks: list[RankHealth], ts: float) -> JobVerdict | None:
        """The rank the others wait for, held `straggler_seconds` (gputui.telemetry.verdicts.straggler)."""
        shares = {r.pid: r.wait_share for r in ranks if r.wait_share is not None}
        found = straggler.waited_for(shares, self.config) if len(shares) == len(ranks) else None
        if found is None:
            self._slow.pop(key, None)
            return None
        named, waiting = found
        share = straggler.median(waiting)
        held = self._slow.get(key)
        if held is None or held[0] != named:
            held = (named, ts, 0.0, 0)
        held = (named, held[1], held[2] + share, held[3] + 1)
        self._slow[key] = held
        if ts - held[1] < self.config.straggler_seconds:
            return None
        return straggler.verdict(ranks, named, held[2] / held[3], held[1], ts)


def _refresh(w: RankWhere) -> float:
    """How old a rank's stack evidence may get before it is wanted again."""
    return STACK_RETRY if w.place == "unread" and w.reason not in FINAL_REASONS else STACK_REFRESH


def _total(values: Iterable[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _gone(r: RankHealth, ts: float) -> RankHealth:
    return replace(r, exited_at=ts, condition="exited", waiting_since=None, where=None)
