"""Where the wall time of a live `gputui snapshot --json` goes, phase by phase, in one process.

    python bench/snapshot_phases.py [--runs N]

Each run is a fresh interpreter (`python -X importtime` would count imports only); it prints
milliseconds per phase: the imports (pynvml, the command line, gputui's modules), nvmlInit alone
(then shut down again), NvmlSource.open (nvmlInit + the static facts the JSON prints),
one sample, building and printing the document.  Needs a GPU machine (live NVML).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
marks = []
def mark(name):
    marks.append((name, time.perf_counter()))
import pynvml; mark("import pynvml")
import gputui.cli; mark("import gputui.cli (argparse, the commands)")
from gputui.telemetry import model; mark("import gputui model (dataclasses)")
from gputui.telemetry import nvml as gn; mark("import gputui nvml")
from gputui.export import snapshot as sf; mark("import gputui snapshot fields")
pynvml.nvmlInit(); mark("nvmlInit")
n = pynvml.nvmlDeviceGetCount(); hs = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]; mark("handles")
pynvml.nvmlShutdown(); mark("nvmlShutdown (for the next step)")
calls = {}
_query = gn.Nvml.query
def timed(self, fn, *a, **k):
    t = time.perf_counter()
    try:
        return _query(self, fn, *a, **k)
    finally:
        calls[fn] = calls.get(fn, 0) + (time.perf_counter() - t) * 1000
gn.Nvml.query = timed
src = gn.NvmlSource(slow=False, enrich_processes=False, static=sf.static_facts(sf.GPU_FIELDS))
info = src.open(); mark("NvmlSource.open (init + static facts)")
print(json.dumps({"calls": calls}))
calls.clear()
snap = src.sample(); mark("sample")
print(json.dumps({"sample calls": calls}))
doc = sf.document(info, snap, source={"kind": "live"}); mark("document")
out = sf.dumps(doc, pretty=True); mark("dumps")
import psutil; mark("import psutil (--processes only)")
prev = t0
res = {}
for name, t in marks:
    res[name] = (t - prev) * 1000
    prev = t
res["total: the snapshot path alone"] = (prev - t0) * 1000 - res["import psutil (--processes only)"] - res["nvmlShutdown (for the next step)"] - res["nvmlInit"] - res["handles"]
import json; print(json.dumps(res))
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    rows: dict[str, list[float]] = {}
    calls: dict[str, dict[str, float]] = {}
    for _ in range(args.runs):
        p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=False)
        if p.returncode != 0:
            print(p.stderr, file=sys.stderr)
            return 1
        lines = p.stdout.strip().splitlines()
        for line in lines[:-1]:  # per-call costs: keep the last run's
            for what, costs in json.loads(line).items():
                calls[what] = costs
        for k, v in json.loads(lines[-1]).items():
            rows.setdefault(k, []).append(v)
    for k, vs in rows.items():
        print(f"{k:<45} median {statistics.median(vs):7.1f} ms  min {min(vs):7.1f}  max {max(vs):7.1f}")
    for what, costs in calls.items():
        top = sorted(costs.items(), key=lambda kv: -kv[1])[:12]
        print(
            f"{what}, last run, slowest NVML calls (ms, all GPUs): "
            + ", ".join(f"{k.removeprefix('nvmlDevice')} {v:.2f}" for k, v in top)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
