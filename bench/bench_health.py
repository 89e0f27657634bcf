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
   ranks), every process given a state, CPU time per tick, three passes.  With them the
   efficiency hints and the input_bound hint (`HintEngine.update`), every process given 4
   pegged workers (`worker_cpu`) and every GPU a bursty utilization, so the hint's whole
   path runs on every GPU at every tick; the issue's budget (0.5 % of a core at 1 Hz) is for
   the two together.
3. The children's CPU read (`WorkerCpu`, sampling thread, once every 10 s): N ranks of one
   thread with 4 sleeping children each (`sh` and `sleep`), CPU time of one read; and 8
   Python ranks of 64 threads with 4 children each, to price a rank's threads (a torch rank
   has dozens: /proc/PID/task/TID/children is one file per thread).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gputui.telemetry.health import HealthEngine  # noqa: E402
from gputui.telemetry.hints import HintEngine  # noqa: E402
from gputui.telemetry.host import processes as host  # noqa: E402
from gputui.telemetry.host.workers import WorkerCpu  # noqa: E402
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
        dataclasses.replace(
            s,
            gpus=tuple(dataclasses.replace(g, gpu_util=(0, 90, 20)[s.seq % 3]) for g in s.gpus),
            processes=tuple(
                dataclasses.replace(p, state="S", worker_cpu=(99.0, 98.0, 97.0, 96.0)) for p in s.processes
            ),
        )
        for s in read_recording(JOBS_240)[1]
    ]
    verdicts: list[float] = []
    hints: list[float] = []
    fired = 0
    for _ in range(3):
        engine, hinter = HealthEngine(), HintEngine()
        for s in snaps:
            t0 = time.process_time()
            engine.update(s)
            t1 = time.process_time()
            got = hinter.update(s)
            hints.append(time.process_time() - t1)
            verdicts.append(t1 - t0)
            fired += sum(h.kind == "input_bound" for gh in got.values() for h in gh)
    both = [a + b for a, b in zip(verdicts, hints, strict=True)]
    mean = sum(both) / len(both)
    return {
        "ticks": len(both),
        "max_processes": max(len(s.processes) for s in snaps),
        "verdicts_ms_median": round(statistics.median(verdicts) * 1e3, 3),
        "hints_ms_median": round(statistics.median(hints) * 1e3, 3),
        "input_bound_hints_given": fired,
        "update_ms_mean": round(mean * 1e3, 3),
        "pct_of_core_at_1hz": round(mean * 100, 3),
    }


THREADED_RANK = """
import os, threading, time
for _ in range(4):
    if os.fork() == 0:
        time.sleep(600); os._exit(0)
for _ in range(63):
    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
print("ready", flush=True)
time.sleep(600)
"""


def workers_cost(n: int, rounds: int) -> dict[str, float | int]:
    ranks = [
        subprocess.Popen(["sh", "-c", "sleep 600 & sleep 600 & sleep 600 & sleep 600 & wait"])
        for _ in range(n)
    ]
    threaded = [
        subprocess.Popen([sys.executable, "-c", THREADED_RANK], stdout=subprocess.PIPE, text=True)
        for _ in range(8)
    ]
    try:
        for t in threaded:
            assert t.stdout is not None
            t.stdout.readline()
        time.sleep(0.5)  # the shells have started their children

        def read_cost(
            procs: list[subprocess.Popen[str]] | list[subprocess.Popen[bytes]],
        ) -> tuple[float, int]:
            w = WorkerCpu(interval=0.0)
            idents = [(p.pid, None) for p in procs]
            w.get(idents, time.time())
            spent = []
            for _ in range(rounds):
                t0 = time.process_time()
                got = w.get(idents, time.time())
                spent.append(time.process_time() - t0)
            counted = sum(len(v or ()) for v in got.values())
            return statistics.median(spent), counted

        one, kids = read_cost(ranks)
        many, kids64 = read_cost(threaded)
    finally:
        for p in [*ranks, *threaded]:
            for child in WorkerCpu.children(p.pid) or []:  # by PID, before they are reparented
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child, signal.SIGKILL)
            p.kill()
            p.wait()
    return {
        "ranks": n,
        "children_measured": kids,
        "read_ms": round(one * 1e3, 2),
        "pct_of_core_read_every_10s": round(one * 100 / 10, 3),
        "threaded_ranks": 8,
        "threaded_children_measured": kids64,
        "read_ms_per_64_thread_rank": round(many * 1e3 / 8, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--processes", type=int, default=240)
    ap.add_argument("--rounds", type=int, default=30)
    a = ap.parse_args()
    print("state read:", state_cost(a.processes, a.rounds))
    print("verdicts + hints:", verdict_cost())
    print("children's CPU:", workers_cost(a.processes, a.rounds))


if __name__ == "__main__":
    main()
