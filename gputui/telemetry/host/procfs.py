"""The host's CPU, memory, load and uptime read straight from /proc, without psutil.

psutil reads the same files; importing it costs 13 ms (47 ms in an environment whose
.pyc files were never written), which is a fifth of a one-shot `gputui snapshot`.  Where
/proc/stat cannot be read (not Linux), `host_sampler()` falls back to psutil's sampler.
"""

from __future__ import annotations

import os
import time
from typing import Protocol

from gputui.telemetry.model import HostSample


class Sampler(Protocol):
    def sample(self) -> HostSample: ...


CpuTimes = tuple[tuple[int, int], ...]
"""Per CPU: (busy, total) jiffies since boot."""


def read_cpu_times(root: str = "/proc") -> CpuTimes:
    """(busy, total) per CPU from /proc/stat, as psutil counts them: idle and iowait are
    not busy, and guest time is already inside user and nice so it is not added again."""
    out = []
    with open(f"{root}/stat", "rb") as f:
        for line in f:
            if not line.startswith(b"cpu"):
                break
            if line[3:4] == b" ":  # the all-CPU line
                continue
            v = [int(x) for x in line.split()[1:]]
            v += [0] * (10 - len(v))  # old kernels have fewer columns
            total = sum(v[:8])  # user nice system idle iowait irq softirq steal (not guest*)
            out.append((total - v[3] - v[4], total))
    return tuple(out)


def read_meminfo(root: str = "/proc") -> dict[str, int]:
    """/proc/meminfo in bytes."""
    out = {}
    with open(f"{root}/meminfo", "rb") as f:
        for line in f:
            key, _, rest = line.partition(b":")
            words = rest.split()
            if words:
                n = int(words[0])
                out[key.decode()] = n * 1024 if len(words) > 1 and words[1] == b"kB" else n
    return out


def cpu_percents(before: CpuTimes, after: CpuTimes) -> tuple[float, ...]:
    """Busy percent of each CPU between two readings (0.0 where no time passed)."""
    out = []
    for (b0, t0), (b1, t1) in zip(before, after, strict=False):
        dt = t1 - t0
        out.append(round(min(100.0, max(0.0, 100.0 * (b1 - b0) / dt)), 1) if dt > 0 else 0.0)
    return tuple(out)


class ProcHostSampler:
    """CPU %, memory, swap, load and uptime from /proc.  CPU % covers the time since the
    previous sample (the first: since the sampler was made); over less than `min_interval`
    seconds the kernel's 10 ms ticks say nothing, so CPU % is None until that has passed
    (a one-shot `gputui snapshot` prints null rather than noise)."""

    def __init__(self, root: str = "/proc", min_interval: float = 0.2) -> None:
        self._root = root
        self._min_interval = min_interval
        self._prev = read_cpu_times(root)
        self._prev_at = time.monotonic()

    def sample(self) -> HostSample:
        root = self._root
        per_cpu: tuple[float, ...] = ()
        if time.monotonic() - self._prev_at >= self._min_interval:
            now = read_cpu_times(root)
            per_cpu = cpu_percents(self._prev, now)
            if len(now) != len(self._prev):  # a CPU went on- or offline: start over from here
                per_cpu = tuple(0.0 for _ in now)
            self._prev, self._prev_at = now, time.monotonic()
        mem = read_meminfo(root)
        total = mem.get("MemTotal")
        avail = mem.get("MemAvailable")
        if avail is None and total is not None:  # kernels before 3.14
            avail = mem.get("MemFree", 0) + mem.get("Buffers", 0) + mem.get("Cached", 0)
        swap_total = mem.get("SwapTotal")
        swap_free = mem.get("SwapFree")
        try:
            with open(f"{root}/loadavg", "rb") as f:
                words = f.read().split()
            load: tuple[float, float, float] | None = (
                round(float(words[0]), 2),
                round(float(words[1]), 2),
                round(float(words[2]), 2),
            )
        except (OSError, ValueError, IndexError):
            load = None
        try:
            with open(f"{root}/uptime", "rb") as f:
                uptime: float | None = round(float(f.read().split()[0]), 1)
        except (OSError, ValueError, IndexError):
            uptime = None
        return HostSample(
            cpu_percent=round(sum(per_cpu) / len(per_cpu), 1) if per_cpu else None,
            per_cpu=per_cpu,
            mem_total=total,
            mem_used=None if total is None or avail is None else total - avail,
            mem_available=avail,
            swap_total=swap_total,
            swap_used=None if swap_total is None or swap_free is None else swap_total - swap_free,
            load_avg=load,
            uptime=uptime,
        )


def host_sampler() -> Sampler:
    """/proc's sampler on Linux; psutil's where /proc/stat is missing or unreadable."""
    if os.path.exists("/proc/stat"):
        try:
            return ProcHostSampler()
        except (OSError, ValueError):
            pass
    from gputui.telemetry.host.processes import HostSampler

    return HostSampler()
