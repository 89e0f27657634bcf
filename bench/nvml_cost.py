"""What one poller tick costs on live NVML, per GPU, and whether the slow-cadence thread
(PCIe throughput, per-process utilization, energy) stalls it.

    python bench/nvml_cost.py [--ticks 60] [--json OUT]
    python bench/nvml_cost.py --gpm [--passes 20] [--interval 1] [--json OUT]

Phase "quiet": the slow thread has done its first pass and sleeps.
Phase "slow busy": the slow thread runs back to back (worst case) while ticks are timed.
--gpm instead: what GPM costs per GPU per slow tick, nvmlGpmSampleGet and nvmlGpmMetricsGet
timed through gputui's own GpmSampler, every GPU, --passes times, --interval s apart.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputui.telemetry.nvml.source import NvmlSource


def stats(xs):
    xs = sorted(xs)
    return {
        "mean_ms": round(1000 * statistics.fmean(xs), 3),
        "p50_ms": round(1000 * xs[len(xs) // 2], 3),
        "p95_ms": round(1000 * xs[int(len(xs) * 0.95) - 1], 3),
        "max_ms": round(1000 * xs[-1], 3),
    }


def timed_ticks(src, n, spacing):
    costs = []
    for _ in range(n):
        t0 = time.perf_counter()
        src.sample()
        costs.append(time.perf_counter() - t0)
        time.sleep(spacing)
    return costs


def ms(xs):
    xs = sorted(xs)
    if not xs:
        return None
    return {
        "n": len(xs),
        "median_ms": round(1000 * statistics.median(xs), 3),
        "p95_ms": round(1000 * xs[max(0, int(len(xs) * 0.95) - 1)], 3),
        "max_ms": round(1000 * xs[-1], 3),
    }


def gpm_cost(passes, interval):
    from gputui.telemetry.nvml.gpm import GpmSampler

    src = NvmlSource(slow=False)
    info = src.open()
    sampler = GpmSampler(src._nvml)
    per_gpu = {i: [] for i in range(len(info.devices))}
    last = {}
    for _ in range(passes):
        for i, h in enumerate(src._handles):
            t0 = time.perf_counter()
            last[i] = sampler.sample(i, h, architecture=info.devices[i].architecture, arch_code=9)
            per_gpu[i].append(time.perf_counter() - t0)
        time.sleep(interval)
    out = {
        "devices": [d.name for d in info.devices],
        "driver": info.system.driver_version,
        "passes": passes,
        "per_gpu_per_tick": {i: ms(v[1:]) for i, v in per_gpu.items()},
        "nvmlGpmSampleGet": ms(sampler.cost.sample_get_s),
        "nvmlGpmMetricsGet": ms(sampler.cost.metrics_get_s),
        "last": {i: repr(s) for i, s in last.items()},
    }
    sampler.close()
    src.close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ticks", type=int, default=60)
    ap.add_argument("--spacing", type=float, default=0.05)
    ap.add_argument("--gpm", action="store_true", help="time GPM's sampling instead")
    ap.add_argument("--passes", type=int, default=20, help="--gpm: passes over every GPU")
    ap.add_argument("--interval", type=float, default=1.0, help="--gpm: seconds between passes")
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.gpm:
        text = json.dumps(gpm_cost(a.passes, a.interval), indent=1)
        print(text)
        if a.json:
            Path(a.json).write_text(text + "\n")
        return
    out = {}
    t0 = time.perf_counter()
    src = NvmlSource(slow_interval=3600)
    info = src.open()
    out["open_s"] = round(time.perf_counter() - t0, 4)
    n = len(info.devices)
    out["gpus"] = n
    out["gpu_names"] = [d.name for d in info.devices]
    t0 = time.perf_counter()
    topo = src.read_topology()
    out["read_topology_s"] = round(time.perf_counter() - t0, 4)
    out["topology_levels"] = topo.levels if topo else None
    time.sleep(1.0)  # let the first slow pass finish
    out["slow_pass_s"] = src.slow_cost
    out["slow_pass_per_gpu_ms"] = round(1000 * src.slow_cost / max(n, 1), 2) if src.slow_cost else None
    timed_ticks(src, 5, args_spacing := a.spacing)
    quiet = timed_ticks(src, a.ticks, args_spacing)
    # a second source whose slow thread runs back to back (the worst case)
    busy_src = NvmlSource(slow_interval=0.0)
    busy_src.open()
    time.sleep(0.2)
    busy = timed_ticks(busy_src, a.ticks, args_spacing)
    busy_src.close()
    out["tick_quiet"] = stats(quiet)
    out["tick_quiet_per_gpu_ms"] = round(1000 * statistics.fmean(quiet) / max(n, 1), 3)
    out["tick_with_slow_busy"] = stats(busy)
    out["tick_with_slow_busy_per_gpu_ms"] = round(1000 * statistics.fmean(busy) / max(n, 1), 3)
    # per-call costs through the query helper, GPU 0
    nv = src._nvml
    h = src._handles[0] if src._handles else None
    calls = {}
    if h is not None:
        lib = nv.lib
        for name, args in [
            ("nvmlDeviceGetUtilizationRates", ()),
            ("nvmlDeviceGetMemoryInfo", ()),
            ("nvmlDeviceGetTemperature", (lib.NVML_TEMPERATURE_GPU,)),
            ("nvmlDeviceGetPowerUsage", ()),
            ("nvmlDeviceGetClockInfo", (lib.NVML_CLOCK_SM,)),
            ("nvmlDeviceGetCurrentClocksEventReasons", ()),
            ("nvmlDeviceGetCurrPcieLinkGeneration", ()),
            ("nvmlDeviceGetComputeRunningProcesses", ()),
            ("nvmlDeviceGetTotalEccErrors", (lib.NVML_MEMORY_ERROR_TYPE_CORRECTED, lib.NVML_VOLATILE_ECC)),
            ("nvmlDeviceGetPcieThroughput", (lib.NVML_PCIE_UTIL_TX_BYTES,)),
            ("nvmlDeviceGetTotalEnergyConsumption", ()),
            ("nvmlDeviceGetProcessUtilization", (int(time.time() * 1e6) - 2_000_000,)),
        ]:
            ts = []
            for _ in range(10):
                t0 = time.perf_counter()
                nv.query(name, h, *args, device=0)
                ts.append(time.perf_counter() - t0)
            calls[name] = round(1e6 * statistics.fmean(ts), 1)
    out["call_us"] = calls
    out["notes"] = src.notes()
    src.close()
    text = json.dumps(out, indent=1)
    print(text)
    if a.json:
        Path(a.json).write_text(text)


if __name__ == "__main__":
    main()
