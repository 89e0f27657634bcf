"""What gputui's job features cost: attribution, health and stack dumps, on real processes.

    python bench/bench_jobs.py attribution [--processes 240] [--ticks 20]
    python bench/bench_jobs.py health [--processes 240] [--rounds 30] [--workers-only]
                                      [--rescan-every N]
    python bench/bench_jobs.py stacks [--procs 8] [--rounds 5] [--threads 0] [--native]
    python bench/bench_jobs.py verdicts [--procs 8] [--rounds 5]

attribution: job attribution and the launcher walk per tick on the sampling thread, with and
without the per-(PID, start time) cache.  Starts N real processes (`sleep`, in groups of 8
under a launcher named `torchrun`, as torchrun lays out ranks), then times, per tick: reading
every process's job afresh (/proc/PID/cgroup and environ, `read_job`: no cache), and the
JobTracker (the cache: the first tick reads everything, later ticks only check the
launchers).  Prints one JSON object.

health: job health's cost.
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
   thread with 4 sleeping children each (`sh` and `sleep`), CPU time of one read (the mean
   over the rounds, and the costliest); and three groups of 8 Python ranks of 64 threads:
   4 children forked from the main thread (a DataLoader's workers), 4 forked from another
   thread, none; per rank, and what 240 such ranks would cost at one read every 10 s.
   `--workers-only` runs this part alone; `--rescan-every N` reads every thread of a process
   at one read in N instead of `workers.RESCAN_EVERY`.

stacks: wall time of `gputui stacks` over N Python processes (issue 26: "a stack dump of 8
ranks: measure").  Starts N Python children, each blocked in a function a few frames deep
(with --threads T, each also has T idle threads, as a rank with data-loader and NCCL threads
has), then dumps all of them with gputui.stacks.dump.dump_many (in parallel, PARALLEL at
once) ROUNDS times and one at a time once; prints the median and each round.  Needs py-spy
and ptrace.  Every child is killed at the end.

verdicts: issue 32's budget (verdicts and stack sampling at most 0.5 % of a core at 1 Hz with
8 GPUs and 240 processes, replayed).
1. `HealthEngine.update` over the derived 8-GPU, 240-process recording with jobs (30 jobs of 8
   ranks), CPU time per tick, in three variants: every rank computing (state R, GPM figures on
   every GPU: the straggler path), every rank blocked past a 2 s `stuck_seconds` (the stuck
   path, a verdict every tick) without evidence, and the same with every rank's stack evidence
   and a RAS view of every job in the snapshots (BUILT here: one communicator per job, rank 1
   one AllReduce behind): what the engine costs with the most evidence to weigh.
2. The sampler (gputui.stacks.sampler): N Python children blocked a few frames deep, one pass
   of `StackSampler` over them (per_pass N), ROUNDS times: wall time of the pass, CPU of this
   process (the pass's thread and event loop) and of the py-spy children (RUSAGE_CHILDREN);
   and per tick, `attach` + `want` when nothing is due (the price every tick pays).  What a
   suspected 8-rank job costs at 1 Hz follows: its ranks read once per STACK_REFRESH.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gputui.stacks.dump import PARALLEL, dump_many, find_py_spy  # noqa: E402
from gputui.telemetry.health import HealthEngine  # noqa: E402
from gputui.telemetry.hints import HintEngine  # noqa: E402
from gputui.telemetry.host import processes as host  # noqa: E402
from gputui.telemetry.host.jobs import read_job  # noqa: E402
from gputui.telemetry.host.processes import ProcessInspector  # noqa: E402
from gputui.telemetry.host.proctree import JobTracker  # noqa: E402
from gputui.telemetry.host.workers import WorkerCpu  # noqa: E402
from gputui.telemetry.model import GpuProcess  # noqa: E402
from gputui.telemetry.recording import read_recording  # noqa: E402

JOBS_240 = ROOT / "tests/fixtures/derived/h200x8-nvswitch-240procs-jobs.jsonl.gz"


# ---- attribution ------------------------------------------------------------------------------

LAUNCHER = """
import subprocess, sys, time
n = int(sys.argv[sys.argv.index("--nproc-per-node") + 1])
kids = [subprocess.Popen(["sleep", "600"]) for _ in range(n)]
print(" ".join(str(k.pid) for k in kids), flush=True)
time.sleep(600)
"""


def attribution(a: argparse.Namespace) -> None:
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


# ---- health -----------------------------------------------------------------------------------


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
import os, sys, threading, time
def fork_workers():
    for _ in range(4):
        if os.fork() == 0:
            time.sleep(600); os._exit(0)
where = sys.argv[1]
if where == "main":
    fork_workers()
for _ in range(63):
    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
if where == "thread":  # a loader started from a thread other than the main one
    t = threading.Thread(target=lambda: (fork_workers(), time.sleep(600)), daemon=True)
    t.start()
print("ready", flush=True)
time.sleep(600)
"""
THREADED_KINDS = ("main", "thread", "none")
"""Where the 64-thread ranks fork their 4 children: the main thread, another thread, none."""


