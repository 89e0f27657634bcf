"""A training-like GPU load for recordings: bf16 MLP steps with AdamW, host->device batches
over PCIe, and short "eval" pauses, so telemetry has the shape of a real job."""

import argparse
import os
import time

import torch
from torch import nn

ap = argparse.ArgumentParser()
ap.add_argument("--seconds", type=float, default=60)
ap.add_argument("--device", type=int, default=0)
ap.add_argument("--hidden", type=int, default=8192)
ap.add_argument("--batch", type=int, default=8192)
ap.add_argument("--layers", type=int, default=4)
ap.add_argument("--pause-every", type=float, default=25.0, help="seconds between eval pauses")
ap.add_argument("--pause", type=float, default=4.0, help="length of an eval pause")
ap.add_argument(
    "--precision",
    choices=("bf16", "fp32"),
    default="bf16",
    help="bf16: autocast to bf16 (tensor cores); fp32: plain float32 with TF32 off (no tensor cores)",
)
a = ap.parse_args()
torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 run: what PyTorch does by default

dev = torch.device("cuda", a.device)
torch.manual_seed(0)
layers = []
for _ in range(a.layers):
    layers += [nn.Linear(a.hidden, a.hidden), nn.GELU()]
model = nn.Sequential(*layers).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
host_batch = torch.randn(a.batch, a.hidden).pin_memory()
start = time.monotonic()
next_pause = start + a.pause_every
steps = 0
print(f"train_like pid={os.getpid()} on cuda:{a.device} ({a.precision})", flush=True)
while time.monotonic() - start < a.seconds:
    x = host_batch.to(dev, non_blocking=True)
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
        loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    steps += 1
    if time.monotonic() >= next_pause:
        torch.cuda.synchronize(dev)
        print(f"step {steps} loss {loss.item():.4f}: eval pause", flush=True)
        time.sleep(a.pause)
        next_pause = time.monotonic() + a.pause_every
torch.cuda.synchronize(dev)
print(f"train_like done: {steps} steps", flush=True)
