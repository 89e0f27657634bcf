"""gputui's terminal cost, measured as an SSH user would feel it (../shared/bench/ptybench.py).

    python bench/bench_tui.py [--seconds 30] [--ptybench ../shared/bench/ptybench.py]

Scenarios: 160x50, TERM=xterm-256color (no COLORTERM, as SSH forwards), replaying
recordings at their recorded 1 s interval, started in a busy stretch; plus the no-GPU view.
Prints one JSON object per scenario and a Markdown table for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures"


def replay(path: str, start: int) -> list[str]:
    return ["--replay", str(FIX / path), "--start", str(start)]


SCENARIOS = [
    ("1 GPU (H200, training + idle holder)", replay("h200-x1-v2/recording.jsonl.gz", 40)),
    ("2 GPUs (2x H200, DDP)", replay("h200-x2/recording.jsonl.gz", 35)),
    ("8 GPUs, 240 processes (derived)", replay("derived/h200x8-nvswitch-240procs.jsonl.gz", 30)),
    ("16 GPUs, 256 processes (derived)", replay("derived/h200x16-nvswitch-256procs.jsonl.gz", 30)),
    ("no GPU (live host only)", []),
]


def measure(
    args: list[str], seconds: float, ptybench: str, keys: str | None = None, size: tuple[int, int] = (160, 50)
) -> dict[str, object]:
    """Run gputui with `args` under ptybench for `seconds`; its JSON result."""
    cmd = [
        sys.executable,
        ptybench,
        "--seconds",
        str(seconds),
        "--cols",
        str(size[0]),
        "--rows",
        str(size[1]),
    ]
    if keys:
        cmd += ["--keys", keys]
    cmd += ["--json", "--", sys.executable, "-m", "gputui", *args]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True, cwd=ROOT)
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--ptybench", default=str(ROOT.parent / "shared" / "bench" / "ptybench.py"))
    ap.add_argument("--only", help="run scenarios whose name contains this")
    a = ap.parse_args()
    rows = []
    for name, args in SCENARIOS:
        if a.only and a.only not in name:
            continue
        res = measure(args, a.seconds, a.ptybench)
        res["scenario"] = name
        print(json.dumps(res), flush=True)
        rows.append(res)
    print()
    print(
        f"Machine: {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        f"{a.seconds:g} s per scenario, 160x50, TERM=xterm-256color"
    )
    print()
    print("| scenario | first frame (s) | steady CPU (% of a core) | bytes/s | peak RSS (MB) |")
    print("|---|---|---|---|---|")
    for r in rows:
        cells = [r["scenario"], r["settle_s"], r["steady_cpu_pct"], f"{r['bytes_per_s']:.0f}", r["rss_mb"]]
        print("| " + " | ".join(str(c) for c in cells) + " |")


if __name__ == "__main__":
    main()
