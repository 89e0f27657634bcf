"""What job health costs: the process state on the sampling thread, and the verdicts.

    python bench/bench_health.py [--processes 240] [--rounds 30]

1. The state read (`GpuProcess.state`): `ProcessInspector.enrich` over N real processes of
   this machine (children started to make up N: sleepers), the tracked path that every
   tick after the first takes, with the state read and with it replaced by a constant
   (the cost before), interleaved rounds, CPU time of this process; and the state read
   alone, timed around it for each process (the difference of two noisy totals can hide
   it).  The state comes from the /proc/PID/stat psutil already reads for the CPU times
   (inside one `oneshot`): no further read.
2. The verdicts: `HealthEngine.update` over the derived 8-GPU, 240-process recording with
   jobs (tests/fixtures/derived/h200x8-nvswitch-240procs-jobs.jsonl.gz; 30 jobs of 8
   ranks), every process given a state, CPU time per tick, three passes.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gputui.telemetry.health import HealthEngine  # noqa: E402
from gputui.telemetry.host import processes as host  # noqa: E402
from gputui.telemetry.model import GpuProcess  # noqa: E402
from gputui.telemetry.recording import read_recording  # noqa: E402

JOBS_240 = ROOT / "tests/fixtures/derived/h200x8-nvswitch-240procs-jobs.jsonl.gz"


def state_cost(n: int, rounds: int) -> dict[str, float | str]:
    import psutil

    kids = []
    pids = [p.pid for p in psutil.process_iter() if p.pid > 1][:n]
    while len(pids) < n:
        kids.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]))
        pids.append(kids[-1].pid)
    rows = [GpuProcess(gpu_index=k % 8, pid=pid) for k, pid in enumerate(pids)]
    real_state = host._state
    try:
        insp = host.ProcessInspector(verify_gpu_files=False)
        insp.enrich(rows)  # first sight: psutil objects, command lines, environments
        with_state: list[float] = []
        without: list[float] = []
        for _ in range(rounds):
            for label, out in (("with", with_state), ("without", without)):
                host._state = real_state if label == "with" else (lambda proc: None)
                t0 = time.process_time()
                insp.enrich(rows)
                out.append(time.process_time() - t0)
        host._state = real_state
        states = {p.state for p in insp.enrich(rows)}
    finally:
        host._state = real_state
        for k in kids:
            k.kill()
            k.wait()
    procs = [psutil.Process(pid) for pid in pids if psutil.pid_exists(pid)]
    alone = []
    for _ in range(rounds):
        spent = 0.0
        for proc in procs:
            try:
                with proc.oneshot():
                    proc.cpu_times()
                    t0 = time.perf_counter()
                    real_state(proc)
                    spent += time.perf_counter() - t0
            except psutil.Error:
                pass
        alone.append(spent)
    w, wo = statistics.median(with_state), statistics.median(without)
    return {
        "processes": n,
        "enrich_ms_with_state": round(w * 1e3, 2),
        "enrich_ms_without_state": round(wo * 1e3, 2),
        "added_ms": round((w - wo) * 1e3, 3),
        "added_pct_of_core_at_1hz": round((w - wo) * 100, 4),
        "state_read_alone_ms": round(statistics.median(alone) * 1e3, 3),
        "states_seen": "".join(sorted(s or "?" for s in states)),
    }


def verdict_cost() -> dict[str, float]:
    snaps = [
        dataclasses.replace(s, processes=tuple(dataclasses.replace(p, state="S") for p in s.processes))
        for s in read_recording(JOBS_240)[1]
    ]
    per_tick = []
    for _ in range(3):
        engine = HealthEngine()
        for s in snaps:
            t0 = time.process_time()
            engine.update(s)
            per_tick.append(time.process_time() - t0)
    mean = sum(per_tick) / len(per_tick)
    return {
        "ticks": len(per_tick),
        "max_processes": max(len(s.processes) for s in snaps),
        "update_ms_median": round(statistics.median(per_tick) * 1e3, 3),
        "update_ms_mean": round(mean * 1e3, 3),
        "pct_of_core_at_1hz": round(mean * 100, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--processes", type=int, default=240)
    ap.add_argument("--rounds", type=int, default=30)
    a = ap.parse_args()
    print("state read:", state_cost(a.processes, a.rounds))
    print("verdicts:", verdict_cost())


if __name__ == "__main__":
    main()
