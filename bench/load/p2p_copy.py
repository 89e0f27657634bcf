"""A known NVLink load: copy a buffer from GPU 0 to GPU 1 (peer to peer) over and over, for
checking the NVLink throughput gputui shows against what was actually copied.

    python bench/load/p2p_copy.py --seconds 20 --mib 1024 --json OUT.json

Writes the bytes copied, the seconds spent (both devices synchronized) and the rate, plus
the wall-clock start and end (seconds since the epoch) of the copying.
"""

import argparse
import json
import os
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--seconds", type=float, default=20)
ap.add_argument("--mib", type=int, default=1024)
ap.add_argument("--src", type=int, default=0)
ap.add_argument("--dst", type=int, default=1)
ap.add_argument("--json", default=None)
a = ap.parse_args()
src, dst = torch.device("cuda", a.src), torch.device("cuda", a.dst)
peer = torch.cuda.can_device_access_peer(a.src, a.dst)
x = torch.empty(a.mib * 2**20, dtype=torch.uint8, device=src).fill_(1)
y = torch.empty_like(x, device=dst)
y.copy_(x)  # warm up (enables peer access)
torch.cuda.synchronize(src)
torch.cuda.synchronize(dst)
print(f"p2p_copy pid={os.getpid()} cuda:{a.src} -> cuda:{a.dst}, peer access {peer}", flush=True)
start_wall = time.time()
t0 = time.perf_counter()
copies = 0
t_end = time.monotonic() + a.seconds
while time.monotonic() < t_end:
    for _ in range(8):
        y.copy_(x, non_blocking=True)
        copies += 1
    torch.cuda.synchronize(src)
    torch.cuda.synchronize(dst)
seconds = time.perf_counter() - t0
end_wall = time.time()
copied = copies * x.numel()
result = {
    "src": a.src,
    "dst": a.dst,
    "peer_access": peer,
    "bytes": copied,
    "seconds": seconds,
    "bytes_per_s": copied / seconds,
    "start": start_wall,
    "end": end_wall,
}
print(json.dumps(result), flush=True)
if a.json:
    with open(a.json, "w") as f:
        json.dump(result, f)
