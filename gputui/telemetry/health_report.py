"""What job health says (`HealthReport`: per GPU, per job, per rank, the verdict).  Pure
data; `health.HealthEngine` fills it.  Its settings and the verdicts' kinds are in
`health_config`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gputui.telemetry.job_energy import JobEnergy
from gputui.telemetry.model import Job

if TYPE_CHECKING:  # (the stacks' modules load where a stack is read: not for the first frame)
    from gputui.telemetry.stack_evidence import RankWhere


WAITING = ("spinning", "blocked")
ABNORMAL = ("stopped", "disk", "zombie")
"""States a rank cannot leave by itself: each names the culprit, however many there are."""


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
