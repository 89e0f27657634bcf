"""On a real GPU machine: kill a real GPU process from gputui's Processes tab, by key presses,
and check with nvidia-smi that it is gone, its GPU memory released, and the other still runs.

    python3 bench/device_kill.py OUTDIR [--gpu 0] [--gib 8]

Starts bench/load/hold_memory.py (idle, holds --gib GiB) and bench/load/train_like.py on the
same GPU, runs `python3 -m gputui` live in a 160x50 pseudo-terminal (read with pyte), then:
`2` (Processes tab), `/hold_memory` + enter (the search leaves the holder's row under the
cursor), `T`, checks the dialog shows the holder's PID, `y`.  Writes OUTDIR/result.json
(every check and its evidence), OUTDIR/screen-*.txt (the screens at each step) and
OUTDIR/nvidia-smi-*.csv (the compute apps before and after).  Exit status 0 when all
checks pass.
"""

from __future__ import annotations

import argparse
import contextlib
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
from pathlib import Path

import pyte

ROOT = Path(__file__).resolve().parents[1]
COLS, ROWS = 160, 50


def smi_apps() -> list[dict[str, str]]:
    out = subprocess.run(
        [
            "nvidia-smi",
            "--query-compute-apps=pid,gpu_uuid,used_memory,process_name",
            "--format=csv,noheader,nounits",
        ],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    apps = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[0].isdigit():
            apps.append(
                {"pid": parts[0], "gpu_uuid": parts[1], "used_mib": parts[2], "name": ",".join(parts[3:])}
            )
    return apps


def smi_memory_used(gpu: int) -> int:
    out = subprocess.run(
        ["nvidia-smi", "-i", str(gpu), "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(out.strip().splitlines()[0])


class Terminal:
    """gputui in a pseudo-terminal, its screen kept by pyte."""

    def __init__(self, argv: list[str]) -> None:
        env = dict(
            os.environ,
            TERM="xterm-256color",
            PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            LINES=str(ROWS),
            COLUMNS=str(COLS),
        )
        env.pop("COLORTERM", None)
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
            os.execvpe(argv[0], argv, env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.screen = pyte.Screen(COLS, ROWS)
        self.stream = pyte.ByteStream(self.screen)

    def pump(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            r, _, _ = select.select([self.fd], [], [], min(left, 0.05))
            if r:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    return
                if b"\x1b[6n" in data:
                    os.write(self.fd, b"\x1b[1;1R")
                self.stream.feed(data)

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    def wait_for(self, what: str, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.pump(0.1)
            if what in self.text():
                return True
        return False

    def keys(self, data: str, settle: float = 0.3) -> None:
        for ch in data:
            os.write(self.fd, ch.encode())
            self.pump(0.05)
        self.pump(settle)

    def close(self) -> None:
        try:
            os.write(self.fd, b"q")
            self.pump(1.0)
            os.kill(self.pid, signal.SIGTERM)
        except OSError:
            pass
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--gib", type=float, default=8)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    checks: dict[str, object] = {}
    load = ROOT / "bench" / "load"
    holder = subprocess.Popen(
        [
            sys.executable,
            str(load / "hold_memory.py"),
            "--gib",
            str(a.gib),
            "--seconds",
            "300",
            "--device",
            str(a.gpu),
        ],
        stdout=(out / "hold.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    trainer = subprocess.Popen(
        [
            sys.executable,
            str(load / "train_like.py"),
            "--seconds",
            "300",
            "--device",
            str(a.gpu),
            "--pause-every",
            "1e9",
        ],
        stdout=(out / "train.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    term = None
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            pids = {x["pid"] for x in smi_apps()}
            if str(holder.pid) in pids and str(trainer.pid) in pids:
                break
            time.sleep(1)
        time.sleep(3)  # the holder has filled its block
        before = smi_apps()
        used_before = smi_memory_used(a.gpu)
        (out / "nvidia-smi-before.csv").write_text("\n".join(json.dumps(x) for x in before) + "\n")
        checks["both_on_gpu_before"] = {str(holder.pid), str(trainer.pid)} <= {x["pid"] for x in before}

        term = Terminal([sys.executable, "-m", "gputui", "--interval", "1"])
        checks["first_frame"] = term.wait_for("NVIDIA", 30)
        term.keys("2", settle=2.5)
        table = term.text()
        (out / "screen-1-table.txt").write_text(table)
        holder_line = next((ln for ln in table.splitlines() if f" {holder.pid} " in ln), "")
        trainer_line = next((ln for ln in table.splitlines() if f" {trainer.pid} " in ln), "")
        checks["table_lists_both"] = bool(holder_line and trainer_line)
        checks["holder_row"] = holder_line.strip()
        checks["trainer_row"] = trainer_line.strip()
        smi_holder = next((x for x in before if x["pid"] == str(holder.pid)), None)
        checks["nvidia_smi_holder_mib"] = smi_holder["used_mib"] if smi_holder else None

        term.keys("/hold_memory")
        term.keys("\r", settle=1.0)
        filtered = term.text()
        (out / "screen-2-search.txt").write_text(filtered)
        checks["search_leaves_only_the_holder"] = (
            f" {holder.pid} " in filtered and f" {trainer.pid} " not in filtered
        )

        term.keys("T", settle=1.0)
        dialog = term.text()
        (out / "screen-3-dialog.txt").write_text(dialog)
        checks["dialog_shows_the_holder"] = (
            "Send SIGTERM to 1 process?" in dialog and str(holder.pid) in dialog
        )
        checks["dialog_not_the_trainer"] = str(trainer.pid) not in dialog
        alive_before_yes = holder.poll() is None
        checks["nothing_sent_before_confirming"] = alive_before_yes

        t0 = time.monotonic()
        term.keys("y", settle=0.2)
        try:
            code = holder.wait(timeout=30)
        except subprocess.TimeoutExpired:
            code = None
        checks["holder_exit_code"] = code
        checks["holder_exited_after_s"] = round(time.monotonic() - t0, 2) if code is not None else None
        checks["holder_got_sigterm"] = code == -signal.SIGTERM
        term.pump(3.0)
        (out / "screen-4-after.txt").write_text(term.text())
        checks["tui_says_exited"] = f"PID {holder.pid} exited" in term.text()

        # the driver frees the memory once the process is gone; give it a few seconds
        released_after = None
        for i in range(40):
            apps = smi_apps()
            if str(holder.pid) not in {x["pid"] for x in apps}:
                released_after = round(0.25 * i, 2)
                break
            time.sleep(0.25)
        time.sleep(1)
        after = smi_apps()
        used_after = smi_memory_used(a.gpu)
        (out / "nvidia-smi-after.csv").write_text("\n".join(json.dumps(x) for x in after) + "\n")
        checks["holder_gone_from_nvidia_smi"] = str(holder.pid) not in {x["pid"] for x in after}
        checks["gone_from_nvidia_smi_after_s"] = released_after
        checks["gpu_memory_used_mib_before_after"] = [used_before, used_after]
        # other processes keep allocating meanwhile (the trainer's optimizer state), so count
        # what the GPU's total dropped plus what the others grew by
        others_before = sum(int(x["used_mib"]) for x in before if x["pid"] != str(holder.pid))
        others_after = sum(int(x["used_mib"]) for x in after if x["pid"] != str(holder.pid))
        freed = (used_before - used_after) + (others_after - others_before)
        checks["others_grew_mib"] = others_after - others_before
        checks["gpu_memory_freed_mib"] = freed
        checks["freed_at_least_the_holders_block"] = freed >= a.gib * 1024 * 0.95
        checks["trainer_still_running"] = trainer.poll() is None and str(trainer.pid) in {
            x["pid"] for x in after
        }

        term.keys("\x1b", settle=0.2)  # clear the search
        term.keys("\x1b", settle=2.0)
        (out / "screen-5-table-after.txt").write_text(term.text())
        # a table row starts with the GPU index then the PID; the status line that reports the
        # outcome ("PID 1873 exited ...") is expected to name it
        row = re.compile(rf"^\s*\d+\s+{holder.pid}\s", re.M)
        checks["table_after_has_no_holder"] = row.search(term.text()) is None
        checks["outcome_reported"] = f"PID {holder.pid} exited" in term.text()
    finally:
        if term is not None:
            term.close()
        for p in (holder, trainer):
            if p.poll() is None:
                p.kill()
            p.wait()
    must = [
        "both_on_gpu_before",
        "first_frame",
        "table_lists_both",
        "search_leaves_only_the_holder",
        "dialog_shows_the_holder",
        "dialog_not_the_trainer",
        "nothing_sent_before_confirming",
        "holder_got_sigterm",
        "tui_says_exited",
        "holder_gone_from_nvidia_smi",
        "freed_at_least_the_holders_block",
        "trainer_still_running",
        "table_after_has_no_holder",
    ]
    checks["passed"] = all(checks.get(k) is True for k in must)
    checks["failed"] = [k for k in must if checks.get(k) is not True]
    (out / "result.json").write_text(json.dumps(checks, indent=2) + "\n")
    print(json.dumps(checks, indent=2))
    return 0 if checks["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
