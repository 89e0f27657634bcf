"""`gputui cluster --prometheus` against an answer of 400,000 series (issue 31: 666 MiB and no
first screen in 14 s).

A loopback HTTP server (a child process) answers /api/v1/query in the Prometheus API's shape:
the list's query with SERIES dcgm-exporter-like series (HAND-WRITTEN, tests/cluster_support.py
`series_json`: 4 metrics per GPU, 8 GPUs a host), `up` with one series per host.  One
PrometheusSource.fetch() in this process: its wall time, this process's peak RSS growth, the
bytes read, and the GPUs and note of the state (what the first screen draws).

Usage: .venv/bin/python bench/bench_cluster_caps.py [--series 400000] [--gzip]
       (PYTHONPATH=OTHER_CHECKOUT measures another version of gputui against the same answer)
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def serve(series: int, hosts: int, gzipped: bool, ready: object) -> None:
    """The child: the answer built and served until it is terminated."""
    from cluster_support import FakePrometheus, series_json, vector

    body = vector(series_json(series, hosts=hosts))
    server = FakePrometheus(body, hosts=hosts, gzipped=gzipped)
    ready.put((server.url, len(body)))  # type: ignore[attr-defined]
    time.sleep(3600)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--series", type=int, default=400_000)
    ap.add_argument("--gzip", action="store_true")
    ap.add_argument("--max-mib", type=int, default=1024, help="the client's cap (max_response_mib)")
    a = ap.parse_args()
    import multiprocessing

    from gputui.cluster.http import HttpClient
    from gputui.cluster.sources import PrometheusSource

    hosts = max(1, a.series // 32)
    ready: multiprocessing.Queue[tuple[str, int]] = multiprocessing.Queue()
    child = multiprocessing.Process(target=serve, args=(a.series, hosts, a.gzip, ready), daemon=True)
    child.start()
    url, size = ready.get(timeout=600)
    client = HttpClient(timeout=120, max_body=a.max_mib * 2**20)
    src = PrometheusSource(url, client)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    state = src.fetch()
    took = time.perf_counter() - t0
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    child.terminate()
    print(
        json.dumps(
            {
                "series": a.series,
                "answer_mib": round(size / 2**20, 1),
                "gzip": a.gzip,
                "fetch_s": round(took, 2),
                "peak_rss_growth_mib": round((rss1 - rss0) / 1024, 1),
                "bytes_read_mib": round(client.bytes_received / 2**20, 1),
                "gpus": len(state.gpus),
                "hosts": len(state.hosts),
                "error": state.error,
                "note": getattr(state, "note", None),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
