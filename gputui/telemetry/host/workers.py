"""The CPU of each GPU process's child processes: a training rank's DataLoader workers.

`WorkerCpu.read` lists each rank's children from /proc/PID/task/TID/children (the kernel's
list, one file per thread: a child belongs to the thread that forked it), and their
children one level down (a forkserver, Python 3.14's default start method on Linux, starts
the workers as its own children).  Each child's CPU time (utime + stime of
/proc/CHILD/stat) is differenced between two reads, per (PID, start time): a PID that a new
process reuses is a new child with no figure until its second read, so one process's CPU
is never charged to another.  Where the kernel has no children files (built without
CONFIG_PROC_CHILDREN), psutil's children (a scan of every process) stand in.

Which threads are read: every thread of a process when it is first seen (per PID and start
time) and at one read in `RESCAN_EVERY` (the processes take turns, by PID); at the other
reads, the threads that had children at an earlier read, until they end, and a rank's main
thread (a DataLoader forks its workers from the thread that iterates it, the main one in
the usual loop; the children of a thread that ends pass to the main thread).  A rank of 64
threads costs one read instead of 64, a worker that never forked none; a child forked by a
thread that had none (a forkserver's first workers) is found within `RESCAN_EVERY` reads.

The reads are spaced `interval` seconds apart; between them every tick carries the last
window's figures.  None where a rank's children cannot be read: never 0.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

Ident = tuple[int, float | None]
"""A GPU process: PID and start time."""

MAX_CHILDREN = 64
"""Children counted per rank at most (the busiest kept): a bound on the recorded figures."""
DEFAULT_INTERVAL = 10.0
"""Seconds between two reads of the children's CPU."""
RESCAN_EVERY = 12
"""Every thread of a process is read at one read in this many (two minutes at 10 s): a
child forked by a thread not known to fork is found within this many reads.  Measured
(bench_jobs.py health): a 64-thread rank with 4 workers costs 0.2 ms a read at 12, 0.27 ms
at 6, 0.8-1.1 ms when every thread is read at every read."""

Key = tuple[int, float | int | None]
"""A process whose threads are remembered: PID and start time (a rank's identity, or a
child's start in clock ticks)."""


