"""What one poller tick costs on live NVML, per GPU, and whether the slow-cadence thread
(PCIe throughput, per-process utilization, energy) stalls it; and what each NVML read
costs at the cadence it is read on ("reads": the registry's reads and the slow pass's own
calls, GPU 0, CPU and wall per call, % of a core a GPU), so the cadence of each is a
visible choice.

    python bench/nvml_cost.py [--ticks 60] [--json OUT]   (with --json: the reads as a table)
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


CADENCE_S = {"tick": 1.0, "slow": 2.0, "rare": 2.0 * 5}
"""Seconds between two reads at each cadence (1 Hz ticks; the slow pass every 2 s; the rare
counters every RARE_EVERY-th pass)."""


def read_costs(src, repeat=20):
    """One row per distinct NVML call NvmlSource makes for a GPU: the registry's reads
    (metrics.NVML_READS) by cadence with the fields they fill and whether a card, a chart
    or /metrics shows them, then the slow pass's own calls.  CPU is this thread's time."""
    from gputui.telemetry.metrics import GPU_METRICS, NVML_READS
    from gputui.telemetry.nvml.query import memory_info

    nv, h = src._nvml, src._handles[0]
    lib = nv.lib
    calls = {}
    for cadence, reads in NVML_READS.items():
        for name, r in reads:
            key = f"field {r.field_id}" if r.field_id is not None else (r.fn, tuple(r.args))
            entry = calls.setdefault(key, {"cadence": cadence, "fields": [], "read": r})
            entry["fields"].append(name)
    rows = []

    def timed(fn):
        cpu, wall = [], []
        for _ in range(repeat):
            c0, w0 = time.thread_time(), time.perf_counter()
            fn()
            cpu.append(time.thread_time() - c0)
            wall.append(time.perf_counter() - w0)
        return statistics.median(cpu), statistics.median(wall)

    for e in calls.values():
        r = e["read"]
        if r.field_id is not None:
            fn = lambda r=r: nv.query("nvmlDeviceGetFieldValues", h, [r.field_id], device=0)  # noqa: E731
            call = f"nvmlDeviceGetFieldValues({r.field_id})"
        elif r.fn == "nvmlDeviceGetMemoryInfo":
            fn = lambda: memory_info(nv, 0, h)  # noqa: E731
            call = r.fn
        else:
            args = tuple(getattr(lib, a) if isinstance(a, str) else a for a in r.args)
            fn = lambda r=r, args=args: nv.query(r.fn, h, *args, device=0)  # noqa: E731
            call = r.fn + (f"({', '.join(map(str, r.args))})" if r.args else "")
        metrics = [m for m in GPU_METRICS if m.field in e["fields"]]
        cpu, wall = timed(fn)
        rows.append(
            {
                "call": call,
                "cadence": e["cadence"],
                "fields": e["fields"],
                "card_or_chart": any(m.history or m.card for m in metrics),
                "exported": any(m.prometheus for m in metrics),
                "cpu_us": round(1e6 * cpu, 1),
                "wall_us": round(1e6 * wall, 1),
                "cpu_pct_per_gpu": round(100 * cpu / CADENCE_S[e["cadence"]], 4),
            }
        )
    # the calls that are not a registry read (the registry's PCIe throughput reads are above)
    from gputui.telemetry.nvml.gpm import GpmSampler
    from gputui.telemetry.nvml.query import _ARCHITECTURE_CODES
    from gputui.telemetry.nvml.slow import NvLinkCounters, nvlink_throughput

    since = int(time.time() * 1e6) - 2_000_000
    arch = src.info.devices[0].architecture if src.info and src.info.devices else None
    gpm = GpmSampler(nv)
    gpm.sample(0, h, architecture=arch, arch_code=_ARCHITECTURE_CODES.get(arch or ""))  # (opens)
    counters = NvLinkCounters()
    totals = NvLinkCounters()
    own = [  # (call, cadence, what shows it)
        (
            "nvmlDeviceGetProcessUtilization (GPUs with processes only)",
            "slow",
            lambda: nv.query("nvmlDeviceGetProcessUtilization", h, since, device=0),
        ),
        (
            "GPM: nvmlGpmSampleGet + nvmlGpmMetricsGet (15 figures)",
            "slow",
            lambda: gpm.sample(0, h, architecture=arch, arch_code=_ARCHITECTURE_CODES.get(arch or "")),
        ),
        (
            "NVLink counters: nvmlDeviceGetFieldValues (the totals and every link: Topology tab shown)",
            "slow",
            lambda: nvlink_throughput(nv, 0, h, counters),
        ),
        (
            "NVLink counters: nvmlDeviceGetFieldValues (the two totals: what a pass reads otherwise)",
            "slow",
            lambda: nvlink_throughput(nv, 0, h, totals, per_link=False),
        ),
        (
            "nvmlDeviceGetComputeRunningProcesses",
            "tick",
            lambda: nv.query("nvmlDeviceGetComputeRunningProcesses", h, device=0),
        ),
        (
            "nvmlDeviceGetGraphicsRunningProcesses",
            "tick",
            lambda: nv.query("nvmlDeviceGetGraphicsRunningProcesses", h, device=0),
        ),
        (
            "nvmlDeviceGetMPSComputeRunningProcesses",
            "tick",
            lambda: nv.query("nvmlDeviceGetMPSComputeRunningProcesses", h, device=0),
        ),
        ("nvmlDeviceGetMigMode", "rare", lambda: nv.query("nvmlDeviceGetMigMode", h, device=0)),
    ]
    for call, cadence, fn in own:
        cpu, wall = timed(fn)
        rows.append(
            {
                "call": call,
                "cadence": cadence,
                "fields": [],
                "card_or_chart": True,
                "exported": True,
                "cpu_us": round(1e6 * cpu, 1),
                "wall_us": round(1e6 * wall, 1),
                "cpu_pct_per_gpu": round(100 * cpu / CADENCE_S[cadence], 4),
            }
        )
    gpm.close()
    return sorted(rows, key=lambda r: -r["cpu_pct_per_gpu"])


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
    # every read of the metric registry, and the slow thread's own calls, GPU 0: CPU and
    # wall per call, and what each costs a second at the cadence it is read on
    out["reads"] = read_costs(src) if src._handles else []
    out["call_us"] = {r["call"]: r["wall_us"] for r in out["reads"]}
    out["notes"] = src.notes()
    src.close()
    text = json.dumps(out, indent=1)
    if a.json:
        Path(a.json).write_text(text)
        for r in out["reads"]:  # the table, the costliest first
            print(
                f"{r['cpu_pct_per_gpu']:8.4f} % of a core a GPU  {r['cpu_us']:8.1f} us CPU  {r['wall_us']:8.1f} us wall  "
                f"{r['cadence']:4s}  {r['call']}  {','.join(r['fields'])}"
            )
    else:
        print(text)


if __name__ == "__main__":
    main()
