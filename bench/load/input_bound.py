"""An input-bound training loop for recordings (issue 26 item 5): the GPU waits on its
DataLoader, whose workers are pegged at 100 % of a core each.

A DataLoader with `--workers` persistent worker processes (children of this process; a
forkserver's children where that is the start method) whose Dataset's __getitem__ burns
`--item-ms` of pure-Python CPU per item; each step moves the batch to cuda:`--device`
(pinned, non-blocking) and runs `--matmuls` bf16 `--size`² matmuls.  With the defaults
(4 workers, 80 ms an item, batches of 8: about 6 batches a second; 24 matmuls of 8192² on
an H100: about 40 ms) the GPU computes in bursts and waits in between.

`--light`: the same loop with items that cost nothing to make: the workers idle and the GPU
is the bottleneck (the negative case: no input-bound hint).

Prints "ready" once the first batch has been computed (the workers are then running)."""

import argparse
import os
import time

import torch
from torch.utils.data import DataLoader, Dataset

ap = argparse.ArgumentParser()
ap.add_argument("--seconds", type=float, default=90)
ap.add_argument("--device", type=int, default=0)
ap.add_argument("--workers", type=int, default=4)
ap.add_argument("--batch", type=int, default=8)
ap.add_argument("--item-ms", type=float, default=80.0, help="CPU per item (pure Python)")
ap.add_argument("--matmuls", type=int, default=24, help="bf16 matmuls per step")
ap.add_argument("--size", type=int, default=8192)
ap.add_argument("--light", action="store_true", help="items cost nothing: GPU-bound")
a = ap.parse_args()


class Burning(Dataset):
    """Items that each cost `ms` of CPU in the worker that makes them (a decoder, an
    augmentation pipeline in Python)."""

    def __init__(self, ms: float, width: int) -> None:
        self.ms = ms
        self.width = width

    def __len__(self) -> int:
        return 1 << 30

    def __getitem__(self, i: int) -> torch.Tensor:
        end = time.thread_time() + self.ms / 1000.0
        x = 0
        while time.thread_time() < end:
            for k in range(2000):
                x += k * k
        return torch.full((self.width,), float(x % 7))


dev = torch.device("cuda", a.device)
loader = DataLoader(
    Burning(0.0 if a.light else a.item_ms, a.size),
    batch_size=a.batch,
    num_workers=a.workers,
    persistent_workers=True,
    pin_memory=True,
    prefetch_factor=2,
)
w = torch.randn(a.size, a.size, device=dev, dtype=torch.bfloat16)
mode = "light (GPU-bound)" if a.light else f"input-bound ({a.item_ms:.0f} ms per item)"
print(f"input_bound pid={os.getpid()} on cuda:{a.device}, {a.workers} workers, {mode}", flush=True)
start = time.monotonic()
steps = 0
waited = 0.0
it = iter(loader)
while time.monotonic() - start < a.seconds:
    t0 = time.monotonic()
    batch = next(it)
    waited += time.monotonic() - t0
    x = batch.to(dev, non_blocking=True).to(torch.bfloat16)
    x = x.repeat(a.size // a.batch, 1)
    for _ in range(a.matmuls):
        x = torch.tanh(x @ w)
    torch.cuda.synchronize(dev)
    steps += 1
    if steps == 1:
        print("ready", flush=True)
    if steps % 50 == 0:
        el = time.monotonic() - start
        print(
            f"{steps} steps in {el:.0f} s, {100 * waited / el:.0f} % of the time waiting for data", flush=True
        )
print(f"done: {steps} steps, waited for data {waited:.1f} s of {time.monotonic() - start:.1f} s", flush=True)
