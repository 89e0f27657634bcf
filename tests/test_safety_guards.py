"""The guards whose breaking the rest of the suite once missed (issue 13, item 9), each pinned
here so that bench/mutate.py's mutants die: the exporter's bind address, `is_loopback` for a
name with a loopback and a routable address, the untrusted-text fast path, a child that
exits non-zero after "done", the pidfd path of a signal, and the runner's own kill guards.
None of them needs root."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest

from gputui.control import signals
from gputui.control.signals import identity_of, pin, send_signal
from gputui.diag import reaper, runner
from gputui.diag.runner import ChildResult
from gputui.diag.session import StressSession
from gputui.diag.verdicts import Diagnosis, StressResults
from gputui.export.address import is_loopback
from gputui.export.prometheus import serve
from gputui.ui.processes.lines import literal
from gputui.ui.render import clean

# ---- the exporter binds where it says ------------------------------------------------------


def _app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok\n"]


def test_the_server_binds_the_loopback_address_it_was_given():
    httpd = serve("127.0.0.1", 0, _app)
    try:
        assert httpd.socket.getsockname()[0] == "127.0.0.1"  # not 0.0.0.0: every interface
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_name_with_a_loopback_and_a_routable_address_is_not_loopback(monkeypatch):
    """Every address a name resolves to must be loopback: one routable one exposes it."""

    def resolve(host, *args, **kwargs):
        assert host == "dual.test"
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 0)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("192.0.2.7", 0)),
        ]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    assert is_loopback("dual.test") is False
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: resolve(*a, **k)[:1])
    assert is_loopback("dual.test") is True
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: [])  # resolves to nothing
    assert is_loopback("dual.test") is False


# ---- the untrusted-text fast path ----------------------------------------------------------


@pytest.mark.parametrize("text", ["漢字", "e\u0301", "\uff21", "abc\u0300def"])
def test_printable_but_not_one_cell_text_is_not_passed_through(text):
    """isprintable() is true for wide and combining characters: they must not take the
    fast path that returns the text as it is (one character must be one cell)."""
    assert text.isprintable()
    assert clean(text) != text
    assert literal(text) != text
    assert "\\u" in literal(text)


# ---- a non-zero exit after "done" is a failure ---------------------------------------------


def _done_stress(returncode: int) -> StressSession:
    session = StressSession(sys.executable, duration=1)
    session.results = StressResults()
    for event in (
        {"v": 1, "event": "gpus", "gpus": [{"index": 0, "name": "NVIDIA H200"}]},
        {"v": 1, "event": "done", "seconds": 1},
    ):
        session.results.feed(event)
    session.result = ChildResult(sys.executable, [], returncode=returncode)
    return session


def test_stress_child_exiting_non_zero_after_done_fails():
    ok = _done_stress(0).report()
    assert not any(e["cause"] == "child-crashed" for e in ok["errors"])
    bad = _done_stress(3).report()
    assert bad["status"] == "FAIL"
    assert any("ended with 3" in e["message"] for e in bad["errors"])


def test_diagnosis_child_exiting_non_zero_after_done_fails():
    d = Diagnosis(python=sys.executable)
    d.feed({"v": 1, "event": "done", "seconds": 1})
    assert d.done
    d.finish(ChildResult(sys.executable, [], returncode=3).to_json())
    child = [f for f in d.findings if f.id == "diag.child"]
    assert len(child) == 1 and child[0].status == "FAIL"
    assert "exited with status 3" in child[0].summary


# ---- signals go through the pidfd ----------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfds here (Linux 5.3+)")
def test_a_pinned_process_is_signalled_through_its_pidfd_not_kill(monkeypatch):
    """The pidfd is what makes a reused PID safe: sending by PID (kill(2)) would hit
    whatever process has the number by then.  Checked by what is called, as any user."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ident = identity_of(child.pid)
        assert ident is not None
        calls: list[tuple[str, int]] = []
        real_pidfd = signal.pidfd_send_signal

        def via_pidfd(fd: int, sig: int, *args: object) -> None:
            calls.append(("pidfd", sig))
            real_pidfd(fd, sig)

        monkeypatch.setattr(os, "kill", lambda pid, sig: calls.append(("kill", sig)))
        monkeypatch.setattr(signal, "pidfd_send_signal", via_pidfd)
        with pin(ident) as pinned:
            assert pinned.pidfd >= 0
            result = send_signal(pinned, signal.SIGTERM)
        assert result.sent
        assert ("kill", signal.SIGTERM) not in calls
        assert ("pidfd", signal.SIGTERM) in calls
        calls.clear()
        assert send_signal(ident, signal.SIGKILL).outcome in (signals.Outcome.SENT, signals.Outcome.GONE)
        assert ("kill", signal.SIGKILL) not in calls
    finally:
        child.kill()
        child.wait()


# ---- the runner's kill guards --------------------------------------------------------------


def test_kill_exact_refuses_another_start_time_and_gputui_itself(monkeypatch):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ticks = reaper.start_ticks(child.pid)
        assert ticks is not None
        assert reaper.kill_exact(child.pid, ticks + 1) is False  # a reused PID: not ours
        assert child.poll() is None
        sent: list[int] = []
        monkeypatch.setattr(os, "kill", lambda pid, sig: sent.append(pid))
        monkeypatch.setattr(signal, "pidfd_send_signal", lambda fd, sig, *a: sent.append(fd))
        own = reaper.start_ticks(os.getpid())
        assert own is not None
        assert reaper.kill_exact(os.getpid(), own) is False
        assert reaper.kill_exact(1, reaper.start_ticks(1) or 0) is False
        assert sent == []
        monkeypatch.undo()
        assert reaper.kill_exact(child.pid, ticks) is True
        assert child.wait(10) == -signal.SIGKILL
    finally:
        monkeypatch.undo()  # the real os.kill for the clean-up
        if child.poll() is None:
            child.kill()
            child.wait()


def test_kill_all_kills_every_running_child(tmp_path):
    script = tmp_path / "child.py"
    script.write_text("import time\ntime.sleep(600)\n")
    runs = [runner.ChildRun(sys.executable, script, timeout=120).start() for _ in range(2)]
    runner.kill_all(30)
    for run in runs:
        result = run.wait(1)
        assert result.cancelled and result.signal == "SIGKILL" and result.leftover_pids == []


def test_gputui_itself_is_refused_as_itself_not_as_one_of_its_threads():
    """Its main thread's id is its PID, so the thread rule alone would refuse it too, with
    the wrong words; the message must say what the PID is."""
    me = os.getpid()
    assert signals.protected_reason(me) == f"PID {me} is gputui itself"
    if os.getppid() == 1:  # a test run whose parent is init: PID 1 is named as init, rightly
        return
    assert signals.protected_reason(os.getppid()) == (
        f"PID {os.getppid()} is gputui's parent (the shell or terminal it runs in)"
    )
