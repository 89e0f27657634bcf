"""What GPM costs per GPU per slow tick, live: nvmlGpmSampleGet and nvmlGpmMetricsGet timed
through gputui's own GpmSampler (the 15 metrics it reads), every GPU, `--passes` times.

    python bench/gpm_cost.py [--passes 20] [--interval 1] [--json OUT]
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputui.telemetry.gpm import GpmSampler
from gputui.telemetry.nvml import NvmlSource


def ms(xs):
    xs = sorted(xs)
    if not xs:
        return None
    return {
        "n": len(xs),
        "median_ms": round(1000 * statistics.median(xs), 3),
        "p95_ms": round(1000 * xs[max(0, int(len(xs) * 0.95) - 1)], 3),
        "max_ms": round(1000 * xs[-1], 3),
    }


ap = argparse.ArgumentParser()
ap.add_argument("--passes", type=int, default=20)
ap.add_argument("--interval", type=float, default=1.0)
ap.add_argument("--json")
a = ap.parse_args()
src = NvmlSource(slow=False)
info = src.open()
nv = src._nvml
sampler = GpmSampler(nv)
per_gpu = {i: [] for i in range(len(info.devices))}
last = {}
for _ in range(a.passes):
    for i, h in enumerate(src._handles):
        t0 = time.perf_counter()
        last[i] = sampler.sample(i, h, architecture=info.devices[i].architecture, arch_code=9)
        per_gpu[i].append(time.perf_counter() - t0)
    time.sleep(a.interval)
out = {
    "devices": [d.name for d in info.devices],
    "driver": info.system.driver_version,
    "passes": a.passes,
    "per_gpu_per_tick": {i: ms(v[1:]) for i, v in per_gpu.items()},
    "nvmlGpmSampleGet": ms(sampler.cost.sample_get_s),
    "nvmlGpmMetricsGet": ms(sampler.cost.metrics_get_s),
    "last": {i: repr(s) for i, s in last.items()},
}
sampler.close()
src.close()
text = json.dumps(out, indent=1)
print(text)
if a.json:
    Path(a.json).write_text(text + "\n")
