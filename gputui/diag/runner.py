"""Parent side of the diagnosis and stress children: start one in a controlled environment,
stream its JSON-lines events, enforce a timeout, cancel it, and report how it ended.

The child runs in a session (process group) of its own, so a cancel or a timeout kills it and
everything it started (NCCL ranks, stress workers) with one signal.  What leaves the group (a
grandchild that calls setsid()) is still followed: gputui makes itself a child subreaper
(PR_SET_CHILD_SUBREAPER), so orphans of the child are re-parented to gputui rather than to
init, and every process descending from the child is recorded by PID and start time (a /proc
scan while it runs, and a run token in the environment for orphans seen only after their
parent died).  All of them are killed when the child ends or is cancelled, and any still alive
afterwards is reported.  Every child still running when gputui leaves (`q`, a hang-up,
SIGTERM, a command's SIGTERM or SIGHUP) is killed by `kill_all`.  Threads, not asyncio: the
TUI posts the events it gets to its message queue, the CLI prints them.

The child's environment is built in `childenv`; the process table, the exact kill and the
subreaper role are in `reaper`.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gputui.diag import staging
from gputui.diag.childenv import child_env, own_settings
from gputui.diag.privilege import RunAs, own_privileges
from gputui.diag.reaper import (
    RUN_TOKEN_VAR,
    become_subreaper,
    group_members,
    has_token,
    kill_exact,
    process_table,
    reap,
    release_subreaper,
    start_ticks,
)
from gputui.rules import PARENT_VAR
from gputui.startvars import start_suspects

STDERR_TAIL_LINES = 40
STDERR_TAIL_BYTES = 8000
KILL_VERIFY_S = 5.0
#: The longest protocol line read (an event); longer lines are cut and the rest dropped.
MAX_LINE_BYTES = 1 << 20
#: How much of a stray (non-protocol) line, or a stderr line, is kept.
MAX_STRAY_CHARS = 2000
#: How often the child's descendants are scanned while it runs (seconds).
SCAN_PERIOD_S = 0.5


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
    """Processes it started (its group, and descendants that left the group) still alive
    after the kill (should be none)."""
    env_changes: dict[str, str | None] = field(default_factory=dict)
    start_variables: dict[str, str] = field(default_factory=dict)
    """The variables set in its environment (by the user, not gputui) that change how CUDA,
    torch and NCCL start (gputui/startvars.py): the suspects when it dies."""
    dropped_output_bytes: int = 0
    """Bytes of its output not kept: over-long lines, beyond MAX_LINE_BYTES or MAX_STRAY_CHARS."""
    privileges: dict[str, Any] = field(default_factory=own_privileges)
    """Whose privileges it ran with (gputui.diag.privilege)."""

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
            "start_variables": self.start_variables,
            "dropped_output_bytes": self.dropped_output_bytes,
            "privileges": self.privileges,
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
        base_env: Mapping[str, str] | None = None,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        on_stray: Callable[[str], None] | None = None,
        on_exit: Callable[[ChildResult], None] | None = None,
        cwd: str | None = None,
        run_as: RunAs | None = None,
    ) -> None:
        self.python = python
        self.script = str(script)
        self.args = list(args)
        self.argv = [python, self.script, *args]
        self.timeout = timeout
        self.run_as = run_as
        """Another user's privileges to run it with (root diagnosing a user's environment:
        gputui.diag.privilege); it then runs a copy of the child code that user can read
        (gputui.diag.staging), from that copy's directory."""
        self._staged: str | None = None
        self.env, self.env_changes = child_env(python, env_overrides, base_env, run_as)
        self.token = uuid.uuid4().hex
        self.env[RUN_TOKEN_VAR] = self.token  # not a change the user made: not reported
        self.env.pop(PARENT_VAR, None)
        self.on_event = on_event
        self.on_stray = on_stray
        self.on_exit = on_exit
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | None = None
        self.result = ChildResult(
            python,
            self.argv,
            timeout=timeout,
            env_changes=self.env_changes,
            start_variables={n: v for n, v, _ in start_suspects(self.env, skip=own_settings(self.env))},
            privileges=run_as.to_json() if run_as is not None else own_privileges(),
        )
        self._stderr: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._phases: dict[str, str] = {}
        self._lock = threading.Lock()
        self._killed_for: str | None = None
        self._finished = threading.Event()
        self._exited = threading.Event()
        self._threads: list[threading.Thread] = []
        self._t0 = 0.0
        self._tracked: dict[int, int] = {}
        """Every process seen descending from the child: PID -> start time (clock ticks)."""
        self._subreaper = False
        """This run holds gputui's subreaper role (released when it finishes)."""
        self._dropped = 0

    # ---- control ---------------------------------------------------------------------

    def start(self) -> ChildRun:
        self._t0 = time.monotonic()
        if threading.current_thread() is threading.main_thread():
            # the child dies with us, SIGKILL included (rules.tie_to_parent, at its hello); the
            # kernel watches the thread that starts it, so only the main thread's children
            self.env[PARENT_VAR] = str(os.getpid())
        become_subreaper()
        self._subreaper = True
        switch: dict[str, Any] = {}
        try:
            if self.run_as is not None:
                self._staged, script = staging.stage(Path(self.script))
                self.argv = self.result.argv = [self.python, script, *self.args]
                self.cwd = self._staged  # (not a directory of theirs: root enters it first)
                switch = {
                    "user": self.run_as.uid,
                    "group": self.run_as.gid,
                    "extra_groups": list(self.run_as.groups),
                }
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,  # its own process group: one killpg ends it all
                **switch,
            )
        except OSError as exc:
            self.result.start_error = f"{type(exc).__name__}: {exc.strerror or exc}"
            self._finish()
            return self
        with _LIVE_LOCK:
            _LIVE.add(self)
        self._tracked[self.proc.pid] = start_ticks(self.proc.pid) or 0
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

    def _lines(self, stream: Any) -> Any:
        """The lines of `stream`, each cut at MAX_LINE_BYTES (the rest is dropped and
        counted): one endless line never takes more memory than that."""
        while True:
            raw = stream.readline(MAX_LINE_BYTES)
            if not raw:
                return
            if not raw.endswith(b"\n") and len(raw) >= MAX_LINE_BYTES:
                while True:  # skip to the end of the line
                    more = stream.readline(MAX_LINE_BYTES)
                    if not more:
                        break
                    if more.endswith(b"\n"):
                        self._dropped += len(more) - 1
                        break
                    self._dropped += len(more)
            yield raw.decode("utf-8", "replace").rstrip("\r\n")

    def _cut(self, line: str) -> str:
        """At most MAX_STRAY_CHARS of a line kept for the report; the rest counted as dropped."""
        if len(line) <= MAX_STRAY_CHARS:
            return line
        self._dropped += len(line[MAX_STRAY_CHARS:].encode("utf-8", "replace"))
        return line[:MAX_STRAY_CHARS]

    def _read_stdout(self) -> None:
        assert self.proc is not None
        assert self.proc.stdout is not None
        for line in self._lines(self.proc.stdout):
            if not line:
                continue
            event = _parse(line)
            if event is None:
                if self.on_stray is not None:
                    self.on_stray(self._cut(line))
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
        for line in self._lines(self.proc.stderr):
            self._stderr.append(self._cut(line))

    def _wait(self) -> None:
        proc = self.proc
        assert proc is not None
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while True:
            self._scan()
            step = SCAN_PERIOD_S if deadline is None else min(SCAN_PERIOD_S, deadline - time.monotonic())
            try:
                proc.wait(timeout=max(step, 0.0))
                break
            except subprocess.TimeoutExpired:
                if deadline is not None and time.monotonic() >= deadline:
                    self._kill("timeout")
                    proc.wait()
                    break
        # whatever it started and left behind goes with it (NCCL ranks of a crashed probe,
        # a daemon that called setsid)
        self._kill_group(scan=True)
        for thread in self._threads[:2]:
            thread.join(timeout=5)
        self._finish()

    # ---- ending ----------------------------------------------------------------------

    def _kill(self, reason: str) -> None:
        with self._lock:
            if self._killed_for is None and self.proc is not None and self.proc.poll() is None:
                self._killed_for = reason
                self.result.pending_phase = _latest(self._phases)
        self._kill_group(scan=False)

    def _kill_group(self, *, scan: bool) -> None:
        """SIGKILL the child's group and every descendant recorded.  Without `scan` (a cancel,
        maybe from the UI thread) only what is known: quick, no /proc walk; the wait thread
        then scans and kills what the child left (twice: one may fork between scan and kill)."""
        proc = self.proc
        if proc is None:
            return
        pgid = proc.pid  # start_new_session: the child leads its own group
        for _ in range(2 if scan else 1):
            if scan:
                self._scan()
            # unreaped (returncode None), the child's PID cannot have been reused; with
            # members left, neither can their group id
            if (not scan and proc.returncode is None) or (scan and group_members(pgid)):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
            with self._lock:
                tracked = dict(self._tracked)
            for pid, ticks in tracked.items():
                if pid != proc.pid:
                    kill_exact(pid, ticks)

    def _scan(self) -> None:
        """Record every live process descending from the child (PID and start time)."""
        proc = self.proc
        if proc is None:
            return
        table = process_table()
        me = os.getpid()
        with self._lock:
            tracked = dict(self._tracked)
        roots = {pid for pid, ticks in tracked.items() if pid in table and table[pid].start == ticks}
        for pid, row in table.items():
            # an orphan re-parented to gputui (the subreaper) after its parent died unseen
            # (or a member of the child's group)
            orphan = row.ppid == me and pid not in tracked and pid != proc.pid
            if row.pgrp == proc.pid or (orphan and has_token(pid, self.token)):
                roots.add(pid)
        children: dict[int, list[int]] = {}
        for pid, row in table.items():
            children.setdefault(row.ppid, []).append(pid)
        found: dict[int, int] = {}
        todo = list(roots)
        while todo:
            pid = todo.pop()
            if pid in found or pid == me or pid not in table:
                continue
            found[pid] = table[pid].start
            todo += children.get(pid, [])
        with self._lock:
            self._tracked.update(found)

    def _leftovers(self) -> list[int]:
        """Recorded processes still alive (not zombies), waiting up to KILL_VERIFY_S; orphans
        re-parented to gputui are reaped on the way."""
        proc = self.proc
        assert proc is not None
        deadline = time.monotonic() + KILL_VERIFY_S
        me = os.getpid()
        while True:
            table = process_table()
            # orphans re-parented to gputui that are now zombies of ours: only those that
            # are still the processes recorded (same start time), never another child of ours
            reap(
                pid
                for pid, ticks in self._tracked.items()
                if pid != proc.pid and pid in table and table[pid].start == ticks and table[pid].ppid == me
            )
            table = process_table()
            left = sorted(
                pid
                for pid, ticks in self._tracked.items()
                if pid in table and table[pid].start == ticks and table[pid].state != "Z"
            )
            left += [pid for pid in group_members(proc.pid) if pid not in left]
            if not left or time.monotonic() >= deadline:
                return sorted(left)
            time.sleep(0.05)

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
            result.leftover_pids = self._leftovers()
        with _LIVE_LOCK:
            _LIVE.discard(self)
        if self._staged is not None:
            staging.unstage(self._staged)
            self._staged = None
        if self._subreaper:
            self._subreaper = False
            release_subreaper()  # (after the leftovers were found, killed and reaped)
        result.dropped_output_bytes = self._dropped
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
    except (ValueError, RecursionError):  # RecursionError: nested too deep
        return None
    if not isinstance(obj, dict) or "event" not in obj or not isinstance(obj.get("v"), int):
        return None
    return obj


_LIVE: set[ChildRun] = set()
_LIVE_LOCK = threading.Lock()


def kill_all(wait: float = 0.0) -> None:
    """Kill every child still running, and what it started (gputui is leaving).  Safe from
    any thread; with `wait`, wait up to that many seconds for their results."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for run in live:
        run.cancel()
    end = time.monotonic() + wait
    for run in live:
        with contextlib.suppress(TimeoutError):
            run.wait(max(0.0, end - time.monotonic()))


atexit.register(kill_all)
