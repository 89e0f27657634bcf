"""Which screen rows cost the bytes a TUI sends: run it in a pseudo-terminal (or read a saved
stream) and charge every byte of the steady state to the row it draws on.

    python bench/pty_rows.py [--seconds 30] [--skip 5] [--cols 160 --rows 50] -- CMD...
    python bench/pty_rows.py --stream FILE [--skip-bytes N]

Textual writes a frame as cursor moves (CSI row;col H) each followed by the cells of one row;
every byte from one move to the next is that row's.  The first `--skip` seconds (the first
frame and its repaints) are left out.  For each row: bytes per second, the share of the total,
how many seconds of the run it changed in, and the text of the row at the end (with `pyte`),
so a row that changes every tick (a rounding, a width that moves) stands out.  `--json`: one
object with the same.
"""

from __future__ import annotations

import argparse
import json
import re

from pty_timeline import capture  # (run as a script: bench/ is on the path)

CUP = re.compile(rb"\x1b\[(\d+);(\d+)H")


def per_row(
    writes: list[tuple[float, bytes]], skip: float
) -> tuple[dict[int, int], dict[int, set[int]], float]:
    """(bytes by row, the whole seconds in which each row was written, seconds counted)."""
    by_row: dict[int, int] = {}
    seconds: dict[int, set[int]] = {}
    row = 0
    kept = [(t, d) for t, d in writes if t >= skip]
    for t, data in kept:
        pos = 0
        for m in CUP.finditer(data):
            if m.start() > pos:
                by_row[row] = by_row.get(row, 0) + m.start() - pos
            row = int(m.group(1))
            by_row[row] = by_row.get(row, 0) + m.end() - m.start()
            seconds.setdefault(row, set()).add(int(t))
            pos = m.end()
        if pos < len(data):
            by_row[row] = by_row.get(row, 0) + len(data) - pos
    span = (kept[-1][0] - skip) if kept else 0.0
    return by_row, seconds, max(span, 1e-9)


def screen_text(writes: list[tuple[float, bytes]], cols: int, rows: int) -> list[str] | None:
    try:
        import pyte
    except ImportError:
        return None
    screen = pyte.Screen(cols, rows)
    stream = pyte.ByteStream(screen)
    for _, data in writes:
        stream.feed(data)
    return [line.rstrip() for line in screen.display]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--skip", type=float, default=5.0, help="seconds of start-up left out")
    ap.add_argument("--cols", type=int, default=160)
    ap.add_argument("--rows", type=int, default=50)
    ap.add_argument("--stream", help="a saved stream (ptybench --save) instead of running CMD")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if a.stream:
        with open(a.stream, "rb") as f:
            writes = [(a.skip, f.read())]  # (no times in a saved stream: all counted)
    else:
        writes = capture(cmd, a.seconds, a.cols, a.rows, answer_cursor=True)
    by_row, seconds, span = per_row(writes, a.skip)
    text = screen_text(writes, a.cols, a.rows) or []
    total = sum(by_row.values())
    rows = [
        {
            "row": r,
            "bytes_per_s": round(b / span, 1),
            "share": round(b / total, 3) if total else 0.0,
            "seconds_written": len(seconds.get(r, ())),
            "text": text[r - 1][:100] if 0 < r <= len(text) else "",
        }
        for r, b in sorted(by_row.items(), key=lambda kv: -kv[1])
    ]
    if a.json:
        print(json.dumps({"bytes_per_s": round(total / span, 1), "seconds": round(span, 1), "rows": rows}))
        return
    print(f"{total / span:.0f} B/s over {span:.0f} s (after the first {a.skip:g} s)")
    for r in rows[: a.top]:
        print(
            f"row {r['row']:3d}  {r['bytes_per_s']:7.1f} B/s  {100 * r['share']:4.1f} %  "
            f"written in {r['seconds_written']:3d} s  {r['text'][:90]!r}"
        )


if __name__ == "__main__":
    main()
