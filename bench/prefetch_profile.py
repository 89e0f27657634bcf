"""Where the live monitor's NVML read-ahead spends its time, on a GPU machine: the prefetch
thread (`NvmlSource.prefetch`: import pynvml and psutil, open NVML, read the static facts,
take the first sample) run alone under cProfile, in a thread as gputui runs it.

    python bench/prefetch_profile.py [N]      # the top N functions (default 30)

Its Python work holds the GIL while Textual's modules import on the main thread, so it is
on the first frame's path; NVML's own C calls release the GIL and are not.  Printed: the
wall time, the thread's CPU time (user+system: the driver's ioctls count too), and the
profile by own time and by cumulative time.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import threading
import time


def main() -> int:
    top = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    from gputui.telemetry.nvml import NvmlSource  # (as gputui's cli imports it)

    source = NvmlSource()
    prof = cProfile.Profile()
    result: dict[str, float] = {}

    def work() -> None:
        cpu = time.thread_time()
        t = time.perf_counter()
        prof.enable()
        source._open_and_sample()
        prof.disable()
        result["wall"] = time.perf_counter() - t
        result["cpu"] = time.thread_time() - cpu

    thread = threading.Thread(target=work, name="gputui-nvml-open")
    thread.start()
    thread.join()
    info = source.info
    gpus = len(info.devices) if info is not None else 0
    print(
        f"prefetch: {result['wall'] * 1000:.1f} ms wall, {result['cpu'] * 1000:.1f} ms thread CPU, {gpus} GPUs"
    )
    for key in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats(key).print_stats(top)
        print(f"== by {key}")
        print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:12000])
    source.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
