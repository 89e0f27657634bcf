"""Finding and killing what a child run started: this PID namespace's processes as /proc
lists them, a kill that names a process by PID and start time (never a reused PID), the
run token that attributes an orphan to its run, reaping orphans, and gputui's child
subreaper role while a child runs (Linux)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Any

#: Marks every process started by one run (inherited through fork and exec): how an orphan
#: re-parented to gputui is attributed to its run.
RUN_TOKEN_VAR = "GPUTUI_CHILD_RUN"  # noqa: S105  (a marker, not a secret)


@dataclass(frozen=True, slots=True)
class ProcRow:
    ppid: int
    pgrp: int
    state: str
    start: int
    """Start time in clock ticks since boot: with the PID, names one process."""


def _stat_fields(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state is [0])."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    # pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields if len(fields) >= 20 else None


PF_KTHREAD = 0x00200000
"""/proc/PID/stat's flag of a kernel thread."""


def state_and_flags(pid: int) -> tuple[str, int] | None:
    """The process's state letter ("R", "S", "Z"...) and its kernel flags; None: no such."""
    fields = _stat_fields(pid)
    return (fields[0], int(fields[6])) if fields else None


def start_ticks(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def process_table() -> dict[int, ProcRow]:
    """Every process of this PID namespace (Linux /proc)."""
    out: dict[int, ProcRow] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for entry in entries:
        if entry.isdigit():
            fields = _stat_fields(entry)
            if fields:
                out[int(entry)] = ProcRow(int(fields[1]), int(fields[2]), fields[0], int(fields[19]))
    return out


def has_token(pid: int, token: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f"{RUN_TOKEN_VAR}={token}".encode() in f.read().split(b"\0")
    except OSError:
        return False


def kill_exact(pid: int, ticks: int) -> bool:
    """SIGKILL `pid` only if it is still the process that started at `ticks` (through a
    pidfd opened before the check where available, so a reused PID is never hit)."""
    if pid <= 1 or pid == os.getpid():
        return False
    opener = getattr(os, "pidfd_open", None)
    fd = -1
    if opener is not None and hasattr(signal, "pidfd_send_signal"):
        try:
            fd = opener(pid)
        except ProcessLookupError:
            return False
        except OSError:
            fd = -1
    try:
        if start_ticks(pid) != ticks:
            return False
        if fd >= 0:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
        return True
    except (ProcessLookupError, PermissionError):
        return False
    finally:
        if fd >= 0:
            os.close(fd)


def reap(pids: Any) -> None:
    """Collect the exit of orphans re-parented to gputui (else they stay zombies)."""
    for pid in list(pids):
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


PR_SET_CHILD_SUBREAPER = 36
_SUBREAPER_LOCK = threading.Lock()
_SUBREAPER_USERS = [0]
"""Child runs that need gputui to be the subreaper (it is one only while this is > 0)."""


def _set_subreaper(on: bool) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0) == 0)
    return False


def become_subreaper() -> bool:
    """Make gputui the child subreaper of what it starts (Linux 3.4+), while a child runs:
    a descendant whose parent dies is re-parented to gputui, not init, so it is still found
    and killed.  Without it (another OS) the /proc scan while the child runs is what finds
    them.  Each call is matched by one `release_subreaper()`."""
    with _SUBREAPER_LOCK:
        _SUBREAPER_USERS[0] += 1
        return _set_subreaper(True)


def release_subreaper() -> None:
    """The last child run is over: orphans go to init again.  (Were gputui the subreaper for
    its whole life, the child of an alert command that daemonises would be re-parented to
    gputui and stay a zombie until gputui exits.)"""
    with _SUBREAPER_LOCK:
        _SUBREAPER_USERS[0] = max(0, _SUBREAPER_USERS[0] - 1)
        if not _SUBREAPER_USERS[0]:
            _set_subreaper(False)


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is `pgid` (Linux /proc)."""
    return [pid for pid, row in process_table().items() if row.state != "Z" and row.pgrp == pgid]
