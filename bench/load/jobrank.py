"""One rank of a small distributed job, for torchrun: a little CUDA memory held, all_reduce
in a loop.  What a job waiting in a collective looks like once one rank stops.

    torchrun --standalone --nproc-per-node 3 bench/load/jobrank.py [--backend gloo|nccl] [--seconds 120]

gloo (default): the all_reduce runs on a CPU tensor; each rank holds 64 MiB on GPU
(LOCAL_RANK % the GPUs there: all on GPU 0 of a one-GPU machine) and runs a small matmul
between collectives.  A stopped rank leaves the others blocked in state S (futex).
nccl (one GPU per rank, so as many GPUs as ranks): the all_reduce runs on the GPU and the
rank synchronizes after it; a stopped rank leaves the others' GPUs spinning.
Each rank prints "rank R pid P gpu G ready" once set up.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist

ap = argparse.ArgumentParser()
ap.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
ap.add_argument("--seconds", type=float, default=120.0)
a = ap.parse_args()
local = int(os.environ.get("LOCAL_RANK", "0"))
gpu = local % torch.cuda.device_count()
dev = torch.device("cuda", gpu)
torch.cuda.set_device(dev)
dist.init_process_group(a.backend, **({"device_id": dev} if a.backend == "nccl" else {}))
rank = dist.get_rank()
hold = torch.empty(64 << 20, dtype=torch.uint8, device=dev)
m = torch.randn(256, 256, device=dev)
t = torch.ones(1 << 16, device=dev if a.backend == "nccl" else "cpu")
print(f"rank {rank} pid {os.getpid()} gpu {gpu} ready", flush=True)
end = time.monotonic() + a.seconds
while time.monotonic() < end:
    dist.all_reduce(t)
    t.fill_(1.0)
    m = (m @ m).clamp_(-1, 1)
    torch.cuda.synchronize(dev)
    time.sleep(0.01)
dist.destroy_process_group()