def _read_cost(
    procs: list[subprocess.Popen[str]] | list[subprocess.Popen[bytes]], rounds: int, rescan: int | None
) -> tuple[list[float], int]:
    """CPU time of each of `rounds` reads (after a first one), and the children measured."""
    w = WorkerCpu(interval=0.0) if rescan is None else WorkerCpu(interval=0.0, rescan_every=rescan)
    idents = [(p.pid, None) for p in procs]
    w.get(idents, time.time())
    spent = []
    got: dict[tuple[int, float | None], tuple[float, ...] | None] = {}
    for _ in range(rounds):
        t0 = time.process_time()
        got = w.get(idents, time.time())
        spent.append(time.process_time() - t0)
    return spent, sum(len(v or ()) for v in got.values())


def workers_cost(n: int, rounds: int, rescan: int | None = None) -> dict[str, float | int]:
    """Mean CPU time of a read over `rounds` reads (a multiple of the reads between two scans
    of every thread counts each scan as often as it comes), and the costliest read."""
    ranks = [
        subprocess.Popen(["sh", "-c", "sleep 600 & sleep 600 & sleep 600 & sleep 600 & wait"])
        for _ in range(n)
    ]
    threaded = {
        kind: [
            subprocess.Popen([sys.executable, "-c", THREADED_RANK, kind], stdout=subprocess.PIPE, text=True)
            for _ in range(8)
        ]
        for kind in THREADED_KINDS
    }
    result: dict[str, float | int] = {"ranks": n}
    try:
        for group in threaded.values():
            for t in group:
                assert t.stdout is not None
                t.stdout.readline()
        time.sleep(0.5)  # the shells have started their children
        spent, kids = _read_cost(ranks, rounds, rescan)
        mean = statistics.mean(spent)
        result |= {
            "children_measured": kids,
            "read_ms": round(mean * 1e3, 2),
            "read_ms_max": round(max(spent) * 1e3, 2),
            "pct_of_core_read_every_10s": round(mean * 100 / 10, 3),
        }
        for kind, group in threaded.items():
            spent, kids = _read_cost(group, rounds, rescan)
            per_rank = statistics.mean(spent) / len(group)
            result |= {
                f"threads64_{kind}_children_measured": kids,
                f"threads64_{kind}_ms_per_rank": round(per_rank * 1e3, 3),
                f"threads64_{kind}_240_ranks_pct_of_core": round(per_rank * 240 * 100 / 10, 3),
            }
    finally:
        every: list[subprocess.Popen[bytes] | subprocess.Popen[str]] = [*ranks]
        every += [t for group in threaded.values() for t in group]
        for p in every:
            for child in WorkerCpu.children(p.pid) or []:  # by PID, before they are reparented
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child, signal.SIGKILL)
            p.kill()
            p.wait()
    return result


def health(a: argparse.Namespace) -> None:
    if not a.workers_only:
        print("state read:", state_cost(a.processes, a.rounds))
        print("verdicts + hints:", verdict_cost())
    print("children's CPU:", workers_cost(a.processes, a.rounds, a.rescan_every))


# ---- stacks -----------------------------------------------------------------------------------

CHILD = """
import os, sys, threading
ev = threading.Event()
for i in range(int(sys.argv[1])):
    threading.Thread(target=ev.wait, name=f"worker-{i}", daemon=True).start()
def wait_here():
    os.write(1, b"ready\\n")
    ev.wait()
def step(n):
    return wait_here() if n == 0 else step(n - 1)
step(5)
"""


