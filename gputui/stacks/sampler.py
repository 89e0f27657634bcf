"""The stacks the job verdicts want, read off the UI thread: a few ranks a pass, a pass at most
every `pass_gap`, only ranks of a job already suspected (`HealthReport.wanted`), each process
at most once per `min_gap`.

The poller's thread calls `attach` with each live snapshot before the verdict engine judges it
(the stacks read since the previous tick go into `Snapshot.stacks`, so a recording keeps them
and a replay judges as the live run did), then `want` with what the engine asks for.  `want`
never waits: it starts one pass of `py-spy dump` (gputui.stacks.dump, its printed form, read
with `parse_text`) on a thread of its own unless one is still running, each dump bounded by
`timeout` (under health.TRACED_GRACE: the process py-spy stops for a moment must not read as
stopped by a debugger), the children killed and reaped past it.  Where py-spy is missing or
may not read a process, the evidence says so (`RankWhere.reason`) and costs no child.

Only for this machine's processes: a replay's snapshots carry the stacks they recorded and are
never given a sampler.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import replace
from types import EllipsisType
from typing import TYPE_CHECKING

from gputui.telemetry.model import Snapshot
from gputui.telemetry.stack_evidence import RankWhere, StackEvidence

if TYPE_CHECKING:
    from gputui.stacks.dump import Background
    from gputui.stacks.model import StackResult
    from gputui.telemetry.health import HealthEngine
    from gputui.telemetry.health_config import HealthConfig

PER_PASS = 4
"""Processes one pass reads at most (a suspected job's ranks: the ones to place first)."""
MIN_GAP = 10.0
"""Seconds before the same process (PID, start time) is read again, whatever is asked."""
PASS_GAP = 20.0
"""Seconds between the starts of two passes: the sampler's whole cost is bounded, however many
jobs are suspected (a dump costs ~8 ms of CPU, py-spy's included: 4 ranks every 20 s is 0.16 %
of a core at most; bench/bench_jobs.py verdicts)."""
TIMEOUT = 5.0
"""Seconds one dump may take (health.TRACED_GRACE is 10 s)."""

Ident = tuple[int, float | None]
_LIVE: weakref.WeakSet[StackSampler] = weakref.WeakSet()


class StackSampler:
    def __init__(
        self,
        *,
        per_pass: int = PER_PASS,
        min_gap: float = MIN_GAP,
        pass_gap: float = PASS_GAP,
        timeout: float = TIMEOUT,
        py_spy: str | EllipsisType | None = ...,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.per_pass = per_pass
        self.min_gap = min_gap
        self.pass_gap = pass_gap
        self._last_pass = -1e18
        self.timeout = timeout
        self._py_spy = py_spy
        self._clock = clock
        self._lock = threading.Lock()
        self._arrived: list[RankWhere] = []
        self._asked: dict[Ident, float] = {}
        self._pass: Background | None = None
        self.passes = 0
        """Passes started (for tests and the benchmark)."""
        _LIVE.add(self)

    def attach(self, snap: Snapshot) -> Snapshot:
        """`snap` with the stacks read since the previous call (unchanged when none arrived)."""
        with self._lock:
            got, self._arrived = self._arrived, []
        if not got:
            return snap
        return replace(snap, stacks=StackEvidence(tuple(got)))

    def want(self, wanted: Sequence[Ident]) -> bool:
        """Start reading some of `wanted` (in its order) unless a pass is still running; True
        when a pass was started.  Never blocks."""
        if not wanted or self.busy:
            return False
        now = time.monotonic()
        if now - self._last_pass < self.pass_gap:
            return False
        pick = [t for t in dict.fromkeys(wanted) if now - self._asked.get(t, -1e18) >= self.min_gap]
        pick = pick[: self.per_pass]
        if not pick:
            return False
        for t in pick:
            self._asked[t] = now
        self._last_pass = now
        for t in [t for t, at in self._asked.items() if now - at > 10 * self.min_gap]:
            del self._asked[t]
        from gputui.stacks import dump  # asyncio and the parser: only once a job is suspected

        if self._py_spy is ...:
            self._py_spy = dump.find_py_spy()
        self.passes += 1
        self._pass = dump.dump_in_background(
            pick, on_result=self._arrive, timeout=self.timeout, py_spy=self._py_spy, text=True
        )
        return True

    @property
    def busy(self) -> bool:
        """A pass is running."""
        return self._pass is not None and self._pass.thread.is_alive()

    def _arrive(self, res: StackResult) -> None:
        from gputui.stacks.where import rank_where

        where = rank_where(res, self._clock())
        with self._lock:
            self._arrived.append(where)

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the running pass (tests, the benchmark); True when none runs."""
        run = self._pass
        return run is None or run.join(timeout)

    def close(self) -> None:
        """Stop: the py-spy children still running are killed and reaped."""
        run = self._pass
        if run is not None:
            run.cancel()
            run.join(5.0)


class Evidence:
    """A verdict engine fed each snapshot with the stacks it wanted attached, for the headless
    writers that have no Hub (`gputui record`, `snapshot --watch`): the snapshot they write
    carries the evidence, so a replay judges as this run did."""

    def __init__(self, engine: HealthEngine, sampler: StackSampler | None) -> None:
        self.engine = engine
        self.sampler = sampler

    def judged(self, snap: Snapshot) -> Snapshot:
        """`snap` with the stacks read since the last tick; the engine has judged it."""
        sampler = self.sampler
        if sampler is not None:
            snap = sampler.attach(snap)
        self.engine.update(snap)
        if sampler is not None:
            sampler.want(self.engine.current.wanted)
        return snap

    def close(self) -> None:
        if self.sampler is not None:
            self.sampler.close()


def for_source(local_processes: bool, config: HealthConfig) -> StackSampler | None:
    """A sampler for a source of this machine's processes with [health] stacks on; else None."""
    return StackSampler() if local_processes and config.stacks else None


def close_all() -> None:
    """Close every sampler (gputui is leaving): no py-spy child is left running."""
    for sampler in list(_LIVE):
        sampler.close()
