"""What NVML's read-ahead costs the monitor's start-up imports through the GIL (issue 33).

    python3 bench/start_profile.py [--rounds 5] [--json OUT]
    python bench/start_profile.py --standin REC.jsonl.gz   (no GPU: NVML answered from a recording
                      by bench/nvml_standin/pynvml.py, with its model of the H100's call costs)

Each case in a fresh interpreter (`python -P`, this checkout's gputui), interleaved:

  imports             what `gputui` imports before its app runs (cli, the config, the state,
                      ui.app), on the main thread, nothing else running
  readahead           NvmlSource.prefetch() alone: NVML's open, static facts, first sample
  imports+readahead   both, as `gputui` starts them (the read-ahead first, on its thread)
  imports+readahead, switch 1 ms   the same with sys.setswitchinterval(0.001): a thread
                      back from an NVML call waits at most 1 ms (not 5) for the GIL

For each: the imports' wall and CPU time (main thread), when the read-ahead ended (from the
start), its thread's CPU time, and its parts (pynvml import, nvmlInit and the static facts,
the first sample).  The imports' wall beside the read-ahead minus alone is what it costs
them; the read-ahead's end past the imports' is how late its data comes for the first frame.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CASE = r"""
import json, sys, threading, time
case = sys.argv[1]
if "switch" in case:
    sys.setswitchinterval(0.001)
t0 = time.perf_counter()
out = {"case": case}
if "readahead" in case:
    from gputui.telemetry.nvml import source as S
    src = S.NvmlSource()
    parts = {}
    open_ = src._open
    def timed_open():
        c0, w0 = time.thread_time(), time.perf_counter()
        import pynvml  # (what Nvml.init imports first)
        parts["pynvml_import_s"] = time.perf_counter() - w0
        info = open_()
        parts["open_s"] = time.perf_counter() - w0
        parts["open_cpu_s"] = time.thread_time() - c0
        return info
    src._open = timed_open
    run = src._open_and_sample
    def timed_run():
        c0, w0 = time.thread_time(), time.perf_counter()
        run()
        parts["thread_cpu_s"] = time.thread_time() - c0
        parts["first_sample_s"] = time.perf_counter() - w0 - parts.get("open_s", 0.0)
        parts["done_at_s"] = time.perf_counter() - t0
    src._open_and_sample = timed_run
    src.prefetch()
if "imports" in case:
    c0 = time.thread_time()
    from gputui import cli
    args = cli._parse(["--no-remember"])
    from gputui.config import load
    loaded = load(None)
    cli.remembered(args, loaded.config)
    import gputui.ui.app
    out["imports_s"] = time.perf_counter() - t0
    out["imports_cpu_s"] = time.thread_time() - c0
if "readahead" in case:
    src._prefetch.join()
    out.update(parts)
    out["gpus"] = len(src.info.devices) if src.info else 0
    out["processes"] = len(src._first.processes) if src._first else None
print(json.dumps(out))
"""

CASES = ("imports", "readahead", "imports+readahead", "imports+readahead, switch 1 ms")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json")
    ap.add_argument("--standin", metavar="REC", help="NVML from this recording (bench/nvml_standin)")
    a = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if a.standin:
        env.update(
            PYTHONPATH=f"{ROOT / 'bench' / 'nvml_standin'}{os.pathsep}{ROOT}",
            GPUTUI_NVML_STANDIN=str(Path(a.standin).resolve()),
            GPUTUI_NVML_STANDIN_COSTS="1",
        )
    rows = []
    for _ in range(a.rounds):
        for case in CASES:
            done = subprocess.run(
                [sys.executable, "-P", "-c", CASE, case], capture_output=True, text=True, env=env, check=False
            )
            if done.returncode:
                print(done.stderr, file=sys.stderr)
                return 1
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    if a.json:
        Path(a.json).write_text("".join(json.dumps(r) + "\n" for r in rows))
    keys = (
        "imports_s",
        "imports_cpu_s",
        "done_at_s",
        "thread_cpu_s",
        "pynvml_import_s",
        "open_s",
        "first_sample_s",
    )
    for case in CASES:
        rs = [r for r in rows if r["case"] == case]
        parts = [
            f"{k.removesuffix('_s')} {1000 * statistics.median(r[k] for r in rs):.0f} ms"
            for k in keys
            if all(k in r for r in rs)
        ]
        print(f"{case:32s} " + ", ".join(parts) + f"  (median of {len(rs)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
