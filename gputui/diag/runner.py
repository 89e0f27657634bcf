"""Parent side of the diagnosis and stress children: start one in a controlled environment,
stream its JSON-lines events, enforce a timeout, cancel it, and report how it ended.

The child runs in a session (process group) of its own, so a cancel or a timeout kills it and
everything it started (NCCL ranks, stress workers) with one signal, and the runner then checks
that no process of that group is left.  Threads, not asyncio: the TUI posts the events it gets
to its message queue, the CLI prints them.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gputui.rules import MULTICAST_OFF

#: Set in every child: unbuffered UTF-8 output, and a Python traceback on a fatal signal
#: (so a segfault in a CUDA library shows where it happened in the stderr tail).
CHILD_SETTINGS = {
    "PYTHONUNBUFFERED": "1",
    "PYTHONIOENCODING": "utf-8",
    "PYTHONFAULTHANDLER": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}
#: Variables of gputui's own process that must not leak into the diagnosed interpreter.
DROPPED = ("PYTHONSTARTUP", "PYTHONINSPECT")
DROPPED_PREFIXES = ("GPUTUI_", "TEXTUAL")
#: Dropped when the child is another interpreter than gputui's: they point at gputui's Python.
FOREIGN_DROPPED = ("PYTHONHOME", "PYTHONEXECUTABLE", "__PYVENV_LAUNCHER__")

STDERR_TAIL_LINES = 40
STDERR_TAIL_BYTES = 8000
KILL_VERIFY_S = 5.0


def child_env(
    python: str, overrides: Mapping[str, str | None] | None = None, base: Mapping[str, str] | None = None
) -> tuple[dict[str, str], dict[str, str | None]]:
    """The child's environment: the user's (it is what their training sees) with gputui's own
    settings removed and the few that make the protocol reliable added.

    Returns (environment, changes) where changes maps each variable gputui set or removed
    (None) to its new value, for the report.  `overrides` values of None unset a variable.
    """
    env = dict(os.environ if base is None else base)
    changes: dict[str, str | None] = {}
    foreign = not same_interpreter(python)
    for name in list(env):
        if name in DROPPED or name.startswith(DROPPED_PREFIXES) or (foreign and name in FOREIGN_DROPPED):
            del env[name]
            changes[name] = None
    for name, setting in {**CHILD_SETTINGS, **MULTICAST_OFF}.items():
        if env.get(name) != setting:
            env[name] = setting
            changes[name] = setting
    for name, override in (overrides or {}).items():
        if override is None:
            env.pop(name, None)
        else:
            env[name] = override
        changes[name] = override
    return env, changes


def same_interpreter(python: str) -> bool:
    try:
        return os.path.samefile(python, sys.executable)
    except OSError:
        return False


@dataclass
class ChildResult:
    """How a child ended."""

    python: str
    argv: list[str]
    returncode: int | None = None
    signal: str | None = None
    """Name of the signal that ended it (SIGSEGV, SIGKILL...), if one did."""
    timed_out: bool = False
    cancelled: bool = False
    timeout: float | None = None
    seconds: float = 0.0
    stderr_tail: str = ""
    start_error: str | None = None
    pending_phase: str | None = None
    """The phase that was running when it was killed or died."""
    leftover_pids: list[int] = field(default_factory=list)
    """Processes of its group still alive after the kill (should be none)."""
    env_changes: dict[str, str | None] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "python": self.python,
            "argv": self.argv,
            "returncode": self.returncode,
            "signal": self.signal,
            "timed_out": self.timed_out,
            "cancelled": self.cancelled,
            "timeout": self.timeout,
            "seconds": round(self.seconds, 3),
            "stderr_tail": self.stderr_tail,
            "start_error": self.start_error,
            "pending_phase": self.pending_phase,
            "leftover_pids": self.leftover_pids,
            "env_changes": self.env_changes,
        }


class ChildRun:
    """One child process speaking the JSON-lines protocol.

    Callbacks run on the runner's threads: `on_event(dict)` for each protocol event, in
    order; `on_stray(str)` for any other stdout line; `on_exit(ChildResult)` once, after the
    last event.
    """

    def __init__(
        self,
        python: str,
        script: str | Path,
        args: Sequence[str] = (),
        *,
        timeout: float | None = None,
        env_overrides: Mapping[str, str | None] | None = None,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        on_stray: Callable[[str], None] | None = None,
        on_exit: Callable[[ChildResult], None] | None = None,
        cwd: str | None = None,
    ) -> None:
        self.python = python
        self.argv = [python, str(script), *args]
        self.timeout = timeout
        self.env, self.env_changes = child_env(python, env_overrides)
        self.on_event = on_event
        self.on_stray = on_stray
        self.on_exit = on_exit
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | None = None
        self.result = ChildResult(python, self.argv, timeout=timeout, env_changes=self.env_changes)
        self._stderr: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._phases: dict[str, str] = {}
        self._lock = threading.Lock()
        self._killed_for: str | None = None
        self._finished = threading.Event()
        self._exited = threading.Event()
        self._threads: list[threading.Thread] = []
        self._t0 = 0.0

    # ---- control ---------------------------------------------------------------------

    def start(self) -> ChildRun:
        self._t0 = time.monotonic()
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,  # its own process group: one killpg ends it all
            )
        except OSError as exc:
            self.result.start_error = f"{type(exc).__name__}: {exc.strerror or exc}"
            self._finish()
            return self
        for target, name in (
            (self._read_stdout, "stdout"),
            (self._read_stderr, "stderr"),
            (self._wait, "wait"),
        ):
            thread = threading.Thread(target=target, name=f"gputui-child-{name}", daemon=True)
            self._threads.append(thread)
            thread.start()
        return self

    def cancel(self) -> None:
        """Kill the child and everything it started (idempotent)."""
        self._kill("cancelled")

    @property
    def running(self) -> bool:
        """False from the moment the child has ended and its result is complete, which is
        before `on_exit` runs: whoever `on_exit` notifies sees it as not running."""
        return not self._exited.is_set()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def wait(self, timeout: float | None = None) -> ChildResult:
        """Block until the child has ended and its output is read."""
        if not self._finished.wait(timeout):
            raise TimeoutError("child still running")
        return self.result

    # ---- threads ---------------------------------------------------------------------

    def _read_stdout(self) -> None:
        assert self.proc is not None
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if not line:
                continue
            event = _parse(line)
            if event is None:
                if self.on_stray is not None:
                    self.on_stray(line)
                continue
            if event.get("event") == "phase":
                name = str(event.get("name"))
                with self._lock:
                    if event.get("state") == "start":
                        self._phases[name] = str(event.get("title") or name)
                    else:
                        self._phases.pop(name, None)
            if self.on_event is not None:
                self.on_event(event)

    def _read_stderr(self) -> None:
        assert self.proc is not None
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self._stderr.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def _wait(self) -> None:
        proc = self.proc
        assert proc is not None
        try:
            proc.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self._kill("timeout")
            proc.wait()
        # whatever it started and left behind goes with it (NCCL ranks of a crashed probe)
        self._kill_group(reason=None)
        for thread in self._threads[:2]:
            thread.join(timeout=5)
        self._finish()

    # ---- ending ----------------------------------------------------------------------

    def _kill(self, reason: str) -> None:
        with self._lock:
            if self._killed_for is None and self.proc is not None and self.proc.poll() is None:
                self._killed_for = reason
                self.result.pending_phase = _latest(self._phases)
        self._kill_group(reason)

    def _kill_group(self, reason: str | None) -> None:
        proc = self.proc
        if proc is None:
            return
        pgid = proc.pid  # start_new_session: the child leads its own group
        if reason is None and not group_members(pgid):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)

    def _finish(self) -> None:
        result = self.result
        result.seconds = time.monotonic() - self._t0 if self._t0 else 0.0
        proc = self.proc
        if proc is not None:
            rc = proc.returncode
            result.returncode = rc
            if rc is not None and rc < 0:
                with contextlib.suppress(ValueError):
                    result.signal = signal.Signals(-rc).name
            result.leftover_pids = wait_group_gone(proc.pid, KILL_VERIFY_S)
        result.timed_out = self._killed_for == "timeout"
        result.cancelled = self._killed_for == "cancelled"
        text = "\n".join(self._stderr)
        result.stderr_tail = text[-STDERR_TAIL_BYTES:]
        if result.pending_phase is None and (result.signal or result.returncode):
            with self._lock:
                result.pending_phase = _latest(self._phases)
        self._exited.set()
        try:
            if self.on_exit is not None:
                self.on_exit(result)
        finally:
            self._finished.set()  # wait() returns once on_exit has run


def _latest(phases: dict[str, str]) -> str | None:
    """The phase started last (dicts keep insertion order)."""
    return next(reversed(phases.values()), None) if phases else None


def _parse(line: str) -> dict[str, Any] | None:
    if not line.startswith("{"):
        return None
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict) or "event" not in obj or not isinstance(obj.get("v"), int):
        return None
    return obj


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is `pgid` (Linux /proc)."""
    out: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) >= 3 and fields[0] != "Z" and int(fields[2]) == pgid:
            out.append(int(entry))
    return out


def wait_group_gone(pgid: int, timeout: float) -> list[int]:
    """Wait until no live process of the group remains; returns those still there."""
    deadline = time.monotonic() + timeout
    while True:
        left = group_members(pgid)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)
