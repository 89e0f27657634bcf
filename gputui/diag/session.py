"""Diagnosis and stress runs: a child plus what its events build, for the CLI and the tab."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gputui.diag import PROBE, STRESS
from gputui.diag.privilege import RunAs
from gputui.diag.runner import ChildResult, ChildRun
from gputui.diag.verdicts import Diagnosis, Finding, StressResults, stress_verdicts
from gputui.telemetry.model import GpuSample, Snapshot

DEFAULT_TIMEOUT = 120.0


def leftover_message(result: ChildResult, what: str) -> str | None:
    """What to say when processes of the run outlived the kill (None when none did)."""
    if not result.leftover_pids:
        return None
    pids = ", ".join(str(p) for p in result.leftover_pids)
    return f"processes the {what} started are still running after SIGKILL: PID {pids}"


class _ChildSession:
    """What the diagnosis and stress sessions share: a ChildRun to cancel and ask about."""

    child: ChildRun

    def cancel(self) -> None:
        self.child.cancel()

    @property
    def running(self) -> bool:
        return self.child.running


class DiagnosisSession(_ChildSession):
    """Runs the probe package (`python gputui/diag/probe`) in `python` and feeds a Diagnosis.

    `on_finding(Finding)`, `on_phase(title or None)` and `on_done(Diagnosis)` are called from
    the runner's threads, in order.
    """

    def __init__(
        self,
        python: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        env_overrides: Mapping[str, str | None] | None = None,
        base_env: Mapping[str, str] | None = None,
        probe_args: Sequence[str] = (),
        on_finding: Callable[[Finding], object] | None = None,
        on_phase: Callable[[str | None], object] | None = None,
        on_done: Callable[[Diagnosis], object] | None = None,
        run_as: RunAs | None = None,
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
            base_env=base_env,
            on_event=self._event,
            on_stray=self._stray,
            on_exit=self._exit,
            run_as=run_as,
        )

    def start(self) -> DiagnosisSession:
        self.child.start()
        return self

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
            left = leftover_message(result, "diagnosis")
            if left is not None:
                self.diagnosis.add_check(
                    {
                        "id": "diag.leftover",
                        "group": "child",
                        "title": "Diagnosis process",
                        "status": "FAIL",
                        "summary": left,
                        "evidence": {"leftover_pids": result.leftover_pids},
                        "fix": [f"ps -o pid,user,stat,args -p {','.join(map(str, result.leftover_pids))}"],
                    }
                )
            extra = self.diagnosis.findings[before:]
        if self._on_finding is not None:
            for finding in extra:
                self._on_finding(finding)
        if self._on_done is not None:
            self._on_done(self.diagnosis)


class StressMonitor:
    """What the monitor's own sampling (the poller's snapshots) saw during a stress run, by
    NVML index: the live values, maxima, clock-event reasons, and a short series per GPU."""

    def __init__(self, series_len: int = 600) -> None:
        self._lock = threading.Lock()
        self.active = False
        self.latest: dict[int, GpuSample] = {}
        self.summary: dict[int, dict[str, Any]] = {}
        self.series: dict[int, dict[str, list[float]]] = {}
        self._len = series_len

    def start(self) -> None:
        with self._lock:
            self.active = True
            self.latest.clear()
            self.summary.clear()
            self.series.clear()

    def stop(self) -> None:
        with self._lock:
            self.active = False

    def observe(self, snapshot: Snapshot) -> None:
        """Feed a snapshot (from the poller's thread or the UI's)."""
        with self._lock:
            if not self.active:
                return
            for g in snapshot.gpus:
                if g.lost:
                    continue
                self.latest[g.index] = g
                s = self.summary.setdefault(g.index, {"samples": 0, "clock_event_reasons": 0})
                s["samples"] += 1
                for key, value, pick in (
                    ("max_temperature", g.temperature, max),
                    ("max_power", g.power_draw, max),
                    ("max_sm_clock", g.sm_clock, max),
                    ("min_sm_clock", g.sm_clock, min),
                ):
                    if value is not None:
                        s[key] = value if s.get(key) is None else pick(s[key], value)
                if g.power_limit is not None:
                    s["power_limit"] = g.power_limit
                s["clock_event_reasons"] |= g.clock_event_reasons or 0
                series = self.series.setdefault(g.index, {"temperature": [], "power": [], "sm_clock": []})
                for key, value in (
                    ("temperature", g.temperature),
                    ("power", g.power_draw),
                    ("sm_clock", g.sm_clock),
                ):
                    series[key].append(float(value) if value is not None else float("nan"))
                    del series[key][: -self._len]

    def snapshot(
        self,
    ) -> tuple[dict[int, GpuSample], dict[int, dict[str, Any]], dict[int, dict[str, list[float]]]]:
        with self._lock:
            return (
                dict(self.latest),
                {k: dict(v) for k, v in self.summary.items()},
                {k: {m: list(s) for m, s in v.items()} for k, v in self.series.items()},
            )


class StressSession(_ChildSession):
    """Runs stress.py in `python`, feeding StressResults; `on_update(kind)` after each event
    ("result", "progress", "phase", "done"), from the runner's threads."""

    def __init__(
        self,
        python: str,
        *,
        duration: float = 60.0,
        gpus: Sequence[int] | None = None,
        extra_args: Sequence[str] = (),
        timeout: float | None = None,
        env_overrides: Mapping[str, str | None] | None = None,
        monitor: StressMonitor | None = None,
        on_update: Callable[[str], object] | None = None,
        run_as: RunAs | None = None,
    ) -> None:
        args = ["--duration", f"{duration:g}", *extra_args]
        if gpus:
            args += ["--gpus", ",".join(str(g) for g in gpus)]
        overrides = {"CUBLAS_WORKSPACE_CONFIG": ":4096:8", **(env_overrides or {})}
        self.results = StressResults()
        self.monitor = monitor
        self.result: ChildResult | None = None
        self._lock = threading.Lock()
        self._on_update = on_update
        self.child = ChildRun(
            python,
            STRESS,
            args,
            timeout=timeout if timeout is not None else duration + 600.0,
            env_overrides=overrides,
            on_event=self._event,
            on_exit=self._exit,
            run_as=run_as,
        )

    def start(self) -> StressSession:
        if self.monitor is not None:
            self.monitor.start()
        self.child.start()
        return self

    def wait(self, timeout: float | None = None) -> StressResults:
        self.child.wait(timeout)
        return self.results

    def _event(self, event: dict[str, Any]) -> None:
        with self._lock:
            self.results.feed(event)
        if self._on_update is not None:
            self._on_update(str(event.get("event")))

    def _exit(self, result: ChildResult) -> None:
        self.result = result
        if self.monitor is not None:
            self.monitor.stop()
        if self._on_update is not None:
            self._on_update("done")

    def report(self) -> dict[str, Any]:
        """The stress section of the report (per-GPU verdicts), with how the child ended."""
        monitor = self.monitor.snapshot()[1] if self.monitor is not None else None
        with self._lock:
            stress = stress_verdicts(self.results, monitor)
        result = self.result
        if result is not None:
            stress["child"] = result.to_json()
            stress["cancelled"] = result.cancelled
            crashed = (
                result.timed_out
                or result.signal
                or (result.returncode not in (0, None) and not result.cancelled)
            )
            if crashed or (not self.results.done and not result.cancelled):
                stress["status"] = "FAIL"
                how = "timed out" if result.timed_out else f"ended with {result.signal or result.returncode}"
                phase = result.pending_phase or self.results.current_phase()
                stress["errors"].append(
                    {
                        "message": f"the stress process {how}" + (f" during {phase}" if phase else ""),
                        "cause": "child-crashed",
                    }
                )
            left = leftover_message(result, "stress benchmark")
            if left is not None:
                stress["status"] = "FAIL"
                stress["errors"].append({"message": left, "cause": "child-crashed"})
        return stress
