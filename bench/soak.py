"""Soak: run the TUI in a pseudo-terminal (as an SSH user would: the output is read and
dropped) for a long time at a fast refresh, and sample the process's RSS over time.

    python bench/soak.py --minutes 30 --interval 0.1 --out soak.json -- \
        --replay tests/fixtures/derived/h200x8-nvswitch-240procs.jsonl.gz

Reports RSS at the end of the warm-up and the largest RSS after it (growth = the
difference), with the full series in --out.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import select
import signal
import struct
import sys
import time

import psutil


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--warmup", type=float, default=120.0, help="seconds before the baseline")
    ap.add_argument("--interval", default="0.1")
    ap.add_argument("--every", type=float, default=5.0, help="seconds between RSS samples")
    ap.add_argument("--cols", type=int, default=160)
    ap.add_argument("--rows", type=int, default=50)
    ap.add_argument("--out", required=True)
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    extra = [x for x in a.args if x != "--"]
    cmd = [sys.executable, "-m", "gputui", "--interval", a.interval, *extra]
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm-256color"
        os.environ.pop("COLORTERM", None)
        os.execvp(cmd[0], cmd)
    import fcntl
    import termios

    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", a.rows, a.cols, 0, 0))
    proc = psutil.Process(pid)
    start = time.monotonic()
    end = start + a.minutes * 60
    series: list[tuple[float, float, float]] = []  # (seconds, rss MiB, cpu seconds)
    next_sample = start
    written = 0
    while time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                written += len(os.read(fd, 65536))
            except OSError:
                break
        now = time.monotonic()
        if now >= next_sample:
            try:
                t = proc.cpu_times()
                series.append((round(now - start, 1), proc.memory_info().rss / 2**20, t.user + t.system))
            except psutil.NoSuchProcess:
                break
            next_sample += a.every
    alive = proc.is_running()
    os.kill(pid, signal.SIGTERM)
    os.waitpid(pid, 0)
    after = [s for s in series if s[0] >= a.warmup]
    base = after[0][1] if after else None
    peak = max((s[1] for s in after), default=None)
    cpu_pct = (
        (series[-1][2] - series[0][2]) / (series[-1][0] - series[0][0]) * 100 if len(series) > 1 else None
    )
    summary = {
        "cmd": cmd,
        "minutes": a.minutes,
        "alive_at_end": alive,
        "rss_after_warmup_mib": base,
        "rss_peak_after_warmup_mib": peak,
        "rss_last_mib": series[-1][1] if series else None,
        "growth_mib": None if base is None or peak is None else round(peak - base, 2),
        "cpu_pct_of_one_core": cpu_pct,
        "bytes_per_s": written / max(1e-9, time.monotonic() - start),
    }
    with open(a.out, "w") as f:
        json.dump({"summary": summary, "series": series}, f)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
