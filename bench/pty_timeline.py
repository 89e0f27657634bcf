"""Run a TUI in a pseudo-terminal and print the bytes it writes each second, to see
start-up repaints apart from the steady per-tick cost (ptybench reports one average).

    python bench/pty_timeline.py [--seconds 20] [--cols 160 --rows 50] [--keys 5:+] -- CMD...
    python bench/pty_timeline.py --start [--seconds 2.5] -- CMD...

--start: the start-up instead, in 10 ms buckets: the bytes written and the first text of
each (escape sequences stripped).  A screen drawn in one go is one burst; repaints that
follow it (a widget mounted late, a layout settling) show as later bursts.  It ends with
ptybench's "settled": the last write before 0.3 s of quiet, and (with the `pyte` package) when
the screen first looked as it does when settled: "complete".  Textual repaints the whole
screen up to three times as it starts, the later paints identical to the first or changing
a few cells; "complete" is when a person at the terminal had the settled picture in front
of them, "settled" when the program stopped sending.  `--json`: one line with the three.
"""

import argparse
import codecs
import fcntl
import os
import pty
import re
import select
import signal
import struct
import termios
import time
from collections.abc import Sequence

ESCAPES = re.compile(r"\x1b\[[0-9;?<>$]*[a-zA-Z]|\x1b[()][A-Z0-9]|\x1b\][^\x07]*\x07|\x1b[=>]")


def complete_at(writes: list[tuple[float, bytes]], settled: float, cols: int, rows: int) -> float | None:
    """When the screen first showed what it shows once settled (every cell's character,
    colours and attributes): the earliest write from which it never changed until then.
    None without `pyte`."""
    try:
        import pyte
    except ImportError:
        return None
    screen = pyte.Screen(cols, rows)
    stream = pyte.ByteStream(screen)
    pictures: list[tuple[float, object]] = []
    for t, data in writes:
        if t > settled:
            break
        stream.feed(data)
        pictures.append((t, tuple(tuple(screen.buffer[y][x] for x in range(cols)) for y in range(rows))))
    final = pictures[-1][1]
    at = pictures[-1][0]
    for t, picture in reversed(pictures):
        if picture != final:
            break
        at = t
    return at


def settled_at(writes: list[tuple[float, bytes]]) -> float:
    return next(t for k, (t, _) in enumerate(writes) if k + 1 == len(writes) or writes[k + 1][0] - t >= 0.3)


def capture(
    cmd: list[str],
    seconds: float,
    cols: int,
    rows: int,
    *,
    keys: Sequence[tuple[float, bytes]] = (),
    poll: float = 0.05,
    answer_cursor: bool = False,
    started: list[float] | None = None,
) -> list[tuple[float, bytes]]:
    """Run `cmd` in a COLSxROWS pseudo-terminal as SSH forwards one (TERM=xterm-256color, no
    COLORTERM) for `seconds`, typing `keys` (seconds from the start, bytes) on time; every
    write it made, with its time from the start.  `answer_cursor`: answer a cursor-position
    query (ESC [6n) as a terminal would, at row 1, column 1.  `started`: given a list, its
    time.monotonic() of the start (the times' zero) is appended to it."""
    env = dict(os.environ, TERM="xterm-256color", LINES=str(rows), COLUMNS=str(cols))
    env.pop("COLORTERM", None)
    pending = sorted(keys)
    pid, fd = pty.fork()
    if pid == 0:
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        os.execvpe(cmd[0], cmd, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    t0 = time.monotonic()
    if started is not None:
        started.append(t0)
    writes: list[tuple[float, bytes]] = []
    while (now := time.monotonic() - t0) < seconds:
        while pending and now >= pending[0][0]:
            os.write(fd, pending.pop(0)[1])
        r, _, _ = select.select([fd], [], [], poll)
        if r:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            if answer_cursor and b"\x1b[6n" in data:
                os.write(fd, b"\x1b[1;1R")
            writes.append((time.monotonic() - t0, data))
    os.kill(pid, signal.SIGTERM)
    os.waitpid(pid, 0)
    return writes


def start_report(writes: list[tuple[float, bytes]]) -> None:
    buckets: dict[int, list[bytes]] = {}
    for t, data in writes:
        buckets.setdefault(int(t * 100), []).append(data)
    for b, chunks in sorted(buckets.items()):
        raw = b"".join(chunks)
        text = ESCAPES.sub("", raw.decode("utf-8", "replace")).replace("\r\n", " | ").strip()
        print(f"{b / 100:5.2f} s {len(raw):7d} B  {text[:100]!r}")
    if not writes:
        print("no output")
        return
    print(f"first byte {writes[0][0]:.3f} s, settled {settled_at(writes):.3f} s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float)
    ap.add_argument("--cols", type=int, default=160)
    ap.add_argument("--rows", type=int, default=50)
    ap.add_argument("--keys", default="", help="t:keys,t:keys (seconds from start)")
    ap.add_argument("--start", action="store_true", help="the start-up in 10 ms buckets")
    ap.add_argument("--save")
    ap.add_argument("--json", action="store_true", help="with --start: one JSON line")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    seconds = a.seconds if a.seconds is not None else (2.5 if a.start else 20)
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    keys = sorted(
        (float(t), codecs.decode(k, "unicode_escape").encode())
        for t, _, k in (i.partition(":") for i in a.keys.split(",") if i)
    )
    started: list[float] = []
    writes = capture(cmd, seconds, a.cols, a.rows, keys=keys, poll=0.01 if a.start else 0.05, started=started)
    if a.save:
        with open(a.save, "wb") as f:
            f.write(b"".join(data for _, data in writes))
    if a.start and a.json:
        import json

        settled = settled_at(writes) if writes else None
        complete = complete_at(writes, settled, a.cols, a.rows) if settled is not None else None
        first = writes[0][0] if writes else None
        print(
            json.dumps(
                {
                    "first_byte_s": first,
                    "settle_s": settled,
                    "complete_s": complete,
                    "bytes": sum(len(d) for _, d in writes),
                    "t0_monotonic": started[0],
                }
            )
        )
        return
    if a.start:
        start_report(writes)
        if writes:
            settled = settled_at(writes)
            complete = complete_at(writes, settled, a.cols, a.rows)
            if complete is not None:
                print(f"complete {complete:.3f} s (the screen as settled, first on the terminal)")
        return
    per_sec = [0] * (int(seconds) + 1)
    for t, data in writes:
        per_sec[min(int(t), len(per_sec) - 1)] += len(data)
    print(" ".join(f"{i}:{n}" for i, n in enumerate(per_sec)))
    tail = per_sec[len(per_sec) // 2 : -1]
    print(f"second half: {sum(tail) / max(1, len(tail)):.0f} B/s")


if __name__ == "__main__":
    main()
