"""gputui in a real pseudo-terminal, as over SSH: colours, NO_COLOR, and hang-ups."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import select
import signal
import struct
import sys
import termios
import time

import pytest

COLS, ROWS = 120, 40


def spawn(
    env_extra: dict[str, str] | None = None, ignore_hup: bool = False, args: tuple[str, ...] = ()
) -> tuple[int, int]:
    env = dict(os.environ, TERM="xterm-256color")
    env.pop("COLORTERM", None)
    env.pop("NO_COLOR", None)
    env.update(env_extra or {})
    pid, fd = pty.fork()
    if pid == 0:  # child
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        if ignore_hup:
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
        os.execvpe(sys.executable, [sys.executable, "-m", "gputui", "--demo", *args], env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    return pid, fd


def read_for(fd: int, seconds: float, until: bytes | None = None) -> bytes:
    out = bytearray()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            out += data
            if until is not None and until in out:
                break
    return bytes(out)


def wait_exit(pid: int, seconds: float) -> int | None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.05)
    return None


def finish(pid: int, fd: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
    with contextlib.suppress(OSError):
        os.close(fd)


def first_frame(env_extra: dict[str, str] | None = None) -> bytes:
    pid, fd = spawn(env_extra)
    try:
        # the cards come with the first tick; wait for a GPU card's title
        data = read_for(fd, 20, until=b"NVIDIA H200")
        data += read_for(fd, 1.0)
        os.write(fd, b"q")
        assert wait_exit(pid, 10) is not None, "q did not quit"
        return data
    finally:
        finish(pid, fd)


def test_256_colours_without_truecolor_and_the_gpus_are_drawn():
    data = first_frame()
    pyte = pytest.importorskip("pyte")
    screen = pyte.Screen(COLS, ROWS)
    pyte.ByteStream(screen).feed(data)
    text = "\n".join(screen.display)
    assert "0 NVIDIA H200" in text
    assert "1 NVIDIA H200" in text
    assert "RECORDED SESSION" in text
    assert re.search(rb"\x1b\[[0-9;]*38;5;\d+", data), "expected 256-colour escapes"
    assert not re.search(rb"\x1b\[[0-9;]*[34]8;2;", data), "truecolor escapes without COLORTERM"


def test_no_color_is_honoured():
    data = first_frame({"NO_COLOR": "1"})
    assert b"NVIDIA H200" in data
    assert not re.search(rb"\x1b\[[0-9;]*[34]8;[25];", data), "colour escapes despite NO_COLOR"


@pytest.mark.parametrize("ignore_hup", [False, True], ids=["sighup", "sighup-ignored"])
def test_exits_when_the_terminal_goes_away(ignore_hup):
    pid, fd = spawn(ignore_hup=ignore_hup)
    try:
        assert b"NVIDIA H200" in read_for(fd, 20, until=b"NVIDIA H200")
        os.close(fd)  # the SSH connection drops: the terminal is gone
        status = wait_exit(pid, 15)
        assert status is not None, "gputui kept running after its terminal went away"
    finally:
        finish(pid, fd)


def test_sigterm_is_honoured_while_the_terminal_is_not_read():
    """A stalled SSH session: the terminal takes no more output, so every write blocks.
    SIGTERM must still end gputui (the issue: still running 20 s later, 3 runs of 3)."""
    pid, fd = spawn(args=("--interval", "0.25"))
    try:
        assert b"NVIDIA H200" in read_for(fd, 20, until=b"NVIDIA H200")
        # stop reading: a redraw every 0.25 s fills the pty's buffer and the writes block
        time.sleep(4)
        os.kill(pid, signal.SIGTERM)
        status = wait_exit(pid, 20)  # still not reading
        assert status is not None, "gputui ignored SIGTERM while its output was blocked"
    finally:
        finish(pid, fd)
