"""Data-parallel training across all GPUs (torchrun), NCCL all-reduce of gradients:
a multi-GPU load for recordings.  Run with NCCL_NVLS_ENABLE=0 (no NVLink multicast)."""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

ap = argparse.ArgumentParser()
ap.add_argument("--seconds", type=float, default=60)
ap.add_argument("--hidden", type=int, default=8192)
ap.add_argument("--batch", type=int, default=8192)
a = ap.parse_args()
assert os.environ.get("NCCL_NVLS_ENABLE") == "0", "keep NVLink multicast off"
dist.init_process_group("nccl")
rank = dist.get_rank()
dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
torch.cuda.set_device(dev)
torch.manual_seed(0)
model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(a.hidden, a.hidden), nn.GELU())]).to(dev)
model = DistributedDataParallel(model, device_ids=[dev.index])
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
host_batch = torch.randn(a.batch, a.hidden).pin_memory()
start = time.monotonic()
steps = 0
print(f"ddp_like rank {rank} pid={os.getpid()} on {dev}", flush=True)
while True:
    done = torch.tensor([time.monotonic() - start >= a.seconds], device=dev, dtype=torch.int32)
    dist.all_reduce(done)
    if done.item():
        break
    x = host_batch.to(dev, non_blocking=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    steps += 1
print(f"ddp_like rank {rank} done: {steps} steps", flush=True)
dist.destroy_process_group()
