"""What job attribution and the launcher walk cost the sampling thread per tick, with and
without the per-(PID, start time) cache, on real processes of this machine.

    python bench/bench_jobs.py [--processes 240] [--ticks 20]

Starts N real processes (`sleep`, in groups of 8 under a launcher named `torchrun`, as
torchrun lays out ranks), then times, per tick: reading every process's job afresh
(/proc/PID/cgroup and environ, `read_job`: no cache), and `JobTracker.annotate` (the
cache: the first tick reads everything, later ticks only check the launchers).  Prints
one JSON object; the figures go to bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import contextlib

from gputui.telemetry.host.jobs import read_job
from gputui.telemetry.host.processes import ProcessInspector
from gputui.telemetry.host.proctree import JobTracker
from gputui.telemetry.model import GpuProcess

LAUNCHER = """
import subprocess, sys, time
n = int(sys.argv[sys.argv.index("--nproc-per-node") + 1])
kids = [subprocess.Popen(["sleep", "600"]) for _ in range(n)]
print(" ".join(str(k.pid) for k in kids), flush=True)
time.sleep(600)
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--processes", type=int, default=240)
    ap.add_argument("--ticks", type=int, default=20)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    (tmp / "torchrun").write_text(LAUNCHER)
    launchers = []
    pids: list[int] = []
    try:
        for _ in range(a.processes // 8):
            p = subprocess.Popen(
                [sys.executable, str(tmp / "torchrun"), "--nproc-per-node", "8"],
                stdout=subprocess.PIPE,
                start_new_session=True,
            )
            launchers.append(p)
            assert p.stdout is not None
            pids += [int(x) for x in p.stdout.readline().split()]
        procs = ProcessInspector(verify_gpu_files=False).enrich(
            [GpuProcess(i % 8, pid) for i, pid in enumerate(pids)]
        )
        nocache = []
        for _ in range(a.ticks):
            t0 = time.perf_counter()
            for pid in pids:
                read_job(pid)
            nocache.append(time.perf_counter() - t0)
        tracker = JobTracker()
        cached = []
        found: tuple[object, ...] = ()
        got: list[tuple[object, int | None]] = []
        for _ in range(a.ticks):  # what ProcessInspector.enrich does for the jobs, per tick
            t0 = time.perf_counter()
            tracker.begin()
            got = [tracker.attribute(p.pid, p.create_time) for p in procs if p.create_time is not None]
            found = tracker.end()
            cached.append(time.perf_counter() - t0)
        assert len(found) == len(launchers)
        assert all(launcher for _, launcher in got)
        result = {
            "machine": f"{platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
            "processes": len(pids),
            "launchers": len(found),
            "ticks": a.ticks,
            "no_cache_ms_per_tick_median": round(1000 * statistics.median(nocache), 2),
            "cached_first_tick_ms": round(1000 * cached[0], 2),
            "cached_ms_per_tick_median_after_first": round(1000 * statistics.median(cached[1:]), 2),
            "cache_reads_total": tracker.jobs.reads,
        }
        print(json.dumps(result))
    finally:
        for p in launchers:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, 9)
            p.wait()


if __name__ == "__main__":
    main()
