"""Where the poller's snapshots land: the latest one, the history, the active alerts, and who
to tell.

Shared by the TUI and headless consumers (watch, exporter, snapshot): the poller thread calls
`publish`; readers take the lock only to copy what they need.  A hub that `follow`s a replay
judges each tick as a function of the recording up to it, whatever was stepped or skipped
(`replay_judge`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from gputui.telemetry.alerts import Alert, AlertEngine, AlertEvent
from gputui.telemetry.health import HealthEngine
from gputui.telemetry.health_report import HealthReport
from gputui.telemetry.hints import Hint, HintEngine
from gputui.telemetry.history import DEFAULT_CAPACITY, History
from gputui.telemetry.model import MachineInfo, Snapshot
from gputui.telemetry.nccl.findings import NOT_ASKED, NOT_RECORDED
from gputui.telemetry.nccl.model import NcclView
from gputui.telemetry.recording import holds_nccl
from gputui.telemetry.replay_judge import CHECKPOINT_EVERY, Engines, ReplayJudge, history_gap

if TYPE_CHECKING:
    from gputui.telemetry.source import Seekable


class Hub:
    def __init__(
        self,
        capacity: int = DEFAULT_CAPACITY,
        alerts: AlertEngine | None = None,
        hints: HintEngine | None = None,
        health: HealthEngine | None = None,
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
        self.lock = threading.Lock()
        self.judge: ReplayJudge | None = None
        """Set by `follow` for a replay."""
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

    def follow(self, replay: Seekable | None, every: int = CHECKPOINT_EVERY) -> None:
        """Judge the snapshots of `replay` (its ticks as `sample` returns them) as a function
        of the recording up to each one, with a copy of the engines kept every `every` ticks;
        None: live data, judged in the order it comes."""
        self.judge = None if replay is None else ReplayJudge(replay, self._engines().fresh(), every)
        self._nccl_recorded = None

    def _engines(self) -> Engines:
        return Engines(self.health, self.hints, self.alerts)

    def publish(self, snap: Snapshot) -> None:
        judge = self.judge
        pos = judge.position_of(snap) if judge is not None else None
        if judge is not None and pos is not None and judge.needs_catch_up(pos):
            # a seek: the engines (and the charts' history) as they stood after the tick
            # before, built aside on this thread, then swapped in whole
            history = History(self.history.capacity) if history_gap(judge.replay, pos, self.history) else None
            engines = judge.before(pos, self.info, history)
            nccl = recorded_nccl(judge.replay.ticks, pos - 1)
            with self.lock:
                self.health, self.hints, self.alerts = engines.health, engines.hints, engines.alerts
                self.nccl = nccl
                if history is not None:
                    self.history = history
        with self.lock:
            latest = self.latest
            if snap.nccl is not None:
                self.nccl = snap.nccl
            elif latest is not None and snap.timestamp < latest.timestamp and judge is None:
                self.nccl = None  # a replay went back: a later tick's view is not this one's
            self.history.append(snap)
            self.latest = snap
            engines = self._engines()
            events = engines.judge(self.info, snap)
        if judge is not None and pos is not None:
            judge.last = pos
            judge.keep(pos, engines)
        for listener in self._listeners:
            listener(snap)
        if events:
            for on_events in self._alert_listeners:
                on_events(events)

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
        judge = self.judge
        if judge is None:
            return NOT_ASKED
        if self._nccl_recorded is None:  # (read once per replay)
            self._nccl_recorded = holds_nccl(judge.replay.ticks)
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
