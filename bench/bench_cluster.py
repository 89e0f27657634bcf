"""`gputui cluster` at 64 hosts x 8 GPUs = 512 GPUs, all on loopback.

The hosts: one process of this script serves 64 exporters, each on its own 127.0.0.1 port,
each answering with what `gputui export` serves (gputui/export/prometheus.py's
`build_families`, per-process series included) for the 8-GPU derived recording
tests/fixtures/derived/h200x8-nvswitch-240procs.jsonl.gz (real H200 samples, 240 processes)
renamed gpu-node-01..64, host k at tick k*7 + seconds since start.  A real Prometheus server
(Debian's `prometheus`) scrapes them every 5 s.

Measured:
  1. `gputui cluster --prometheus URL --refresh 5` in a 160x50 pseudo-terminal through
     /work/shared/bench/ptybench.py: CPU % of one core and bytes/s to the terminal.
  2. The same for direct mode (`gputui cluster TARGET x64 --refresh 5`), and the scrapes it
     made of each exporter (requests per exporter per second, bytes per scrape).
  3. In-process (ClusterApp headless): per refresh, the fetch time, the time from the answer to
     the drawn screen, the HTTP queries per refresh and the bytes received.

  4. --no-pty: only 3., the hosts' ticks frozen (their expositions rendered once: this process
     then spends its time as gputui does, not as 64 exporters do).
  5. With --jobs N (default 20): N stuck jobs of 2 nodes each on hosts 0..2N-1.  DERIVED job
     series: the real engine's verdicts over the two halves of the real 4-rank NCCL recording
     tests/fixtures/h200-x4-nccl/stopped.jsonl.gz (emulated nodes: node-a names rank 1, PID
     1129; node-b "stuck"; tests/cluster_support.py `split_recording`), written by the real
     exporter code, then renamed per job (host names, Slurm job 5000+j).  Per refresh: the
     merge's own cost (merge() over the hosts' parsed jobs, timed alone), and the UI event
     loop's lag while the refreshes come (the UI answering: how long a key would wait).

Usage: .venv/bin/python bench/bench_cluster.py [--seconds 60] [--jobs 20] [--no-pty]
       [--out bench/results/FILE.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from cluster_support import PROMETHEUS, Fleet, host_name, prometheus  # noqa: E402

RECORDING = ROOT / "tests" / "fixtures" / "derived" / "h200x8-nvswitch-240procs.jsonl.gz"
PTYBENCH = Path("/work/shared/bench/ptybench.py")
HOSTS = 64


def ptybench(cmd: list[str], seconds: float) -> dict[str, object]:
    env = dict(os.environ, GPUTUI_ALLOW_NOTTY="1")
    out = subprocess.run(
        [sys.executable, str(PTYBENCH), "--seconds", str(seconds), "--rows", "50", "--cols", "160", "--json",
         "--", *cmd],
        capture_output=True, text=True, env=env, check=True, timeout=seconds + 120,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


async def in_process(source, refreshes: int, refresh: float) -> dict[str, object]:
    """Run the cluster screen headless and time each refresh: the fetch (on the worker
    thread), and from the answer's arrival to the screen drawn with it; meanwhile a task on
    the UI's event loop sleeps 10 ms again and again and records how late it wakes (the loop
    lag: how long a key press would wait)."""
    from gputui.cluster.jobs import merge
    from gputui.ui.cluster.app import ClusterApp

    app = ClusterApp(source, refresh=refresh)
    timings: list[dict[str, float]] = []
    lags: list[float] = []
    original = app.apply_state

    def timed(state):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        original(state)
        draw = time.perf_counter() - t0
        t1 = time.perf_counter()
        merge((h.key, h.jobs) for h in state.hosts)
        timings.append(
            {"fetch_s": state.duration, "draw_s": draw, "queries": state.queries,
             "bytes": state.bytes, "gpus": len(state.gpus), "error": bool(state.error),
             "jobs": len(state.jobs), "merge_s": time.perf_counter() - t1}
        )  # fmt: skip

    app.apply_state = timed  # type: ignore[method-assign]
    async with app.run_test(size=(160, 50)) as pilot:
        deadline = time.monotonic() + refreshes * refresh + 120
        while not timings and time.monotonic() < deadline:
            await pilot.pause(0.05)
        while len(timings) < refreshes and time.monotonic() < deadline:
            t0 = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append(time.perf_counter() - t0 - 0.01)
    steady = timings[1:] or timings
    lags.sort()
    return {
        "refreshes": len(timings),
        "gpus": timings[-1]["gpus"] if timings else 0,
        "errors": sum(1 for t in timings if t["error"]),
        "fetch_s_median": statistics.median(t["fetch_s"] for t in steady),
        "fetch_s_max": max(t["fetch_s"] for t in steady),
        "draw_s_median": statistics.median(t["draw_s"] for t in steady),
        "draw_s_max": max(t["draw_s"] for t in steady),
        "queries_per_refresh": statistics.median(t["queries"] for t in steady),
        "bytes_per_refresh_median": statistics.median(t["bytes"] for t in steady),
        "jobs_shown": timings[-1]["jobs"] if timings else 0,
        "merge_s_median": statistics.median(t["merge_s"] for t in steady),
        "merge_s_max": max(t["merge_s"] for t in steady),
        "loop_lag_s_median": statistics.median(lags) if lags else None,
        "loop_lag_s_p99": lags[int(len(lags) * 0.99)] if lags else None,
        "loop_lag_s_max": lags[-1] if lags else None,
        "loop_lag_samples": len(lags),
    }


def job_series(jobs: int) -> dict[int, bytes]:
    """DERIVED: `jobs` stuck jobs of 2 nodes (hosts 2j and 2j+1), each node's series the real
    engine's verdict over one half of the real 4-rank NCCL recording, renamed."""
    import tempfile

    from cluster_support import split_recording
    from prometheus_client.exposition import generate_latest
    from prometheus_client.registry import CollectorRegistry

    from gputui.export.prometheus import build_families
    from gputui.telemetry.health import HealthEngine
    from gputui.telemetry.health_config import HealthConfig
    from gputui.telemetry.model import Job
    from gputui.telemetry.recording import read_recording

    stopped = ROOT / "tests" / "fixtures" / "h200-x4-nccl" / "stopped.jsonl.gz"
    halves: list[str] = []
    with tempfile.TemporaryDirectory() as d:
        for gpus, name in (((0, 1), "node-a"), ((2, 3), "node-b")):
            path = split_recording(
                stopped, Path(d) / f"{name}.jsonl.gz", gpus, name, job=Job("slurm", "4242", step="0")
            )
            header, ticks = read_recording(path)
            engine = HealthEngine(HealthConfig(stuck_seconds=30, spin_seconds=30))
            for snap in ticks:
                engine.update(snap)
            registry = CollectorRegistry(auto_describe=False)

            class Fixed:
                def collect(self, header=header, ticks=ticks, engine=engine):  # type: ignore[no-untyped-def]
                    yield from build_families(header.machine, ticks[-1], health=engine.current)

            registry.register(Fixed())  # type: ignore[arg-type]
            text = generate_latest(registry).decode()
            halves.append(
                "".join(line + "\n" for line in text.splitlines() if line.startswith("gputui_job_"))
            )
    out: dict[int, bytes] = {}
    for j in range(jobs):
        for half, (k, name) in enumerate(((2 * j, "node-a"), (2 * j + 1, "node-b"))):
            text = halves[half].replace(f'Hostname="{name}"', f'Hostname="{host_name(k)}"')
            out[k] = text.replace('slurm_job="4242"', f'slurm_job="{5000 + j}"').encode()
    return out


