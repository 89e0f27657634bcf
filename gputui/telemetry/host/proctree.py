"""The launchers above GPU processes (torchrun, `python -m torch.distributed.run`, mpirun,
srun, deepspeed, accelerate), and each GPU process's job, for one tick.

`JobTracker.annotate` runs on the sampling thread: it walks each new GPU process's
ancestors once (/proc/PID/stat and cmdline, no psutil), remembers the launchers it found
per (PID, start time), and afterwards only checks that those launchers are still the same
processes.  `forest` (pure) orders rows as trees for the Processes tab.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from gputui.telemetry.host.cmdline import launcher_kind
from gputui.telemetry.host.jobs import JobCache
from gputui.telemetry.model import GpuProcess, Job, LauncherProcess

MAX_DEPTH = 64
"""Ancestors walked at most (a guard against a corrupt /proc)."""


@dataclass(frozen=True, slots=True)
class ProcStat:
    """What /proc/PID/stat and cmdline say about one process."""

    pid: int
    ppid: int
    pgid: int
    sid: int
    start_ticks: int
    """Start time in clock ticks since boot: with the PID, one process."""
    name: str
    cmdline: tuple[str, ...] | None


def read_stat(pid: int, proc: str = "/proc", *, cmdline: bool = True) -> ProcStat | None:
    """None when the process does not exist (or /proc cannot be read); the command line
    only with `cmdline`."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    head, sep, tail = raw.rpartition(b")")
    if not sep:
        return None
    name = head.partition(b"(")[2].decode("utf-8", "replace")
    fields = tail.split()
    try:
        ppid, pgid, sid, start = int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19])
    except (IndexError, ValueError):
        return None
    if not cmdline:
        return ProcStat(pid, ppid, pgid, sid, start, name, None)
    try:
        with open(f"{proc}/{pid}/cmdline", "rb") as f:
            data = f.read(1 << 16)
        argv = tuple(a.decode("utf-8", "replace") for a in data.split(b"\0")[:-1]) if data else None
    except OSError:
        argv = None
    return ProcStat(pid, ppid, pgid, sid, start, name, argv)


def _start_time(pid: int) -> float | None:
    """The start time as `gputui.telemetry.host.starttime.start_time` reads it (what signals check)."""
    import psutil

    from gputui.telemetry.host.starttime import start_time

    try:
        return start_time(psutil.Process(pid))
    except psutil.Error:
        return None


def _owner(pid: int, proc: str) -> str | None:
    try:
        uid = os.stat(f"{proc}/{pid}").st_uid
    except OSError:
        return None
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


