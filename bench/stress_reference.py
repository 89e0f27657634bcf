"""The plain-torch figures the stress benchmark must match within 5 %: an 8192^3 bf16
torch.matmul loop timed with CUDA events (3 warm-ups, then 10 products and about 1 s of
products, as the benchmark times), and a 2 GiB copy_ (bytes read + written), each GPU alone."""

from __future__ import annotations

import json

import torch


def events(fn, iters: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1000


def measure(i: int) -> dict[str, object]:
    torch.cuda.set_device(i)
    n = 8192
    a = torch.randn(n, n, device=i, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=i, dtype=torch.bfloat16)
    for _ in range(3):
        torch.matmul(a, b)
    torch.cuda.synchronize()
    s10 = events(lambda: torch.matmul(a, b), 10)
    iters = max(5, int(1.0 / (s10 / 10)))
    s1 = events(lambda: torch.matmul(a, b), iters)
    nbytes = 2 << 30
    src = torch.empty(nbytes, dtype=torch.uint8, device=i)
    dst = torch.empty(nbytes, dtype=torch.uint8, device=i)
    for _ in range(3):
        dst.copy_(src)
    c = events(lambda: dst.copy_(src), 20)
    return {
        "gpu": i,
        "name": torch.cuda.get_device_name(i),
        "bf16_tflops_10": 2 * n**3 * 10 / s10 / 1e12,
        "bf16_tflops_1s": 2 * n**3 * iters / s1 / 1e12,
        "d2d_gbps": 2 * nbytes * 20 / c / 1e9,
    }


out = []
for gpu in range(torch.cuda.device_count()):
    out.append(measure(gpu))
    torch.cuda.empty_cache()
print(json.dumps(out, indent=1))