def stacks(a: argparse.Namespace) -> None:
    if find_py_spy() is None:
        sys.exit("py-spy is not installed: pip install py-spy")
    kids = [
        subprocess.Popen([sys.executable, "-c", CHILD, str(a.threads)], stdout=subprocess.PIPE)
        for _ in range(a.procs)
    ]
    try:
        for k in kids:
            assert k.stdout is not None
            assert k.stdout.readline() == b"ready\n"
        pids = [k.pid for k in kids]
        dump_many(pids, native=a.native)  # warm: py-spy's binary in the page cache
        walls = []
        for _ in range(a.rounds):
            t0 = time.perf_counter()
            res = dump_many(pids, native=a.native)
            walls.append(time.perf_counter() - t0)
            bad = [r.missing for r in res if r.missing is not None]
            assert not bad, bad
        t0 = time.perf_counter()
        dump_many(pids, native=a.native, parallel=1)
        serial = time.perf_counter() - t0
    finally:
        for k in kids:
            k.kill()
            k.wait()
    print(
        f"{a.procs} processes x {a.threads + 1} threads{' --native' if a.native else ''}, "
        f"{os.cpu_count()} CPUs, {PARALLEL} dumps at once: median {statistics.median(walls) * 1000:.0f} ms "
        f"(rounds: {', '.join(f'{w * 1000:.0f}' for w in walls)} ms); one at a time: {serial * 1000:.0f} ms"
    )


# ---- issue 32: verdicts with evidence, and the stack sampler ---------------------------------------


def _evidence_snaps(kind: str) -> list:
    """The 240-process recording, every process a rank in `kind` ("computing" or "blocked"),
    GPM on every GPU; with "evidence", every rank's stack and a RAS view of every job at the
    tick after the wait began (BUILT: the benchmark's, not a real job's)."""
    from gputui.telemetry.model import GpmSample
    from gputui.telemetry.nccl.model import NcclComm, NcclCount, NcclRank, NcclView, RasAnswer
    from gputui.telemetry.stack_evidence import RankWhere, StackEvidence

    gpm = GpmSample(graphics_active=100.0, sm_active=60.0, tensor_active=55.0, fp64_active=0.0,
                    fp32_active=1.0, fp16_active=0.0, dram_active=20.0)  # fmt: skip
    out = []
    for s in read_recording(JOBS_240)[1]:
        busy = kind == "computing"
        procs = tuple(
            dataclasses.replace(p, state="R" if busy else "S", cpu_percent=100.0 if busy else 0.0)
            for p in s.processes
        )
        gpus = tuple(
            dataclasses.replace(g, gpm=gpm if busy else None, gpu_util=100 if busy else 0) for g in s.gpus
        )
        out.append(dataclasses.replace(s, processes=procs, gpus=gpus))
    if kind == "evidence":
        k = 5
        s = out[k]
        wheres = tuple(
            RankWhere(p.pid, s.timestamp, p.create_time, "collective", "all_reduce", "train.py:42",
                      ("all_reduce (torch/distributed/distributed_c10d.py:2)", "main (train.py:42)"))
            for p in s.processes
        )  # fmt: skip
        jobs: dict[int | None, list] = {}
        for p in s.processes:
            jobs.setdefault(p.launcher, []).append(p)
        comms = tuple(
            NcclComm(f"0x{n + 1:x}", size=len(ps), ranks=tuple(
                NcclRank(rank=r, host="192.0.2.2", pid=p.pid, init_state=0, async_error=0,
                         counts=(NcclCount("AllReduce", 100 - (r == 1)),))
                for r, p in enumerate(ps)), counts_since=s.timestamp - 60)
            for n, ps in enumerate(jobs.values())
        )  # fmt: skip
        view = NcclView(s.timestamp, (RasAnswer("localhost:28028", tuple(p.pid for p in s.processes),
                                                format="json", communicators=comms),), ("192.0.2.2",))  # fmt: skip
        out[k] = dataclasses.replace(s, stacks=StackEvidence(wheres), nccl=view)
    return out


def engine_cost() -> dict[str, dict[str, float]]:
    from gputui.telemetry.health_config import HealthConfig

    result = {}
    for kind in ("computing", "blocked", "evidence"):
        snaps = _evidence_snaps(kind)
        spent: list[float] = []
        verdicts = 0
        for _ in range(3):
            engine = HealthEngine(HealthConfig(stuck_seconds=2.0, straggler_seconds=2.0))
            for s in snaps:
                t0 = time.process_time()
                r = engine.update(s)
                spent.append(time.process_time() - t0)
                verdicts += sum(j.verdict is not None for j in r.jobs)
        mean = sum(spent) / len(spent)
        result[kind] = {
            "ticks": len(spent),
            "verdicts": verdicts,
            "ms_median": round(statistics.median(spent) * 1e3, 3),
            "ms_mean": round(mean * 1e3, 3),
            "pct_of_core_at_1hz": round(mean * 100, 3),
        }
    return result


