"""Per-phase medians of NVML utilization and the GPM figures in a recording, for
bench/RESULTS.md: the phases come from gpm_loads.py's --phases file, or (without one) each
GPU's whole recording.  Ticks are counted in a phase when their GPM window lies inside it.

    python bench/gpm_summary.py RECORDING [PHASES.json]
"""

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputui.telemetry.recording import read_recording

FIELDS = ("sm_active", "sm_occupancy", "tensor_active", "tensor_hmma_active", "dram_active",
          "fp32_active", "fp16_active", "fp64_active", "graphics_active")  # fmt: skip


def med(xs):
    xs = [x for x in xs if x is not None]
    return round(statistics.median(xs), 2) if xs else None


header, ticks = read_recording(sys.argv[1])
if len(sys.argv) > 2:
    doc = json.loads(Path(sys.argv[2]).read_text())
    phases = [(p["name"], p["start"], p["end"], doc["device"]) for p in doc["phases"]]
else:
    phases = [(f"GPU {d.index} whole run", 0, 1e12, d.index) for d in header.machine.devices]
print("phase | ticks | NVML util | " + " | ".join(FIELDS))
for name, start, end, gpu in phases:
    rows = []
    for t in ticks:
        g = t.gpus[gpu]
        w = g.gpm
        if w is None or w.window is None:
            continue
        if start <= t.timestamp - w.window - 2.2 and t.timestamp <= end:
            rows.append((g, w))
    util = med([g.gpu_util for g, _ in rows])
    figs = [med([getattr(w, f) for _, w in rows]) for f in FIELDS]
    print(f"{name} | {len(rows)} | {util} | " + " | ".join(str(f) for f in figs))
reasons = {g.gpm.unavailable for t in ticks for g in t.gpus if g.gpm is not None and g.gpm.unavailable}
print("unavailable reasons:", reasons or "none")
