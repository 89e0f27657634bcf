"""A replay's verdicts at any tick: what the engines say at tick N is a function of the
recording's ticks 1 to N, whatever was watched, stepped back, stepped over or skipped.

The engines (job health, hints, alerts) are pure and fed tick by tick (`Hub.publish`): each
keeps since when a condition holds.  Played in order, a replay judges as the live run did.
A seek breaks the order: a step back (`,`), a jump (`gputui --start N`, `snapshot --tick
N`), a loop.  Before the hub judges a tick that does not follow the last one it judged, it
asks `ReplayJudge.before` for the engines as they stood after the previous recorded tick:
the nearest checkpoint at or before it (a deep copy of the engines, kept every `every`
ticks), then the recorded ticks after the checkpoint fed through them silently (no alert
events: those are the past).  The work runs on the thread that publishes (the poller's, or
the command's), never on the UI's, on copies: the hub swaps them in whole, so a reader
never sees engines half-way through.

The first seek to tick N decodes and judges ticks 1 to N once (measured on a 2-GPU NCCL
recording: 0.2 ms per tick to decode, 0.07 ms to judge; bench/RESULTS.md); the checkpoints
it leaves make any later seek cost at most `every` ticks.  Ticks decoded for a catch-up are
not kept (a day's recording decoded whole would hold ~700 MB).

A snapshot the source changed on its way out (a test's wrapper that maps PIDs, say) is not
the recording's tick: the hub then judges as for live data (`position_of` gives None).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gputui.telemetry.model import MachineInfo, Snapshot

if TYPE_CHECKING:
    from gputui.telemetry.alerts import AlertEngine, AlertEvent
    from gputui.telemetry.health import HealthEngine
    from gputui.telemetry.hints import HintEngine
    from gputui.telemetry.history import History
    from gputui.telemetry.source import Seekable

CHECKPOINT_EVERY = 256
"""Ticks between two checkpoints (a copy of the engines: 0.3 to 1.3 ms and a few to ~100 KB
each, for 2 to 16 GPUs).  A recording of more than MAX_CHECKPOINTS x this many ticks spaces
them wider, so their number stays bounded."""
MAX_CHECKPOINTS = 256


@dataclass
class Engines:
    """The engines one hub runs (any may be absent)."""

    health: HealthEngine | None = None
    hints: HintEngine | None = None
    alerts: AlertEngine | None = None

    def judge(self, info: MachineInfo | None, snap: Snapshot) -> list[AlertEvent]:
        """Feed one tick to every engine, in the one order they depend on (the alerts read
        the job verdicts of the same tick); the alert events of the tick."""
        events: list[AlertEvent] = []
        report = None
        if self.health is not None:
            report = self.health.update(snap)
            if not self.health.config.enabled:
                report = None  # the job_stuck rule judges whether or not the view does
        if self.alerts is not None and info is not None:
            events = self.alerts.update(info, snap, report)
        if self.hints is not None:
            self.hints.update(snap)
        return events

    def copy(self) -> Engines:
        return copy.deepcopy(self)

    def fresh(self) -> Engines:
        """A copy as the engines were before their first tick (same settings)."""
        out = self.copy()
        for engine in (out.health, out.hints, out.alerts):
            if engine is not None:
                engine.reset()
        return out


class ReplayJudge:
    """Keeps a replay's engines a function of the recording up to the tick (module doc)."""

    def __init__(self, replay: Seekable, fresh: Engines, every: int = CHECKPOINT_EVERY) -> None:
        """`fresh`: the engines before their first tick (`Engines.fresh`)."""
        self.replay = replay
        n = len(replay.ticks)
        self.every = max(every, -(-n // MAX_CHECKPOINTS))
        self._checkpoints: dict[int, Engines] = {-1: fresh.copy()}
        """Position of the last tick fed -> a copy of the engines after it (-1: none fed)."""
        self.last: int | None = None
        """Position of the last tick the hub's engines judged (None: none yet)."""
        self.replayed = 0
        """Ticks fed silently by catch-ups so far (for tests and benchmarks)."""

    def position_of(self, snap: Snapshot) -> int | None:
        """The recording's position of `snap`, just sampled; None when `snap` is not the
        recorded tick itself."""
        pos = self.replay.position
        ticks = self.replay.ticks
        if not 0 <= pos < len(ticks) or ticks[pos] is not snap:
            return None
        return pos

    def needs_catch_up(self, pos: int) -> bool:
        return pos != (0 if self.last is None else self.last + 1)

    def before(self, pos: int, info: MachineInfo | None, history: History | None = None) -> Engines:
        """The engines as they stand after tick `pos - 1` (fresh ones for tick 0).  An empty
        `history` given is filled with the ticks before `pos` it holds (each tick decoded
        once for both)."""
        start = max(k for k in self._checkpoints if k < pos)
        engines = self._checkpoints[start].copy()
        tick = _reader(self.replay.ticks)
        charts = pos if history is None else max(0, pos - history.capacity)
        for k in range(min(charts, start + 1), pos):
            snap = tick(k)
            if k >= charts and history is not None:
                history.append(snap)
            if k > start:
                engines.judge(info, snap)
                self.replayed += 1
                self.keep(k, engines)
        return engines

    def keep(self, pos: int, engines: Engines) -> None:
        """Called after the engines judged tick `pos`: a checkpoint every `every` ticks."""
        if (pos + 1) % self.every == 0 and pos not in self._checkpoints:
            self._checkpoints[pos] = engines.copy()

    @property
    def checkpoints(self) -> int:
        return len(self._checkpoints) - 1


def history_gap(replay: Seekable, pos: int, history: History) -> bool:
    """Whether the charts' `history` lacks tick `pos - 1` (a jump forward, a loop): then it
    is built anew; a step back needs nothing (`History.append` rewinds by time itself)."""
    return pos == 0 or _reader(replay.ticks)(pos - 1).timestamp not in history.timestamps.last()


def _reader(ticks: Sequence[Snapshot]) -> Callable[[int], Snapshot]:
    """How to read a recorded tick without keeping it decoded (`peek`, where the ticks have it)."""
    peek: Callable[[int], Snapshot] | None = getattr(ticks, "peek", None)
    return peek if peek is not None else ticks.__getitem__
