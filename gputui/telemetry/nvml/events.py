"""Xid events (the driver's critical-error reports), watched on a thread of their own: how
many each GPU has had since gputui started and the last code."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from typing import Any

from gputui.telemetry.nvml.query import _TIMEOUT, Nvml, _handle_key

XID_EVENT = 0x8
"""nvmlEventTypeXidCriticalError: the driver reported an Xid (a critical error) for the GPU."""
EVENT_WAIT_MS = 100
"""How long one wait for an event lasts: closing the source (quitting) waits at most this for
the event thread, which must leave NVML's wait before nvmlShutdown."""


class XidWatch:
    """Counts each GPU's Xid events while `run` runs (on its own thread, until `stop` is set).
    A GPU whose events cannot be watched has no count (None, not 0)."""

    def __init__(self, nv: Nvml, handles: Sequence[Any], lost: set[int], stop: threading.Event) -> None:
        self._nvml = nv
        self._handles = handles
        self._lost = lost
        self._stop = stop
        self._lock = threading.Lock()
        self._xids: dict[int, tuple[int, int | None]] = {}
        """GPU -> (Xid events seen, the last code), for the GPUs whose events are watched."""

    def get(self, i: int) -> tuple[int, int | None] | None:
        """(Xid events seen, the last code) of GPU `i`; None where it is not watched."""
        with self._lock:
            return self._xids.get(i)

    def run(self) -> None:
        """Wait for Xid events (the driver's critical-error reports) of every GPU and count
        them.  Runs alongside the slow thread; where the driver or a GPU has no event support
        that GPU's count stays None (not watched) rather than 0."""
        nv = self._nvml
        lib = nv.lib
        names = ("nvmlEventSetCreate", "nvmlDeviceRegisterEvents", "nvmlEventSetWait_v2", "nvmlEventSetFree")
        create, register, wait, free = (getattr(lib, n, None) for n in names)
        if create is None or register is None or wait is None or free is None:
            nv.note("nvmlEventSetWait_v2", "no NVML events in these nvidia-ml-py bindings: Xids not watched")
            return
        try:
            event_set = create()
        except lib.NVMLError as exc:
            nv.note("nvmlEventSetCreate", str(exc))
            return
        try:
            watched: dict[object, int] = {}
            for i, h in enumerate(self._handles):
                if h is None or i in self._lost:
                    continue
                try:
                    register(h, XID_EVENT, event_set)
                except lib.NVMLError:
                    continue  # no Xid events for this GPU (not supported, no permission)
                watched[_handle_key(h)] = i
                with self._lock:
                    self._xids[i] = (0, None)
            while watched and not self._stop.is_set():
                try:
                    data = wait(event_set, EVENT_WAIT_MS)
                except lib.NVMLError as exc:
                    if exc.value == _TIMEOUT:
                        continue
                    nv.note("nvmlEventSetWait_v2", str(exc))
                    return
                gpu = watched.get(_handle_key(data.device))
                if gpu is not None and int(data.eventType) & XID_EVENT:
                    with self._lock:
                        self._xids[gpu] = (self._xids[gpu][0] + 1, int(data.eventData))
        except Exception as exc:  # never a traceback from a thread onto the TUI's terminal
            nv.note("nvmlEventSetWait_v2", f"the Xid watch stopped: {exc!r}")
        finally:
            with contextlib.suppress(Exception):
                free(event_set)
            if not self._stop.is_set():  # stopped by an error: "none seen" is no longer known
                with self._lock:
                    self._xids = {i: v for i, v in self._xids.items() if v[0]}
