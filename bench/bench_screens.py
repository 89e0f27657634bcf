"""The Topology tab and the GPU detail view, measured as an SSH user would feel them.

    python bench/bench_screens.py [--short 15] [--long 45]

Each scenario opens its screen with real keys 1.5 s after start (ptybench --keys) and runs
twice, `--short` and `--long` seconds; the steady cost is the difference between the two
runs divided by the difference in time, so the first frame and the switch to the screen
(a one-time full repaint) are not counted.  160x50, TERM=xterm-256color, 1 s refresh (the
recordings' interval).  Prints JSON lines and a Markdown table for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform

from bench_tui import ROOT, measure, replay

SCENARIOS: list[tuple[str, list[str], str]] = [
    ("Overview, 2 GPUs (for comparison)", replay("h200-x2/recording.jsonl.gz", 35), ""),
    ("Topology tab, 2 GPUs (NV18)", replay("h200-x2/recording.jsonl.gz", 35), "1.5:3"),
    ("Topology tab, 8 GPUs mixed (derived)", replay("derived/h200x8-mixed-topology.jsonl.gz", 30), "1.5:3"),
    ("Topology tab, 16 GPUs (derived)", replay("derived/h200x16-nvswitch-256procs.jsonl.gz", 30), "1.5:3"),
    ("Topology tab + CUDA view, 2 GPUs", replay("h200-x2/recording.jsonl.gz", 35), "1.5:3,2.0:v"),
    ("Detail view, 1 GPU", replay("h200-x1-v2/recording.jsonl.gz", 40), "1.5:\\r"),
    (
        "Detail view, 2 GPUs, scrolled to the charts",
        replay("h200-x2/recording.jsonl.gz", 35),
        "1.5:\\r,2.0:\\x1b[F",
    ),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--short", type=float, default=15)
    ap.add_argument("--long", type=float, default=45)
    ap.add_argument("--ptybench", default=str(ROOT.parent / "shared" / "bench" / "ptybench.py"))
    ap.add_argument("--only", help="run scenarios whose name contains this")
    a = ap.parse_args()
    rows = []
    for name, args, keys in SCENARIOS:
        if a.only and a.only not in name:
            continue
        short = measure(args, a.short, a.ptybench, keys or None)
        long = measure(args, a.long, a.ptybench, keys or None)
        dt = a.long - a.short
        row = {
            "scenario": name,
            "keys": keys,
            "settle_s": long["settle_s"],
            "bytes_per_s": (float(long["bytes"]) - float(short["bytes"])) / dt,  # type: ignore[arg-type]
            "cpu_pct": 100 * (float(long["cpu_s"]) - float(short["cpu_s"])) / dt,  # type: ignore[arg-type]
            "rss_mb": long["rss_mb"],
            "short": short,
            "long": long,
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    print()
    print(
        f"Machine: {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        f"steady = (run of {a.long:g} s - run of {a.short:g} s) / {a.long - a.short:g} s; 160x50"
    )
    print()
    print("| scenario | keys | steady CPU (% of a core) | bytes/s | peak RSS (MB) |")
    print("|---|---|---|---|---|")
    for r in rows:
        cells = [
            r["scenario"],
            f"`{r['keys']}`" if r["keys"] else "",
            f"{r['cpu_pct']:.2f}",
            f"{r['bytes_per_s']:,.0f}",
            r["rss_mb"],
        ]
        print("| " + " | ".join(str(c) for c in cells) + " |")


if __name__ == "__main__":
    main()
