"""Bounded history: fixed-size ring buffers of floats (NaN = no value), per GPU and metric,
for the host, and per GPU process (its GPU memory and SM %) while it lives."""

from __future__ import annotations

import bisect
import itertools
import math
from array import array
from collections.abc import Iterator

from gputui.telemetry.metric_types import GpuMetric
from gputui.telemetry.metrics import GPU_METRICS as ALL_GPU_METRICS
from gputui.telemetry.model import Snapshot
from gputui.telemetry.process_metrics import PROCESS_HISTORY_FIELDS

NAN = math.nan

HISTORY: tuple[GpuMetric, ...] = tuple(m for m in ALL_GPU_METRICS if m.history)
"""The registry's quantities kept in history (NaN where a value is missing)."""
GPU_METRICS = tuple(m.field for m in HISTORY)
"""Their series' names (GpuSample fields; GPM's figures under their GpmSample names)."""
#: Host series: name -> how to read it off a HostSample.
HOST_METRICS = ("cpu_percent", "mem_used")

DEFAULT_CAPACITY = 3600
"""One hour at 1 Hz: 16 GPUs x one series per HISTORY metric (25) x 3600 x 8 bytes =
11.5 MB at most."""

PROCESS_METRICS = PROCESS_HISTORY_FIELDS
"""GpuProcess fields kept per process (the registry's `history=True` columns)."""
PROCESS_CAPACITY = 600
"""Ten minutes at 1 Hz per process."""
MAX_PROCESSES = 512
"""Processes with history at once: 512 x 2 metrics x 600 x 8 bytes = 4.9 MB at most.  A
process beyond that (a fork storm) is shown without history."""


class Ring:
    """A fixed-capacity ring of floats; the oldest value is dropped when full."""

    __slots__ = ("_buf", "_capacity", "_head", "_len")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._capacity = capacity
        self._buf = array("d", [NAN]) * capacity
        self._head = 0  # next write position
        self._len = 0

    def append(self, value: float | None) -> None:
        self._buf[self._head] = NAN if value is None else float(value)
        self._head = (self._head + 1) % self._capacity
        if self._len < self._capacity:
            self._len += 1

    def __len__(self) -> int:
        return self._len

    def drop_newest(self, n: int) -> None:
        """Forget the newest `n` values."""
        n = max(0, min(n, self._len))
        self._head = (self._head - n) % self._capacity
        self._len -= n

    @property
    def capacity(self) -> int:
        return self._capacity

    def last(self, n: int | None = None) -> list[float]:
        """The newest `n` values (all when None), oldest first."""
        n = self._len if n is None else max(0, min(n, self._len))
        start = (self._head - n) % self._capacity
        if start + n <= self._capacity:
            return self._buf[start : start + n].tolist()
        return self._buf[start:].tolist() + self._buf[: (start + n) - self._capacity].tolist()

    def latest(self) -> float | None:
        if not self._len:
            return None
        v = self._buf[(self._head - 1) % self._capacity]
        return None if math.isnan(v) else v

    def __iter__(self) -> Iterator[float]:
        return iter(self.last())


