"""A stand-in for `srun` on one node: starts NPROC ranks of a script with RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR and MASTER_PORT set and waits for all of them.  As srun does by
default (no --kill-on-bad-exit), a rank that dies leaves the others running: what a job
looks like when one rank is killed and the rest wait in a collective.  bench/device_matrix.sh
copies it to a file named `srun` so that gputui groups its ranks as one job.

    python3 srun --nproc 2 --port 29650 SCRIPT [ARGS...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--nproc", type=int, default=2)
ap.add_argument("--port", type=int, default=29650)
ap.add_argument("script")
ap.add_argument("args", nargs=argparse.REMAINDER)
a = ap.parse_args()
ranks = []
for r in range(a.nproc):
    env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(a.nproc))
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(a.port))
    ranks.append(subprocess.Popen([sys.executable, a.script, *a.args], env=env))
codes = [p.wait() for p in ranks]
print(f"srun stand-in: ranks exited {codes}", flush=True)
sys.exit(max((abs(c) for c in codes), default=0))
