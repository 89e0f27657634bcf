"""Xid events (the driver's critical-error reports): how many each GPU has had since gputui
started and the last code.

NVML queues a GPU's events in an event set; `XidWatch.poll` drains that queue without waiting
(a 1 ms wait per call), and `NvmlSource` calls it after each slow-cadence pass (every 2 s by
default), so an Xid shows within one slow pass.  A thread of its own blocked in
nvmlEventSetWait would see it sooner, but it had to wake every 100 ms (to let the source
close), and those wake-ups cost an eighth of the live monitor's steady CPU on an H100
(0.32 % of a core of 2.5 %; bench/RESULTS.md).
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from collections.abc import Sequence
from typing import Any

from gputui.telemetry.nvml.query import _TIMEOUT, Nvml

XID_EVENT = 0x8
"""nvmlEventTypeXidCriticalError: the driver reported an Xid (a critical error) for the GPU."""
POLL_WAIT_MS = 1
"""How long one drain call may wait: the queue is read, never waited on."""
MAX_PER_POLL = 1000
"""Events read in one drain at most (a driver flooding events cannot hold the slow pass)."""

_NAMES = ("nvmlEventSetCreate", "nvmlDeviceRegisterEvents", "nvmlEventSetWait_v2", "nvmlEventSetFree")


class XidWatch:
    """Counts each GPU's Xid events: `open` registers every GPU, `poll` drains what the driver
    queued, `close` frees the event set (all on the slow-cadence thread).  A GPU whose events
    cannot be watched has no count (None, not 0)."""

    def __init__(self, nv: Nvml, handles: Sequence[Any], lost: set[int]) -> None:
        self._nvml = nv
        self._handles = handles
        self._lost = lost
        self._lock = threading.Lock()
        self._xids: dict[int, tuple[int, int | None]] = {}
        """GPU -> (Xid events seen, the last code), for the GPUs whose events are watched."""
        self._set: Any = None
        self._watched: dict[object, int] = {}

    def get(self, i: int) -> tuple[int, int | None] | None:
        """(Xid events seen, the last code) of GPU `i`; None where it is not watched."""
        with self._lock:
            return self._xids.get(i)

    def open(self) -> None:
        """Create the event set and register every GPU for Xid events; where the driver or a
        GPU has no event support that GPU's count stays None (not watched) rather than 0."""
        nv = self._nvml
        lib = nv.lib
        create, register, wait, free = (getattr(lib, n, None) for n in _NAMES)
        if create is None or register is None or wait is None or free is None:
            nv.note("nvmlEventSetWait_v2", "no NVML events in these nvidia-ml-py bindings: Xids not watched")
            return
        try:
            self._set = create()
        except lib.NVMLError as exc:
            nv.note("nvmlEventSetCreate", str(exc))
            return
        except Exception as exc:  # never a traceback from the sampling thread
            nv.note("nvmlEventSetCreate", f"the Xid watch did not start: {exc!r}")
            return
        for i, h in enumerate(self._handles):
            if h is None or i in self._lost:
                continue
            try:
                register(h, XID_EVENT, self._set)
            except lib.NVMLError:
                continue  # no Xid events for this GPU (not supported, no permission)
            except Exception as exc:
                self._stop_watching(f"the Xid watch stopped: {exc!r}")
                return
            self._watched[_handle_key(h)] = i
            with self._lock:
                self._xids[i] = (0, None)

    def poll(self) -> None:
        """Count the Xid events the driver has queued since the last poll."""
        if self._set is None or not self._watched:
            return
        nv = self._nvml
        lib = nv.lib
        try:
            for _ in range(MAX_PER_POLL):
                try:
                    data = lib.nvmlEventSetWait_v2(self._set, POLL_WAIT_MS)
                except lib.NVMLError as exc:
                    if exc.value == _TIMEOUT:
                        return  # the queue is empty
                    self._stop_watching(str(exc))
                    return
                gpu = self._watched.get(_handle_key(data.device))
                if gpu is not None and int(data.eventType) & XID_EVENT:
                    with self._lock:
                        self._xids[gpu] = (self._xids[gpu][0] + 1, int(data.eventData))
        except Exception as exc:  # never a traceback from a thread onto the TUI's terminal
            self._stop_watching(f"the Xid watch stopped: {exc!r}")

    def _stop_watching(self, why: str) -> None:
        """An error: note it, stop polling, and "none seen" is no longer known."""
        self._nvml.note("nvmlEventSetWait_v2", why)
        self._watched = {}
        with self._lock:
            self._xids = {i: v for i, v in self._xids.items() if v[0]}

    def close(self) -> None:
        """Free the event set (before nvmlShutdown)."""
        event_set, self._set = self._set, None
        if event_set is not None:
            with contextlib.suppress(Exception):
                self._nvml.lib.nvmlEventSetFree(event_set)


def _handle_key(handle: Any) -> object:
    """Something equal for two references to the same NVML device handle (an event names
    its GPU by a handle object of its own): the pointer's address, for ctypes handles."""
    if isinstance(handle, ctypes._Pointer | ctypes.c_void_p):
        return ctypes.cast(handle, ctypes.c_void_p).value
    return handle
