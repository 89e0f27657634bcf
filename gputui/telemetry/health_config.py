"""The health room's settings and words: `HealthConfig` (the config file's [health] table:
how jobs' health is judged) and the verdicts' kinds.

Apart from the reports (`health_report`) and the engine (`health`), as the alert rules'
settings are (`alert_config`): reading the config file, or drawing a verdict line, does not
build the report classes; the monitor makes its engines on the poller's thread, after the
first frame.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputui.options import option


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
