"""Running the user's alert command (`gputui watch --alert-cmd CMD`).

Each alert that fires (and, unless switched off, clears) starts CMD with the alert as a JSON
document on stdin (`gputui.telemetry.alerts.event_json`) and a few GPUTUI_ALERT_* variables
in its environment.  CMD is split like a shell would split it but run without one (no
injection through process names or hostnames); `shell=True` runs it with /bin/sh -c for
users who want pipes.  Never blocks the caller: `submit` only queues; worker threads run
the commands, each killed after `timeout` seconds.  Rate limit: at most one command per
alert key (rule + GPU or process) in `rate_limit` seconds; what was held back is counted in
the next document's "suppressed".
"""

from __future__ import annotations

import contextlib
import os
import queue
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO

from gputui.export.snapshot import dumps
from gputui.telemetry.alerts import AlertEvent, event_json
from gputui.telemetry.model import MachineInfo
from gputui.untrusted import escaped

MAX_RUNNING = 4
"""Commands running at once."""
MAX_QUEUED = 100
"""Commands waiting; beyond this, new ones are dropped (and counted) rather than piling up."""


def command_argv(cmd: str, shell: bool = False) -> list[str]:
    """The argv to run: shlex-split, or /bin/sh -c CMD when the user asked for a shell."""
    if shell:
        return ["/bin/sh", "-c", cmd]
    argv = shlex.split(cmd)
    if not argv:
        raise ValueError("the alert command is empty")
    return argv


@dataclass
class Stats:
    started: int = 0
    suppressed: int = 0
    dropped: int = 0
    failed: int = 0
    timed_out: int = 0
    results: list[tuple[str, int | None]] = field(default_factory=list)
    """(alert key, exit status or None when killed), in the order they finished."""


class AlertCommand:
    def __init__(
        self,
        argv: Sequence[str],
        *,
        rate_limit: float = 900.0,
        timeout: float = 30.0,
        resolved: bool = True,
        info: Callable[[], MachineInfo | None] = lambda: None,
        log: IO[str] | None = None,
        prog: str = "gputui watch",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.argv = list(argv)
        self.rate_limit = rate_limit
        self.timeout = timeout
        self.resolved = resolved
        self._info = info
        self._log = log if log is not None else sys.stderr
        self._prog = prog
        self._clock = clock
        self._last_sent: dict[str, float] = {}
        self._held: dict[str, int] = {}
        self._sent_episodes: set[tuple[str, float]] = set()
        self._queue: queue.Queue[tuple[str, bytes, dict[str, str]] | None] = queue.Queue(MAX_QUEUED)
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._pending = 0
        self.stats = Stats()
        self._workers = [
            threading.Thread(target=self._work, name=f"gputui-alert-cmd-{k}", daemon=True)
            for k in range(MAX_RUNNING)
        ]
        for w in self._workers:
            w.start()

    # ---- the caller's side: decide and queue, never wait --------------------------------

    def submit(self, events: Sequence[AlertEvent]) -> None:
        for event in events:
            self._submit(event)

    def _submit(self, event: AlertEvent) -> None:
        a = event.alert
        episode = (a.key, a.since)
        now = self._clock()
        with self._lock:
            if event.state == "firing":
                last = self._last_sent.get(a.key)
                if last is not None and now - last < self.rate_limit:
                    self._held[a.key] = self._held.get(a.key, 0) + 1
                    self.stats.suppressed += 1
                    return
                self._last_sent[a.key] = now
                self._sent_episodes.add(episode)
                held = self._held.pop(a.key, 0)
            else:
                # a clear is sent only for a firing that was sent (never rate-limited: at
                # most one per firing), and only when asked for
                if episode not in self._sent_episodes:
                    return
                self._sent_episodes.discard(episode)
                if not self.resolved:
                    return
                held = 0
        doc = event_json(event, self._info(), suppressed=held)
        env = {
            "GPUTUI_ALERT_STATE": event.state,
            "GPUTUI_ALERT_KIND": a.kind,
            "GPUTUI_ALERT_KEY": escaped(a.key),
            "GPUTUI_ALERT_GPU": str(a.gpu),
            "GPUTUI_ALERT_MESSAGE": escaped(a.message),  # may quote a process name: untrusted
        }
        payload = (dumps(doc, pretty=False) + "\n").encode()
        with self._lock:
            self._pending += 1
        try:
            self._queue.put_nowait((a.key, payload, env))
        except queue.Full:
            with self._lock:
                self._pending -= 1
                self.stats.dropped += 1
            self._say(f"too many alert commands waiting; dropped the one for {a.key}")

    # ---- the workers ---------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            key, payload, env = job
            try:
                self._run(key, payload, env)
            finally:
                with self._lock:
                    self._pending -= 1
                    self._idle.notify_all()

    def _run(self, key: str, payload: bytes, env: dict[str, str]) -> None:
        with self._lock:
            self.stats.started += 1
        try:
            proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=self._log.fileno() if _has_fileno(self._log) else subprocess.DEVNULL,
                env={**os.environ, **env},
                start_new_session=True,  # a timeout kills the command, not gputui's group
            )
        except OSError as exc:
            with self._lock:
                self.stats.failed += 1
                self.stats.results.append((key, None))
            self._say(f"cannot run the alert command {self.argv[0]!r}: {exc.strerror or exc}")
            return
        try:
            proc.communicate(payload, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.wait()
            with self._lock:
                self.stats.timed_out += 1
                self.stats.results.append((key, None))
            self._say(f"the alert command for {key} was still running after {self.timeout:g} s: killed")
            return
        with self._lock:
            self.stats.results.append((key, proc.returncode))
            if proc.returncode != 0:
                self.stats.failed += 1
        if proc.returncode != 0:
            self._say(f"the alert command for {key} exited with status {proc.returncode}")

    def _say(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):  # a closed stderr: nowhere to say it
            print(f"{self._prog}: {text}", file=self._log, flush=True)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until every queued command has finished; False if `timeout` passed first."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def close(self, timeout: float | None = None) -> None:
        """Let queued and running commands finish (each is bounded by its own timeout)."""
        self.wait_idle(self.timeout + 1.0 if timeout is None else timeout)
        for _ in self._workers:
            try:
                self._queue.put_nowait(None)
            except queue.Full:
                break


def _has_fileno(f: IO[str]) -> bool:
    try:
        f.fileno()
    except (OSError, ValueError, AttributeError):
        return False
    return True


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
