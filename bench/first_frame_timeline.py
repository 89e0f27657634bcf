"""When a program's start-up output reaches the terminal: run it in a 160x50 pseudo-terminal
for a few seconds and print, in 10 ms buckets, the bytes written and the first text of each
(escape sequences stripped).  A screen drawn in one go is one burst; repaints that follow
it (a widget mounted late, a layout settling) show as later bursts.  ptybench's settle_s is
the end of the last burst before 0.3 s of quiet.

    python bench/first_frame_timeline.py [--seconds 2.5] [--cols 160 --rows 50] -- CMD...
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import select
import signal
import struct
import termios
import time

ESCAPES = re.compile(r"\x1b\[[0-9;?<>$]*[a-zA-Z]|\x1b[()][A-Z0-9]|\x1b\][^\x07]*\x07|\x1b[=>]")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=2.5)
    ap.add_argument("--cols", type=int, default=160)
    ap.add_argument("--rows", type=int, default=50)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    env = dict(os.environ, TERM="xterm-256color", LINES=str(a.rows), COLUMNS=str(a.cols))
    env.pop("COLORTERM", None)
    size = struct.pack("HHHH", a.rows, a.cols, 0, 0)
    t0 = time.monotonic()
    pid, fd = pty.fork()
    if pid == 0:
        fcntl.ioctl(0, termios.TIOCSWINSZ, size)
        os.execvpe(cmd[0], cmd, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, size)
    writes: list[tuple[float, bytes]] = []
    while time.monotonic() - t0 < a.seconds:
        ready, _, _ = select.select([fd], [], [], 0.01)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            writes.append((time.monotonic() - t0, data))
    os.kill(pid, signal.SIGTERM)
    os.waitpid(pid, 0)
    buckets: dict[int, list[bytes]] = {}
    for t, data in writes:
        buckets.setdefault(int(t * 100), []).append(data)
    settle = None
    for k, (t, _) in enumerate(writes):
        if settle is None and (k + 1 == len(writes) or writes[k + 1][0] - t >= 0.3):
            settle = t
    for b, chunks in sorted(buckets.items()):
        raw = b"".join(chunks)
        text = ESCAPES.sub("", raw.decode("utf-8", "replace")).replace("\r\n", " | ").strip()
        print(f"{b / 100:5.2f} s {len(raw):7d} B  {text[:100]!r}")
    first = writes[0][0] if writes else None
    print(f"first byte {first:.3f} s, settled {settle:.3f} s" if first is not None else "no output")


if __name__ == "__main__":
    main()
