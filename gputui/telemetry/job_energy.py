"""Energy per job: from NVML's total-energy counter (GpuSample.energy, millijoules since the
driver loaded, read on the slow cadence), the joules a job's GPUs used since gputui first saw
the job on them.

Only GPUs the job holds alone count: a GPU where a process outside the job held memory at
any tick since is "shared" (its energy cannot be split between the holders), and is named
instead.  The counter is read every 10 s, so a figure is good to 10 s of the GPU's power.
A counter that went backwards (the driver reloaded) starts the count again.  A GPU whose
counter is unknown (None, never 0) is left out and named in `unknown`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass


def hms(ts: float) -> str:
    """A time of day, local: 14:03:07."""
    return time.strftime("%H:%M:%S", time.localtime(ts))


MJ_PER_WH = 3_600_000.0
"""Millijoules in a watt-hour."""


@dataclass(frozen=True, slots=True)
class JobEnergy:
    """The energy used by the GPUs a job holds alone, since gputui first saw it."""

    joules: float | None
    """Used by the GPUs the job holds alone since `since`; None when there is none to count
    (every GPU shared, or no counter read twice yet)."""
    since: float | None
    """When counting began: the first tick gputui saw the job with a counter reading."""
    gpus: tuple[int, ...]
    """The GPUs counted (held alone)."""
    shared: tuple[int, ...]
    """The job's GPUs another process held memory on since: not counted."""
    unknown: tuple[int, ...] = ()
    """The job's GPUs without an energy counter reading."""

    @property
    def wh(self) -> float | None:
        return None if self.joules is None else self.joules / 3600.0

    def text(self) -> str:
        """ "4.2 Wh on GPU 0, 1 since 14:03:07", "GPU 0 shared: energy not split"."""
        parts = []
        if self.joules is not None and self.gpus:
            gpus = ", ".join(map(str, self.gpus))
            since = f" since {hms(self.since)}" if self.since is not None else ""
            parts.append(f"{self.joules / 3600.0:.2f} Wh on GPU {gpus}{since}")
        if self.shared:
            parts.append(f"GPU {', '.join(map(str, self.shared))} shared: energy not split")
        if self.unknown:
            parts.append(f"GPU {', '.join(map(str, self.unknown))}: no energy counter")
        return "; ".join(parts) or "energy: not read yet"


class EnergyMeter:
    """Remembers each job's counter readings at first sight and which of its GPUs were shared."""

    def __init__(self) -> None:
        self._start: dict[tuple[str, ...], dict[int, tuple[int, float]]] = {}
        self._shared: dict[tuple[str, ...], set[int]] = {}

    def reset(self) -> None:
        self._start.clear()
        self._shared.clear()

    def update(
        self,
        key: tuple[str, ...],
        gpus: Iterable[int],
        energy: dict[int, int | None],
        shared_now: Iterable[int],
        ts: float,
    ) -> JobEnergy:
        start = self._start.setdefault(key, {})
        shared = self._shared.setdefault(key, set())
        shared.update(shared_now)
        joules = 0.0
        counted: list[int] = []
        unknown: list[int] = []
        for gpu in sorted(set(gpus)):
            mj = energy.get(gpu)
            if gpu in shared:
                continue
            if mj is None:
                unknown.append(gpu)
                continue
            first = start.get(gpu)
            if first is None or mj < first[0]:  # first sight, or the counter went back
                start[gpu] = first = (mj, ts)
            joules += (mj - first[0]) / 1000.0
            counted.append(gpu)
        since = min((start[g][1] for g in counted), default=None)
        return JobEnergy(
            joules if counted else None,
            since,
            tuple(counted),
            tuple(sorted(shared)),
            tuple(unknown),
        )

    def forget(self, live: Iterable[tuple[str, ...]]) -> None:
        """Drop the jobs not in `live` (ended)."""
        keep = set(live)
        for d in (self._start, self._shared):
            for key in [k for k in d if k not in keep]:
                del d[key]
