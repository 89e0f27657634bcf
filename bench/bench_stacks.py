"""Wall time of `gputui stacks` over N Python processes (issue 26 item 3: "a stack dump of 8
ranks: measure").

    python bench/bench_stacks.py [--procs 8] [--rounds 5] [--threads 0] [--native]

Starts N Python children, each blocked in a function a few frames deep (with --threads T,
each also has T idle threads, as a rank with data-loader and NCCL threads has), then dumps
all of them with gputui.stacks.dump.dump_many (in parallel, PARALLEL at once) ROUNDS times
and one at a time once; prints the median and each round.  Every child is killed at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gputui.stacks.dump import PARALLEL, dump_many, find_py_spy  # noqa: E402

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--native", action="store_true")
    a = ap.parse_args()
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


if __name__ == "__main__":
    main()