class JobTracker:
    """Adds `job` and `launcher` to a tick's GPU processes and lists their launchers."""

    def __init__(self, proc: str = "/proc") -> None:
        self.proc = proc
        self.jobs = JobCache(proc)
        self._chains: dict[tuple[int, float], tuple[tuple[int, int], ...]] = {}
        """(PID, start time) of a GPU process -> its launchers, nearest first, as (PID, start ticks)."""
        self._launchers: dict[tuple[int, int], LauncherProcess] = {}
        self.begin()

    def _walk(self, pid: int) -> tuple[tuple[int, int], ...]:
        chain: list[tuple[int, int]] = []
        st = read_stat(pid, self.proc, cmdline=False)
        depth = 0
        while st is not None and st.ppid > 1 and depth < MAX_DEPTH:
            depth += 1
            parent = self._stats.get(st.ppid)
            if parent is None:  # ranks share their ancestors: each is read once a tick
                parent = self._stats[st.ppid] = read_stat(st.ppid, self.proc)
            if parent is None:
                break
            kind = launcher_kind(parent.cmdline, parent.name)
            if kind is not None:
                key = (parent.pid, parent.start_ticks)
                chain.append(key)
                if key not in self._launchers:
                    created = _start_time(parent.pid)
                    if created is None:
                        break
                    self._launchers[key] = LauncherProcess(
                        pid=parent.pid,
                        create_time=created,
                        kind=kind,
                        name=parent.name,
                        user=_owner(parent.pid, self.proc),
                        cmdline=parent.cmdline,
                        pgid=parent.pgid,
                        sid=parent.sid,
                        job=self.jobs.get(parent.pid, created),
                    )
            st = parent
        return tuple(chain)

    def _alive(self, key: tuple[int, int]) -> bool:
        st = read_stat(key[0], self.proc, cmdline=False)
        return st is not None and st.start_ticks == key[1]

    def begin(self) -> None:
        """Start a tick: `attribute` each process, then `end`."""
        self._used: dict[tuple[int, int], int | None] = {}
        self._alive_now: dict[tuple[int, int], bool] = {}
        self._present: set[tuple[int, float]] = set()
        self._stats: dict[int, ProcStat | None] = {}

    def attribute(self, pid: int, create_time: float) -> tuple[Job | None, int | None]:
        """(job, PID of the nearest launcher) of one visible process."""
        ident = (pid, create_time)
        self._present.add(ident)
        chain = self._chains.get(ident)
        if chain is not None:
            alive = self._alive_now
            for k in chain:
                if k not in alive:
                    alive[k] = self._alive(k)
            if not all(alive[k] for k in chain):
                chain = None  # a launcher has gone: the process was re-parented
        if chain is None:
            chain = self._chains[ident] = self._walk(pid)
            for k in chain:
                self._alive_now[k] = True
        for i, k in enumerate(chain):
            self._used[k] = chain[i + 1][0] if i + 1 < len(chain) else None
        return self.jobs.get(pid, create_time), chain[0][0] if chain else None

    def end(self) -> tuple[LauncherProcess, ...]:
        """The launchers of this tick's processes; forget processes no longer seen."""
        present, used = self._present, self._used
        for ident in [k for k in self._chains if k not in present]:
            del self._chains[ident]
        for key in [k for k in self._launchers if k not in used]:
            del self._launchers[key]
        launchers = []
        for key, parent in used.items():
            lp = self._launchers.get(key)
            if lp is not None:
                launchers.append(lp if lp.launcher == parent else replace(lp, launcher=parent))
        self.jobs.prune([*present, *((lp.pid, lp.create_time) for lp in self._launchers.values())])
        return tuple(sorted(launchers, key=lambda lp: lp.pid))

    def annotate(
        self, processes: Sequence[GpuProcess]
    ) -> tuple[list[GpuProcess], tuple[LauncherProcess, ...]]:
        """`job` and `launcher` set on each visible process, and the launchers."""
        self.begin()
        out = []
        for p in processes:
            if p.visible and p.create_time is not None:
                job, launcher = self.attribute(p.pid, p.create_time)
                out.append(replace(p, job=job, launcher=launcher))
            else:
                out.append(p)
        return out, self.end()


# --------------------------------------------------------------------------------------
# trees, as the Processes tab lays them out
# --------------------------------------------------------------------------------------

N = TypeVar("N")


def forest(
    nodes: Iterable[N],
    key: Callable[[N], Hashable],
    parent: Callable[[N], Hashable | None],
    order: Callable[[list[N]], list[N]],
) -> list[tuple[N, str]]:
    """Nodes in tree order, each with the prefix that draws its branch (`├─ `, `└─ `,
    `│  `): roots are nodes whose parent is not among `nodes`; `order` sorts siblings."""
    items = list(nodes)
    keys = {key(n) for n in items}
    children: dict[Hashable, list[N]] = {}
    roots: list[N] = []
    for n in items:
        par = parent(n)
        if par is not None and par in keys and par != key(n):
            children.setdefault(par, []).append(n)
        else:
            roots.append(n)
    out: list[tuple[N, str]] = []
    seen: set[Hashable] = set()

    def visit(n: N, lead: str, branch: str) -> None:
        k = key(n)
        if k in seen:
            return
        seen.add(k)
        out.append((n, lead + branch))
        kids = order(children.get(k, []))
        deeper = lead + ("│  " if branch == "├─ " else "   " if branch else "")
        for i, c in enumerate(kids):
            visit(c, deeper, "└─ " if i == len(kids) - 1 else "├─ ")

    for r in order(roots):
        visit(r, "", "")
    return out
