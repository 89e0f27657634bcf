"""The terminal watchdog on a real pseudo-terminal pair (no app): hang-up -> exit."""

from __future__ import annotations

import os
import pty
import signal
import threading
import time

from gputui.ui.terminal_watch import TerminalWatch, terminal_alive


def test_terminal_alive_follows_the_controlling_terminal():
    """In a child whose controlling terminal is a pty: alive, then dead once it hangs up."""
    r, w = os.pipe()
    pid, master = pty.fork()
    if pid == 0:  # child: the pty is its controlling terminal
        os.close(r)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        os.write(w, b"1" if terminal_alive(0) else b"0")
        time.sleep(0.5)  # the parent hangs up meanwhile
        os.write(w, b"1" if terminal_alive(0) else b"0")
        os._exit(0)
    os.close(w)
    first = os.read(r, 1)
    os.close(master)  # hang up
    second = os.read(r, 1)
    os.waitpid(pid, 0)
    os.close(r)
    assert (first, second) == (b"1", b"0")
    a, b = os.pipe()
    try:
        assert terminal_alive(a) is False  # not a terminal at all
    finally:
        os.close(a)
        os.close(b)


def test_a_dead_terminal_asks_for_exit_then_forces_it():
    r, w = os.pipe()  # not a terminal: "dead" from the first check
    asked = threading.Event()
    forced: list[int] = []
    done = threading.Event()

    def force(code: int) -> None:
        forced.append(code)
        done.set()

    watch = TerminalWatch(r, asked.set, period=0.05, grace=0.2, force_exit=force)
    watch.start()
    try:
        assert asked.wait(5)  # the app is asked to exit first
        assert done.wait(5)  # and if it is still there after the grace, the process ends
        assert forced == [0]
        assert watch.lost
    finally:
        os.close(r)
        os.close(w)


def test_sighup_flag_acts_at_once_and_stop_ends_quietly():
    master, slave = pty.openpty()
    try:
        forced: list[int] = []
        asked = threading.Event()
        watch = TerminalWatch(slave, asked.set, period=60, grace=0.0, force_exit=forced.append)
        # a long period: nothing is checked until the hang-up flag wakes the thread
        watch.start()
        watch.hangup()
        assert asked.wait(5)
        watch.join(5)
        assert forced == [0]
        quiet = TerminalWatch(slave, asked.set, period=60, grace=0.0, force_exit=forced.append)
        quiet.start()
        quiet.stop()
        quiet.join(5)
        assert not quiet.is_alive()
        assert forced == [0]  # a normal exit forces nothing
    finally:
        os.close(master)
        os.close(slave)
