"""gputui's terminal cost, measured as an SSH user would feel it (../shared/bench/ptybench.py).

    python bench/bench_tui.py [--seconds 30] [--only TEXT] [--ptybench ../shared/bench/ptybench.py]
    python bench/bench_tui.py --screens [--short 15] [--long 45] [--only TEXT]

Scenarios: 160x50, TERM=xterm-256color (no COLORTERM, as SSH forwards), replaying
recordings at their recorded 1 s interval, started in a busy stretch; plus the no-GPU view.
The processes scenarios press `2` 0.2 s after start, before the first frame settles, so the
tab switch is part of the first frame and "steady" is the table's own cost (sorted by GPU
memory, the default); the sorted ones press `s` (once: SM %; five times: CPU %) at 2 s (keys
typed before the tab has focus would be lost), so their steady figure includes that one
re-sort of the whole table.
--screens: the Topology tab and the GPU detail view, each opened with real keys 1.5 s after
start and run twice (--short and --long seconds); the steady cost is the difference of the two
runs over the difference in time, so the first frame and the switch to the screen (a one-time
full repaint) are not counted.
--ticks N: the UI's own CPU per tick, without a terminal: the H100 GPM recording (or --recording)
replayed in Textual's `App.run_test()` at 160x50, stepped N ticks 30 ms apart; CPU (process
time) per tick, less the same pauses without a tick.  Alternate it between checkouts
(`PYTHONPATH=CHECKOUT python -P bench/bench_tui.py --ticks 80`) to compare line building and
Textual's compositing without the terminal's noise.
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
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures"


def replay(path: str, start: int) -> list[str]:
    return ["--replay", str(FIX / path), "--start", str(start)]


X8 = "derived/h200x8-nvswitch-240procs.jsonl.gz"

#: (name, gputui arguments, keys for ptybench --keys)
SCENARIOS: list[tuple[str, list[str], str]] = [
    ("1 GPU (H200, training + idle holder)", replay("h200-x1-v2/recording.jsonl.gz", 40), ""),
    ("2 GPUs (2x H200, DDP)", replay("h200-x2/recording.jsonl.gz", 35), ""),
    ("8 GPUs, 240 processes (derived)", replay(X8, 30), ""),
    ("16 GPUs, 256 processes (derived)", replay("derived/h200x16-nvswitch-256procs.jsonl.gz", 30), ""),
    ("no GPU (live host only)", [], ""),
    ("1 GPU with GPM (H100 float32 matmul, the TF32 hint on)", replay("h100-gpm/recording.jsonl.gz", 42), ""),
    ("2 GPUs with GPM (2x H200, bf16 vs float32 training)", replay("h200-x2-gpm/recording.jsonl.gz", 15), ""),
    ("Processes tab: 8 GPUs, 210-240 processes (derived), by GPU memory", replay(X8, 30), "0.2:2"),
    ("Processes tab sorted by SM%", replay(X8, 30), "0.2:2,2.0:s"),
    ("Processes tab sorted by CPU% (rows reorder every tick)", replay(X8, 30), "0.2:2,2.0:sssss"),
    (
        "Processes tab in tree mode: 240 processes under 30 launchers (derived)",
        replay("derived/h200x8-nvswitch-240procs-jobs.jsonl.gz", 30),
        "0.2:2,2.0:v",
    ),
]

#: --screens: (name, gputui arguments, keys), each measured as the difference of two runs
SCREENS: list[tuple[str, list[str], str]] = [
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


def measure(
    args: list[str], seconds: float, ptybench: str, keys: str | None = None, size: tuple[int, int] = (160, 50)
) -> dict[str, Any]:
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
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    )
    result: dict[str, Any] = {}
    for attempt in range(3):
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True, cwd=ROOT)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        result["retries"] = attempt
        # ptybench's "first frame" is the first 0.3 s of quiet after the first byte; a run
        # where that came right after the first byte (the terminal set-up, written before
        # Textual has finished loading) counted the whole first frame as steady: measure again.
        if result["settle_s"] is None or result["settle_s"] - result["first_byte_s"] > 0.05:
            break
    return result


def screens(a: argparse.Namespace) -> None:
    """The --screens table: steady cost as the difference of a --long and a --short run."""
    rows = []
    for name, args, keys in SCREENS:
        if a.only and a.only not in name:
            continue
        short = measure(args, a.short, a.ptybench, keys or None)
        long = measure(args, a.long, a.ptybench, keys or None)
        dt = a.long - a.short
        row = {
            "scenario": name,
            "keys": keys,
            "settle_s": long["settle_s"],
            "bytes_per_s": (float(long["bytes"]) - float(short["bytes"])) / dt,
            "cpu_pct": 100 * (float(long["cpu_s"]) - float(short["cpu_s"])) / dt,
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
        keys = f"`{r['keys']}`" if r["keys"] else ""
        cells = [r["scenario"], keys, f"{r['cpu_pct']:.2f}", f"{r['bytes_per_s']:,.0f}", r["rss_mb"]]
        print("| " + " | ".join(str(c) for c in cells) + " |")


def ticks(n: int, recording: Path) -> None:
    """--ticks: CPU per tick of the UI stepping a replay in App.run_test."""
    import asyncio
    import tempfile
    import time

    os.environ["TZ"] = "UTC"
    time.tzset()
    os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp()  # (no saved settings)

    from gputui.telemetry.recording import ReplaySource
    from gputui.ui.app import GpuTuiApp

    async def go() -> dict[str, float]:
        app = GpuTuiApp(source=ReplaySource(recording), interval=3600.0, watch_terminal=False)
        async with app.run_test(size=(160, 50)) as pilot:
            while app.snapshot is None:
                await pilot.pause(0.02)
            for _ in range(5):  # past the first frame and the process list's mount
                app.poller.step(1)
                await pilot.pause(0.05)
            await pilot.pause(0.3)
            t0 = time.process_time()
            for _ in range(20):
                await pilot.pause(0.03)
            idle = (time.process_time() - t0) / 20
            t0 = time.process_time()
            for _ in range(n):
                app.poller.step(1)
                await pilot.pause(0.03)
            per = (time.process_time() - t0) / n
        return {"ms_per_tick": round(1e3 * (per - idle), 2), "ms_with_pause": round(1e3 * per, 2)}

    result = asyncio.run(go())
    import gputui

    print(json.dumps({"checkout": str(Path(gputui.__file__).resolve().parents[1]), "ticks": n, **result}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--ptybench", default=str(ROOT.parent / "shared" / "bench" / "ptybench.py"))
    ap.add_argument("--only", help="run scenarios whose name contains this")
    ap.add_argument("--screens", action="store_true", help="the Topology tab and the detail view")
    ap.add_argument("--short", type=float, default=15, help="--screens: the short run's seconds")
    ap.add_argument("--long", type=float, default=45, help="--screens: the long run's seconds")
    ap.add_argument("--ticks", type=int, help="the UI's CPU per tick in App.run_test, over this many ticks")
    ap.add_argument(
        "--recording", type=Path, default=FIX / "h100-gpm" / "recording.jsonl.gz", help="--ticks: replay"
    )
    a = ap.parse_args()
    if a.ticks:
        ticks(a.ticks, a.recording)
        return
    if a.screens:
        screens(a)
        return
    rows = []
    for name, args, keys in SCENARIOS:
        if a.only and a.only not in name:
            continue
        res = measure(args, a.seconds, a.ptybench, keys)
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
