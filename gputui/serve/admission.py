"""Connections to a `gputui serve` port before one of their requests passed the gate.

Anyone who can reach the port can open connections without the token, so serve accepts them
itself (not through asyncio's server, whose accept loop logs a traceback per failed accept,
many a second, once the open-files limit is reached) and:

- closes one that has brought no request that passed the gate within HEADER_DEADLINE_S (a
  browser sends its request at once; a connection that sends nothing, or a byte at a time,
  held a file descriptor for an hour);
- holds at most `cap` such waiting connections (`waiting_cap`: well below the open-files
  limit, leaving room for the sessions); a new one over the cap closes the oldest, so a flood
  cannot keep the owner's browser out: it holds the newest places, and the owner's request
  arrives with its connection;
- on running out of file descriptors (EMFILE) closes the oldest waiting connection, pauses
  accepting a moment, and says so in one log line an interval (`QuietLog`).

A connection whose request passed the gate (`admitted`) leaves this count: its sessions are
capped by `Sessions`, its idle keep-alive by aiohttp's keepalive_timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import resource
import socket
import weakref
from collections.abc import Callable

from gputui.serve.logs import QuietLog

HEADER_DEADLINE_S = 5.0
"""A connection's first request must have passed the gate this long after it was accepted."""
ACCEPT_BATCH = 16
"""Connections accepted per wake-up, at most: the requests of those accepted get their turn."""
RETRY_S = 0.1
"""Accepting pauses this long after running out of file descriptors, when a waiting
connection could be closed to free one; IDLE_RETRY_S when none could."""
IDLE_RETRY_S = 1.0
OUT_OF_FILES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})

FDS_PER_SESSION = 16
"""File descriptors a browser session may hold in serve: its websocket, its process's three
pipes, the page's own connections (a browser opens up to six)."""
SPARE_FDS = 64
"""File descriptors kept free besides (logging, a session starting, Python's own)."""
MIN_WAITING = 8
MAX_WAITING = 256
"""Waiting connections held at most, whatever the limit (a browser needs a handful)."""


def open_fds() -> int:
    """File descriptors this process has open now (a guess where /proc is not mounted)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 32


def waiting_cap(max_sessions: int, limit: int | None = None, in_use: int | None = None) -> int:
    """How many waiting connections to hold: half of what the open-files limit (RLIMIT_NOFILE,
    soft) leaves after the descriptors open now, the sessions' and SPARE_FDS; within
    MIN_WAITING..MAX_WAITING."""
    if limit is None:
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if limit == resource.RLIM_INFINITY or limit < 0:
        return MAX_WAITING
    in_use = open_fds() if in_use is None else in_use
    free = limit - in_use - max_sessions * FDS_PER_SESSION - SPARE_FDS
    return max(MIN_WAITING, min(MAX_WAITING, free // 2))


class Admission:
    """Accepts connections on `sock` for `factory` (aiohttp's `web.Server`), and holds those
    not yet admitted to the rules above."""

    def __init__(
        self,
        sock: socket.socket,
        factory: Callable[[], asyncio.Protocol],
        cap: int,
        quiet: QuietLog,
        deadline: float = HEADER_DEADLINE_S,
    ) -> None:
        self.sock = sock
        self.factory = factory
        self.cap = cap
        self.quiet = quiet
        self.deadline = deadline
        self.loop = asyncio.get_running_loop()
        self.waiting: dict[asyncio.BaseTransport, asyncio.TimerHandle] = {}
        """Connections not admitted yet, oldest first, with their deadlines."""
        self.starting: dict[socket.socket, asyncio.Task[None]] = {}
        """Accepted sockets whose transport is being made."""
        self.trusted: weakref.WeakSet[asyncio.BaseTransport] = weakref.WeakSet()
        """Connections admitted (held weakly: they go with their transport)."""
        self.open = False

    def start(self) -> None:
        self.sock.setblocking(False)
        self.open = True
        self.loop.add_reader(self.sock.fileno(), self._accept)

    def stop(self) -> None:
        """Accept no more, and close every waiting connection."""
        self.open = False
        with contextlib.suppress(ValueError, OSError):
            self.loop.remove_reader(self.sock.fileno())
        for task in list(self.starting.values()):
            task.cancel()
        for transport in list(self.waiting):
            self._close(transport)

    def admitted(self, transport: asyncio.BaseTransport | None) -> None:
        """A request of `transport`'s passed the gate: it is no longer a waiting connection."""
        if transport is None:
            return
        self.trusted.add(transport)  # (should it be admitted before it was counted)
        handle = self.waiting.pop(transport, None)
        if handle is not None:
            handle.cancel()

    def held(self) -> int:
        return len(self.waiting) + len(self.starting)

    # ---- accepting -------------------------------------------------------------------

    def _accept(self) -> None:
        for _ in range(ACCEPT_BATCH):
            try:
                conn, _address = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as exc:
                self._cannot_accept(exc)
                return
            self._make_room()
            conn.setblocking(False)
            self.starting[conn] = self.loop.create_task(self._connect(conn))

    def _make_room(self) -> None:
        """Close waiting connections, oldest first, until a new one fits under the cap."""
        if self.held() < self.cap:
            return
        for transport in [t for t in self.waiting if t.is_closing()]:
            self._forget(transport)
        while self.held() >= self.cap and self.waiting:
            self._close(next(iter(self.waiting)))

    def _cannot_accept(self, exc: OSError) -> None:
        """Out of file descriptors (or another accept error): no traceback, one line an
        interval; free a descriptor if a waiting connection holds one, and try again soon."""
        why = os.strerror(exc.errno) if exc.errno else str(exc)
        self.quiet.note(f"cannot accept connections: {why}", f"cannot accept connections: {why}")
        freed = False
        if exc.errno in OUT_OF_FILES and self.waiting:
            self._close(next(iter(self.waiting)))
            freed = True
        self.loop.remove_reader(self.sock.fileno())
        self.loop.call_later(RETRY_S if freed else IDLE_RETRY_S, self._resume)

    def _resume(self) -> None:
        if self.open:
            self.loop.add_reader(self.sock.fileno(), self._accept)

    async def _connect(self, conn: socket.socket) -> None:
        try:
            transport, _protocol = await self.loop.connect_accepted_socket(self.factory, conn)
        except (OSError, asyncio.CancelledError):
            conn.close()
            return
        finally:
            self.starting.pop(conn, None)
        if not self.open:
            transport.abort()
        elif transport not in self.trusted:
            self.waiting[transport] = self.loop.call_later(self.deadline, self._expire, transport)

    # ---- closing ---------------------------------------------------------------------

    def _expire(self, transport: asyncio.BaseTransport) -> None:
        if transport in self.waiting:
            if not transport.is_closing():
                self.quiet.note(
                    "closed: no request in time",
                    f"closed a connection that sent no request within {self.deadline:g} s",
                )
            self._close(transport)

    def _forget(self, transport: asyncio.BaseTransport) -> None:
        handle = self.waiting.pop(transport, None)
        if handle is not None:
            handle.cancel()

    def _close(self, transport: asyncio.BaseTransport) -> None:
        self._forget(transport)
        if isinstance(transport, asyncio.Transport):
            transport.abort()  # (at once: no lingering, no waiting for a reader)
        else:
            transport.close()
