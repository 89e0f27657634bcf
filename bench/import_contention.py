"""Does opening NVML in a background thread slow the main thread's imports (the GIL)?
Each case in a fresh interpreter, interleaved:  python bench/import_contention.py [ROUNDS]

  alone     import gputui.ui.app (Textual and gputui's UI), nothing else running
  prefetch  the same while NvmlSource.prefetch() opens NVML and takes the first sample
  nvml      NvmlSource's open and first sample alone (no imports beside it)

Prints, for each, the median of the import time and of the moment the NVML work ended, and
the time spent creating dataclasses during the imports (Python builds their methods with
exec at import)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

CASE = r"""
import json, sys, time, dataclasses
case = sys.argv[1]
real = dataclasses._process_class
spent = [0.0]
def timed(cls, *a, **k):
    t = time.perf_counter(); r = real(cls, *a, **k); spent[0] += time.perf_counter() - t; return r
dataclasses._process_class = timed
t0 = time.perf_counter()
out = {}
if case in ("prefetch", "nvml"):
    from gputui.telemetry.nvml import NvmlSource
    source = NvmlSource()
    source.prefetch()
if case in ("alone", "prefetch"):
    import gputui.ui.app
    out["import_s"] = time.perf_counter() - t0
    out["dataclasses_s"] = spent[0]
if case in ("prefetch", "nvml"):
    source._prefetch.join()
    out["nvml_done_s"] = time.perf_counter() - t0
print(json.dumps(out))
"""


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    results: dict[str, list[dict[str, float]]] = {"alone": [], "prefetch": [], "nvml": []}
    for _ in range(rounds):
        for case, rows in results.items():
            done = subprocess.run(
                [sys.executable, "-c", CASE, case], check=False, capture_output=True, text=True
            )
            if done.returncode:
                print(done.stderr, file=sys.stderr)
                return 1
            rows.append(json.loads(done.stdout))
    for case, rows in results.items():
        parts = [
            f"{key} {statistics.median(r[key] for r in rows) * 1000:.0f} ms"
            for key in ("import_s", "dataclasses_s", "nvml_done_s")
            if key in rows[0]
        ]
        print(f"{case:9s} " + ", ".join(parts) + f"  (median of {len(rows)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
