"""How long a GPM window must be for stable figures: under steady known loads, GPM measured
over windows of several lengths, each repeated, on one GPU (issue 33 item 3; the window a
one-shot `gputui snapshot` waits for, `--gpm-window`).

    python3 bench/gpm_window.py [--gpu 0] [--windows 0.1,0.2,0.5,1] [--repeats 6]
                                [--loads bf16,fp32,copy] [--json OUT]

Each load runs alone on the GPU in a child process (torch): bf16 8192^2 matmuls, float32
8192^2 matmuls with TF32 off, 2 GiB device-to-device copies.  After a warm-up, the windows
are taken round-robin (every length once, then again) through gputui's own GpmSampler, so
a drift of the load touches every length alike.  For each load, length and figure (SM
active, SM occupancy, tensor, DRAM, FP32, FP16): the median and the spread (max - min) of the
repeats in percentage points.  The suggestion is the shortest window whose spread is within
--tolerance points for every figure under every load.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

LOADS = {
    "bf16": "x = torch.randn(8192, 8192, device=d, dtype=torch.bfloat16); y = torch.randn_like(x)\n"
    "step = lambda: torch.matmul(x, y)",
    "fp32": "torch.backends.cuda.matmul.allow_tf32 = False\n"
    "x = torch.randn(8192, 8192, device=d); y = torch.randn_like(x)\nstep = lambda: torch.matmul(x, y)",
    "copy": "src = torch.empty(2**30, device=d, dtype=torch.int16).random_(); dst = torch.empty_like(src)\n"
    "step = lambda: dst.copy_(src)",
}
CHILD = """
import sys, time, torch
d = torch.device("cuda", int(sys.argv[1]))
{setup}
step(); torch.cuda.synchronize(d)
print("ready", flush=True)
end = time.monotonic() + float(sys.argv[2])
n = 0
while time.monotonic() < end:
    step(); n += 1
    if n % 16 == 0:
        torch.cuda.synchronize(d)
"""
FIGURES = ("sm_active", "sm_occupancy", "tensor_active", "dram_active", "fp32_active", "fp16_active")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--windows", default="0.1,0.2,0.5,1")
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--loads", default="bf16,fp32,copy")
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--tolerance", type=float, default=2.0, help="points of spread called stable")
    ap.add_argument("--json")
    a = ap.parse_args()
    windows = [float(w) for w in a.windows.split(",")]
    from gputui.telemetry.nvml.gpm import GpmSampler
    from gputui.telemetry.nvml.query import _ARCHITECTURE_CODES
    from gputui.telemetry.nvml.source import NvmlSource

    src = NvmlSource(slow=False, enrich_processes=False)
    info = src.open()
    if info.system.nvml_problem is not None or a.gpu >= len(info.devices):
        print(f"no GPU {a.gpu}: {info.system.nvml_problem}", file=sys.stderr)
        return 2
    dev = info.devices[a.gpu]
    h = src._handles[a.gpu]
    sampler = GpmSampler(src._nvml)
    arch = {"architecture": dev.architecture, "arch_code": _ARCHITECTURE_CODES.get(dev.architecture or "")}
    out: dict = {"gpu": dev.name, "windows": windows, "repeats": a.repeats, "loads": {}}
    for load in a.loads.split(","):
        seconds = a.warmup + a.repeats * (sum(windows) + 0.05 * len(windows)) + 10
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD.format(setup=LOADS[load]), str(a.gpu), str(seconds)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        if child.stdout.readline().strip() != "ready":
            print(f"{load}: the load did not start", file=sys.stderr)
            return 2
        time.sleep(a.warmup)
        got: dict[float, list[dict]] = {w: [] for w in windows}
        for _ in range(a.repeats):
            for w in windows:
                first = sampler.sample(a.gpu, h, **arch)  # opens a window (closes any older one)
                if first is not None and first.unavailable:
                    print(f"GPM unavailable: {first.unavailable}", file=sys.stderr)
                    child.kill()
                    return 2
                time.sleep(w)
                s = sampler.sample(a.gpu, h, **arch)
                got[w].append({f: getattr(s, f, None) for f in (*FIGURES, "window")})
        child.kill()
        child.wait()
        rows = {}
        for w, samples in got.items():
            row = {}
            for f in FIGURES:
                v = [x[f] for x in samples if x[f] is not None]
                if v:
                    row[f] = {"median": round(statistics.median(v), 2), "spread": round(max(v) - min(v), 2)}
            row["measured_window_s"] = round(statistics.median(x["window"] for x in samples), 3)
            rows[str(w)] = row
        out["loads"][load] = rows
    sampler.close()
    src.close()
    stable = [
        w
        for w in windows
        if all(
            fig["spread"] <= a.tolerance
            for rows in out["loads"].values()
            for name, fig in rows[str(w)].items()
            if name != "measured_window_s"
        )
    ]
    out["tolerance_points"] = a.tolerance
    out["suggested_window_s"] = min(stable) if stable else None
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    for load, rows in out["loads"].items():
        for w, row in rows.items():
            figs = "  ".join(
                f"{k.replace('_active', '')} {v['median']:5.1f}±{v['spread']:.1f}"
                for k, v in row.items()
                if k != "measured_window_s"
            )
            print(f"{load:5s} window {float(w):4.2f} s: {figs}")
    print(f"shortest window within {a.tolerance:g} points everywhere: {out['suggested_window_s']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