class _Done(Exception):
    """The in-process timings were all that was asked for."""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--refreshes", type=int, default=8)
    ap.add_argument("--out", default=None)
    ap.add_argument("--jobs", type=int, default=20, help="stuck jobs of 2 nodes each (DERIVED series)")
    ap.add_argument("--no-pty", action="store_true", help="only the in-process timings")
    args = ap.parse_args()
    if PROMETHEUS is None:
        print("prometheus is not installed (apt-get install prometheus)", file=sys.stderr)
        return 2
    from gputui.cluster.http import HttpClient
    from gputui.cluster.sources import DirectSource, PrometheusSource

    result: dict[str, object] = {
        "hosts": HOSTS,
        "recording": str(RECORDING.relative_to(ROOT)),
        "machine": {"cpus": os.cpu_count(), "load_at_start": os.getloadavg()},
    }
    # in-process only: the hosts keep their tick, so this process does not spend its time
    # rendering 64 expositions a second (the exporters' work, not gputui's)
    fleet = Fleet(RECORDING, HOSTS, extra=job_series(args.jobs), frozen=args.no_pty)
    result["jobs"] = args.jobs
    targets = fleet.start()
    result["exposition_bytes_per_host"] = len(fleet.body(0))
    gputui = [sys.executable, "-m", "gputui", "cluster"]
    try:
        with prometheus(targets, scrape_interval="5s") as prom:
            prom.wait_for("DCGM_FI_DEV_GPU_TEMP", HOSTS * 8, timeout=120)
            print("prometheus has 512 GPUs; in-process refresh timings…", file=sys.stderr)
            src = PrometheusSource(prom.url, HttpClient(timeout=10))
            result["prometheus_in_process"] = asyncio.run(in_process(src, args.refreshes, 5.0))
            if args.no_pty:
                direct = DirectSource(targets, HttpClient(timeout=10))
                result["direct_in_process"] = asyncio.run(in_process(direct, args.refreshes, 5.0))
                direct.close()
                raise _Done
            print("ptybench: gputui cluster --prometheus…", file=sys.stderr)
            result["prometheus_ptybench"] = ptybench(
                [*gputui, "--prometheus", prom.url, "--refresh", "5"], args.seconds
            )
            before = list(fleet.requests)
            t0 = time.monotonic()
            print("ptybench: gputui cluster TARGETS (direct)…", file=sys.stderr)
            result["direct_ptybench"] = ptybench([*gputui, *targets, "--refresh", "5"], args.seconds)
            elapsed = time.monotonic() - t0
            prom_scrapes_per_s = 1 / 5.0  # Prometheus' own scrape interval, running meanwhile
            per = [
                (a - b) / elapsed - prom_scrapes_per_s for a, b in zip(fleet.requests, before, strict=True)
            ]
            result["direct_scrapes_per_exporter_per_s"] = {
                "median": statistics.median(per), "max": max(per), "window_s": elapsed,
                "note": "requests counted at each exporter during the direct run, minus Prometheus' 1 per 5 s",
            }  # fmt: skip
            direct = DirectSource(targets, HttpClient(timeout=10))
            result["direct_in_process"] = asyncio.run(in_process(direct, args.refreshes, 5.0))
            direct.close()
    except _Done:
        pass
    finally:
        fleet.stop()
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
