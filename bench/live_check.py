"""Check the live app against nvidia-smi on a real GPU machine.

Runs `gputui` in a pseudo-terminal (160x50), and at several instants reads GPU 0's card off
the screen (via pyte) and asks `nvidia-smi --query-gpu` for the same fields right then.
The screen shows the last tick (at most one interval old), so fields that move every second
(power, SM clock) may differ a little; the rest should match exactly.

    python bench/live_check.py [--samples 6] [--every 3] [--json OUT] [--screen OUT]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time

import pyte

COLS, ROWS = 160, 50
FIELDS = ",".join(
    [
        "utilization.gpu",
        "memory.used",
        "memory.total",
        "temperature.gpu",
        "power.draw",
        "power.limit",
        "clocks.sm",
        "clocks.mem",
        "pstate",
    ]
)

PATTERNS = {
    "util": r"UTIL [^0-9N]*?(\d+)%",
    "mem_used_gib": r"MEM [^0-9]*?([\d.]+)/[\d.]+ GiB",
    "mem_total_gib": r"MEM [^0-9]*?[\d.]+/([\d.]+) GiB",
    "power": r"PWR [^0-9]*?(\d+)/\d+ W",
    "power_limit": r"PWR [^0-9]*?\d+/(\d+) W",
    "temp": r"TEMP [^0-9]*?(\d+)°C",
    "sm_clock": r"SM [^0-9]*?(\d+)/\d+ MHz",
    "mem_clock": r"MCLK [^0-9]*?(\d+)/\d+ MHz",
    "pstate": r"P-state P(\d+)",
}


def card_text(screen: pyte.Screen) -> str:
    """GPU 0's card: the left half of the screen from its title down."""
    lines = screen.display
    start = next(i for i, ln in enumerate(lines) if "0 NVIDIA" in ln)
    several = any("1 NVIDIA" in ln for ln in lines)
    return "\n".join(ln[: COLS // 2] if several else ln for ln in lines[start : start + 30])


def parse(text: str) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for key, pat in PATTERNS.items():
        m = re.search(pat, text)
        out[key] = float(m.group(1)) if m else None
    return out


def smi() -> dict[str, float]:
    line = subprocess.run(
        ["nvidia-smi", f"--query-gpu={FIELDS}", "--format=csv,noheader,nounits", "-i", "0"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    v = [x.strip() for x in line.split(",")]
    return {
        "util": float(v[0]),
        "mem_used_gib": round(float(v[1]) / 1024, 1),
        "mem_total_gib": round(float(v[2]) / 1024, 1),
        "temp": float(v[3]),
        "power": round(float(v[4])),
        "power_limit": round(float(v[5])),
        "sm_clock": float(v[6]),
        "mem_clock": float(v[7]),
        "pstate": float(v[8].lstrip("P")),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=6)
    ap.add_argument("--every", type=float, default=3.0)
    ap.add_argument("--json")
    ap.add_argument("--screen")
    a = ap.parse_args()
    env = dict(os.environ, TERM="xterm-256color")
    pid, fd = pty.fork()
    if pid == 0:
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        os.execvpe(sys.executable, [sys.executable, "-m", "gputui", "--interval", "1"], env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    screen = pyte.Screen(COLS, ROWS)
    stream = pyte.ByteStream(screen)

    def pump(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            r, _, _ = select.select([fd], [], [], 0.05)
            if r:
                try:
                    data = os.read(fd, 65536)
                except OSError:  # the app exited and closed the terminal
                    return
                if b"\x1b[6n" in data:
                    os.write(fd, b"\x1b[1;1R")
                stream.feed(data)

    pump(4.0)
    rows = []
    for _ in range(a.samples):
        pump(a.every)
        shown = parse(card_text(screen))
        truth = smi()
        rows.append({"gputui": shown, "nvidia_smi": truth})
    os.write(fd, b"q")
    pump(1.0)
    os.kill(pid, signal.SIGTERM)
    os.waitpid(pid, 0)
    keys = list(PATTERNS)
    print("field".ljust(14) + "".join(f"  #{i + 1} gputui / smi".ljust(24) for i in range(len(rows))))
    for k in keys:
        print(k.ljust(14) + "".join(f"  {r['gputui'][k]!s:>8} / {r['nvidia_smi'][k]!s:<10}" for r in rows))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    if a.screen:
        with open(a.screen, "w") as f:
            f.write("\n".join(screen.display) + "\n")


if __name__ == "__main__":
    main()
