"""Where the poller's snapshots land: the latest one, the history, the active alerts, and who
to tell.

Shared by the TUI and headless consumers (watch, exporter, snapshot): the poller thread calls
`publish`; readers take the lock only to copy what they need.

The engines (alerts, hints, job health) judge every snapshot, in order.  A consumer hands
them over made (`Hub(alerts=..., ...)`), or hands a function that makes them
(`make_engines`): the monitor does, so that its first frame waits neither for the engines'
modules nor for their first judgement.  They are then made on the first `judge_pending()`
(or the first `publish` that judges, on the poller's thread), which first judges the
snapshots published before them, in order: what they say is the same, only later.

A hub that `follow`s a replay judges each tick as a function of the recording up to it,
whatever was stepped or skipped (`replay_judge`, imported only for a replay, once the
engines are made): a tick out of order has the engines (and the charts' history and the NCCL
view) as they stood after the tick before, built aside on the publishing thread, swapped in
whole.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from gputui.telemetry.history import DEFAULT_CAPACITY, History
from gputui.telemetry.model import MachineInfo, Snapshot

if TYPE_CHECKING:
    from gputui.stacks.sampler import StackSampler
    from gputui.telemetry.alerts import Alert, AlertEngine, AlertEvent
    from gputui.telemetry.health import HealthEngine
    from gputui.telemetry.health_report import HealthReport
    from gputui.telemetry.hints import Hint, HintEngine
    from gputui.telemetry.nccl.model import NcclView
    from gputui.telemetry.replay_judge import Engines, ReplayJudge
    from gputui.telemetry.source import Seekable


class Hub:
    def __init__(
        self,
        capacity: int = DEFAULT_CAPACITY,
        alerts: AlertEngine | None = None,
        hints: HintEngine | None = None,
        health: HealthEngine | None = None,
        *,
        make_engines: Callable[[], Engines] | None = None,
    ) -> None:
        self.history = History(capacity)
        self.latest: Snapshot | None = None
        self.info: MachineInfo | None = None
        self.alerts = alerts
        """Evaluated on every published snapshot when set."""
        self.hints = hints
        """Efficiency hints, evaluated on every published snapshot when set."""
        self.health = health
        """Job health, evaluated on every published snapshot when set (before the alerts,
        whose job_stuck rule reads its verdicts)."""
        self.nccl: NcclView | None = None
        """NCCL RAS's latest view: snapshots carry one only on the tick after a round of
        questions (`Snapshot.nccl`); this keeps it for the ticks between."""
        self.stacks: StackSampler | None = None
        """Reads the stacks the verdicts want (this machine's processes only: `use_stacks`)."""
        self._stacks_factory: Callable[[], StackSampler | None] | None = None
        """Makes `stacks` the first time the verdicts want a stack (`stacks_when_wanted`)."""
        self.lock = threading.Lock()
        self.judge: ReplayJudge | None = None
        """Set by `follow` for a replay (once the engines are made, where `make_engines`)."""
        self._following: tuple[Seekable, int | None] | None = None
        """The replay `follow` was given, and its checkpoint spacing."""
        self._make_engines = make_engines
        """Makes the engines on the first `judge_pending()`; None once they are made."""
        self._engines_lock = threading.Lock()
        self._judging = threading.Lock()
        """One judgement at a time, in the order published (the poller's and a worker's)."""
        self._unjudged: list[tuple[Snapshot, int]] = []
        """Snapshots published before the engines were made, oldest first, each with the
        position its replay stood at then (-1: not following one)."""
        self._nccl_recorded: bool | None = None
        """Whether the replay's recording holds a RAS view at all (None: not read yet)."""
        self._listeners: list[Callable[[Snapshot], None]] = []
        self._info_listeners: list[Callable[[MachineInfo], None]] = []
        self._alert_listeners: list[Callable[[list[AlertEvent]], None]] = []

    def subscribe(self, on_snapshot: Callable[[Snapshot], None]) -> None:
        self._listeners.append(on_snapshot)

    def subscribe_info(self, on_info: Callable[[MachineInfo], None]) -> None:
        self._info_listeners.append(on_info)

    def subscribe_alerts(self, on_events: Callable[[list[AlertEvent]], None]) -> None:
        """Called (on the publishing thread) with the alerts that fired or cleared at a tick."""
        self._alert_listeners.append(on_events)

    def set_info(self, info: MachineInfo) -> None:
        with self.lock:
            self.info = info
        for listener in self._info_listeners:
            listener(info)

    def use_stacks(self, sampler: StackSampler | None) -> None:
        """Read the ranks' stacks the verdicts want with `sampler` (for a live source of this
        machine's processes; None for a replay, whose snapshots carry their own)."""
        old, self.stacks = self.stacks, sampler
        if old is not None and old is not sampler:
            old.close()

    def stacks_when_wanted(self, factory: Callable[[], StackSampler | None]) -> None:
        """`use_stacks(factory())` the first time the verdicts want a stack: the monitor's
        start pays for no stack reader (a job must be suspected first)."""
        self.use_stacks(None)
        self._stacks_factory = factory

    def follow(self, replay: Seekable | None, every: int | None = None) -> None:
        """Judge the snapshots of `replay` (its ticks as `sample` returns them) as a function
        of the recording up to each one, with a copy of the engines kept every `every` ticks
        (None: `replay_judge.CHECKPOINT_EVERY`); None: live data, judged in the order it
        comes."""
        with self.lock:
            self._nccl_recorded = None
            self._following = None if replay is None else (replay, every)
            made = self._make_engines is None
            self.judge = self._replay_judge() if made else None  # (else: made with them)

    def _replay_judge(self) -> ReplayJudge | None:
        """A judge of the replay followed, from the engines as they are now (fresh copies)."""
        if self._following is None:
            return None
        from gputui.telemetry.replay_judge import CHECKPOINT_EVERY, ReplayJudge  # (a replay only)

        replay, every = self._following
        return ReplayJudge(replay, self._engines().fresh(), CHECKPOINT_EVERY if every is None else every)

    def _engines(self) -> Engines:
        from gputui.telemetry.replay_judge import Engines  # (loaded with the engines)

        return Engines(self.health, self.hints, self.alerts)

    def publish(self, snap: Snapshot, *, judge: bool = True) -> None:
        """Store `snap` as the latest tick and in the history, and have the engines judge it.
        `judge=False` (the monitor's first frame, on the UI thread): engines not made yet are
        left so; `snap` waits for them (`judge_pending`)."""
        stacks = self.stacks
        if stacks is not None:  # live only: a replay's snapshots carry the stacks they recorded
            snap = stacks.attach(snap)
        if judge:
            self._ensure_engines()
        with self.lock:
            waits = self._make_engines is not None
            if waits:  # not made yet: judged once they are
                replay = self._following[0] if self._following is not None else None
                self._unjudged.append((snap, -1 if replay is None else replay.position))
                self._store(snap, following=False)
        if waits:
            self._tell(snap, [])
            return
        with self._judging:
            earlier = self._judge_waiting()
            events = self._judge_new(snap)
            with self.lock:
                wanted = self._wanted() if stacks is not None or self._stacks_factory is not None else ()
        if wanted and stacks is None and self._stacks_factory is not None:
            factory, self._stacks_factory = self._stacks_factory, None
            self.use_stacks(factory())
            stacks = self.stacks
        if stacks is not None and wanted:
            stacks.want(wanted)
        for before, before_events in earlier:
            self._tell(before, before_events, listeners=False)
        self._tell(snap, events)

    def judge_pending(self) -> bool:
        """Make the engines if they are not made yet (`make_engines`) and have them judge the
        snapshots published before: True when there were such snapshots (what is shown of
        the latest may have changed).  Any thread; a worker's in the monitor."""
        self._ensure_engines()
        with self._judging:
            judged = self._judge_waiting()
        for snap, events in judged:
            self._tell(snap, events, listeners=False)
        return bool(judged)

    def _ensure_engines(self) -> bool:
        """Make the engines now if they are to be made: True when this call made them."""
        if self._make_engines is None:  # made, or never to be made here
            return False
        with self._engines_lock:
            make = self._engines_to_make()
            if make is None:  # (another thread made them meanwhile)
                return False
            engines = make()  # (imports their modules: outside self.lock)
            with self.lock:
                self.alerts, self.hints, self.health = engines.alerts, engines.hints, engines.health
                self.judge = self._replay_judge()
                self._make_engines = None
        return True

    def _engines_to_make(self) -> Callable[[], Engines] | None:
        return self._make_engines

    def _store(self, snap: Snapshot, *, following: bool) -> None:
        """`snap` as the latest tick, in the history, its NCCL view kept (under self.lock).
        `following`: a seek has set the view already (`_seek`)."""
        latest = self.latest
        if snap.nccl is not None:
            self.nccl = snap.nccl
        elif latest is not None and snap.timestamp < latest.timestamp and not following:
            self.nccl = None  # a replay went back: a later tick's view is not this one's
        self.history.append(snap)
        self.latest = snap

    def _judge_new(self, snap: Snapshot) -> list[AlertEvent]:
        """Store and judge a snapshot just published (under self._judging)."""
        rj = self.judge
        pos = rj.position_of(snap) if rj is not None else None
        if rj is not None and pos is not None and rj.needs_catch_up(pos):
            self._seek(rj, pos, snap, stored=False)
        with self.lock:
            self._store(snap, following=rj is not None)
            engines = self._engines()
            events = engines.judge(self.info, snap)
        if rj is not None and pos is not None:
            rj.last = pos
            rj.keep(pos, engines)
        return events

    def _judge_waiting(self) -> list[tuple[Snapshot, list[AlertEvent]]]:
        """Judge, in order, the snapshots stored before the engines were made (under
        self._judging; none once they are)."""
        with self.lock:
            waiting, self._unjudged = self._unjudged, []
        out = []
        for snap, position in waiting:
            rj = self.judge
            pos = rj.position_of(snap, position) if rj is not None and position >= 0 else None
            if rj is not None and pos is not None and rj.needs_catch_up(pos):
                self._seek(rj, pos, snap, stored=True)  # (never the monitor's: its first tick)
            with self.lock:
                engines = self._engines()
                events = engines.judge(self.info, snap)
            if rj is not None and pos is not None:
                rj.last = pos
                rj.keep(pos, engines)
            out.append((snap, events))
        return out

    def _seek(self, rj: ReplayJudge, pos: int, snap: Snapshot, *, stored: bool) -> None:
        """Before the recording's tick `pos` (`snap`) is judged out of order: the engines as
        they stood after the tick before, built aside on this thread, then swapped in whole;
        the charts' history (where it lacks the tick before) and the NCCL view as of that
        tick too, unless a later snapshot is stored already (`stored`: `snap` was stored
        before the engines were made)."""
        from gputui.telemetry.replay_judge import history_gap

        shown = not stored or self.latest is snap
        history = None
        if shown and history_gap(rj.replay, pos, self.history):
            history = History(self.history.capacity)
        engines = rj.before(pos, self.info, history)
        nccl = recorded_nccl(rj.replay.ticks, pos - 1) if shown else None
        with self.lock:
            self.health, self.hints, self.alerts = engines.health, engines.hints, engines.alerts
            if shown:
                self.nccl = snap.nccl if stored and snap.nccl is not None else nccl
            if history is not None:
                if stored:
                    history.append(snap)
                self.history = history

    def _tell(self, snap: Snapshot, events: list[AlertEvent], *, listeners: bool = True) -> None:
        if listeners:
            for listener in self._listeners:
                listener(snap)
        if events:
            for on_events in self._alert_listeners:
                on_events(events)

    def _wanted(self) -> tuple[tuple[int, float | None], ...]:
        """The stacks the verdicts of this tick want (the view's engine, else the alerts')."""
        if self.health is not None and self.health.config.enabled:
            return self.health.current.wanted
        return self.alerts.health.current.wanted if self.alerts is not None else ()

    def active_alerts(self) -> dict[str, Alert]:
        """The alerts firing now (an immutable view: the engine replaces it every tick)."""
        return self.alerts.active if self.alerts is not None else {}

    def by_gpu_alerts(self) -> dict[int, list[Alert]]:
        """The active alerts of each GPU, in the order they fired."""
        out: dict[int, list[Alert]] = {}
        for a in sorted(self.active_alerts().values(), key=lambda a: a.fired_at):
            out.setdefault(a.gpu, []).append(a)
        return out

    def hints_by_gpu(self) -> dict[int, tuple[Hint, ...]]:
        """Each GPU's efficiency hints at the latest tick (immutable: replaced every tick)."""
        return self.hints.current if self.hints is not None else {}

    def nccl_view(self) -> NcclView | None:
        """NCCL RAS's latest view (an immutable object, replaced whole)."""
        return self.nccl

    def nccl_absent(self) -> str:
        """What a job's NCCL section says where there is no RAS view: live, none yet; in a
        replay of a recording that holds none at all, that it is not in the recording."""
        from gputui.telemetry.nccl.findings import NOT_ASKED, NOT_RECORDED
        from gputui.telemetry.recording import holds_nccl

        following = self._following
        if following is None:
            return NOT_ASKED
        if self._nccl_recorded is None:  # (read once per replay)
            self._nccl_recorded = holds_nccl(following[0].ticks)
        return NOT_ASKED if self._nccl_recorded else NOT_RECORDED

    def health_report(self) -> HealthReport | None:
        """The job verdicts and spinning GPUs at the latest tick (immutable)."""
        return self.health.current if self.health is not None else None

    def series(self, gpu: int, metric: str, n: int | None = None) -> list[float]:
        with self.lock:
            return self.history.series(gpu, metric, n)

    def process_series(self, gpu: int, pid: int, metric: str, n: int | None = None) -> list[float]:
        with self.lock:
            return self.history.process_series(gpu, pid, metric, n)

    def host_series(self, metric: str, n: int | None = None) -> list[float]:
        with self.lock:
            return self.history.host[metric].last(n)

    def reset(self) -> None:
        with self.lock:
            self._unjudged.clear()
            self.history.clear()
            self.latest = None
            self.info = None
            self.nccl = None
            if self.alerts is not None:
                self.alerts.reset()
            if self.hints is not None:
                self.hints.reset()
            if self.health is not None:
                self.health.reset()
            self.judge = None  # its checkpoints were of the engines before
            self._following = None


NCCL_LOOKBACK = 120
"""Ticks a seek looks back for the recording's latest NCCL RAS view: RAS is asked every 10 s,
and a round that gets no answer records a view with its reason, so an older one is stale."""


def recorded_nccl(ticks: Sequence[Snapshot], pos: int) -> NcclView | None:
    """The latest NCCL RAS view recorded at or before tick `pos` (within NCCL_LOOKBACK
    ticks): what the live run showed at that tick."""
    for k in range(pos, max(-1, pos - NCCL_LOOKBACK), -1):
        view = ticks[k].nccl
        if view is not None:
            return view
    return None
