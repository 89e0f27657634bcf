"""How fast the processes view answers a sort, a filter or a search with 1,000 processes.

    python bench/bench_process_sort.py [--processes 1000] [--repeat 20]

SYNTHETIC SCALE, DERIVED DATA: no recording has 1,000 GPU processes, so the 240 processes of
the derived 8-GPU fixture's tick 40 (tests/fixtures/derived/h200x8-nvswitch-240procs.jsonl.gz,
itself derived from the real 2x H200 recording) are repeated with renumbered PIDs until there
are --processes of them.  What is measured is gputui's own code, not the data:

1. `arrange` (filter + sort) alone, for every column and direction;
2. the whole response inside a running (headless) app: the key's action, i.e. arrange, the
   cursor's placement, building the visible rows and diffing them against the screen
   (`ProcessList.action_sort` and friends, called as the key binding calls them);
3. with --pty: what a user sees.  The scaled tick is written to a temporary recording
   (marked derived), gputui replays it in a 160x50 pseudo-terminal, paused, on the
   Processes tab; each key is sent and the time until the terminal has the new screen (the
   last byte of the response) is measured.

Prints a JSON line per measurement and a Markdown table (median and worst of --repeat).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gputui.telemetry.model import Snapshot  # noqa: E402
from gputui.telemetry.recording import ReplaySource, read_recording  # noqa: E402
from gputui.ui.processes.rows import COLUMNS, RowBuilder, ViewState, arrange  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "derived" / "h200x8-nvswitch-240procs.jsonl.gz"


def scaled_snapshot(n: int) -> Snapshot:
    _, ticks = read_recording(FIXTURE)
    base = ticks[39]
    procs = []
    k = 0
    while len(procs) < n:
        for p in base.processes:
            if len(procs) == n:
                break
            procs.append(dataclasses.replace(p, pid=p.pid + 100_000 * k))
        k += 1
    return dataclasses.replace(base, processes=tuple(procs))


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def report(name: str, ms: list[float], rows: list[tuple[str, float, float]]) -> None:
    med, worst = statistics.median(ms), max(ms)
    print(json.dumps({"what": name, "median_ms": round(med, 2), "max_ms": round(worst, 2)}), flush=True)
    rows.append((name, med, worst))


async def in_app(snap: Snapshot, repeat: int, rows: list[tuple[str, float, float]]) -> None:
    from gputui.ui.app import GpuTuiApp
    from gputui.ui.processes.pane import ProcessesPane

    app = GpuTuiApp(source=ReplaySource(FIXTURE), interval=3600, watch_terminal=False)
    async with app.run_test(size=(160, 50)) as pilot:
        while app.info is None:
            await pilot.pause(0.05)
        await pilot.press("2")
        pane = app.query_one(ProcessesPane).list
        pane.show_snapshot(app.info, snap)
        await pilot.pause()
        assert len(pane.all_rows) == len(snap.processes)
        actions: list[tuple[str, Callable[[], None]]] = [
            ("tick (same order, new values)", lambda: pane.show_snapshot(app.info, snap)),
            ("s: next sort column", lambda: pane.action_sort(1)),
            ("r: reverse", pane.action_reverse),
            ("g: one GPU / all", lambda: pane.action_gpu_filter(1)),
            ("u: mine on/off", pane.action_mine),
            ("t: compute only on/off", pane.action_compute),
        ]
        for name, action in actions:
            report(f"in the app, {len(snap.processes)} rows: {name}", timed(action, repeat), rows)
            await pilot.pause()

        def search() -> None:
            for text in ("h", "ho", "hol", "hold", ""):
                pane.state.search = text
                pane._refresh(reordered=True)

        ms = [t / 5 for t in timed(search, repeat)]
        report(f"in the app, {len(snap.processes)} rows: / search, per keystroke", ms, rows)


def pty_latency(snap: Snapshot, rows: list[tuple[str, float, float]], rounds: int = 5) -> None:
    import os
    import pty
    import select
    import struct
    import tempfile
    from fcntl import ioctl
    from termios import TIOCSWINSZ

    from gputui.telemetry.recording import RecordingWriter

    header, _ = read_recording(FIXTURE)
    with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as tmp:
        pass
    how = f"tick 40 of {FIXTURE.name} with its processes repeated (PIDs renumbered) to {len(snap.processes)}"
    with RecordingWriter(tmp.name, header.machine, 1.0, derived={"from": FIXTURE.name, "how": how}) as w:
        for i in range(3):
            w.write(dataclasses.replace(snap, seq=i + 1, timestamp=snap.timestamp + i))
    env = dict(
        os.environ,
        TERM="xterm-256color",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        LINES="50",
        COLUMNS="160",
    )
    env.pop("COLORTERM", None)
    pid, fd = pty.fork()
    if pid == 0:
        ioctl(0, TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
        os.execvpe(sys.executable, [sys.executable, "-m", "gputui", "--replay", tmp.name], env)
    ioctl(fd, TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))

    def drain(quiet: float, limit: float = 10.0) -> float | None:
        """Read until `quiet` s without output; the time of the last byte (None: no byte)."""
        t0 = time.monotonic()
        last = None
        while time.monotonic() - t0 < limit:
            r, _, _ = select.select([fd], [], [], quiet)
            if not r:
                break
            data = os.read(fd, 65536)
            if b"\x1b[6n" in data:
                os.write(fd, b"\x1b[1;1R")
            last = time.monotonic()
        return last

    try:
        drain(1.0)  # the first frame
        os.write(fd, b"p")  # pause: no tick repaints in between
        drain(0.5)
        os.write(fd, b"2")
        drain(0.5)
        for name, key in (("s: next sort column", b"s"), ("r: reverse", b"r"), ("g: one GPU / all", b"g")):
            ms = []
            for _ in range(rounds):
                t0 = time.monotonic()
                os.write(fd, key)
                last = drain(0.3)
                if last is not None:
                    ms.append((last - t0) * 1000)
            report(f"in a terminal, {len(snap.processes)} rows: {name} (key to last byte)", ms, rows)
    finally:
        os.write(fd, b"q")
        time.sleep(0.3)
        try:
            os.kill(pid, 15)
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        os.unlink(tmp.name)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--processes", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--pty", action="store_true", help="also measure key-to-screen in a pseudo-terminal")
    a = ap.parse_args()
    snap = scaled_snapshot(a.processes)
    built = RowBuilder().rows(snap)
    rows: list[tuple[str, float, float]] = []
    report(f"rows from a snapshot ({a.processes})", timed(lambda: RowBuilder().rows(snap), a.repeat), rows)
    worst_arrange = []
    for col in COLUMNS:
        for desc in (False, True):
            state = ViewState(sort_key=col.key, descending=desc)
            worst_arrange += timed(lambda s=state: arrange(built, s, "root"), a.repeat)
    report(f"arrange: every column, both ways ({a.processes})", worst_arrange, rows)
    state = ViewState(
        gpu=3, mine=True, compute_only=True, search="hold", sort_key="gpu_memory", descending=True
    )
    report(
        f"arrange: all filters + search ({a.processes})",
        timed(lambda: arrange(built, state, "root"), a.repeat),
        rows,
    )
    asyncio.run(in_app(snap, a.repeat, rows))
    if a.pty:
        pty_latency(snap, rows)
    print()
    print("| what | median (ms) | worst (ms) |")
    print("|---|---|---|")
    for name, med, worst in rows:
        print(f"| {name} | {med:.2f} | {worst:.2f} |")


if __name__ == "__main__":
    main()
