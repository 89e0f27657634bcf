"""Where the poller's snapshots land: the latest one, the history, the active alerts, and who
to tell.

Shared by the TUI and headless consumers (watch, exporter): the poller thread calls
`publish`; readers take the lock only to copy what they need.

The engines (alerts, hints, job health) judge every snapshot, in order.  A consumer hands
them over made (`Hub(alerts=..., ...)`), or hands a function that makes them
(`make_engines`): the monitor does, so that its first frame waits neither for the engines'
modules nor for their first judgement.  They are then made on the first `judge()` (the
first `publish` that judges, on the poller's thread, or an explicit call), which first
judges the snapshots published before them, in order: what they say is the same, only later.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from gputui.telemetry.history import DEFAULT_CAPACITY, History
from gputui.telemetry.model import MachineInfo, Snapshot

if TYPE_CHECKING:
    from gputui.telemetry.alerts import Alert, AlertEngine, AlertEvent
    from gputui.telemetry.health import HealthEngine
    from gputui.telemetry.health_report import HealthReport
    from gputui.telemetry.hints import Hint, HintEngine

    Engines = tuple[AlertEngine | None, HintEngine | None, HealthEngine | None]


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
        self.lock = threading.Lock()
        self._make_engines = make_engines
        """Makes (alerts, hints, health) on the first `judge()`; None once they are made."""
        self._engines_lock = threading.Lock()
        self._unjudged: list[Snapshot] = []
        """Snapshots published before the engines were made, oldest first."""
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

    def publish(self, snap: Snapshot, *, judge: bool = True) -> None:
        """Store `snap` as the latest tick and in the history, and have the engines judge it.
        `judge=False` (the monitor's first frame, on the UI thread): engines not made yet are
        left so; `snap` waits for them (`judge`)."""
        if judge:
            self._ensure_engines()
        with self.lock:
            self.history.append(snap)
            self.latest = snap
            if self._make_engines is not None:  # not made yet: judged once they are
                self._unjudged.append(snap)
                judged = []
                events: list[AlertEvent] = []
            else:
                pending, self._unjudged = self._unjudged, []
                judged = [(s, self._judge(s)) for s in pending]
                events = self._judge(snap)
        for earlier, earlier_events in judged:
            self._tell(earlier, earlier_events, listeners=False)
        self._tell(snap, events)

    def judge(self) -> bool:
        """Make the engines if they are not made yet (`make_engines`) and have them judge the
        snapshots published before: True when there were such snapshots (what is shown of
        the latest may have changed).  Any thread; the poller's in the monitor."""
        if not self._ensure_engines():
            return False
        with self.lock:
            pending, self._unjudged = self._unjudged, []
            judged = [(s, self._judge(s)) for s in pending]
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
            alerts, hints, health = make()  # (imports their modules: outside self.lock)
            with self.lock:
                self.alerts, self.hints, self.health = alerts, hints, health
                self._make_engines = None
        return True

    def _engines_to_make(self) -> Callable[[], Engines] | None:
        return self._make_engines

    def _judge(self, snap: Snapshot) -> list[AlertEvent]:
        """The engines' judgement of one tick (under self.lock)."""
        events: list[AlertEvent] = []
        report = None
        if self.health is not None:
            report = self.health.update(snap)
            if not self.health.config.enabled:
                report = None  # the job_stuck rule judges whether or not the view does
        if self.alerts is not None and self.info is not None:
            events = self.alerts.update(self.info, snap, report)
        if self.hints is not None:
            self.hints.update(snap)
        return events

    def _tell(self, snap: Snapshot, events: list[AlertEvent], *, listeners: bool = True) -> None:
        if listeners:
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
            if self.alerts is not None:
                self.alerts.reset()
            if self.hints is not None:
                self.hints.reset()
            if self.health is not None:
                self.health.reset()
