"""What NCCL RAS costs gputui (issue 32): parsing and judging a 64-rank answer, one query, and
whether the sampling thread ever waits for it.

    python bench/bench_nccl.py [--rounds 200] [--ranks 64]

The 64-rank answer is DERIVED from a real one: NCCL 2.28.9's JSON answer for a healthy 2-rank
job on 4 H100s (tests/fixtures/h100-x4-matrix/1-healthy-stopped/ras.jsonl.gz), its rank entry
repeated for ranks 0-63 on 8 nodes of 8 (PIDs, hosts and devices renumbered), rank 37 one
AllReduce behind and rank 50 missing (in NCCL's own missing-rank shape, without its comma).
It is served by a RAS-like service on a loopback socket of this process (this script's, as
NCCL's protocol goes); nothing here is NCCL's own timing.

1. parse + findings: `parse_json` and `findings` of that answer, CPU time per call (mean of
   --rounds, and the costliest).
2. one query: `client.ask` (connect, the protocol, the answer) + parse + findings, wall and
   CPU time of the asking thread per query; what that costs at 1 Hz and at RasWatch's 10 s.
3. the sampling thread: `RasWatch.offer` (what the source calls every tick) timed while a
   query is in flight against a service that never answers: the most any call took.
4. `RasWatch.offer` at a tick with no round due, 240 processes in 30 jobs of 8 (the issue's
   8-GPU, 240-process machine): CPU per tick.

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import socket
import statistics
import threading
import time
from pathlib import Path

from gputui.telemetry.model import GpuProcess
from gputui.telemetry.nccl import client
from gputui.telemetry.nccl.findings import findings
from gputui.telemetry.nccl.model import NcclView, parse_json
from gputui.telemetry.nccl.watch import RasWatch

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "tests/fixtures/h100-x4-matrix/1-healthy-stopped/ras.jsonl.gz"


def real_answer() -> str:
    with gzip.open(REAL, "rt") as f:
        for line in f:
            o = json.loads(line)
            if o["ok"] and o["format"] == "json" and o["addr"] == "localhost:28028":
                answer = o["answer"]
                return answer[answer.index("{") :]
    raise SystemExit("no real JSON answer")


def derived_answer(n: int) -> str:
    """The real answer's first rank repeated as ranks 0..n-1 (see the module's doc)."""
    text = real_answer()
    start = text.index('        {\n          "rank": 0')
    end = text.index("\n        }", text.index('"collective_counts"', start)) + len("\n        }")
    rank = text[start:end]
    entries, missing = [], ""
    for k in range(n):
        host = f"192.0.2.{2 + k // 8}"
        e = re.sub(r'"rank": \d+', f'"rank": {k}', rank)
        e = re.sub(r'"pid": \d+', f'"pid": {1241 + k}', e)
        e = re.sub(r'"host": "[^"]*"', f'"host": "{host}"', e)
        e = re.sub(r'"(cuda|nvml)_dev": \d+', lambda m, k=k: f'"{m[1]}_dev": {k % 8}', e)
        e = re.sub(r'"AllReduce": \d+', f'"AllReduce": {6 - (k == 37)}', e)
        if k == 50:
            missing = (
                f'        {{\n          "rank": {k},\n          "host": "{host}",\n          "pid": {1241 + k},\n'
                f'          "cuda_dev": 2,\n          "nvml_dev": 2\n          "status": {{\n'
                '            "unresponsive": true,\n            "considered_dead": false\n          }\n        }'
            )
            continue
        entries.append(e)
    head = (
        text[:start]
        .replace('"size": 2', f'"size": {n}')
        .replace('"ranks_count": 2', f'"ranks_count": {n - 1}')
    )
    head = head.replace('"missing_ranks_count": 0', '"missing_ranks_count": 1')
    tail = text[end:]
    tail = tail.replace('"missing_ranks": [\n\n      ]', f'"missing_ranks": [\n{missing}\n      ]')
    # the real answer's second rank follows the first: drop it (it is among the n now)
    tail = tail[tail.index("\n      ],") :]
    return head + ",\n".join(entries) + tail


class Service:
    """A RAS-like service on loopback: NCCL's protocol, then `answer` (or silence)."""

    def __init__(self, answer: bytes, silent: bool = False) -> None:
        self.answer, self.silent = answer, silent
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._talk, args=(conn,), daemon=True).start()

    def _talk(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as f:
            for line in f:
                if self.silent:
                    continue
                cmd = line.strip().upper()
                if cmd.startswith(b"CLIENT PROTOCOL"):
                    conn.sendall(b"SERVER PROTOCOL 2\n")
                elif cmd == b"VERBOSE STATUS":
                    conn.sendall(self.answer)
                    return
                else:
                    conn.sendall(b"OK\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--ranks", type=int, default=64)
    a = ap.parse_args()
    text = derived_answer(a.ranks)
    answer = parse_json(text)
    assert answer.reason is None, answer.reason
    view = NcclView(0.0, (answer,), ("192.0.2.2",))
    found = findings(view)
    assert [f.kind for f in found] == ["missing", "behind"], found

    cpu = []
    for _ in range(a.rounds):
        t0 = time.thread_time()
        findings(NcclView(0.0, (parse_json(text),), ("192.0.2.2",)))
        cpu.append(time.thread_time() - t0)

    service = Service(text.encode())
    target = client.ras_target(service.addr)
    assert isinstance(target, client.RasTarget)
    wall, qcpu = [], []
    for _ in range(a.rounds):
        w0, c0 = time.perf_counter(), time.thread_time()
        reply = client.ask(target)
        findings(NcclView(0.0, (parse_json(reply.body),), ()))
        qcpu.append(time.thread_time() - c0)
        wall.append(time.perf_counter() - w0)
        assert reply.reason is None

    silent = Service(b"", silent=True)
    procs = [GpuProcess(gpu_index=k % 8, pid=100 + k, launcher=1, create_time=1.0) for k in range(a.ranks)]
    watch = RasWatch(env=lambda pid: (True, silent.addr), addresses=lambda: ())
    offers = []
    watch.offer(procs, 0.0)  # starts a round: the query waits for its deadline
    for _ in range(2000):
        t0 = time.perf_counter()
        watch.offer(procs, 0.0)
        offers.append(time.perf_counter() - t0)
    in_flight = watch._busy  # still asking: every offer above ran during the query
    watch.close(0.1)

    many = [GpuProcess(gpu_index=k % 8, pid=1000 + k, launcher=k // 8, create_time=1.0) for k in range(240)]
    idle = RasWatch(env=lambda pid: (False, None), addresses=lambda: ())
    idle.offer(many, 0.0)  # the first round (RAS off: nothing asked); the next is 10 s away
    ticks = []
    for _ in range(2000):
        t0 = time.thread_time()
        idle.offer(many, 0.0)
        ticks.append(time.thread_time() - t0)
    idle.close(0.1)

    ms = 1e3
    print(
        json.dumps(
            {
                "answer": {"ranks": a.ranks, "bytes": len(text), "derived_from": str(REAL.relative_to(ROOT))},
                "parse_findings_cpu_ms": {
                    "mean": round(statistics.mean(cpu) * ms, 3),
                    "max": round(max(cpu) * ms, 3),
                },
                "query": {
                    "wall_ms_median": round(statistics.median(wall) * ms, 3),
                    "wall_ms_max": round(max(wall) * ms, 3),
                    "cpu_ms_mean": round(statistics.mean(qcpu) * ms, 3),
                    "core_percent_at_1hz": round(statistics.mean(qcpu) * 100, 3),
                    "core_percent_at_10s": round(statistics.mean(qcpu) * 10, 4),
                },
                "offer_per_tick_240_processes_us": round(statistics.mean(ticks) * 1e6, 1),
                "offer_during_a_query": {
                    "calls": len(offers),
                    "query_in_flight_throughout": in_flight,
                    "max_us": round(max(offers) * 1e6, 1),
                    "median_us": round(statistics.median(offers) * 1e6, 1),
                },
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
