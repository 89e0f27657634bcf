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
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gputui.rules import MULTICAST_OFF
from gputui.startvars import start_suspects

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
#: The longest protocol line read (an event); longer lines are cut and the rest dropped.
MAX_LINE_BYTES = 1 << 20
#: How much of a stray (non-protocol) line, or a stderr line, is kept.
MAX_STRAY_CHARS = 2000
#: How often the child's descendants are scanned while it runs (seconds).
SCAN_PERIOD_S = 0.5
#: Marks every process started by one run (inherited through fork and exec): how an orphan
#: re-parented to gputui is attributed to its run.
RUN_TOKEN_VAR = "GPUTUI_CHILD_RUN"  # noqa: S105  (a marker, not a secret)


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


def own_settings(env: Mapping[str, str]) -> list[str]:
    """The variables of `env` that hold gputui's own settings for its children (not the user's)."""
    return [name for name, value in {**CHILD_SETTINGS, **MULTICAST_OFF}.items() if env.get(name) == value]


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
    """Processes it started (its group, and descendants that left the group) still alive
    after the kill (should be none)."""
    env_changes: dict[str, str | None] = field(default_factory=dict)
    start_variables: dict[str, str] = field(default_factory=dict)
    """The variables set in its environment (by the user, not gputui) that change how CUDA,
    torch and NCCL start (gputui/startvars.py): the suspects when it dies."""
    dropped_output_bytes: int = 0
    """Bytes of its output not kept: over-long lines, beyond MAX_LINE_BYTES or MAX_STRAY_CHARS."""

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
    ) -> None:
        self.python = python
        self.argv = [python, str(script), *args]
        self.timeout = timeout
        self.env, self.env_changes = child_env(python, env_overrides, base_env)
        self.token = uuid.uuid4().hex
        self.env[RUN_TOKEN_VAR] = self.token  # not a change the user made: not reported
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
        become_subreaper()
        self._subreaper = True
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
        with _LIVE_LOCK:
            _LIVE.add(self)
        self._tracked[self.proc.pid] = _start_ticks(self.proc.pid) or 0
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
            if row.pgrp == proc.pid or (orphan and _has_token(pid, self.token)):
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
            _reap(
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


@dataclass(frozen=True, slots=True)
class ProcRow:
    ppid: int
    pgrp: int
    state: str
    start: int
    """Start time in clock ticks since boot: with the PID, names one process."""


def _stat_fields(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state is [0])."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    # pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields if len(fields) >= 20 else None


def _start_ticks(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def process_table() -> dict[int, ProcRow]:
    """Every process of this PID namespace (Linux /proc)."""
    out: dict[int, ProcRow] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for entry in entries:
        if entry.isdigit():
            fields = _stat_fields(entry)
            if fields:
                out[int(entry)] = ProcRow(int(fields[1]), int(fields[2]), fields[0], int(fields[19]))
    return out


def _has_token(pid: int, token: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f"{RUN_TOKEN_VAR}={token}".encode() in f.read().split(b"\0")
    except OSError:
        return False


def kill_exact(pid: int, ticks: int) -> bool:
    """SIGKILL `pid` only if it is still the process that started at `ticks` (through a
    pidfd opened before the check where available, so a reused PID is never hit)."""
    if pid <= 1 or pid == os.getpid():
        return False
    opener = getattr(os, "pidfd_open", None)
    fd = -1
    if opener is not None and hasattr(signal, "pidfd_send_signal"):
        try:
            fd = opener(pid)
        except ProcessLookupError:
            return False
        except OSError:
            fd = -1
    try:
        if _start_ticks(pid) != ticks:
            return False
        if fd >= 0:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
        return True
    except (ProcessLookupError, PermissionError):
        return False
    finally:
        if fd >= 0:
            os.close(fd)


def _reap(pids: Any) -> None:
    """Collect the exit of orphans re-parented to gputui (else they stay zombies)."""
    for pid in list(pids):
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


PR_SET_CHILD_SUBREAPER = 36
_SUBREAPER_LOCK = threading.Lock()
_SUBREAPER_USERS = [0]
"""Child runs that need gputui to be the subreaper (it is one only while this is > 0)."""


def _set_subreaper(on: bool) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0) == 0)
    return False


def become_subreaper() -> bool:
    """Make gputui the child subreaper of what it starts (Linux 3.4+), while a child runs:
    a descendant whose parent dies is re-parented to gputui, not init, so it is still found
    and killed.  Without it (another OS) the /proc scan while the child runs is what finds
    them.  Each call is matched by one `release_subreaper()`."""
    with _SUBREAPER_LOCK:
        _SUBREAPER_USERS[0] += 1
        return _set_subreaper(True)


def release_subreaper() -> None:
    """The last child run is over: orphans go to init again.  (Were gputui the subreaper for
    its whole life, the child of an alert command that daemonises would be re-parented to
    gputui and stay a zombie until gputui exits.)"""
    with _SUBREAPER_LOCK:
        _SUBREAPER_USERS[0] = max(0, _SUBREAPER_USERS[0] - 1)
        if not _SUBREAPER_USERS[0]:
            _set_subreaper(False)


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


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is `pgid` (Linux /proc)."""
    return [pid for pid, row in process_table().items() if row.state != "Z" and row.pgrp == pgid]
