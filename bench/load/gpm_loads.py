"""Known GPU loads one after another, for GPM recordings: each phase's start and end (wall
clock) go to --phases as JSON, so tests can tell which recorded ticks ran which load.

    python bench/load/gpm_loads.py --phases OUT.json [--seconds 16] [--gap 4] [--device 0]

Phases: idle; bf16 8192x8192 matmul; float32 8192x8192 matmul with TF32 off; 2 GiB
device-to-device copies; 64x64 matmuls with a synchronize after each (the GPU waits on the
CPU); 64x64 matmuls without synchronizing (a queue of tiny kernels); idle holding 8 GiB.
"""

import argparse
import json
import os
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--phases", required=True)
ap.add_argument("--seconds", type=float, default=16.0)
ap.add_argument("--gap", type=float, default=4.0, help="idle seconds between phases")
ap.add_argument("--device", type=int, default=0)
a = ap.parse_args()
dev = torch.device("cuda", a.device)
torch.backends.cuda.matmul.allow_tf32 = False
torch.manual_seed(0)
phases = []


def run(name, step, seconds=a.seconds, sync_every=64):
    torch.cuda.synchronize(dev)
    start = time.time()
    n = 0
    while time.time() - start < seconds:
        step()
        n += 1
        if n % sync_every == 0:
            torch.cuda.synchronize(dev)  # keep the queue short so the phase ends on time
    torch.cuda.synchronize(dev)
    end = time.time()
    phases.append({"name": name, "start": start, "end": end, "steps": n})
    print(f"{name}: {n} steps in {end - start:.1f} s", flush=True)
    time.sleep(a.gap)


print(f"gpm_loads pid={os.getpid()} on {dev}", flush=True)
start = time.time()
time.sleep(a.seconds)
phases.append({"name": "idle", "start": start, "end": time.time(), "steps": 0})


def matmul(name, dtype):
    x = torch.randn(8192, 8192, device=dev, dtype=dtype)
    y = torch.randn(8192, 8192, device=dev, dtype=dtype)
    run(name, lambda: torch.matmul(x, y))


def copies():
    src = torch.empty(2**30, device=dev, dtype=torch.int16).random_()
    dst = torch.empty_like(src)
    run("2 GiB device copies", lambda: dst.copy_(src))


matmul("bf16 matmul 8192", torch.bfloat16)
matmul("float32 matmul 8192 (TF32 off)", torch.float32)
copies()
t1 = torch.randn(64, 64, device=dev)
t2 = torch.randn(64, 64, device=dev)


def tiny_sync():
    torch.matmul(t1, t2)
    torch.cuda.synchronize(dev)


run("64x64 matmul + synchronize", tiny_sync)
run("64x64 matmul, no synchronize", lambda: torch.matmul(t1, t2), sync_every=100_000)
torch.cuda.empty_cache()
hold = torch.empty(8 * 2**30, device=dev, dtype=torch.uint8)
start = time.time()
time.sleep(a.seconds)
phases.append({"name": "idle holding 8 GiB", "start": start, "end": time.time(), "steps": 0})
del hold
with open(a.phases, "w") as f:
    json.dump({"device": a.device, "tf32": False, "phases": phases}, f, indent=1)
print("gpm_loads done", flush=True)
