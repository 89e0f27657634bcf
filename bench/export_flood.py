"""Half-open connections against `gputui export` at a descriptor limit: how many connect,
whether a scrape is still answered, and how much CPU the exporter burns meanwhile.

    python bench/export_flood.py [--connections 1020] [--nofile 1024] [--seconds 5]

Loopback only; every socket is closed at the end.  Run it with PYTHONPATH pointing at
another checkout to measure that code instead."""

from __future__ import annotations

import argparse
import resource
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

RECORDING = Path(__file__).parent.parent / "tests" / "fixtures" / "h200-x2" / "recording.jsonl.gz"
START = (
    "import resource, runpy, sys\n"
    "resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv.pop(1)), int(sys.argv.pop(1))))\n"
    "runpy.run_module('gputui', run_name='__main__', alter_sys=True)\n"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=1020)
    parser.add_argument("--nofile", type=int, default=1024, help="the exporter's soft descriptor limit")
    parser.add_argument("--seconds", type=float, default=5.0, help="CPU measured over this long")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, args.connections + 64), hard))
    cmd = [sys.executable, "-c", START, str(args.nofile), str(hard), "export", "--replay", str(RECORDING)]
    proc = subprocess.Popen([*cmd, "--listen", "127.0.0.1:0"], stderr=subprocess.PIPE, text=True)
    socks: list[socket.socket] = []
    try:
        url = proc.stderr.readline().split("serving ", 1)[1].strip()  # type: ignore[union-attr]
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        t0 = time.monotonic()
        failed = 0
        for _ in range(args.connections):
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=2)
                s.sendall(b"GET /metr")
                socks.append(s)
            except OSError:
                failed += 1
                if failed >= 5:
                    break
        connect_s = time.monotonic() - t0
        t0 = time.monotonic()
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                scrape = f"answered in {time.monotonic() - t0:.3f} s ({len(resp.read())} bytes)"
        except OSError as exc:
            scrape = f"not answered ({exc})"
        p = psutil.Process(proc.pid)
        c0 = sum(p.cpu_times()[:2])
        w0 = time.monotonic()
        time.sleep(args.seconds)
        cpu = (sum(p.cpu_times()[:2]) - c0) / (time.monotonic() - w0) * 100
        fds = len(p.open_files()) + len(p.net_connections())
    finally:
        for s in socks:
            s.close()
        proc.kill()
        proc.wait()
    print(
        f"{len(socks)} of {args.connections} half-open connections in {connect_s:.1f} s "
        f"(soft limit {args.nofile}); scrape {scrape}; exporter CPU {cpu:.0f} % of a core over "
        f"{args.seconds:g} s; {fds} descriptors open"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
