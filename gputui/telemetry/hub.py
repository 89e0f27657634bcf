"""Where the poller's snapshots land: the latest one, the history, and who to tell.

Shared by the TUI and headless consumers (recorder, exporter): the poller thread calls
`publish`; readers take the lock only to copy what they need.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from gputui.telemetry.history import DEFAULT_CAPACITY, History
from gputui.telemetry.model import MachineInfo, Snapshot


class Hub:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.history = History(capacity)
        self.latest: Snapshot | None = None
        self.info: MachineInfo | None = None
        self.lock = threading.Lock()
        self._listeners: list[Callable[[Snapshot], None]] = []
        self._info_listeners: list[Callable[[MachineInfo], None]] = []

    def subscribe(self, on_snapshot: Callable[[Snapshot], None]) -> None:
        self._listeners.append(on_snapshot)

    def subscribe_info(self, on_info: Callable[[MachineInfo], None]) -> None:
        self._info_listeners.append(on_info)

    def set_info(self, info: MachineInfo) -> None:
        with self.lock:
            self.info = info
        for listener in self._info_listeners:
            listener(info)

    def publish(self, snap: Snapshot) -> None:
        with self.lock:
            self.history.append(snap)
            self.latest = snap
        for listener in self._listeners:
            listener(snap)

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
