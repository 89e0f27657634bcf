"""The alert rules' settings: the config file's [alerts] tables (`AlertConfig`).

Apart from the engine (`gputui.telemetry.alerts`) so that reading the config file does not
load the engine: the monitor makes its engines on the poller's thread, after the first frame.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputui.options import option


@dataclass(frozen=True)
class ThresholdRule:
    """Fires when the value has been >= `above` for `for_seconds`; clears below `clear_below`."""

    enabled: bool = option("evaluate this rule")
    above: float = option("fire at or above this value")
    clear_below: float = option("clear when the value falls below this (<= above)")
    for_seconds: float = option("the value must stay at or above the threshold this long", min=0)


@dataclass(frozen=True)
class IdleRule:
    """A GPU doing nothing while memory is held on it."""

    enabled: bool = option("evaluate this rule")
    minutes: float = option("idle this long before the alert fires", min=0)
    max_util: int = option("utilization at or below this (percent) counts as idle", min=0, max=100)
    min_memory_mib: int = option("memory used at or above this (MiB) counts as held", min=0)


@dataclass(frozen=True)
class ProcessAgeRule:
    """One process holding GPU memory for a long time (forgotten notebooks, zombies)."""

    enabled: bool = option("evaluate this rule")
    hours: float = option("fire when a process has held GPU memory this long", min=0)
    min_memory_mib: int = option("only processes holding at least this much GPU memory (MiB)", min=0)


@dataclass(frozen=True)
class EfficiencyRule:
    """A GPM efficiency hint that holds for a while (gputui.telemetry.hints)."""

    enabled: bool = option("evaluate this rule")
    minutes: float = option("the hint must hold this long, without a break, before the alert fires", min=0)


@dataclass(frozen=True)
class Switch:
    """A rule with nothing to set but whether it is evaluated."""

    enabled: bool = option("evaluate this rule")


@dataclass(frozen=True)
class AlertConfig:
    """The config file's [alerts]: one rule per condition a GPU or process is alerted on."""

    memory: ThresholdRule = option(
        "GPU memory used, percent of the GPU's total",
        factory=lambda: ThresholdRule(True, 95.0, 90.0, 0.0),
    )
    temperature: ThresholdRule = option(
        "GPU core temperature, °C (an H100/H200 slows down at about 87-90 °C)",
        factory=lambda: ThresholdRule(True, 85.0, 80.0, 10.0),
    )
    power: ThresholdRule = option(
        "power draw, percent of the enforced power limit (a GPU at its cap is normal under load)",
        factory=lambda: ThresholdRule(False, 100.0, 95.0, 60.0),
    )
    ecc: ThresholdRule = option(
        "volatile uncorrected ECC errors since the driver loaded (count)",
        factory=lambda: ThresholdRule(True, 1.0, 1.0, 0.0),
    )
    xid: ThresholdRule = option(
        "Xid events (the driver's critical-error reports) since gputui started watching (count)",
        factory=lambda: ThresholdRule(True, 1.0, 1.0, 0.0),
    )
    gpu_lost: Switch = option("a GPU fell off the bus (Xid 79)", factory=lambda: Switch(True))
    idle_memory: IdleRule = option(
        'a GPU idle while memory is held on it: "reserved but wasted"',
        factory=lambda: IdleRule(True, 30.0, 0, 1024),
    )
    process_age: ProcessAgeRule = option(
        "a process holding GPU memory for longer than this",
        factory=lambda: ProcessAgeRule(False, 24.0, 1),
    )
    efficiency: EfficiencyRule = option(
        "a GPM efficiency hint (float32 without tensor cores, tiny kernels, memory-bound; "
        "thresholds in [hints]) holding for this long: Hopper and newer",
        factory=lambda: EfficiencyRule(False, 10.0),
    )
    job_stuck: Switch = option(
        "a job stuck in a collective, the rank the others wait for, or a rank that exited while "
        "the others wait (fires once ranks have waited [health] stuck_seconds)",
        factory=lambda: Switch(True),
    )