def _read(path: str) -> bytes:
    """A small /proc file (os.open and os.read: a third of open()'s cost)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.read(fd, 65536)
        while len(data) % 65536 == 0 and data and len(data) < 1 << 20:  # thousands of children
            more = os.read(fd, 65536)
            if not more:
                break
            data += more
        return data
    finally:
        os.close(fd)


def _pids(data: bytes) -> list[int]:
    return [int(w) for w in data.split() if w.isdigit()]


def _scan(pid: int, proc: str, keep: tuple[int, ...] = ()) -> tuple[list[int], tuple[int, ...]] | None:
    """A process's children, from every thread, and the threads that have any, or are in
    `keep` (they had some) and still run; None when unreadable."""
    try:
        tids = os.listdir(f"{proc}/{pid}/task")
    except OSError:
        return None
    out: list[int] = []
    forking: list[int] = []
    found = False
    for tid in tids:
        try:
            data = _read(f"{proc}/{pid}/task/{tid}/children")
        except FileNotFoundError:
            continue  # the thread ended meanwhile, or the kernel has no children files
        except OSError:
            return None
        found = True
        kids = _pids(data)
        if tid.isdigit() and (kids or int(tid) in keep):
            forking.append(int(tid))
        out.extend(kids)
    if found:
        return out, tuple(forking)
    if tids and proc == "/proc" and not _kernel_lists_children():
        kids_ = _psutil_children(pid)
        return None if kids_ is None else (kids_, ())
    return None


def _children_of(pid: int, proc: str) -> list[int] | None:
    """The PIDs of a process's children (all its threads'); None when unreadable."""
    got = _scan(pid, proc)
    return None if got is None else got[0]


def _known_threads(
    pid: int, proc: str, forking: tuple[int, ...], main: bool
) -> tuple[list[int], tuple[int, ...]] | None:
    """A process's children from the threads in `forking` (those that had children: the
    ones that ended are left out) and, with `main`, from its main thread; None where the
    main thread's list cannot be read (the process ended, or no children files: the caller
    lists every thread)."""
    out: list[int] = []
    if main and pid not in forking:
        try:
            out = _pids(_read(f"{proc}/{pid}/task/{pid}/children"))
        except OSError:
            return None
    alive: list[int] = []
    for tid in forking:
        try:
            data = _read(f"{proc}/{pid}/task/{tid}/children")
        except OSError:
            if tid == pid:
                return None
            continue  # the thread ended: its children passed to the main thread
        alive.append(tid)
        out.extend(_pids(data))
    return out, tuple(alive)


def _kernel_lists_children() -> bool:
    me = os.getpid()
    return os.path.exists(f"/proc/{me}/task/{me}/children")


def _psutil_children(pid: int) -> list[int] | None:
    """The fallback where /proc has no children files."""
    import psutil

    try:
        return [c.pid for c in psutil.Process(pid).children()]
    except psutil.Error:
        return None


def read_cpu_ticks(pid: int, proc: str = "/proc") -> tuple[int, int] | None:
    """(start time, utime + stime) of a process in clock ticks; None when it is gone or
    unreadable."""
    try:
        raw = _read(f"{proc}/{pid}/stat")
    except OSError:
        return None
    fields = raw.rpartition(b")")[2].split()
    try:
        return int(fields[19]), int(fields[11]) + int(fields[12])
    except (IndexError, ValueError):
        return None


@dataclass(slots=True)
class _Seen:
    cpu_ticks: int
    at: float


class WorkerCpu:
    """Each rank's children's CPU % over the last window (see the module docstring)."""

    def __init__(
        self, proc: str = "/proc", interval: float = DEFAULT_INTERVAL, rescan_every: int = RESCAN_EVERY
    ) -> None:
        self._proc = proc
        self.interval = interval
        self.rescan_every = max(1, rescan_every)
        self._hz = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0
        self._seen: dict[tuple[int, int], _Seen] = {}
        """(child PID, start ticks) -> its CPU time at the last read."""
        self._forking: dict[Key, tuple[int, ...]] = {}
        """Processes read at the last read -> their threads that have had children."""
        self._last: dict[Ident, tuple[float, ...] | None] = {}
        self._read_at: float | None = None
        self.reads = 0
        """Windows read (for benchmarks)."""

    @staticmethod
    def children(pid: int, proc: str = "/proc") -> list[int] | None:
        """The PIDs of a process's children; None when they cannot be read."""
        return _children_of(pid, proc)

    def get(self, ranks: Iterable[Ident], now: float) -> dict[Ident, tuple[float, ...] | None]:
        """Each rank's children's CPU percents, highest first: read afresh once `interval`
        has passed since the last read, else the last window's (a rank not seen at the
        last read is read at once, alone)."""
        wanted = set(ranks)
        if self._read_at is None or now - self._read_at >= self.interval or now < self._read_at:
            before, self._seen = self._seen, {}
            self._forking, forking = {}, self._forking
            self._last = self._read(wanted, now, before, forking)
            self._read_at = now
            self.reads += 1
        else:
            new = wanted - self._last.keys()
            if new:
                self._last.update(self._read(new, now, self._seen, self._forking))
        return {r: self._last.get(r) for r in wanted}

    def lists_every_thread(self, pid: int) -> bool:
        """Whether the next read lists every thread of process `pid` even if it was read
        before: its turn, once in `rescan_every` reads (the processes take turns by PID)."""
        return (self.reads + pid) % self.rescan_every == 0

    def _children(self, key: Key, forking: dict[Key, tuple[int, ...]], main: bool) -> list[int] | None:
        """A process's children (see the module docstring for which threads are read; with
        `main`, a rank's, its main thread at every read); the threads that fork go into
        `self._forking`."""
        pid = key[0]
        known = forking.get(key)
        got = None
        if known is not None and not self.lists_every_thread(pid):
            got = _known_threads(pid, self._proc, known, main)
        if got is None:
            got = _scan(pid, self._proc, known or ())
        if got is None:
            return None
        self._forking[key] = got[1]
        return got[0]

    def _read(
        self,
        ranks: set[Ident],
        now: float,
        before: dict[tuple[int, int], _Seen],
        forking: dict[Key, tuple[int, ...]],
    ) -> dict[Ident, tuple[float, ...] | None]:
        """Read `ranks`' children; their CPU times go into `self._seen`."""
        proc, hz, seen = self._proc, self._hz, self._seen
        last: dict[Ident, tuple[float, ...] | None] = {}
        for ident in ranks:
            kids = self._children(ident, forking, main=True)
            if kids is None:
                last[ident] = None
                continue
            level: dict[int, tuple[int, int] | None] = {}  # child -> (start, CPU ticks)
            for kid in kids:
                level[kid] = ticks = read_cpu_ticks(kid, proc)
                if ticks is not None:  # its children: a forkserver's workers
                    for grand in self._children((kid, ticks[0]), forking, main=False) or ():
                        if grand not in level:
                            level[grand] = read_cpu_ticks(grand, proc)
            measured: list[float] = []
            new = 0
            for child, ticks in level.items():
                if ticks is None:
                    continue  # gone meanwhile
                key = (child, ticks[0])
                prev = before.get(key)
                seen[key] = _Seen(ticks[1], now)
                if prev is None or now <= prev.at or ticks[1] < prev.cpu_ticks:
                    new += 1  # first seen (or a reused PID: another start time)
                    continue
                measured.append(round(100.0 * (ticks[1] - prev.cpu_ticks) / hz / (now - prev.at), 1))
            if new and not measured:
                last[ident] = None  # children, none measured yet
                continue
            measured.sort(reverse=True)
            last[ident] = tuple(measured[:MAX_CHILDREN])
        return last
