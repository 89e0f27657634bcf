"""On a GPU machine: the GPU detail view's Pipes (GPM) chart, live, under a float32 training
load (TF32 off) — the FP32 pipe busy, the tensor cores idle — read off the screen of the real
app (headless, `App.run_test`), with the history's own figures beside it.

    python bench/live_pipes_check.py [--seconds 10] [--screen OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


async def check(seconds: float, screen_out: str | None) -> int:
    from gputui.telemetry.nvml import NvmlSource
    from gputui.ui.app import GpuTuiApp

    load = subprocess.Popen(
        [sys.executable, str(ROOT / "bench/load/train_like.py"), "--precision", "fp32",
         "--seconds", str(seconds + 120), "--pause-every", "1000"],
    )  # fmt: skip
    try:
        app = GpuTuiApp(source=NvmlSource(), interval=1.0, watch_terminal=False)
        async with app.run_test(size=(160, 60)) as pilot:
            history = app.hub.history
            for _ in range(90):  # until the load is up (torch and CUDA take a while to start)
                await asyncio.sleep(1.0)
                with app.hub.lock:
                    util = history.series(0, "gpu_util")[-3:]
                if len(util) == 3 and min(util) >= 50:
                    break
            await asyncio.sleep(seconds)  # GPM windows (the slow cadence) inside the load
            with app.hub.lock:
                figures = {
                    m: [v for v in history.series(0, m)[-5:] if not math.isnan(v)]
                    for m in (
                        "gpu_util",
                        "sm_active",
                        "tensor_active",
                        "fp32_active",
                        "fp16_active",
                        "sm_occupancy",
                    )
                }
            await pilot.press("enter")
            await pilot.pause(0.5)
            for _ in range(3):
                await pilot.press("pagedown")
                await pilot.pause(0.2)
            text = "\n".join(strip.text for strip in app.screen._compositor.render_strips())
    finally:
        load.terminate()
        load.wait(30)
    for name, values in figures.items():
        print(f"{name:14s} last values: {', '.join(f'{v:.1f}' for v in values) or 'none'}")
    pipes = [line for line in text.splitlines() if "Pipes (GPM)" in line]
    print("Pipes chart on screen:", bool(pipes), "| N/A shown:", "N/A: no samples" in text)
    if screen_out:
        Path(screen_out).write_text(text + "\n")
    ok = bool(pipes) and bool(figures["fp32_active"]) and min(figures["fp32_active"]) > 30
    ok = ok and max(figures["tensor_active"] or [100.0]) < 5
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds of load shown")
    ap.add_argument("--screen")
    a = ap.parse_args()
    return asyncio.run(check(a.seconds, a.screen))


if __name__ == "__main__":
    sys.exit(main())
