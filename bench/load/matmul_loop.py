"""A matmul loop on one GPU: busy bf16 work, or tiny kernels that keep the SMs almost idle.

    python bench/load/matmul_loop.py --seconds 40 [--size 8192] [--dtype bf16|float32] [--sync-every 64]

`--size 64 --dtype float32 --sync-every 1`: 64x64 matmuls with a synchronize after each (the
"tiny kernels" load of shared/REFERENCE.md).  Prints "matmul pid=P ready" once running.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--seconds", type=float, default=40.0)
ap.add_argument("--device", type=int, default=0)
ap.add_argument("--size", type=int, default=8192)
ap.add_argument("--dtype", choices=("bf16", "float32"), default="bf16")
ap.add_argument("--sync-every", type=int, default=64)
a = ap.parse_args()
dev = torch.device("cuda", a.device)
dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
torch.backends.cuda.matmul.allow_tf32 = False
x = torch.randn(a.size, a.size, dtype=dtype, device=dev)
y = torch.randn(a.size, a.size, dtype=dtype, device=dev)
torch.cuda.synchronize(dev)
print(f"matmul pid={os.getpid()} size={a.size} dtype={a.dtype} sync_every={a.sync_every} ready", flush=True)
end = time.monotonic() + a.seconds
n = 0
while time.monotonic() < end:
    torch.matmul(x, y)
    n += 1
    if n % a.sync_every == 0:
        torch.cuda.synchronize(dev)
torch.cuda.synchronize(dev)
print(f"matmul done: {n} steps", flush=True)
