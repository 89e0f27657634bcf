"""What `gputui export` and `gputui snapshot` cost.

    python bench/bench_export.py [--seconds 30] [--recording FILE] [--live]

Exporter: starts `gputui export` as a user would (a subprocess, 1 s interval, loopback), on the
derived 8-GPU, 240-process recording by default (`--live`: this machine's GPUs), then
  - its CPU while idle (sampling, nobody scraping) and while Prometheus-like scrapes arrive
    every second, from /proc/PID/stat over --seconds each;
  - scrape latency in each format Prometheus may ask for (text 0.0.4; OpenMetrics; gzip):
    the first scrape after a tick (renders it: what a 15 s Prometheus scrape always sees) and
    an immediate second one (served from the per-tick cache), 20 of each; median / p95 / max.
Snapshot: wall time of `gputui snapshot --json` and `--csv` (20 runs each, median), on the
recording (or live with --live).  Prints JSON lines and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import select
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "tests" / "fixtures" / "derived" / "h200x8-nvswitch-240procs.jsonl.gz"
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def scrape(url: str, headers: dict[str, str]) -> tuple[float, int]:
    req = urllib.request.Request(url, headers=headers)
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=10) as resp:
        body = resp.read()
    return time.perf_counter() - t0, len(body)


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def bench_exporter(source: list[str], seconds: float, a_cold: int = 20) -> list[dict]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputui", "export", "--listen", "127.0.0.1:0", "--interval", "1", *source],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    rows: list[dict] = []
    try:
        ready, _, _ = select.select([proc.stderr], [], [], 60)
        assert ready, "exporter did not start"
        line = proc.stderr.readline()
        url = line.split("serving ", 1)[1].strip()
        time.sleep(3)  # first ticks, caches warm
        c0 = cpu_seconds(proc.pid)
        time.sleep(seconds)
        idle = (cpu_seconds(proc.pid) - c0) / seconds * 100
        c0, t0 = cpu_seconds(proc.pid), time.monotonic()
        lat: list[float] = []
        while time.monotonic() - t0 < seconds:
            took, _ = scrape(
                url,
                {
                    "Accept": "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
                    "Accept-Encoding": "gzip",
                },
            )
            lat.append(took)
            time.sleep(max(0.0, 1.0 - took))
        scraped = (cpu_seconds(proc.pid) - c0) / (time.monotonic() - t0) * 100
        rows.append({"what": "exporter CPU, 1 Hz sampling, no scrapes", "cpu_pct": round(idle, 2)})
        rows.append(
            {"what": "exporter CPU, 1 Hz sampling, a scrape every second", "cpu_pct": round(scraped, 2)}
        )
        for name, headers in (
            ("text 0.0.4", {}),
            ("OpenMetrics", {"Accept": "application/openmetrics-text;version=1.0.0"}),
            (
                "OpenMetrics + gzip (what Prometheus sends)",
                {"Accept": "application/openmetrics-text;version=1.0.0", "Accept-Encoding": "gzip"},
            ),
        ):
            # cold: the first scrape after a new tick renders it (every Prometheus scrape at
            # the usual 15 s); warm: an immediate second scrape of the same tick (the cache)
            cold, warm, size = [], [], 0
            for _ in range(a_cold):
                time.sleep(1.05)
                took, size = scrape(url, headers)
                cold.append(took * 1000)
                took, _ = scrape(url, headers)
                warm.append(took * 1000)
            for label, times in (("first after a tick", cold), ("same tick again", warm)):
                rows.append(
                    {
                        "what": f"scrape latency, {name}, {label}",
                        "median_ms": round(statistics.median(times), 2),
                        "p95_ms": round(pct(times, 0.95), 2),
                        "max_ms": round(max(times), 2),
                        "body_bytes": size,
                    }
                )
        rows.append({"what": "exporter peak RSS", "rss_mb": round(rss_mb(proc.pid), 1)})
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
    return rows


def bench_snapshot(source: list[str], runs: int = 20) -> list[dict]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    rows = []
    for fmt in ("--json", "--csv"):
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "gputui", "snapshot", fmt, *source],
                env=env,
                stdout=subprocess.DEVNULL,
                check=True,
            )
            times.append((time.perf_counter() - t0) * 1000)
        rows.append(
            {
                "what": f"gputui snapshot {fmt} (wall)",
                "median_ms": round(statistics.median(times), 1),
                "min_ms": round(min(times), 1),
                "max_ms": round(max(times), 1),
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--recording", default=str(DEFAULT))
    ap.add_argument("--live", action="store_true", help="this machine's GPUs instead of a recording")
    a = ap.parse_args()
    source = [] if a.live else ["--replay", a.recording]
    print(
        json.dumps(
            {
                "machine": platform.node(),
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "source": "live" if a.live else a.recording,
            }
        )
    )
    rows = bench_exporter(source, a.seconds) + bench_snapshot(source)
    for r in rows:
        print(json.dumps(r))
    print()
    print("| measurement | result |")
    print("|---|---|")
    for r in rows:
        rest = ", ".join(f"{k} {v}" for k, v in r.items() if k != "what")
        print(f"| {r['what']} | {rest} |")


if __name__ == "__main__":
    main()
