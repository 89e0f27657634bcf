"""Run a TUI in a pseudo-terminal and print the bytes it writes each second, to see
start-up repaints apart from the steady per-tick cost (ptybench reports one average).

    python bench/pty_timeline.py [--seconds 20] [--cols 160 --rows 50] [--keys 5:+] -- CMD...
"""

import argparse
import codecs
import fcntl
import os
import pty
import select
import signal
import struct
import termios
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--cols", type=int, default=160)
    ap.add_argument("--rows", type=int, default=50)
    ap.add_argument("--keys", default="", help="t:keys,t:keys (seconds from start)")
    ap.add_argument("--save")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    env = dict(os.environ, TERM="xterm-256color", LINES=str(a.rows), COLUMNS=str(a.cols))
    env.pop("COLORTERM", None)
    keys = sorted(
        (float(t), codecs.decode(k, "unicode_escape").encode())
        for t, _, k in (i.partition(":") for i in a.keys.split(",") if i)
    )
    pid, fd = pty.fork()
    if pid == 0:
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", a.rows, a.cols, 0, 0))
        os.execvpe(cmd[0], cmd, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", a.rows, a.cols, 0, 0))
    t0 = time.monotonic()
    per_sec = [0] * (int(a.seconds) + 1)
    raw = bytearray()
    while (now := time.monotonic() - t0) < a.seconds:
        while keys and now >= keys[0][0]:
            os.write(fd, keys.pop(0)[1])
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            per_sec[int(time.monotonic() - t0)] += len(data)
            raw += data
    os.kill(pid, signal.SIGTERM)
    os.waitpid(pid, 0)
    if a.save:
        with open(a.save, "wb") as f:
            f.write(raw)
    print(" ".join(f"{i}:{n}" for i, n in enumerate(per_sec)))
    tail = per_sec[len(per_sec) // 2 : -1]
    print(f"second half: {sum(tail) / max(1, len(tail)):.0f} B/s")


if __name__ == "__main__":
    main()
