"""The background thread that samples a Source at an interval and hands over each snapshot.

The thread owns the source: it opens it (so a slow `nvmlInit` never delays the first
frame), samples it, and closes it.  Ticks follow a fixed schedule; a tick that overruns
pushes the schedule back instead of queueing a burst of catch-up ticks.  Interval changes,
pause, single steps and stop are commands that wake the thread at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from gputui.telemetry.model import MachineInfo, Snapshot
from gputui.telemetry.source import Source, start_background

log = logging.getLogger(__name__)

MIN_INTERVAL = 0.1
MAX_INTERVAL = 60.0


class Poller:
    def __init__(
        self,
        source: Source,
        interval: float,
        on_snapshot: Callable[[Snapshot], None],
        on_info: Callable[[MachineInfo], None] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        *,
        first_delivered: bool = False,
        delivered_info: MachineInfo | None = None,
        on_open: Callable[[], None] | None = None,
    ) -> None:
        self.source = source
        self._first_delivered = first_delivered
        """The caller already handed out the source's static facts and first snapshot
        (`source.take_ready`): the source is opened once the first frame is drawn (or one
        interval on), no info callback unless `open()` found other facts than
        `delivered_info`, and the first tick is one interval on."""
        self._delivered_info = delivered_info
        self._on_open = on_open
        """Called on this thread once the source has opened, before its first tick."""
        self._interval = _clamp(interval)
        self._on_snapshot = on_snapshot
        self._on_info = on_info
        self._on_error = on_error
        self._wake = threading.Event()
        self._stopping = False
        self._paused = False
        self._steps: deque[int] = deque()
        self._background = 0
        """1 once the app's first frame is up: the source's work left for later is due
        (`first_frame_drawn`); 2 once started."""
        self._thread = threading.Thread(target=self._run, name="gputui-poller", daemon=True)
        self.ticks = 0
        self.last_cost: float | None = None
        """Seconds the source took for the last tick."""

    # ---- control, from any thread ----------------------------------------------------

    @property
    def interval(self) -> float:
        return self._interval

    def set_interval(self, seconds: float) -> float:
        self._interval = _clamp(seconds)
        self._wake.set()
        return self._interval

    @property
    def paused(self) -> bool:
        return self._paused

    def pause(self) -> None:
        self._paused = True
        self._wake.set()

    def resume(self) -> None:
        self._paused = False
        self._wake.set()

    def step(self, delta: int = 1) -> None:
        """While paused: sample once (delta=1), or go back one recorded tick (delta=-1)."""
        self._steps.append(delta)
        self._wake.set()

    def first_frame_drawn(self) -> None:
        """The app's first frame is on screen: the source may now start what it left for
        later (`source.start_background`), on this poller's thread, once."""
        if self._background == 0:
            self._background = 1
            self._wake.set()

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stopping = True
        self._wake.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # ---- the thread ------------------------------------------------------------------

    def _run(self) -> None:
        started = time.monotonic()
        if self._first_delivered:
            self._await_first_frame()
            if self._stopping:  # (quit before the first frame was up: nothing to open)
                self._close_source()
                return
        try:
            info = self.source.open()
        except BaseException as exc:  # a broken recording, say: report, don't die silently
            self._report(exc)
            return
        if self._on_open is not None:
            try:
                self._on_open()
            except Exception as exc:  # a consumer's bug must not stop the sampling
                self._report(exc)
        changed = self._delivered_info is not None and info != self._delivered_info
        if self._on_info is not None and (not self._first_delivered or changed):
            try:
                self._on_info(info)
            except Exception as exc:  # a consumer's bug must not stop the sampling
                self._report(exc)
        try:
            next_due = started + self._interval if self._first_delivered else time.monotonic()
            while not self._stopping:
                if self._background == 1:
                    self._background = 2
                    try:
                        start_background(self.source)
                    except Exception as exc:  # the ticks go on without what it started
                        self._report(exc)
                if self._steps:
                    self._do_step(self._steps.popleft())
                    continue
                now = time.monotonic()
                if not self._paused and now >= next_due:
                    self._tick()
                    # schedule from the due time, not from now: no drift; but never catch up
                    next_due = max(next_due + self._interval, time.monotonic())
                    continue
                timeout = None if self._paused else next_due - now
                self._wake.wait(timeout)
                self._wake.clear()
                if not self._paused and next_due - time.monotonic() > self._interval:
                    next_due = time.monotonic() + self._interval  # interval was shortened
        finally:
            self._close_source()

    def _close_source(self) -> None:
        try:
            self.source.close()
        except Exception as exc:
            log.debug("closing the source failed: %s", exc)

    def _do_step(self, delta: int) -> None:
        if delta < 0:
            replay = self.source.seekable
            if replay is None:
                return  # live data cannot go back
            replay.seek(replay.position - 2)
        self._tick()

    def _await_first_frame(self) -> None:
        """With the first snapshot already shown: open the source once the app's first
        frame is on screen (a source read ahead in a child opens NVML in this process then,
        not beside Textual's first layout and paint), or one interval on, or at stop."""
        deadline = time.monotonic() + self._interval
        while self._background == 0 and not self._stopping:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._wake.wait(left)
            self._wake.clear()

    def _tick(self) -> None:
        t0 = time.perf_counter()
        try:
            snap = self.source.sample()
        except Exception as exc:
            self._report(exc)
            return
        self.last_cost = time.perf_counter() - t0
        self.ticks += 1
        try:
            self._on_snapshot(snap)
        except Exception as exc:  # a consumer's bug must not stop the sampling
            self._report(exc)

    def _report(self, exc: BaseException) -> None:
        # the consumer says it in one line; the traceback only for whoever turns logging on
        # (unconfigured logging would print it on stderr, over the TUI, at every loop)
        log.debug("poller: %s", exc, exc_info=exc)
        if self._on_error is not None:
            self._on_error(exc)


def _clamp(seconds: float) -> float:
    return min(MAX_INTERVAL, max(MIN_INTERVAL, float(seconds)))