def sampler_cost(n: int, rounds: int) -> dict[str, float | int]:
    import resource

    from gputui.stacks.sampler import StackSampler
    from gputui.telemetry.host.starttime import start_time
    from gputui.telemetry.model import Snapshot

    if find_py_spy() is None:
        sys.exit("py-spy is not installed: pip install py-spy")
    import psutil

    kids = [subprocess.Popen([sys.executable, "-c", CHILD, "0"], stdout=subprocess.PIPE) for _ in range(n)]
    try:
        for k in kids:
            assert k.stdout is not None
            assert k.stdout.readline() == b"ready\n"
        idents = [(k.pid, start_time(psutil.Process(k.pid))) for k in kids]
        walls, own, children = [], [], []
        for r in range(rounds + 1):
            sampler = StackSampler(per_pass=n, min_gap=0.0, pass_gap=0.0)
            c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0, p0 = time.perf_counter(), time.process_time()
            assert sampler.want(idents)
            assert sampler.join(60)
            wall, cpu = time.perf_counter() - t0, time.process_time() - p0
            c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            got = sampler.attach(Snapshot(0, time.time())).stacks
            assert got is not None
            assert all(w.place != "unread" for w in got.ranks), got
            if r:  # the first warms py-spy's binary in the page cache
                walls.append(wall)
                own.append(cpu)
                children.append((c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime))
        idle = StackSampler()
        snap = Snapshot(0, time.time())
        t0 = time.process_time()
        for _ in range(10_000):
            idle.attach(snap)
            idle.want(())
        tick = (time.process_time() - t0) / 10_000
    finally:
        for k in kids:
            k.kill()
            k.wait()
    from gputui.stacks.sampler import PASS_GAP, PER_PASS
    from gputui.telemetry.health import STACK_REFRESH

    pass_cpu = statistics.median(own) + statistics.median(children)
    per_rank = pass_cpu / n
    return {
        "ranks": n,
        "pass_wall_ms_median": round(statistics.median(walls) * 1e3, 1),
        "pass_cpu_ms_this_process": round(statistics.median(own) * 1e3, 1),
        "pass_cpu_ms_py_spy_children": round(statistics.median(children) * 1e3, 1),
        "per_tick_idle_us": round(tick * 1e6, 2),
        # a suspected job of n ranks: each re-read every STACK_REFRESH, as the pass gap allows
        "suspected_job_of_n_ranks_pct_of_core": round(
            per_rank * min(n / STACK_REFRESH, PER_PASS / PASS_GAP) * 100, 3
        ),
        "most_the_sampler_costs_pct_of_core": round(per_rank * PER_PASS / PASS_GAP * 100, 3),
    }


def verdicts(a: argparse.Namespace) -> None:
    print("engine:", json.dumps(engine_cost()))
    print("sampler:", json.dumps(sampler_cost(a.procs, a.rounds)))


def main() -> None:
    ap = argparse.ArgumentParser(description="What gputui's job features cost (see the docstring)")
    sub = ap.add_subparsers(dest="what", required=True)
    p = sub.add_parser("attribution", help="job attribution and the launcher walk per tick")
    p.add_argument("--processes", type=int, default=240)
    p.add_argument("--ticks", type=int, default=20)
    p.set_defaults(func=attribution)
    p = sub.add_parser("health", help="the process state read and the health verdicts per tick")
    p.add_argument("--processes", type=int, default=240)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--workers-only", action="store_true", help="only the children's CPU read")
    p.add_argument("--rescan-every", type=int, help="WorkerCpu's rescan_every (default: its own)")
    p.set_defaults(func=health)
    p = sub.add_parser("stacks", help="wall time of one py-spy dump of N Python processes")
    p.add_argument("--procs", type=int, default=8)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--native", action="store_true")
    p.set_defaults(func=stacks)
    p = sub.add_parser("verdicts", help="issue 32: the verdict engine with evidence, and the stack sampler")
    p.add_argument("--procs", type=int, default=8)
    p.add_argument("--rounds", type=int, default=5)
    p.set_defaults(func=verdicts)
    a = ap.parse_args()
    a.func(a)


if __name__ == "__main__":
    main()
