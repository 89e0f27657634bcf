"""The host side, through psutil: CPU, memory, load, and what each GPU process is."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TypeVar

import psutil

from gputui.telemetry.model import GpuProcess, HostSample

T = TypeVar("T")


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


@dataclass
class _Tracked:
    proc: psutil.Process
    create_time: float
    name: str | None
    user: str | None
    cmdline: tuple[str, ...] | None
    cpu_total: float
    seen_at: float


class ProcessInspector:
    """Adds host facts (user, command line, CPU %, RSS, start time) to NVML's processes.

    psutil objects are kept between ticks, keyed by PID and checked against their creation
    time, so a reused PID is never mistaken for the process seen before, and CPU % is a
    real rate from the first tick a process is seen (its average since it started, then the
    rate since the previous tick).
    """

    def __init__(self) -> None:
        self._tracked: dict[int, _Tracked] = {}

    def enrich(self, processes: Iterable[GpuProcess], now: float | None = None) -> list[GpuProcess]:
        now = time.time() if now is None else now
        procs = list(processes)
        facts: dict[int, dict[str, object] | None] = {}
        for pid in {p.pid for p in procs}:
            facts[pid] = self._describe(pid, now)
        for pid in set(self._tracked) - set(facts):
            del self._tracked[pid]
        out = []
        for p in procs:
            f = facts.get(p.pid)
            out.append(replace(p, visible=False) if f is None else replace(p, **f))  # type: ignore[arg-type]
        return out

    def _describe(self, pid: int, now: float) -> dict[str, object] | None:
        tracked = self._tracked.get(pid)
        try:
            if tracked is None:
                proc = psutil.Process(pid)
                with proc.oneshot():
                    create_time = proc.create_time()
                    name = _safe(proc.name)
                    user = _safe(proc.username)
                    cmd = _safe(proc.cmdline)
                    times = proc.cpu_times()
                    rss = proc.memory_info().rss
                cpu_total = times.user + times.system
                elapsed = max(now - create_time, 1e-3)
                cpu_pct = 100.0 * cpu_total / elapsed
                tracked = _Tracked(
                    proc, create_time, name, user, tuple(cmd) if cmd is not None else None, cpu_total, now
                )
                self._tracked[pid] = tracked
            else:
                proc = tracked.proc
                # psutil caches create_time() per Process object, so comparing it with the
                # record cannot see a reused PID; is_running() compares a fresh reading.
                if not proc.is_running() or proc.create_time() != tracked.create_time:
                    del self._tracked[pid]  # gone, or the PID was reused by another process
                    return self._describe(pid, now)
                with proc.oneshot():
                    times = proc.cpu_times()
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
        }


def _safe(getter: Callable[[], T]) -> T | None:
    try:
        return getter()
    except (psutil.AccessDenied, psutil.ZombieProcess):
        return None
