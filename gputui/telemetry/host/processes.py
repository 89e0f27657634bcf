"""The host side, through psutil: CPU, memory, load, and what each GPU process is.

Also what the processes view needs beyond a tick: whether a PID that NVML reports is
visible from gputui's PID namespace (containers), and the facts of one process that are
too costly to read every tick (environment, open files, children), read on demand.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TypedDict, TypeVar

import psutil

from gputui.telemetry.host.pidns import in_host_pid_namespace
from gputui.telemetry.host.rank import ENVIRON_LIMIT, environ_rank
from gputui.telemetry.host.starttime import start_time
from gputui.telemetry.host.workers import WorkerCpu
from gputui.telemetry.model import GpuProcess, HostSample, Job, LauncherProcess

T = TypeVar("T")

#: Every process using an NVIDIA GPU holds some of these device files open.
GPU_DEVICE_PREFIX = "/dev/nvidia"


def gpu_device_files(pid: int, prefix: str | None = None) -> tuple[str, ...] | None:
    """The NVIDIA device files the process holds open (sorted, each once); None when its
    file descriptors cannot be read (another user's process, without root)."""
    prefix = GPU_DEVICE_PREFIX if prefix is None else prefix
    found: set[str] = set()
    try:
        with os.scandir(f"/proc/{pid}/fd") as it:
            for entry in it:
                try:
                    target = os.readlink(entry.path)
                except OSError:
                    continue  # closed meanwhile
                if target.startswith(prefix):
                    found.add(target)
    except (PermissionError, FileNotFoundError, ProcessLookupError, NotADirectoryError):
        return None
    return tuple(sorted(found))


class HostSampler:
    """Samples the host's CPU, memory, swap, load and uptime without blocking."""

    def __init__(self) -> None:
        # psutil's cpu_percent measures since the previous call: prime it so the first
        # real sample covers the time since gputui started rather than returning zeros.
        psutil.cpu_percent(percpu=True)
        self._boot_time = psutil.boot_time()

    def sample(self) -> HostSample:
        per_cpu = tuple(psutil.cpu_percent(percpu=True))
        vm = psutil.virtual_memory()
        sw = psutil.swap_memory()
        try:
            load = psutil.getloadavg()
            load_avg: tuple[float, float, float] | None = (
                round(load[0], 2),
                round(load[1], 2),
                round(load[2], 2),
            )
        except (AttributeError, OSError):
            load_avg = None
        return HostSample(
            cpu_percent=round(sum(per_cpu) / len(per_cpu), 1) if per_cpu else None,
            per_cpu=per_cpu,
            mem_total=vm.total,
            mem_used=vm.total - vm.available,
            mem_available=vm.available,
            swap_total=sw.total,
            swap_used=sw.used,
            load_avg=load_avg,
            uptime=round(time.time() - self._boot_time, 1),
        )


class HostFacts(TypedDict, total=False):
    """What psutil adds to a GpuProcess: `GpuProcess` fields, typed, so a misspelt or
    mistyped one is an error for mypy, not a TypeError at run time."""

    visible: bool
    name: str | None
    user: str | None
    cmdline: tuple[str, ...] | None
    cpu_percent: float | None
    rss: int | None
    create_time: float | None
    job: Job | None
    launcher: int | None
    state: str | None
    rank: int | None
    worker_cpu: tuple[float, ...] | None


def environ_values(pid: int, names: Iterable[bytes], proc: str = "/proc") -> dict[bytes, bytes] | None:
    """The variables `names` present in a process's environment (its first MiB); None when
    the environment is unreadable (another user's process, without root; gone)."""
    try:
        with open(f"{proc}/{pid}/environ", "rb") as f:
            data = f.read(ENVIRON_LIMIT)
    except OSError:
        return None
    wanted = set(names)
    found: dict[bytes, bytes] = {}
    for item in data.split(b"\0"):
        name, eq, value = item.partition(b"=")
        if eq and name in wanted:
            found[name] = value
    return found


#: psutil's names of the states in /proc/PID/stat -> the kernel's letters (`GpuProcess.state`).
STATE_LETTERS = {
    "running": "R",
    "sleeping": "S",
    "disk-sleep": "D",
    "stopped": "T",
    "tracing-stop": "t",
    "zombie": "Z",
    "dead": "X",
    "wake-kill": "K",
    "waking": "W",
    "parked": "P",
    "idle": "I",
}


def _state(proc: psutil.Process) -> str | None:
    """The state letter; call inside `proc.oneshot()` after `cpu_times()`: psutil then
    takes it from the /proc/PID/stat it has already read (no further read)."""
    try:
        return STATE_LETTERS.get(proc.status())
    except psutil.AccessDenied:
        return None


@dataclass
class _Tracked:
    proc: psutil.Process
    create_time: float
    name: str | None
    user: str | None
    cmdline: tuple[str, ...] | None
    cpu_total: float
    seen_at: float
    rank: int | None = None


class ProcessInspector:
    """Adds host facts (user, command line, CPU %, RSS, start time) to NVML's processes.

    psutil objects are kept between ticks, keyed by PID and checked against their start
    time, so a reused PID is never mistaken for the process seen before, and CPU % is a
    real rate from the first tick a process is seen (its average since it started, then the
    rate since the previous tick).

    NVML reports PIDs of the host's PID namespace.  Inside a container without the host's
    PID namespace such a PID does not exist locally, or is some other local process.  So
    where gputui is not in the host's PID namespace (or when `verify_gpu_files` is set),
    a process is shown as the GPU process only if it holds an NVIDIA device file open;
    otherwise its row is marked not visible and carries no host facts.  The check reads
    /proc/PID/fd once per process, not every tick.
    """

    def __init__(self, verify_gpu_files: bool | None = None) -> None:
        self._tracked: dict[int, _Tracked] = {}
        self._foreign: dict[int, psutil.Process] = {}
        """PIDs that exist here but are not the GPU process NVML means."""
        host_ns = in_host_pid_namespace()
        self.verify_gpu_files = (host_ns is not True) if verify_gpu_files is None else verify_gpu_files
        """Check that a local process with NVML's PID really holds an NVIDIA device file."""
        self._unverifiable_is_foreign = host_ns is False
        """Outside the host's namespace, a process whose files cannot be read is not trusted."""
        from gputui.telemetry.host.proctree import JobTracker

        self.jobs = JobTracker()
        """Each process's job (cgroup, environment) and launcher, cached per process."""
        self.launchers: tuple[LauncherProcess, ...] = ()
        """The launchers of the processes of the latest `enrich`."""
        self.workers = WorkerCpu()
        """Each GPU process's children's CPU (its DataLoader workers), on a slower cadence."""

    def enrich(self, processes: Iterable[GpuProcess], now: float | None = None) -> list[GpuProcess]:
        now = time.time() if now is None else now
        procs = list(processes)
        facts: dict[int, HostFacts | None] = {}
        for pid in {p.pid for p in procs}:
            facts[pid] = self._describe(pid, now)
        for pid in set(self._tracked) - set(facts):
            del self._tracked[pid]
        for pid in set(self._foreign) - set(facts):
            del self._foreign[pid]
        out = []
        jobs = self.jobs
        jobs.begin()
        readable = [(pid, f.get("create_time")) for pid, f in facts.items() if f and "create_time" in f]
        workers = self.workers.get(readable, now)
        for p in procs:
            f = facts.get(p.pid)
            if f is None:
                out.append(replace(p, visible=False))
                continue
            created = f.get("create_time")
            if isinstance(created, float):
                job, launcher = jobs.attribute(p.pid, created)
                f = {**f, "job": job, "launcher": launcher, "worker_cpu": workers.get((p.pid, created))}
            out.append(replace(p, **f))
        self.launchers = jobs.end()
        return out

    def _is_foreign(self, pid: int) -> bool:
        """Seen before as a local process that is not the GPU process, and still the same."""
        proc = self._foreign.get(pid)
        if proc is None:
            return False
        if proc.is_running():
            return True
        del self._foreign[pid]
        return False

    def _describe(self, pid: int, now: float) -> HostFacts | None:
        tracked = self._tracked.get(pid)
        try:
            if tracked is None:
                if self._is_foreign(pid):
                    return None
                proc = psutil.Process(pid)
                with proc.oneshot():
                    create_time = start_time(proc)
                    name = _safe(proc.name)
                    user = _safe(proc.username)
                    cmd = _safe(proc.cmdline)
                    times = proc.cpu_times()
                    state = _state(proc)
                    rss = proc.memory_info().rss
                if self.verify_gpu_files:
                    files = gpu_device_files(pid)
                    if (files is not None and not files) or (files is None and self._unverifiable_is_foreign):
                        self._foreign[pid] = proc
                        return None
                cpu_total = times.user + times.system
                elapsed = max(now - create_time, 1e-3)
                cpu_pct = 100.0 * cpu_total / elapsed
                tracked = _Tracked(
                    proc,
                    create_time,
                    name,
                    user,
                    tuple(cmd) if cmd is not None else None,
                    cpu_total,
                    now,
                    environ_rank(pid),
                )
                self._tracked[pid] = tracked
            else:
                proc = tracked.proc
                # is_running() compares a fresh reading of the start time with the one
                # psutil took first: it sees a PID that was reused by another process.
                if not proc.is_running() or start_time(proc) != tracked.create_time:
                    del self._tracked[pid]  # gone, or the PID was reused by another process
                    return self._describe(pid, now)
                with proc.oneshot():
                    times = proc.cpu_times()
                    state = _state(proc)
                    rss = proc.memory_info().rss
                cpu_total = times.user + times.system
                dt = now - tracked.seen_at
                cpu_pct = 100.0 * (cpu_total - tracked.cpu_total) / dt if dt > 0 else 0.0
                tracked.cpu_total, tracked.seen_at = cpu_total, now
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            self._tracked.pop(pid, None)
            return None
        except psutil.AccessDenied:
            return {"visible": True}
        return {
            "visible": True,
            "name": tracked.name,
            "user": tracked.user,
            "cmdline": tracked.cmdline,
            "cpu_percent": round(max(cpu_pct, 0.0), 1),
            "rss": rss,
            "create_time": tracked.create_time,
            "state": state,
            "rank": tracked.rank,
        }


@dataclass(frozen=True, slots=True)
class ProcessDetail:
    """One process's facts that are too costly to read every tick, read on demand (the
    detail view, off the UI thread).  None = could not be read."""

    pid: int
    create_time: float
    exists: bool
    """False when the process has exited, or its PID now belongs to another process."""
    cmdline: tuple[str, ...] | None = None
    exe: str | None = None
    cwd: str | None = None
    user: str | None = None
    status: str | None = None
    threads: int | None = None
    ppid: int | None = None
    parent: str | None = None
    """The parent's name and command line."""
    children: tuple[tuple[int, str], ...] = ()
    """(PID, name) of each direct child."""
    environ: tuple[tuple[str, str], ...] | None = None
    """Sorted by name; None when not readable (see `environ_error`)."""
    environ_error: str | None = None
    gpu_files: tuple[str, ...] | None = None
    """NVIDIA device files it holds open; None when its file descriptors are not readable."""
    rss: int | None = None
    vms: int | None = None


def describe_process(pid: int, create_time: float | None) -> ProcessDetail:
    """Everything the detail view shows about one process, if it is still the one that
    started at `create_time` (any start time when None).  Blocking: call off the UI thread."""
    gone = ProcessDetail(pid, create_time or 0.0, exists=False)
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            started = start_time(proc)
            if create_time is not None and abs(started - create_time) > 0.005:
                return gone
            cmd = _safe(proc.cmdline)
            user = _safe(proc.username)
            status = _safe(proc.status)
            threads = _safe(proc.num_threads)
            ppid = _safe(proc.ppid)
            mem = _safe(proc.memory_info)
        exe = _safe(proc.exe)
        cwd = _safe(proc.cwd)
        parent = None
        if ppid:
            try:
                pproc = psutil.Process(ppid)
                pcmd = _safe(pproc.cmdline)
                parent = " ".join(pcmd) if pcmd else _safe(pproc.name)
            except psutil.Error:
                parent = None
        children: list[tuple[int, str]] = []
        for child in _safe(proc.children) or []:
            children.append((child.pid, _safe(child.name) or "?"))
        environ: tuple[tuple[str, str], ...] | None = None
        environ_error = None
        try:
            environ = tuple(sorted(proc.environ().items()))
        except psutil.AccessDenied:
            owner = user or "another user"
            environ_error = f"not readable: the process belongs to {owner} (root can read it)"
        except psutil.ZombieProcess:
            environ_error = "not readable: the process has exited"
        return ProcessDetail(
            pid,
            started,
            exists=True,
            cmdline=tuple(cmd) if cmd is not None else None,
            exe=exe or None,
            cwd=cwd,
            user=user,
            status=status,
            threads=threads,
            ppid=ppid,
            parent=parent,
            children=tuple(sorted(children)),
            environ=environ,
            environ_error=environ_error,
            gpu_files=gpu_device_files(pid),
            rss=getattr(mem, "rss", None),
            vms=getattr(mem, "vms", None),
        )
    except psutil.Error:
        return gone


def _safe(getter: Callable[[], T]) -> T | None:
    try:
        return getter()
    except (psutil.AccessDenied, psutil.ZombieProcess):
        return None
