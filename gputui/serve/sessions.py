"""The browser sessions of `gputui serve`: one gputui process each, at most `limit` at once,
each ended with its browser (quit, then SIGHUP, then SIGKILL) and all ended with serve."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gputui.serve.upstream import AppSession

log = logging.getLogger("gputui.serve")

MAX_COLUMNS = 500
MAX_ROWS = 200
"""The largest terminal a browser may ask for (a 4K screen at a small font is ~480x130):
a session's memory and CPU grow with its cells."""
QUIT_WAIT_S = 1.0
"""How long a session has to quit when asked, before SIGHUP."""
HUP_WAIT_S = 1.5
"""How long after SIGHUP before SIGKILL."""


def clamp_size(width: Any, height: Any) -> tuple[int, int]:
    """A terminal size a browser asked for, as ints within 1..MAX_COLUMNS x 1..MAX_ROWS."""

    def one(value: Any, default: int, top: int) -> int:
        try:
            number = int(value)
        except (TypeError, ValueError, OverflowError):
            number = default
        return max(1, min(top, number))

    return one(width, 80, MAX_COLUMNS), one(height, 24, MAX_ROWS)


@dataclass(slots=True)
class Sessions:
    """The sessions running now."""

    limit: int
    running: set[AppSession]

    @classmethod
    def capped(cls, limit: int) -> Sessions:
        return cls(limit, set())

    def reserve(self, service: AppSession) -> bool:
        """Count `service` in, or False when `limit` sessions run already."""
        if len(self.running) >= self.limit:
            return False
        self.running.add(service)
        return True

    async def end(self, service: AppSession, quit_wait: float = QUIT_WAIT_S) -> None:
        """Ask the session to quit; SIGHUP it if it has not after `quit_wait` s, SIGKILL it
        HUP_WAIT_S later.  Returns once it is gone."""
        try:
            process = service.process()
            loop = asyncio.get_running_loop()
            deadline = loop.time() + quit_wait
            with contextlib.suppress(Exception):  # (a dead pipe, a stuck app: the signals follow)
                await asyncio.wait_for(service.stop(), quit_wait)
            if process is not None:
                with contextlib.suppress(asyncio.TimeoutError):  # (its exit follows its last output)
                    await asyncio.wait_for(process.wait(), max(0.05, deadline - loop.time()))
                await stop_process(process)
        finally:
            self.running.discard(service)

    async def end_all(self, quit_wait: float = 0.2) -> None:
        await asyncio.gather(*(self.end(s, quit_wait) for s in list(self.running)))


async def stop_process(process: asyncio.subprocess.Process) -> None:
    for sig, wait in ((signal.SIGHUP, HUP_WAIT_S), (signal.SIGKILL, 5.0)):
        if process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, sig)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(process.wait(), wait)
    if process.returncode is None:
        log.error("session %d did not end after SIGKILL", process.pid)
