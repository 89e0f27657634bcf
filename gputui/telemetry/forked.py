"""Run one function in a forked child process and take its (pickled) result back without
waiting: the monitor's NVML read-ahead, whose Python work would otherwise take the GIL from
the imports beside it (see `NvmlSource.prefetch`)."""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import threading
from collections.abc import Callable
from typing import Any

PENDING = object()
"""What `ForkedCall.poll` returns while the child is still working."""


class ForkedCall:
    """`fn()` running in a child process; `poll()` hands its result over once it is done."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid = pid
        self._fd: int | None = fd
        self._data = bytearray()
        self._reaped = False
        self._pidfd: int | None = None
        """The child pinned (Linux 5.3+): a signal through it reaches this child or none,
        even if something else reaped it and its PID went to another process."""
        with contextlib.suppress(AttributeError, OSError):
            self._pidfd = os.pidfd_open(pid)

    @classmethod
    def start(cls, fn: Callable[[], Any]) -> ForkedCall | None:
        """Fork and call `fn` in the child; None where that cannot be done safely: no fork
        (not POSIX), or other threads running (a fork copies only the calling thread, and a
        lock another thread holds stays held in the child)."""
        if not hasattr(os, "fork") or threading.active_count() != 1:
            return None
        try:
            read_end, write_end = os.pipe()
        except OSError:
            return None
        try:
            pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            return None
        if pid == 0:  # the child: never returns, never writes anywhere but the pipe
            _child(fn, read_end, write_end)
        os.close(write_end)
        os.set_blocking(read_end, False)
        return cls(pid, read_end)

    def poll(self) -> Any:
        """The child's result once it has sent it (None if it failed), else `PENDING`; None
        after it was handed over.  Never blocks, not even on the child's exit (a child that
        opened NVML takes tens of ms to exit): `reap` or `cancel` collects it later."""
        fd = self._fd
        if fd is None:
            return None
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                return PENDING
            except OSError:
                chunk = b""
            if not chunk:  # the child closed its end: it is exiting
                break
            self._data += chunk
        self._close()
        self._reap(block=False)
        try:
            # (written by our own child, through a pipe only it and we hold)
            return pickle.loads(bytes(self._data)) if self._data else None  # noqa: S301
        except Exception:  # a child killed halfway through writing
            return None
        finally:
            self._data = bytearray()

    def cancel(self) -> None:
        """Kill the child if it is still there, and reap it (waits for its exit).  Safe to
        call again."""
        if not self._reaped:
            with contextlib.suppress(ProcessLookupError):
                if self._pidfd is not None:
                    signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
                else:  # (unreaped, so the PID is still this child's)
                    os.kill(self.pid, signal.SIGKILL)
            self._reap(block=True)
        self._close()

    def _close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        if self._reaped and self._pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self._pidfd)
            self._pidfd = None

    def _reap(self, block: bool) -> None:
        try:
            pid, _ = os.waitpid(self.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            pid = self.pid  # (reaped elsewhere)
        self._reaped = pid == self.pid


def _child(fn: Callable[[], Any], read_end: int, write_end: int) -> None:
    status = 1
    try:
        # nothing may escape the child: it shares the terminal, and must not run the
        # parent's code after the fork (os._exit, whatever happens)
        with contextlib.suppress(BaseException):
            os.close(read_end)
            _die_with_parent()
            devnull = os.open(os.devnull, os.O_RDWR)  # (a library's or the driver's messages)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            data = pickle.dumps(fn(), protocol=pickle.HIGHEST_PROTOCOL)
            view = memoryview(data)
            while view:
                view = view[os.write(write_end, view) :]
            status = 0
    finally:
        os._exit(status)


def _die_with_parent() -> None:
    """Linux: the child is killed if the parent dies first (a hung nvmlInit, say)."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
