"""`gputui snapshot` wall time next to nvidia-smi and gpustat, interleaved, in one run.

    python bench/snapshot_timing.py [--runs N] [--json]

Each command runs N times (default 21), the tools interleaved so each sees the same machine;
prints the median, min and max wall time in ms.  The interpreter's own start-up (`python -c
pass`, with and without `site`) and `import pynvml; nvmlInit()` are timed alongside: they are
the floor any Python tool pays.  gpustat is timed when importable.  Needs a GPU machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import time

FIELDS = "index,name,temperature.gpu,utilization.gpu,memory.used,memory.total,power.draw"
FLOOR = "import os, pynvml; pynvml.nvmlInit(); pynvml.nvmlDeviceGetHandleByIndex(0); os._exit(0)"
BARE = """
import os, sys, pynvml
pynvml.nvmlInit()
out = ["index, name, temperature.gpu, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W]"]
for i in range(pynvml.nvmlDeviceGetCount()):
    h = pynvml.nvmlDeviceGetHandleByIndex(i)
    m = pynvml.nvmlDeviceGetMemoryInfo(h)
    out.append(f"{i}, {pynvml.nvmlDeviceGetName(h)}, {pynvml.nvmlDeviceGetTemperature(h, 0)}, "
               f"{pynvml.nvmlDeviceGetUtilizationRates(h).gpu} %, {m.used >> 20} MiB, {m.total >> 20} MiB, "
               f"{pynvml.nvmlDeviceGetPowerUsage(h) / 1000:.2f} W")
sys.stdout.write("\\n".join(out) + "\\n"); sys.stdout.flush(); os._exit(0)
"""
"""The least any Python program on nvidia-ml-py can do for nvidia-smi's query: the floor."""


def commands() -> dict[str, list[str]]:
    py = sys.executable
    cmds = {
        "python -c pass": [py, "-c", "pass"],
        "python -S -c pass (no site)": [py, "-S", "-c", "pass"],
        "python: import pynvml; nvmlInit()": [py, "-c", "import pynvml; pynvml.nvmlInit()"],
        "python: the same + one handle, then os._exit (no teardown)": [py, "-c", FLOOR],
        "python: a bare pynvml script printing nvidia-smi's 7 fields, os._exit": [py, "-c", BARE],
        f"nvidia-smi --query-gpu={FIELDS} --format=csv": [
            "nvidia-smi",
            f"--query-gpu={FIELDS}",
            "--format=csv",
        ],
        "gputui snapshot --json": [py, "-m", "gputui", "snapshot", "--json"],
        f"gputui snapshot --fields {FIELDS}": [py, "-m", "gputui", "snapshot", "--fields", FIELDS],
        "gputui snapshot --json --processes": [py, "-m", "gputui", "snapshot", "--json", "--processes"],
    }
    if importlib.util.find_spec("gpustat") is not None:
        cmds["gpustat --json"] = [py, "-m", "gpustat", "--json"]
    return cmds


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--json", action="store_true", help="one JSON object per command")
    args = ap.parse_args()
    cmds = commands()
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for name, cmd in cmds.items():  # warm the page cache and .pyc files once
        r = subprocess.run(cmd, capture_output=True, check=False)
        if r.returncode != 0:
            print(f"{name}: exit {r.returncode}: {r.stderr.decode(errors='replace')[-400:]}", file=sys.stderr)
            return 1
    for _ in range(args.runs):
        for name, cmd in cmds.items():
            t0 = time.perf_counter()
            r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            times[name].append((time.perf_counter() - t0) * 1000)
            if r.returncode != 0:  # a tool that dies early is fast: never time a failure
                print(f"{name}: exit {r.returncode}", file=sys.stderr)
                return 1
    for name, t in times.items():
        med, lo, hi = statistics.median(t), min(t), max(t)
        if args.json:
            print(
                json.dumps(
                    {
                        "command": name,
                        "runs": len(t),
                        "median_ms": round(med, 1),
                        "min_ms": round(lo, 1),
                        "max_ms": round(hi, 1),
                    }
                )
            )
        else:
            print(f"{name:<75} median {med:6.1f} ms  min {lo:6.1f}  max {hi:6.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
