"""gputui.control.signals against real processes: what is sent, what is refused, and why.

Every process signalled here is a child this test started; the guards (PID 1, gputui
itself, its parent and threads) are checked with the sending functions replaced by
recorders, so a broken guard fails the test instead of signalling init.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest
from gpu_children import SLEEP_INTERRUPTIBLE, alive, can_choose_pids, start_child, start_child_with_pid

from gputui.control import signals
from gputui.control.signals import Outcome, ProcessIdentity, identity_of, is_running, send_signal
from gputui.telemetry.host.processes import start_time

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def no_sending(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, object, int]]:
    """Replace every way of sending a signal with a recorder."""
    calls: list[tuple[str, object, int]] = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: calls.append(("kill", pid, sig)))
    monkeypatch.setattr(signal, "pidfd_send_signal", lambda fd, sig, *a: calls.append(("pidfd", fd, sig)))
    return calls


def me() -> ProcessIdentity:
    ident = identity_of(os.getpid())
    assert ident is not None
    return ident


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL, signal.SIGINT])
def test_never_signals_pid_1_itself_its_parent_or_its_threads(no_sending, sig) -> None:
    own = me()
    parent = identity_of(os.getppid())
    assert parent is not None
    init = identity_of(1) or ProcessIdentity(1, 0.0)
    seen = threading.Event()
    stop = threading.Event()

    def worker() -> None:
        seen.set()
        stop.wait(10)

    t = threading.Thread(target=worker)
    t.start()
    seen.wait(5)
    try:
        assert t.native_id is not None and t.native_id != os.getpid()
        thread = ProcessIdentity(t.native_id, own.create_time)
        targets = [init, own, parent, thread, ProcessIdentity(0, 0.0), ProcessIdentity(-1, 0.0)]
        for target in targets:
            r = send_signal(target, sig)
            assert r.outcome is Outcome.PROTECTED, (target, r)
            assert "never signals" in r.message
        assert no_sending == []  # nothing reached the kernel
    finally:
        stop.set()
        t.join()


def test_protected_reasons_name_what_the_process_is() -> None:
    assert "init" in (signals.protected_reason(1) or "")
    assert "gputui itself" in (signals.protected_reason(os.getpid()) or "")
    if os.getppid() != 1:  # (a test run whose parent is init: PID 1 is named as init, rightly)
        assert "parent" in (signals.protected_reason(os.getppid()) or "")
    assert "process groups" in (signals.protected_reason(0) or "")
    assert signals.protected_reason(os.getpid() + 10_000_000) is None


def test_sends_to_the_process_the_user_saw(children) -> None:
    child = start_child("term")
    children.append(child)
    ident = identity_of(child.pid)
    assert ident is not None and ident.user and ident.name
    r = send_signal(ident, signal.SIGTERM)
    assert r.outcome is Outcome.SENT and r.sent
    assert r.message == f"SIGTERM sent to PID {child.pid}"
    assert child.wait(timeout=10) == -signal.SIGTERM


def caught(pid: int, sig: int) -> bool:
    """Whether process `pid` has a handler for `sig` (SigCgt in /proc/PID/status)."""
    with open(f"/proc/{pid}/status") as f:
        line = next(ln for ln in f if ln.startswith("SigCgt:"))
    return bool(int(line.split()[1], 16) >> (sig - 1) & 1)


def test_without_pidfd_it_falls_back_to_kill(children, monkeypatch) -> None:
    monkeypatch.delattr(os, "pidfd_open")
    child = start_child("nopidfd", code=SLEEP_INTERRUPTIBLE)
    children.append(child)
    # until its handler is in place a SIGINT could be lost (ignored by the launcher)
    deadline = time.monotonic() + 30
    while not caught(child.pid, signal.SIGINT):
        assert time.monotonic() < deadline, "the child never caught SIGINT"
        time.sleep(0.01)
    ident = identity_of(child.pid)
    assert ident is not None
    assert send_signal(ident, signal.SIGINT).sent
    assert child.wait(timeout=10) != 0


def test_a_process_that_exited_is_gone_not_an_error(children) -> None:
    child = start_child("gone")
    children.append(child)
    ident = identity_of(child.pid)
    assert ident is not None
    child.kill()
    # not reaped yet: a zombie has exited, and is reported so
    deadline = time.monotonic() + 10
    while alive(child.pid):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    r = send_signal(ident, signal.SIGTERM)
    assert r.outcome is Outcome.GONE, r
    assert "already exited" in r.message
    assert not is_running(ident)
    child.wait(timeout=10)  # reaped: no such process at all
    r = send_signal(ident, signal.SIGTERM)
    assert r.outcome is Outcome.GONE and "already exited" in r.message


def test_a_pid_that_now_names_another_process_is_refused(children) -> None:
    """What PID reuse looks like to the code: the PID exists but started at another time."""
    child = start_child("other")
    children.append(child)
    now = identity_of(child.pid)
    assert now is not None
    seen = ProcessIdentity(child.pid, now.create_time - 42.0, "root", "python3")
    r = send_signal(seen, signal.SIGKILL)
    assert r.outcome is Outcome.REUSED, r
    assert "different process" in r.message and "nothing sent" in r.message
    assert not is_running(seen)
    assert is_running(now)
    assert child.poll() is None  # untouched


needs_pid_choice = pytest.mark.skipif(
    not can_choose_pids(), reason="cannot set ns_last_pid here (needs CAP_SYS_ADMIN)"
)


def reuse_pid(children, first: subprocess.Popen[bytes], gap: float) -> subprocess.Popen[bytes]:
    """End `first`, wait `gap` seconds, start a new child with the same PID."""
    first.kill()
    first.wait(timeout=10)
    time.sleep(gap)
    second = start_child_with_pid(first.pid, "second")
    if second is None:
        pytest.skip("other processes kept taking the PID")
    children.append(second)
    assert second.pid == first.pid
    return second


@needs_pid_choice
def test_real_pid_reuse_is_refused(children) -> None:
    """The selected process exits and the kernel gives its PID to a new process: the start
    times differ (they are read to 10 ms; the gap makes sure they are in different ticks)."""
    first = start_child("first")
    children.append(first)
    seen = identity_of(first.pid)
    assert seen is not None
    second = reuse_pid(children, first, gap=0.05)
    r = send_signal(seen, signal.SIGKILL)
    assert r.outcome is Outcome.REUSED, r
    assert "different process" in r.message
    assert second.poll() is None and alive(second.pid)


@needs_pid_choice
def test_a_pinned_process_is_exact_even_when_its_pid_is_reused_at_once(children) -> None:
    """Pinned (as when the confirmation opens), the signal goes through the pidfd of that
    very process: a new process with the same PID, started within the same 10 ms tick
    (so its start time reads the same), is never signalled."""
    first = start_child("first")
    children.append(first)
    seen = identity_of(first.pid)
    assert seen is not None
    with signals.pin(seen) as pinned:
        assert pinned.problem is None
        second = reuse_pid(children, first, gap=0.0)
        r = send_signal(pinned, signal.SIGKILL)
    assert r.outcome in (Outcome.GONE, Outcome.REUSED), r
    assert not r.sent
    assert second.poll() is None and alive(second.pid)


def test_pin_reports_problems_before_anything_is_sent(children, request) -> None:
    child = start_child("pinned-gone")
    children.append(child)
    ident = identity_of(child.pid)
    assert ident is not None
    child.kill()
    child.wait(timeout=10)
    no_sending = request.getfixturevalue("no_sending")
    own = me()
    with signals.pin(own) as pinned:
        assert pinned.problem is not None and pinned.problem.outcome is Outcome.PROTECTED
        assert send_signal(pinned, signal.SIGTERM).outcome is Outcome.PROTECTED
    with signals.pin(ident) as pinned:
        assert pinned.problem is not None and pinned.problem.outcome is Outcome.GONE
        r = send_signal(pinned, signal.SIGTERM)
        assert r.outcome is Outcome.GONE and r.signal == signal.SIGTERM
    assert no_sending == []


def test_invalid_signal_is_refused(children) -> None:
    child = start_child("invalid")
    children.append(child)
    ident = identity_of(child.pid)
    assert ident is not None
    assert send_signal(ident, 12345).outcome is Outcome.INVALID
    assert child.poll() is None


DROP_AND_SIGNAL = textwrap.dedent(
    """
    import json, os, signal, sys
    from gputui.control.signals import identity_of, pin, send_signal
    target = int(sys.argv[1])
    ident = identity_of(target)            # read as root, before dropping
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)                       # nobody: may not signal root's processes
    r = send_signal(ident, signal.SIGTERM)
    with pin(ident) as pinned:             # the confirmation knows before asking
        early = pinned.problem.outcome.value if pinned.problem else None
    print(json.dumps({"uid": os.getuid(), "outcome": r.outcome.value, "owner": r.owner,
                      "message": r.message, "pinned": early}))
    """
)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to drop to nobody against a root-owned process")
def test_permission_denied_names_the_owner_and_root(children) -> None:
    """For real: the signalling code runs as `nobody` against a process owned by root."""
    target = start_child("root-owned")
    children.append(target)
    assert psutil.Process(target.pid).username() == "root"
    out = subprocess.run(
        [sys.executable, "-c", DROP_AND_SIGNAL, str(target.pid)],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        check=True,
    )
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["uid"] == 65534
    assert res["outcome"] == "denied"
    assert res["pinned"] == "denied"
    assert res["owner"] == "root"
    assert res["message"] == (
        f"permission denied: PID {target.pid} belongs to root; only root (e.g. sudo gputui) can signal it"
    )
    assert target.poll() is None  # still running


def test_start_time_is_stable_for_one_process(children) -> None:
    child = start_child("stable")
    children.append(child)
    a = start_time(psutil.Process(child.pid))
    b = start_time(psutil.Process(child.pid))
    assert a == b
    assert abs(a - psutil.Process(child.pid).create_time()) < 1.5
