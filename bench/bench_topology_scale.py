"""The Topology tab with many GPUs: does the UI keep answering?  (issue 13: with 256 GPUs the
tab froze the UI and `q` went unanswered for over a minute.)

    python bench/bench_topology_scale.py [--gpus 256] [--cap 90] [--repo PATH]

Makes a DERIVED recording of GPUS GPUs (bench/derive_recording.py, from the real 2x H200
recording; its header says derived) in a temporary directory, then runs gputui replaying it
in a pseudo-terminal (160x50, TERM=xterm-256color), reading everything it writes:

* `open`: press `3` once the first frame is up; seconds until the matrix is on the screen
  (the "N18" cells: 256 GPUs draw 3-letter codes);
* `quit_while_opening`: press `3`, then `q` 0.3 s later (while the matrix is being worked
  out); seconds from `q` until the process is gone;
* `quit_after`: `3`, wait for the matrix, then `q`; seconds from `q` until gone.

Times are wall-clock on whatever machine runs it, each capped at --cap seconds ("> cap"
means it had not happened by then).  --repo runs another checkout (e.g. main, for a before
figure).  Prints one JSON object per scenario.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLS, ROWS = 160, 50


class Tui:
    def __init__(self, repo: Path, recording: Path) -> None:
        env = dict(os.environ, TERM="xterm-256color", PYTHONPATH=str(repo))
        env.pop("COLORTERM", None)
        pid, fd = pty.fork()
        if pid == 0:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
            os.chdir(repo)
            os.execvpe(sys.executable, [sys.executable, "-m", "gputui", "--replay", str(recording)], env)
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.pid, self.fd = pid, fd
        self.out = bytearray()
        self.status: int | None = None

    def pump(self, seconds: float, until: bytes | None = None, start: int = 0) -> bool:
        """Read for up to `seconds`; True once `until` appears after offset `start` (or the
        process ended, when `until` is None)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.status is None:
                done, status = os.waitpid(self.pid, os.WNOHANG)
                if done:
                    self.status = status
            if until is None and self.status is not None:
                return True
            r, _, _ = select.select([self.fd], [], [], 0.02)
            if r:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    data = b""
                self.out += data
            if until is not None and until in self.out[start:]:
                return True
        return False

    def send(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def close(self) -> None:
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        os.close(self.fd)


def scenario(name: str, repo: Path, recording: Path, cap: float) -> dict[str, object]:
    tui = Tui(repo, recording)
    row: dict[str, object] = {"scenario": name}
    try:
        if not tui.pump(60, b"GPU"):
            row["error"] = "no first frame in 60 s"
            return row
        tui.pump(2.0)  # the first frame settles
        mark = len(tui.out)
        t0 = time.monotonic()
        tui.send(b"3")
        if name == "quit_while_opening":
            tui.pump(0.3)
        else:
            seen = tui.pump(cap, b"N18", mark)
            row["open_s"] = round(time.monotonic() - t0, 3) if seen else f"> {cap}"
            if name == "open" or not seen:
                return row
        t1 = time.monotonic()
        tui.send(b"q")
        gone = tui.pump(cap)
        row["quit_s"] = round(time.monotonic() - t1, 3) if gone else f"> {cap}"
        return row
    finally:
        tui.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, default=256)
    ap.add_argument("--cap", type=float, default=90.0)
    ap.add_argument("--repo", default=str(ROOT), help="the gputui checkout to run (default this one)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        recording = Path(tmp) / f"h200x{a.gpus}-derived.jsonl.gz"
        subprocess.run(
            [
                *(sys.executable, str(ROOT / "bench" / "derive_recording.py"), "--gpus", str(a.gpus)),
                *("--processes", "256", "--ticks", "30", "--out", str(recording)),
            ],
            check=True,
            capture_output=True,
        )
        for name in ("open", "quit_while_opening", "quit_after"):
            row = scenario(name, Path(a.repo), recording, a.cap)
            row.update(gpus=a.gpus, repo=a.repo)
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
