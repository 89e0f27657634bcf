"""What opening NVML costs before the live first frame can be drawn: `NvmlSource.open()`
(nvmlInit, the devices and their static facts) and the first `sample()`, timed, then
profiled to show which calls take the time.

    python bench/nvml_open_cost.py [--plain]

--plain: time them only (cProfile slows the Python side).
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time


def main() -> None:
    t0 = time.perf_counter()
    from gputui.telemetry.nvml import NvmlSource

    t1 = time.perf_counter()
    prof = cProfile.Profile()
    profile = "--plain" not in sys.argv
    source = NvmlSource()
    if profile:
        prof.enable()
    t2 = time.perf_counter()
    info = source.open()
    t3 = time.perf_counter()
    source.sample()
    t4 = time.perf_counter()
    prof.disable()
    print(
        f"import {t1 - t0:.3f} s, open {t3 - t2:.3f} s ({len(info.devices)} GPUs), "
        f"first sample {t4 - t3:.3f} s{' (profiled)' if profile else ''}",
        file=sys.stderr,
    )
    source.close()
    if profile:
        pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(30)


if __name__ == "__main__":
    main()
