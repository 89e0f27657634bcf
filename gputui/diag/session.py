"""A diagnosis run: the probe child plus the Diagnosis its events build, for the CLI and the tab."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gputui.diag import PROBE
from gputui.diag.runner import ChildResult, ChildRun
from gputui.diag.verdicts import Diagnosis, Finding

DEFAULT_TIMEOUT = 120.0


class DiagnosisSession:
    """Runs probe.py in `python` and feeds a Diagnosis.

    `on_finding(Finding)`, `on_phase(title or None)` and `on_done(Diagnosis)` are called from
    the runner's threads, in order.
    """

    def __init__(
        self,
        python: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        env_overrides: Mapping[str, str | None] | None = None,
        probe_args: Sequence[str] = (),
        on_finding: Callable[[Finding], object] | None = None,
        on_phase: Callable[[str | None], object] | None = None,
        on_done: Callable[[Diagnosis], object] | None = None,
    ) -> None:
        self.python = python
        self.diagnosis = Diagnosis(python=python)
        self._lock = threading.Lock()
        self._on_finding = on_finding
        self._on_phase = on_phase
        self._on_done = on_done
        self.child = ChildRun(
            python,
            PROBE,
            probe_args,
            timeout=timeout,
            env_overrides=env_overrides,
            on_event=self._event,
            on_stray=self._stray,
            on_exit=self._exit,
        )

    def start(self) -> DiagnosisSession:
        self.child.start()
        return self

    def cancel(self) -> None:
        self.child.cancel()

    @property
    def running(self) -> bool:
        return self.child.running

    def wait(self, timeout: float | None = None) -> Diagnosis:
        self.child.wait(timeout)
        return self.diagnosis

    def _event(self, event: dict[str, Any]) -> None:
        with self._lock:
            finding = self.diagnosis.feed(event)
            phase = self.diagnosis.current_phase()
        if finding is not None and self._on_finding is not None:
            self._on_finding(finding)
        if event.get("event") == "phase" and self._on_phase is not None:
            self._on_phase(phase)

    def _stray(self, line: str) -> None:
        with self._lock:
            self.diagnosis.stray.append(line)

    def _exit(self, result: ChildResult) -> None:
        with self._lock:
            before = len(self.diagnosis.findings)
            self.diagnosis.finish(result.to_json())
            extra = self.diagnosis.findings[before:]
        if self._on_finding is not None:
            for finding in extra:
                self._on_finding(finding)
        if self._on_done is not None:
            self._on_done(self.diagnosis)
