"""Exit when the terminal goes away, even if the UI is stuck writing to it.

When an SSH connection drops, the terminal hangs up.  Textual's writer thread dies on the
first failed write, and its shutdown can then wait forever on the writer's queue; a
signal handler or timer that lives in the event loop never runs again.  This thread lives
outside the loop: on SIGHUP or a dead terminal it asks the app to exit, and if the process
is still there a few seconds later it ends it (there is no terminal left to restore, and
the monitor holds nothing that needs saving).  A monitor must never keep spinning on a
server after its user has gone.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable


def terminal_alive(fd: int) -> bool:
    """False once the terminal on `fd` has hung up (or `fd` is no terminal at all)."""
    try:
        os.tcgetpgrp(fd)
    except (OSError, ValueError):
        return False
    return True


class TerminalWatch(threading.Thread):
    def __init__(
        self,
        fd: int,
        on_lost: Callable[[], None],
        *,
        period: float = 1.0,
        grace: float = 3.0,
        force_exit: Callable[[int], None] = os._exit,
        alive: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__(name="gputui-terminal-watch", daemon=True)
        self.fd = fd
        self.on_lost = on_lost
        self.period = period
        self.grace = grace
        self._force_exit = force_exit
        self.alive = alive if alive is not None else lambda: terminal_alive(fd)
        """What is watched: the terminal on `fd` by default (a browser session: its pipes)."""
        self._stopping = threading.Event()
        self._hangup = threading.Event()
        self.lost = False

    def hangup(self) -> None:
        """Call from a SIGHUP handler: only sets a flag (safe in a signal handler)."""
        self._hangup.set()
        self._stopping.set()  # wake the thread now

    def stop(self) -> None:
        self._stopping.set()

    def run(self) -> None:
        while True:
            self._stopping.wait(self.period)
            if self._hangup.is_set():
                break
            if self._stopping.is_set():
                return  # the app is exiting normally
            if not self.alive():
                break
        self.lost = True
        try:
            self.on_lost()  # must not block: it only schedules the app's exit
        finally:
            threading.Event().wait(self.grace)
            self._force_exit(0)