class History:
    """Ring buffers per GPU per metric, plus host series and tick timestamps.

    Keyed by sample time: a sample no newer than the newest kept (a replay stepped back or
    looping, a clock set back) first drops every sample at or after its time, so a chart
    never shows samples from after the one on screen, and a replay's loop starts a new
    history instead of piling its samples after the previous loop's."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._gpus: dict[int, dict[str, Ring]] = {}
        self.host: dict[str, Ring] = {m: Ring(capacity) for m in HOST_METRICS}
        self.timestamps = Ring(capacity)
        self.ticks = 0
        self.process_capacity = min(capacity, PROCESS_CAPACITY)
        self._procs: dict[tuple[int, int], tuple[float | None, dict[str, Ring]]] = {}
        """(GPU, PID) -> (start time, rings); a process that ends is dropped."""

    def append(self, snap: Snapshot) -> None:
        newest = self.timestamps.latest()
        if newest is not None and snap.timestamp <= newest:
            self._rewind(snap.timestamp)
        self.ticks += 1
        self.timestamps.append(snap.timestamp)
        for g in snap.gpus:
            rings = self._gpus.get(g.index)
            if rings is None:
                rings = self._gpus[g.index] = {m: Ring(self.capacity) for m in GPU_METRICS}
            for m in HISTORY:
                rings[m.field].append(m.value(g))
        h = snap.host
        self.host["cpu_percent"].append(h.cpu_percent if h else None)
        self.host["mem_used"].append(h.mem_used if h else None)
        self._append_processes(snap)

    def _append_processes(self, snap: Snapshot) -> None:
        procs = self._procs
        seen: set[tuple[int, int]] = set()
        for p in snap.processes:
            key = (p.gpu_index, p.pid)
            seen.add(key)
            entry = procs.get(key)
            if entry is None or entry[0] != p.create_time:  # new, or the PID was reused
                if entry is None and len(procs) >= MAX_PROCESSES:
                    continue
                entry = procs[key] = (
                    p.create_time,
                    {m: Ring(self.process_capacity) for m in PROCESS_METRICS},
                )
            rings = entry[1]
            for m in PROCESS_METRICS:
                rings[m].append(getattr(p, m))
        if len(seen) != len(procs):
            for key in [k for k in procs if k not in seen]:
                del procs[key]

    def _rewind(self, timestamp: float) -> None:
        """Drop the samples taken at or after `timestamp` (the times kept are increasing)."""
        times = self.timestamps.last()
        n = len(times) - bisect.bisect_left(times, timestamp)
        if n >= len(times):
            self.clear()
            return
        self.ticks -= n
        self.timestamps.drop_newest(n)
        for rings in [*self._gpus.values(), self.host]:
            for ring in rings.values():
                ring.drop_newest(n)
        # a process's rings cover the newest ticks without a gap (one missing tick drops
        # the process), so its newest n values are exactly those of the dropped ticks
        for _, rings in self._procs.values():
            for ring in rings.values():
                ring.drop_newest(n)

    def process_series(self, gpu: int, pid: int, metric: str, n: int | None = None) -> list[float]:
        """A process's history on one GPU since gputui first saw it there (oldest first)."""
        entry = self._procs.get((gpu, pid))
        return entry[1][metric].last(n) if entry is not None else []

    @property
    def process_count(self) -> int:
        return len(self._procs)

    def series(self, gpu: int, metric: str, n: int | None = None) -> list[float]:
        rings = self._gpus.get(gpu)
        if rings is None:
            return []
        return rings[metric].last(n)

    def columns(self, gpu: int, metric: str, n: int, per: int) -> list[float]:
        """The newest `n` columns of `per` ticks each, oldest first: each the mean of its
        ticks' values (NaN where none has one).  Columns are aligned on the tick count, so a
        column once complete never changes and a chart of them moves once every `per`
        ticks; the newest ticks that do not fill a column yet are left out.  `per` 1: the
        newest `n` values (`series`)."""
        rings = self._gpus.get(gpu)
        if rings is None or n <= 0:
            return []
        ring = rings[metric]
        if per <= 1:
            return ring.last(n)
        waiting = self.ticks % per
        values = ring.last(min(len(ring), n * per + waiting))
        if waiting:
            values = values[:-waiting]
        out: list[float] = []
        for stop in range(len(values), 0, -per):
            known = [v for v in values[max(0, stop - per) : stop] if not math.isnan(v)]
            out.append(sum(known) / len(known) if known else NAN)
            if len(out) == n:
                break
        out.reverse()
        return out

    def spacing(self, last: int = 8) -> float | None:
        """The median time between the newest `last` + 1 samples (None before two)."""
        times = self.timestamps.last(last + 1)
        gaps = sorted(b - a for a, b in itertools.pairwise(times))
        return gaps[len(gaps) // 2] if gaps else None

    def gpu_indices(self) -> list[int]:
        return sorted(self._gpus)

    def clear(self) -> None:
        self.__init__(self.capacity)  # type: ignore[misc]
