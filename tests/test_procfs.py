"""The /proc host sampler (no psutil) against psutil's readings of the same machine, and
against /proc trees written by the test (old kernels, odd files)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gputui.telemetry.host.processes import HostSampler
from gputui.telemetry.host.procfs import (
    ProcHostSampler,
    cpu_percents,
    host_sampler,
    read_cpu_times,
    read_meminfo,
)

REPO = Path(__file__).resolve().parents[1]


def test_it_agrees_with_psutil_on_this_machine() -> None:
    mine, theirs = ProcHostSampler(), HostSampler()
    time.sleep(0.25)
    a, b = mine.sample(), theirs.sample()
    assert len(a.per_cpu) == len(b.per_cpu) == psutil.cpu_count()
    assert a.mem_total == b.mem_total == psutil.virtual_memory().total
    assert a.mem_available is not None and b.mem_available is not None
    assert abs(a.mem_available - b.mem_available) < 256 * 2**20  # moments apart
    assert a.mem_used is not None and a.mem_used + a.mem_available == a.mem_total
    assert a.swap_total == b.swap_total
    assert a.load_avg is not None and b.load_avg is not None
    assert a.load_avg == pytest.approx(b.load_avg, abs=0.5)
    assert a.uptime == pytest.approx(time.time() - psutil.boot_time(), abs=2)
    assert a.cpu_percent is not None and 0.0 <= a.cpu_percent <= 100.0


def test_a_busy_child_shows_as_busy() -> None:
    sampler = ProcHostSampler()
    before = read_cpu_times()
    busy = subprocess.Popen(
        [sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<30: pass"]
    )
    try:
        deadline = time.monotonic() + 30
        while sum(psutil.Process(busy.pid).cpu_times()[:2]) < 0.5:
            assert time.monotonic() < deadline, "the busy child got no CPU time"
            time.sleep(0.05)
        s = sampler.sample()
        after = read_cpu_times()
        spun = sum(psutil.Process(busy.pid).cpu_times()[:2])
    finally:
        busy.kill()
        busy.wait(timeout=10)
    assert max(s.per_cpu) > 0
    assert s.cpu_percent is not None and s.cpu_percent > 0
    # every busy clock tick of the child is in the machine's busy time
    busy_jiffies = sum(b for b, _ in after) - sum(b for b, _ in before)
    assert busy_jiffies >= 0.9 * spun * os.sysconf("SC_CLK_TCK") - 5


def test_cpu_percent_counts_iowait_as_idle_and_guest_once(tmp_path: Path) -> None:
    # user nice system idle iowait irq softirq steal guest guest_nice
    (tmp_path / "stat").write_text("cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 100 0 100 700 100 0 0 0 50 0\nintr 1\n")
    before = read_cpu_times(str(tmp_path))
    assert before == ((200, 1000),)  # guest is inside user already: not added again
    (tmp_path / "stat").write_text("cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 150 0 150 750 150 0 0 0 90 0\n")
    after = read_cpu_times(str(tmp_path))
    assert cpu_percents(before, after) == (50.0,)  # 100 busy of 200 (iowait is idle)
    assert cpu_percents(after, after) == (0.0,)  # no time passed: 0, not a division error


def test_an_old_kernel_without_memavailable_or_loadavg(tmp_path: Path) -> None:
    (tmp_path / "stat").write_text("cpu  1 2 3 4\ncpu0 1 2 3 4\ncpu1 1 2 3 4\n")  # 4 columns only
    (tmp_path / "meminfo").write_text(
        "MemTotal:       1000 kB\nMemFree:         100 kB\nBuffers:          50 kB\n"
        "Cached:          250 kB\nSwapTotal:         0 kB\nSwapFree:          0 kB\nHugePages_Total: 0\n"
    )
    (tmp_path / "uptime").write_text("12345.67 999.0\n")
    s = ProcHostSampler(str(tmp_path), min_interval=0).sample()
    assert s.per_cpu == (0.0, 0.0)
    assert s.mem_total == 1000 * 1024
    assert s.mem_available == 400 * 1024  # free + buffers + cached
    assert s.mem_used == 600 * 1024
    assert s.swap_total == 0 and s.swap_used == 0
    assert s.load_avg is None  # no /proc/loadavg: None, not a crash
    assert s.uptime == 12345.7
    assert read_meminfo(str(tmp_path))["HugePages_Total"] == 0  # a count, not kB


def test_a_cpu_going_offline_restarts_the_measurement(tmp_path: Path) -> None:
    (tmp_path / "stat").write_text("cpu  0\ncpu0 10 0 0 90\ncpu1 10 0 0 90\n")
    (tmp_path / "meminfo").write_text("MemTotal: 1 kB\n")
    sampler = ProcHostSampler(str(tmp_path), min_interval=0)
    (tmp_path / "stat").write_text("cpu  0\ncpu0 60 0 0 140\n")
    assert sampler.sample().per_cpu == (0.0,)
    (tmp_path / "stat").write_text("cpu  0\ncpu0 110 0 0 190\n")
    assert sampler.sample().per_cpu == (50.0,)


def test_no_cpu_percent_over_too_short_a_time() -> None:
    """The kernel counts CPU time in 10 ms ticks: a few ms say nothing.  A one-shot reader
    gets None (null in the JSON), and the next sample covers the whole time since."""
    sampler = ProcHostSampler(min_interval=0.2)
    first = sampler.sample()
    assert first.cpu_percent is None and first.per_cpu == ()
    assert first.mem_total is not None and first.load_avg is not None  # the rest is there
    time.sleep(0.25)
    later = sampler.sample()
    assert later.cpu_percent is not None and len(later.per_cpu) == psutil.cpu_count()


def test_linux_gets_the_proc_sampler() -> None:
    assert isinstance(host_sampler(), ProcHostSampler)


def test_a_live_snapshot_imports_neither_psutil_nor_logging() -> None:
    """What `gputui snapshot` without --processes loads on a live machine (psutil: 13-47 ms)."""
    code = (
        "import sys\n"
        "from gputui.commands import snapshot\n"
        "from gputui.export import snapshot as fields\n"
        "from gputui.telemetry.nvml.source import NvmlSource\n"
        "src = NvmlSource(slow=False, enrich_processes=False, static=())\n"
        "src.open(); src.sample()\n"
        "heavy = ('psutil', 'logging', 'argparse', 'socket', 'datetime')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "['argparse']"
