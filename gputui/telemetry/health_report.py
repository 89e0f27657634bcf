"""What job health says (`HealthReport`: per GPU, per job, per rank, the verdict) and its
settings (`HealthConfig`, the [health] table).  Pure data; `health.HealthEngine` fills it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gputui.options import option
from gputui.telemetry.job_energy import JobEnergy
from gputui.telemetry.model import Job

if TYPE_CHECKING:  # (the stacks' modules load where a stack is read: not for the first frame)
    from gputui.telemetry.stack_evidence import RankWhere


@dataclass(frozen=True)
class HealthConfig:
    """The config file's [health]: how jobs' health is judged."""

    enabled: bool = option(
        "judge jobs' health: a spinning GPU, a stuck job, the rank the others wait for", True
    )
    stacks: bool = option(
        "before naming a rank of a job whose ranks wait, read where each rank is: its Python stack "
        "(py-spy dump, a few ranks at a time, off the UI thread); off: a rank busy on its host is "
        "never named",
        True,
    )
    spin_seconds: float = option(
        "how long a GPU must show the spinning signature before it counts as waiting in a collective",
        120.0,
        min=0.0,
    )
    spin_min_util: float = option(
        "spinning: GPM's graphics-engine activity (or, without GPM, NVML's utilization) at or above "
        "this percent",
        95.0,
        min=0.0,
        max=100.0,
    )
    spin_max_sm: float = option(
        "spinning: GPM's SM activity below this percent (NCCL's wait runs one block per channel: "
        "16.7 % on 2 H200s, 24 % for 32 blocks on an H100)",
        50.0,
        min=0.0,
        max=100.0,
    )
    spin_max_pipe: float = option(
        "spinning: GPM's tensor, FP64, FP32 and FP16 pipe activity each below this percent "
        "(a kernel polling a flag does no arithmetic)",
        1.0,
        min=0.0,
        max=100.0,
    )
    spin_max_dram: float = option(
        "spinning: GPM's DRAM bandwidth below this percent of the maximum", 1.0, min=0.0, max=100.0
    )
    idle_power_fraction: float = option(
        "the GPU's idle power: the lowest power seen on it, at most this fraction of its power limit",
        0.2,
        min=0.0,
        max=1.0,
    )
    idle_power_margin: float = option(
        "power up to this fraction of the power limit above the idle power counts as idle power",
        0.1,
        min=0.0,
        max=1.0,
    )
    blocked_max_cpu: float = option(
        "blocked: a rank in state S using less than this percent of a core, its GPU idle", 2.0, min=0.0
    )
    blocked_max_util: float = option(
        "blocked: the rank's GPU utilization (percent) at or below which its GPU counts as idle",
        5.0,
        min=0.0,
        max=100.0,
    )
    cpu_window_seconds: float = option(
        "blocked and computing read a rank's CPU averaged over its ticks of the last this many seconds "
        "(one busy thread's wake-up does not end a wait); 0: the tick's own figure",
        5.0,
        min=0.0,
        max=60.0,
    )
    stuck_seconds: float = option(
        "how long ranks must wait before the job counts as stuck (or a rank as the one the others wait for)",
        120.0,
        min=0.0,
    )
    straggler_wait: float = option(
        "straggler: name the rank the others wait for when each of them waits at least this percent "
        "of each step (their GPUs busy without its arithmetic) and it waits under half of that "
        "(measured: healthy 0-4 %, two unrelated trainings 24 %, stragglers 73-83 %)",
        50.0,
        min=1.0,
        max=100.0,
    )
    straggler_ratio: float = option(
        "not used any more (the straggler is judged on waiting shares: straggler_wait); kept so "
        "that a config file that sets it still loads",
        0.5,
        min=0.0,
        max=1.0,
    )
    straggler_busy_util: float = option(
        "not used any more (see straggler_wait); kept so that a config file that sets it still loads",
        50.0,
        min=0.0,
        max=100.0,
    )
    straggler_seconds: float = option("straggler: held this long", 60.0, min=0.0)


# --------------------------------------------------------------------------------------
# Reports
# --------------------------------------------------------------------------------------

WAITING = ("spinning", "blocked")
ABNORMAL = ("stopped", "disk", "zombie")
"""States a rank cannot leave by itself: each names the culprit, however many there are."""

VERDICT_KINDS = ("stuck", "culprit", "exited", "mismatch", "all_wait", "stalled", "nccl", "straggler")
"""  stuck      every rank waits (where, the stacks did not say)
  culprit    the others wait for the rank(s) named (stopped, a zombie, in D state, or, by its
             stack, in its data loader, writing a checkpoint, or elsewhere outside a collective)
  exited     a rank has gone while the others wait
  mismatch   every rank waits, at different calls (their stacks): mismatched collectives
  all_wait   every rank waits at the same call (their stacks)
  stalled    ranks wait, and a rank busy on its host could not be placed (its stack unread):
             nobody is named
  nccl       every rank here waits, and NCCL RAS names a rank on another node (missing or
             behind) or a rank's error
  straggler  the job runs, and the others wait a share of each step for the rank named"""
STUCK_VERDICTS = ("stuck", "culprit", "exited", "mismatch", "all_wait", "stalled", "nccl")
"""The verdicts that say the job is not progressing: the job_stuck alert and gputui_job_stuck
fire on them (a straggler is slow, not stuck)."""


@dataclass(frozen=True, slots=True)
class GpuHealth:
    """One GPU showing the spinning signature."""

    gpu: int
    certain: bool
    """True where GPM tells a spinning kernel from tiny kernels; False without GPM."""
    since: float
    """When the signature began (the snapshots' time)."""
    seconds: float
    waiting: bool
    """Held for `spin_seconds` at least: the finding to show."""
    short: str
    evidence: str
    idle_power_max: float | None = None
    """The highest power that counts as idle on this GPU now (watts)."""


@dataclass(frozen=True, slots=True)
class RankHealth:
    """One rank (one GPU process of a job) side by side with the others."""

    pid: int
    create_time: float | None
    gpu: int
    """Its GPU (the lowest index where it holds several: `gpus`)."""
    gpus: tuple[int, ...]
    rank: int | None
    """From its environment (RANK...) or command line (`--rank N`); None where neither says."""
    util: float | None
    """Its GPU's utilization, percent (NVML)."""
    sm: float | None
    """Its GPU's SM activity, percent (GPM)."""
    tensor: float | None
    memory: int | None
    """Bytes of GPU memory the process holds."""
    power: float | None
    """Its GPU's power, watts."""
    state: str | None
    cpu_percent: float | None
    """Its CPU, percent of a core, averaged over its ticks of the last `cpu_window_seconds`
    (what "blocked" and "computing" read); None when no tick of the window had a figure."""
    state_since: float | None
    """When gputui first saw it in `state` (None when the state is unknown)."""
    condition: str
    """"spinning", "blocked", "stopped", "disk", "zombie", "computing" or "unknown"."""
    waiting_since: float | None
    """When it began waiting (spinning or blocked), continuously; None when not waiting."""
    exited_at: float | None = None
    """For a rank that has gone: the first tick it was missing."""
    where: RankWhere | None = None
    """Where its stack was, read while the job's ranks waited (None: not read)."""
    wait_share: float | None = None
    """The share of each step it waits (0-1) while the job runs in step (straggler rule; None
    where its GPU's figures cannot tell)."""

    @property
    def who(self) -> str:
        r = f"rank {self.rank} " if self.rank is not None else ""
        return f"{r}(PID {self.pid}, GPU {self.gpu})" if r else f"PID {self.pid} (GPU {self.gpu})"


@dataclass(frozen=True, slots=True)
class JobVerdict:
    """What a job's health comes to, in one line and with its evidence."""

    kind: str
    """One of VERDICT_KINDS."""
    short: str
    """One line: "rank 1 (PID 457, GPU 0) is the one the others wait for"."""
    why: str
    """The evidence, with its numbers."""
    since: float | None
    pids: tuple[int, ...] = ()
    """The ranks it names as the cause (none for stuck, mismatch, all_wait, stalled)."""


@dataclass(frozen=True, slots=True)
class JobHealth:
    """One job's ranks as judged at a tick, and its verdict."""

    key: tuple[str, ...]
    """("launcher", "455"), or (kind, id, step) of a Slurm job step or a pod."""
    launcher: int | None
    ranks: tuple[RankHealth, ...]
    exited: tuple[RankHealth, ...]
    verdict: JobVerdict | None
    energy: JobEnergy | None = None
    """Energy of the GPUs it holds alone since gputui first saw it (gputui/telemetry/job_energy.py)."""
    job: Job | None = None
    """The Slurm job step or pod its ranks are in, as their JOB column names it (a rank's
    `GpuProcess.job`); None for a launcher's job (see `gputui.telemetry.alerts.job_label`)."""


@dataclass(frozen=True, slots=True)
class HealthReport:
    """The health engine's judgement of one tick: the GPUs that spin, the jobs."""

    timestamp: float
    gpus: dict[int, GpuHealth]
    """GPUs showing the spinning signature (`waiting` once held long enough)."""
    jobs: tuple[JobHealth, ...]
    """Jobs of two ranks or more."""
    wanted: tuple[tuple[int, float | None], ...] = ()
    """(pid, create_time) of ranks of suspected jobs whose stacks the verdicts want read
    (gputui.stacks.sampler reads a few at a time, off the UI thread)."""

    def job_of(self, pid: int) -> JobHealth | None:
        return next((j for j in self.jobs if any(r.pid == pid for r in j.ranks)), None)
