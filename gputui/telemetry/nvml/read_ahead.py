"""NVML's read-ahead in a forked child: the monitor's first reading taken on another core.

The monitor draws its first frame with NVML's static facts and a first sample (issue 33).
Read on a thread, that reading (pynvml's and psutil's imports, nvmlInit, the static queries,
the first sample: 60-105 ms of CPU on an H100, most of it Python) competed with the UI's
imports for the GIL, and the first frame waited for both.  A child forked once the source is
made reads it on another core instead and hands it back through a pipe; the monitor takes it
at mount if it is there, and otherwise never waits for it: the poller opens NVML itself, as
it always could, and the child is stopped once that open is done.

The child runs this program's own code (no exec: nothing another user controls, no new
interpreter), has no terminal (its standard streams are /dev/null), ends within
CHILD_DEADLINE_S whatever NVML does (SIGALRM), and never runs the parent's exit handlers
(`os._exit`).  Its answer is pickled by this same code and read from a pipe only the two
processes hold; at most PIPE_BYTES of it, else it is not used.  The parent kills it once
its own NVML is open if it has not answered by then, and reaps it (on the poller's thread if
the kernel has not let it go at once): no child of ours is left running.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import sys
import threading
import time
from collections.abc import Callable

CHILD_DEADLINE_S = 10
"""The child's SIGALRM: a reading NVML never finishes (a wedged driver) ends with it."""

PIPE_BYTES = 1 << 20
"""The pipe's size (Linux's limit for unprivileged processes): the child writes its whole
answer and exits without waiting for the parent to read; an answer larger than this is not
used (eight GPUs and 240 processes, a derived recording's tick, pickle to 58 KB)."""


def can_fork() -> bool:
    """Forking is safe here: a POSIX system and no other thread running (a thread's locks
    would be copied held into the child)."""
    return hasattr(os, "fork") and threading.active_count() == 1


class ChildRead:
    """One reading taken by a forked child (`start`), handed over once by `take`."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid: int | None = pid
        """The child while it may still run or be unreaped; None once reaped."""
        self.status: int | None = None
        """Its wait status once reaped (`os.waitstatus_to_exitcode`: -9 when it was killed)."""
        self._fd: int | None = fd
        self._chunks: list[bytes] = []
        self._size = 0
        self._eof = False
        self._taken = False

    @classmethod
    def start(cls, read: Callable[[], object]) -> ChildRead | None:
        """Fork a child that calls `read()` and sends back what it returns; None where a
        child cannot be made (the caller reads in-process instead)."""
        r, w = os.pipe()
        with contextlib.suppress(OSError, AttributeError, ImportError):  # (else 64 KiB: larger not used)
            import fcntl  # (POSIX; F_SETPIPE_SZ: Linux)

            fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        try:
            pid = os.fork()
        except OSError:
            os.close(r)
            os.close(w)
            return None
        if pid == 0:  # the child: read, answer, exit; never return into the parent's code
            code = 1
            try:
                os.close(r)
                _no_terminal()
                signal.alarm(CHILD_DEADLINE_S)
                _write_all(w, pickle.dumps(read(), protocol=pickle.HIGHEST_PROTOCOL))
                code = 0
            except BaseException:  # noqa: S110  (whatever it was, the parent reads NVML itself)
                pass
            finally:
                os._exit(code)
        os.close(w)
        os.set_blocking(r, False)
        return cls(pid, r)

    def take(self) -> object | None:
        """The child's answer if it has sent it all; else None at once (never waits).
        Once: later calls give None.  A child that has not answered is left to go on (its
        caller `stop`s or `reap`s it: without persistence mode the driver stays loaded while
        the child holds it, for whoever opens NVML meanwhile)."""
        if self._taken:
            return None
        self._taken = True
        self._drain()
        if not self._eof:
            return None
        return self._finish()

    def answered(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the child's whole answer (kept for `take`);
        whether it came.  For a caller that may wait (a test), never the UI thread."""
        deadline = time.monotonic() + timeout
        while not self._eof and self._fd is not None and (left := deadline - time.monotonic()) > 0:
            select.select([self._fd], [], [], left)
            self._drain()
        return self._eof

    def stop(self) -> None:
        """Stop the child if it still runs and close the pipe, never waiting: a child the
        kernel has not yet reaped (one inside a driver call dies when it returns) is left
        for `reap`.  Idempotent."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self.pid is not None:
            try:
                if self._reaped(os.waitpid(self.pid, os.WNOHANG)):
                    return
                os.kill(self.pid, signal.SIGKILL)  # (after EOF: one already exiting)
                self._reaped(os.waitpid(self.pid, os.WNOHANG))
            except ChildProcessError:
                self.pid = None  # (reaped elsewhere)

    def reap(self) -> None:
        """`stop`, then wait until the child is gone (a thread that may wait: the poller's,
        the one closing the source)."""
        self.stop()
        if self.pid is not None:
            try:
                self._reaped(os.waitpid(self.pid, 0))
            except ChildProcessError:
                self.pid = None

    def _reaped(self, waited: tuple[int, int]) -> bool:
        if waited[0] == 0:
            return False
        self.pid, self.status = None, waited[1]
        return True

    def _drain(self) -> None:
        while self._fd is not None and not self._eof:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return
            if not data:
                self._eof = True
                return
            self._size += len(data)
            if self._size > PIPE_BYTES:
                self.stop()
                return
            self._chunks.append(data)

    def _finish(self) -> object | None:
        complete = self._eof
        data = b"".join(self._chunks)
        self._chunks = []
        self.stop()
        if not complete or not data:
            return None
        try:
            answer: object = pickle.loads(data)  # noqa: S301  (this program's own child, its own pipe)
            return answer
        except Exception:  # (cut short: the parent reads NVML itself)
            return None


def _no_terminal() -> None:
    """The child's standard streams go to /dev/null: nothing it or NVML prints reaches the
    terminal the monitor is about to draw on."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    if null > 2:
        os.close(null)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115  (Python's own streams too)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.close(fd)
