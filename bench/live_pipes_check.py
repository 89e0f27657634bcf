"""On a GPU machine: the GPU detail view's GPM charts, live, under a training load, read off
the screen of the real app (headless, `App.run_test`), with the history's own figures beside
it.  `--precision fp32` (TF32 off): the FP32 pipe busy, the tensor cores (and HMMA) idle.
`--precision bf16`: the tensor cores busy with HMMA work, the FP32 pipe idle, the graphics
engine busy.  Every GPM chart (Activity, Pipes, Tensor pipes, Traffic) must be on screen.

    python bench/live_pipes_check.py [--precision fp32|bf16] [--seconds 10] [--screen OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


CHARTS = ("Activity (GPM)", "Pipes (GPM)", "Tensor pipes (GPM)", "Traffic (GPM)")


async def check(precision: str, seconds: float, screen_out: str | None) -> int:
    from gputui.telemetry.nvml.source import NvmlSource
    from gputui.ui.app import GpuTuiApp

    load = subprocess.Popen(
        [sys.executable, str(ROOT / "bench/load/train_like.py"), "--precision", precision,
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
                        "graphics_active",
                        "tensor_hmma_active",
                        "gpm_pcie_rx",
                        "gpm_pcie_tx",
                    )
                }
            await pilot.press("enter")
            await pilot.pause(0.5)
            pages = []
            for _ in range(6):  # the charts are below the detail's boxes: every page of it
                pages.append("\n".join(strip.text for strip in app.screen._compositor.render_strips()))
                await pilot.press("pagedown")
                await pilot.pause(0.2)
            text = "\n".join(pages)
    finally:
        load.terminate()
        load.wait(30)
    for name, values in figures.items():
        print(f"{name:14s} last values: {', '.join(f'{v:.1f}' for v in values) or 'none'}")
    charts = {title: title in text for title in CHARTS}
    print("GPM charts on screen:", charts, "| N/A shown:", "N/A: no samples" in text)
    if screen_out:
        Path(screen_out).write_text(text + "\n")

    def low(name: str) -> float:
        return min(figures[name] or [0.0])

    def high(name: str) -> float:
        return max(figures[name] or [100.0])

    ok = all(charts.values()) and all(figures[m] for m in figures)
    if precision == "fp32":
        ok = ok and low("fp32_active") > 30 and high("tensor_active") < 5 and high("tensor_hmma_active") < 5
    else:
        ok = ok and low("tensor_active") > 30 and low("tensor_hmma_active") > 30 and high("fp32_active") < 5
        ok = ok and low("graphics_active") > 30
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds of load shown")
    ap.add_argument("--screen")
    a = ap.parse_args()
    return asyncio.run(check(a.precision, a.seconds, a.screen))


if __name__ == "__main__":
    sys.exit(main())
