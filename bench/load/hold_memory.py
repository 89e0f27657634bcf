"""An idle GPU process that holds memory (the "reserved but idle" job), with a tiny kernel
now and then, as a notebook or a stuck job would."""

import argparse
import os
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--gib", type=float, default=8)
ap.add_argument("--seconds", type=float, default=60)
ap.add_argument("--device", type=int, default=0)
a = ap.parse_args()
dev = torch.device("cuda", a.device)
block = torch.empty(int(a.gib * 2**30) // 4, dtype=torch.float32, device=dev)
block.fill_(1.0)
print(f"hold_memory pid={os.getpid()} holds {a.gib} GiB on cuda:{a.device}", flush=True)
end = time.monotonic() + a.seconds
while time.monotonic() < end:
    time.sleep(min(10.0, max(0.0, end - time.monotonic())))
    block[:1024].add_(1.0)
torch.cuda.synchronize(dev)
