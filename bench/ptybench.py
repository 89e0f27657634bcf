#!/usr/bin/env python3
"""Run a terminal program in a pseudo-terminal, as a user over SSH would, and measure what it costs.

(The project's shared tool, ../shared/bench/ptybench.py, copied here so that a device
machine, which gets this repository only, has it: bench/device.sh uses this copy.  This copy
adds one option, --steady-from; without it the figures are the shared tool's.)

Usage:
  ptybench.py [--seconds S] [--rows R] [--cols C] [--keys SPEC] [--screen FILE] [--json] -- CMD...

  --keys "1.5:j,2.0:k,2.2:\\r"   send keystrokes at times (seconds from start); escapes like \\r \\x1b allowed
  --screen FILE                  write the final screen as plain text (needs the `pyte` package)
  PTY_TERM / PTY_COLORTERM       environment for the program (default xterm-256color and no COLORTERM,
                                 which is what an ordinary SSH session forwards)

Reports, for the whole process tree of CMD:
  first_byte_s    time until the first byte reaches the terminal
  settle_s        time until output first goes quiet for 0.3 s after the first byte (first frame drawn)
  bytes           bytes written to the terminal during the run
  bytes_per_s     bytes per second after the first frame: the steady redraw cost that crosses SSH
  cpu_s, cpu_pct  user+sys CPU seconds of the tree, and that as percent of one core over the run
  steady_cpu_pct  CPU percent after the first frame only
  rss_mb          peak resident memory of the tree (sampled every 0.25 s)
  --steady-from S also late_cpu_pct and late_bytes_per_s: CPU percent and bytes per second
                  from S seconds after the start to the end (work a program leaves for just
                  after its first frame, once, is then not counted as its steady cost)
Compare programs in one run on one machine: absolute figures move from machine to machine.
"""
import argparse
import codecs
import fcntl
import json
import os
import pty
import select
import signal
import struct
import termios
import time

import psutil


def tree_usage(proc):
    cpu, rss = 0.0, 0
    procs = [proc]
    try:
        procs += proc.children(recursive=True)
    except psutil.Error:
        pass
    for p in procs:
        try:
            t = p.cpu_times()
            cpu += t.user + t.system + t.children_user + t.children_system
            rss += p.memory_info().rss
        except psutil.Error:
            pass
    return cpu, rss


def parse_keys(spec):
    out = []
    for item in filter(None, (spec or "").split(",")):
        t, _, keys = item.partition(":")
        out.append((float(t), codecs.decode(keys, "unicode_escape").encode()))
    return sorted(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rows", type=int, default=50)
    ap.add_argument("--cols", type=int, default=160)
    ap.add_argument("--keys", default="")
    ap.add_argument("--quit", default="q", help="keys sent at the end before SIGTERM")
    ap.add_argument("--screen")
    ap.add_argument("--save", help="write the raw terminal stream here")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--steady-from", type=float, help="also CPU and bytes from this second on")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    if not cmd:
        ap.error("no command given")

    env = dict(os.environ, TERM=os.environ.get("PTY_TERM", "xterm-256color"),
               LINES=str(a.rows), COLUMNS=str(a.cols))
    env.pop("COLORTERM", None)
    if os.environ.get("PTY_COLORTERM"):
        env["COLORTERM"] = os.environ["PTY_COLORTERM"]
    pid, fd = pty.fork()
    if pid == 0:
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", a.rows, a.cols, 0, 0))
        os.execvpe(cmd[0], cmd, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", a.rows, a.cols, 0, 0))
    proc = psutil.Process(pid)
    keys = parse_keys(a.keys)
    raw = bytearray()
    t0 = time.monotonic()
    first = settle = last_data = cpu_at_settle = None
    cpu_at_from = None
    nbytes = bytes_after_settle = bytes_after_from = peak_rss = 0
    next_sample = t0
    while True:
        now = time.monotonic()
        if now - t0 >= a.seconds:
            break
        while keys and now - t0 >= keys[0][0]:
            os.write(fd, keys.pop(0)[1])
        r, _, _ = select.select([fd], [], [], 0.05)
        now = time.monotonic()
        if r:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            if b"\x1b[6n" in data:  # cursor position query
                os.write(fd, b"\x1b[1;1R")
            if b"\x1b[c" in data or b"\x1b[0c" in data:  # device attributes query
                os.write(fd, b"\x1b[?62;22c")
            nbytes += len(data)
            raw += data
            if first is None:
                first = now - t0
            if settle is not None:
                bytes_after_settle += len(data)
            if cpu_at_from is not None:
                bytes_after_from += len(data)
            last_data = now
        if first is not None and settle is None and now - last_data >= 0.3:
            settle = last_data - t0
            cpu_at_settle, _ = tree_usage(proc)
        if a.steady_from is not None and cpu_at_from is None and now - t0 >= a.steady_from:
            cpu_at_from, _ = tree_usage(proc)
        if now >= next_sample:
            _, rss = tree_usage(proc)
            peak_rss = max(peak_rss, rss)
            next_sample = now + 0.25
    wall = time.monotonic() - t0
    cpu, rss = tree_usage(proc)
    peak_rss = max(peak_rss, rss)
    try:
        os.write(fd, a.quit.encode())
    except OSError:
        pass
    time.sleep(0.3)
    try:
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
    if a.save:
        with open(a.save, "wb") as f:
            f.write(raw)
    if a.screen:
        import pyte

        screen = pyte.Screen(a.cols, a.rows)
        stream = pyte.ByteStream(screen)
        stream.feed(bytes(raw))
        with open(a.screen, "w") as f:
            f.write("\n".join(line.rstrip() for line in screen.display) + "\n")
    steady = wall - settle if settle else None
    res = {
        "cmd": " ".join(cmd),
        "first_byte_s": round(first, 3) if first is not None else None,
        "settle_s": round(settle, 3) if settle is not None else None,
        "bytes": nbytes,
        "bytes_per_s": round(bytes_after_settle / steady, 1) if steady else None,
        "cpu_s": round(cpu, 3),
        "cpu_pct": round(100 * cpu / wall, 2),
        "steady_cpu_pct": round(100 * (cpu - cpu_at_settle) / steady, 2) if steady else None,
        "rss_mb": round(peak_rss / 2**20, 1),
        "wall_s": round(wall, 2),
    }
    if cpu_at_from is not None and wall > a.steady_from:
        late = wall - a.steady_from
        res["late_cpu_pct"] = round(100 * (cpu - cpu_at_from) / late, 2)
        res["late_bytes_per_s"] = round(bytes_after_from / late, 1)
    print(json.dumps(res) if a.json else "\n".join(f"{k}: {v}" for k, v in res.items()))


if __name__ == "__main__":
    main()
