"""NVML's read-ahead in a forked child (gputui/telemetry/nvml/read_ahead.py): the answer
handed over once, never waited for on the UI thread, the child never left running, never
writing to the terminal, never running the parent's exit handlers, a cut-short or oversized
answer not used."""

from __future__ import annotations

import atexit
import os
import time
from pathlib import Path

import pytest

from gputui.telemetry.nvml import read_ahead
from gputui.telemetry.nvml.read_ahead import ChildRead, can_fork

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this system")


def gone(pid: int) -> bool:
    """The process is neither running nor a zombie of ours."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def answer(child: ChildRead) -> object | None:
    """The child's answer once it has sent it all (up to 10 s), or None."""
    child.answered(10)
    return child.take()


def start(read: object) -> tuple[ChildRead, int]:
    child = ChildRead.start(read)  # type: ignore[arg-type]
    assert child is not None and child.pid is not None
    return child, child.pid


def test_the_childs_answer_is_handed_over_once_and_the_child_reaped() -> None:
    child, pid = start(lambda: ("facts", [1, 2, 3]))
    assert answer(child) == ("facts", [1, 2, 3])
    assert child.take() is None  # once
    child.reap()  # (the kernel may not have let it go the moment its answer ended)
    assert child.pid is None and gone(pid)
    assert child.status is not None and os.waitstatus_to_exitcode(child.status) in (0, -9)


def test_take_never_waits_and_reap_kills_a_child_that_has_not_answered() -> None:
    """The UI thread asks at mount: a child still reading NVML (here: sleeping) gives None
    at once and reads on; `reap` (the poller's thread, once its own NVML is open) kills
    and reaps it."""
    child, pid = start(lambda: time.sleep(30))
    t0 = time.monotonic()
    assert child.take() is None
    assert time.monotonic() - t0 < 0.5
    os.kill(pid, 0)  # still there
    assert child.take() is None  # once
    child.reap()
    assert gone(pid)
    assert child.status is not None and os.waitstatus_to_exitcode(child.status) == -9  # killed


def test_take_after_the_child_answered_gives_the_answer_without_waiting() -> None:
    child, pid = start(lambda: {"gpus": 4})
    assert child.answered(10)
    t0 = time.monotonic()
    assert child.take() == {"gpus": 4}
    assert time.monotonic() - t0 < 0.5
    child.reap()
    assert gone(pid)


def test_a_failing_read_gives_nothing_and_prints_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    """An exception in the child (NVML's, say) is not the parent's: no answer, no
    traceback on the terminal the monitor draws on, the child gone."""

    def read() -> object:
        print("from the child's stdout")
        raise RuntimeError("NVML broke in the child")

    child, pid = start(read)
    assert answer(child) is None
    child.reap()
    assert gone(pid)
    out, err = capfd.readouterr()
    assert "NVML broke" not in err and "from the child" not in out


def test_the_child_never_runs_the_parents_exit_handlers(tmp_path: Path) -> None:
    """It ends with os._exit: the parent's atexit handlers (the saved state, a recording's
    last lines) and buffered output are the parent's alone."""
    marker = tmp_path / "ran"

    def handler() -> None:
        marker.write_text("exit handler ran")

    atexit.register(handler)
    try:
        child, pid = start(lambda: "answer")
        assert answer(child) == "answer"
        child.reap()
        assert gone(pid)
        assert not marker.exists()
    finally:
        atexit.unregister(handler)


def test_an_answer_larger_than_the_pipe_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(read_ahead, "PIPE_BYTES", 4096)
    child, pid = start(lambda: "x" * 100_000)
    assert answer(child) is None
    child.reap()
    assert gone(pid)


def test_a_child_killed_mid_answer_gives_nothing() -> None:
    """A cut-short answer (the child killed, say by its deadline) does not unpickle: None."""

    def read() -> object:
        os.write(1, b"")  # (its stdout is /dev/null)
        os.kill(os.getpid(), 9)
        return "never sent"

    child, pid = start(read)
    assert answer(child) is None
    child.reap()
    assert gone(pid)


def test_no_fork_while_another_thread_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread's locks would be copied held into the child: with any other thread running
    (this test process may have some: its count is stood in for), no fork."""
    import threading

    monkeypatch.setattr(threading, "active_count", lambda: 1)
    assert can_fork()
    monkeypatch.setattr(threading, "active_count", lambda: 2)
    assert not can_fork()
