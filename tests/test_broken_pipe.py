"""`gputui COMMAND | head -1` (issue 24, item 8): the reader leaving early ends the command
quietly, as SIGPIPE ends other tools: no traceback from any thread, no 'Exception ignored'
at exit, and a diagnosis still running is stopped."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from conftest import H200_X2

TEMPERATURE = "[alerts.temperature]\nabove = 30.0\nclear_below = 29.0\nfor_seconds = 0.0\n"


def first_line_then_close(
    args: list[str], timeout: float = 120, until: tuple[str, ...] = ()
) -> tuple[int, str, float]:
    """Run `python -m gputui ARGS | head -1`: read one line (with `until`, lines up to the
    first that starts with one of those words), close the pipe; (exit status, stderr,
    seconds from the close to the exit)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputui", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "GPUTUI_ALLOW_NOTTY": ""},
    )
    assert proc.stdout is not None and proc.stderr is not None
    line = proc.stdout.readline()
    assert line
    while until and line and not line.decode("utf-8", "replace").startswith(until):
        line = proc.stdout.readline()
    proc.stdout.close()
    closed = time.monotonic()
    try:
        err = proc.stderr.read().decode("utf-8", "replace")
        rc = proc.wait(timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return rc, err, time.monotonic() - closed


def assert_quiet(err: str) -> None:
    assert "Traceback" not in err, err
    assert "Exception" not in err, err
    assert "BrokenPipe" not in err, err


def test_diag_stops_quietly_when_the_reader_leaves():
    """Before: two BrokenPipeError tracebacks, from threads gputui-child-stdout and
    gputui-child-wait, and the diagnosis ran on to its end.  The reader leaves after the
    first finding, so that the next one is written from the runner's thread (the header's
    lines are written before the child starts)."""
    rc, err, _ = first_line_then_close(["diag"], until=("PASS", "WARN", "FAIL", "SKIP", "INFO"))
    assert_quiet(err)
    assert rc == 141  # 128 + SIGPIPE, as a tool SIGPIPE ends


@pytest.mark.parametrize(
    "args",
    [
        ["snapshot", "--replay", str(H200_X2), "--watch", "0.02"],
        ["snapshot", "--replay", str(H200_X2), "--watch", "0.02", "--json"],
        ["snapshot", "--replay", str(H200_X2)],
        ["--help"],
        ["--print-config"],
        ["snapshot", "--list-fields"],
        ["export", "--help"],
    ],
    ids=" ".join,
)
def test_headless_commands_end_quietly_when_the_reader_leaves(args):
    rc, err, _ = first_line_then_close(args)
    assert_quiet(err)
    assert rc in (0, 141)


def test_watch_ends_quietly_when_the_reader_leaves(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(TEMPERATURE)
    rc, err, _ = first_line_then_close(
        ["watch", "--config", str(cfg), "--replay", str(H200_X2), "--interval", "0.01"]
    )
    assert_quiet(err)
    assert rc in (0, 141)


def test_stress_ends_quietly_when_the_reader_leaves():
    _, err, _ = first_line_then_close(
        ["stress", "--test-cpu", "--duration", "0.5", "--monitor-interval", "0"]
    )
    assert_quiet(err)


def closed_before_output(args: list[str], timeout: float = 120) -> tuple[int, str]:
    """Run `python -m gputui ARGS` with its stdout a pipe nobody reads any more (closed
    before gputui has started): its first write fails."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputui", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err.decode("utf-8", "replace")


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["--print-config"],
        ["snapshot", "--list-fields"],
        ["snapshot", "--schema"],
        ["snapshot", "--replay", str(H200_X2)],
        ["snapshot", "--replay", str(H200_X2), "--json"],
        ["snapshot", "--replay", str(H200_X2), "--watch", "0.02"],
        ["diag"],
        ["diag", "--json"],
        ["stress", "--test-cpu", "--duration", "0.5", "--monitor-interval", "0"],
    ],
    ids=" ".join,
)
def test_a_reader_gone_before_the_first_line_ends_the_command_quietly(args):
    rc, err = closed_before_output(args)
    assert_quiet(err)
    assert rc in (0, 1, 2, 141), err  # (diag and stress keep their verdict's status when done)
