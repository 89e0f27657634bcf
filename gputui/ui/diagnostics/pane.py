"""The Diagnostics tab: run the diagnosis (and the stress benchmark) in a child interpreter,
stream its findings in, pick the interpreter, cancel, save the report.

The children run on the runner's threads; their events reach the pane as messages.  Nothing
here imports torch: the monitor process never initialises CUDA.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message

from gputui.diag.interpreters import find_interpreters
from gputui.diag.session import DEFAULT_TIMEOUT, DiagnosisSession, StressMonitor, StressSession
from gputui.diag.target import Target, TargetError, fallback_python, header_items, python_target
from gputui.diag.verdicts import Diagnosis, Finding
from gputui.telemetry.model import MachineInfo, Snapshot
from gputui.ui.context import LOCKED, PaneContext
from gputui.ui.diagnostics.choose import choose
from gputui.ui.diagnostics.lines import finding_lines, primary_lines, stress_lines, summary_line
from gputui.ui.diagnostics.picker import InterpreterPicker, label_for
from gputui.ui.diagnostics.report import save_report
from gputui.ui.panes import Pane
from gputui.ui.render import Line, S, clean, fit
from gputui.ui.widgets.lines import LineWidget

if TYPE_CHECKING:
    from gputui.telemetry.hub import Hub
    from gputui.ui.processes.rows import ProcessRow


# --------------------------------------------------------------------------------------
# messages from the runner's threads
# --------------------------------------------------------------------------------------


@dataclass(eq=False)
class FindingArrived(Message):
    finding: Finding
    generation: int


@dataclass(eq=False)
class PhaseChanged(Message):
    title: str | None
    generation: int


@dataclass(eq=False)
class DiagnosisDone(Message):
    diagnosis: Diagnosis
    generation: int


@dataclass(eq=False)
class StressUpdated(Message):
    generation: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, StressUpdated)


# --------------------------------------------------------------------------------------
# widgets
# --------------------------------------------------------------------------------------


class DiagHeader(LineWidget):
    """Interpreter, state and counts, the first fix, and the keys."""

    DEFAULT_CSS = """
    DiagHeader { height: auto; }
    """

    def __init__(self, pane: DiagnosticsPane, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.pane = pane

    def build(self, width: int, height: int) -> list[Line]:
        p = self.pane
        label = f" ({clean(p.python_label)})" if p.python_label else ""
        if p.diagnosis is None and p.target is None and not p.picked and not p.context.diag_python:
            short = p.python_label.split(" (")[0]
            label = f" ({clean(short)}; g tries your busiest GPU process's Python first)"
        lines: list[Line] = [
            [
                (" python ", S.label),
                (fit(clean(p.python), max(10, width - 10 - len(label))), S.value),
                (label, S.dim),
            ],
        ]
        told = header_items(p.target.to_json()) if p.target else []
        # (what the first line says already is not said twice: a chosen interpreter's label,
        # gputui's own environment)
        said = {("interpreter", p.python_label), ("environment", "gputui's own")}
        shown = [f"  {name}: {text}" for name, text in told if (name, text) not in said]
        target: list[Line] = [[(fit(clean(t), width), S.dim)] for t in shown]
        lines += [*target, summary_line(p.diagnosis, p.running, p.phase, p.elapsed())]
        if not p.running:
            lines += primary_lines(p.diagnosis, width)
        if p.saved:
            lines.append([(" saved: ", S.label), (fit(clean(p.saved), max(10, width - 8)), S.ok)])
        keys: Line = [(" ", None)]
        for key, what in (
            ("g", "diagnose"),
            ("b", "stress"),
            ("x", "cancel"),
            ("e", "interpreter"),
            ("w", "save"),
        ):
            if p.offers(what):
                keys += [(key, S.index), (f" {what}  ", S.label)]
        lines.append(keys)
        lines.append([("─" * width, S.border)])
        return lines


class FindingsView(LineWidget):
    """The checks as they arrive."""

    DEFAULT_CSS = """
    FindingsView { height: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.findings: list[Finding] = []

    def build(self, width: int, height: int) -> list[Line]:
        out: list[Line] = []
        for f in self.findings:
            out += finding_lines(f, width)
        return out


class StressView(LineWidget):
    """The stress run: live telemetry, progress, results."""

    DEFAULT_CSS = """
    StressView { height: auto; }
    """

    def __init__(self, pane: DiagnosticsPane, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.pane = pane

    def build(self, width: int, height: int) -> list[Line]:
        session = self.pane.stress
        if session is None:
            return []
        return stress_lines(session, width, self.pane.stress_elapsed())


class DiagnosticsPane(Pane):
    """Diagnosis and stress results; `g` (anywhere) runs the diagnosis."""

    PANE_ID = "diagnostics"
    TAB_TITLE = "Diagnostics"
    TAB_KEY = "4"
    can_focus = True

    DEFAULT_CSS = """
    DiagnosticsPane #diag-body { height: 1fr; scrollbar-size-vertical: 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("b", "stress", "Stress", tooltip="Diagnostics tab: burn every GPU (the stress benchmark)"),
        Binding("x,escape", "cancel", "Cancel", key_display="x", tooltip="Diagnostics tab: cancel the run"),
        Binding(
            "e", "pick_interpreter", "Interpreter", tooltip="Diagnostics tab: choose the Python to diagnose"
        ),
        Binding("w", "save", "Save", tooltip="Diagnostics tab: save the report (Markdown and JSON)"),
        Binding("up", "scroll(-1)", show=False),
        Binding("down", "scroll(1)", show=False),
        Binding("pageup", "scroll(-10)", show=False),
        Binding("pagedown", "scroll(10)", show=False),
    ]

    timeout: float = DEFAULT_TIMEOUT
    """Seconds before a hung diagnosis is killed."""

    def __init__(self, hub: Hub, context: PaneContext = LOCKED) -> None:
        super().__init__(hub, context)
        if context.diag_python:
            self.python, self.python_label = context.diag_python, label_for(context.diag_python)
        else:  # what `g` with nothing selected runs when no GPU process of yours is there
            self.python, self.python_label = fallback_python()
        """The interpreter diagnosed.  In a browser session of `gputui serve` only serve's
        command line chooses it (the page may neither pick nor type one)."""
        self.target: Target | None = None
        """Which interpreter and environment the last `g` chose (gputui.ui.diagnostics.choose):
        its interpreter, why, and the process's environment; None before the first."""
        self.picked = False
        """The interpreter was chosen with `e`: `g` with no process selected keeps it."""
        self.diagnosis: Diagnosis | None = None
        self.session: DiagnosisSession | None = None
        self.phase: str | None = None
        self.saved: str | None = None
        self.env_overrides: dict[str, str | None] = {}
        """Extra child environment (tests)."""
        self.report_dir: Path | None = None
        """Where `w` saves (default: the current directory, else the home directory)."""
        self.stress: StressSession | None = None
        self.stress_monitor = StressMonitor()
        """Fed by the hub with every snapshot the poller takes (the monitor's own sampling)."""
        self.stress_duration = 60.0
        """Burn seconds for `b`."""
        self.stress_args: list[str] = []
        """Extra stress-child arguments (tests)."""
        self._stress_generation = 0
        self._stress_started = 0.0
        self._stress_ended = 0.0
        self._stress_ticker: Any = None
        self._generation = 0
        self._started = 0.0
        self._ended = 0.0
        self._ticker: Any = None

    def compose(self) -> ComposeResult:
        yield DiagHeader(self, id="diag-header")
        with VerticalScroll(id="diag-body"):
            yield StressView(self, id="stress")
            yield FindingsView(id="findings")

    def on_mount(self) -> None:
        self.hub.subscribe(self.stress_monitor.observe)

    def on_show(self) -> None:
        self.focus()

    # ---- state -----------------------------------------------------------------------

    def offers(self, what: str) -> bool:
        """Whether the action (stress, interpreter, ...) is offered.  A browser session of
        `gputui serve` runs no program the page could name or start at will: no chooser
        (it runs any path typed into it), no stress run (a GPU at full power)."""
        return not (self.context.serve_session and what in ("stress", "interpreter"))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in {"stress", "pick_interpreter"}:
            return self.offers("stress" if action == "stress" else "interpreter")
        return True

    @property
    def running(self) -> bool:
        return self.session is not None and self.session.running

    @property
    def stress_running(self) -> bool:
        return self.stress is not None and self.stress.running

    def stress_elapsed(self) -> float:
        if not self._stress_started:
            return 0.0
        return (time.monotonic() if self.stress_running else self._stress_ended) - self._stress_started

    def elapsed(self) -> float:
        if not self._started:
            return 0.0
        return (time.monotonic() if self.running else self._ended) - self._started

    def refresh_header(self) -> None:
        self.query_one(DiagHeader).update_lines()

    # ---- the diagnosis ---------------------------------------------------------------

    def diagnose(self, row: ProcessRow | None, again: bool) -> None:
        """`g`: diagnose the selected process `row`, else the default (chosen by
        gputui.ui.diagnostics.choose); `again`: pressed on this tab."""
        try:
            target, note = choose(
                self.context,
                self.hub.latest,
                row,
                shown=self.python,
                last=self.target if again else None,
                picked=self.picked,
            )
        except TargetError as exc:
            self.app.notify(clean(f"Not diagnosed: {exc}"), severity="error", timeout=8, markup=False)
            return
        if note is not None:
            self.app.notify(clean(note), severity="warning", timeout=6, markup=False)
        self.start_diagnosis(target)

    def start_diagnosis(self, target: Target | None = None) -> None:
        if self.running:
            self.app.notify("A diagnosis is already running (x cancels it)", timeout=3)
            return
        if target is not None:
            self.target = target
            self.python, self.python_label = target.python, ""
        try:
            self.target = self._target()
        except TargetError as exc:
            self.app.notify(clean(f"Not diagnosed: {exc}"), severity="error", timeout=8, markup=False)
            return
        self._generation += 1
        gen = self._generation
        self.saved = None
        self.phase = None
        view = self.query_one(FindingsView)
        view.findings = []
        view.relayout()
        self.session = DiagnosisSession(
            self.python,
            timeout=self.timeout,
            env_overrides=self.env_overrides,
            base_env=self.target.env,
            on_finding=lambda f: self.post_message(FindingArrived(f, gen)),
            on_phase=lambda t: self.post_message(PhaseChanged(t, gen)),
            on_done=lambda d: self.post_message(DiagnosisDone(d, gen)),
            run_as=self.target.privileges,
        )
        self.diagnosis = self.session.diagnosis
        self._started = time.monotonic()
        self.session.start()
        if self._ticker is None:
            self._ticker = self.set_interval(0.25, self._tick)
        self.refresh_header()

    def _target(self) -> Target:
        """What the next run diagnoses: the target chosen last, else the interpreter shown
        (chosen with `e`, or the default), with whose privileges it runs (TargetError: none
        that are safe)."""
        if self.target is not None and self.target.python == self.python:
            return self.target
        return python_target(self.python, self.python_label or "chosen with e")

    def _tick(self) -> None:
        if self.running:
            self.refresh_header()

    def on_finding_arrived(self, message: FindingArrived) -> None:
        if message.generation != self._generation:
            return
        view = self.query_one(FindingsView)
        view.findings.append(message.finding)
        view.update_lines()
        self.refresh_header()

    def on_phase_changed(self, message: PhaseChanged) -> None:
        if message.generation == self._generation:
            self.phase = message.title
            self.refresh_header()

    def on_diagnosis_done(self, message: DiagnosisDone) -> None:
        if message.generation != self._generation:
            return
        self._ended = time.monotonic()
        self.phase = None
        if self._ticker is not None:
            self._ticker.stop()
            self._ticker = None
        self.refresh_header()

    # ---- actions ---------------------------------------------------------------------

    def action_cancel(self) -> None:
        if self.session is not None and self.session.running:
            self.session.cancel()
            self.app.notify("Cancelled: the diagnosis process and its children were killed", timeout=3)
        if self.stress is not None and self.stress.running:
            self.stress.cancel()
            self.app.notify("Cancelled: the stress process was killed and its GPU memory freed", timeout=3)

    def action_stress(self) -> None:
        if not self.offers("stress"):
            return
        if self.stress_running:
            self.app.notify("The stress benchmark is already running (x cancels it)", timeout=3)
            return
        try:
            target = self._target()
        except TargetError as exc:
            self.app.notify(clean(f"Not run: {exc}"), severity="error", timeout=8, markup=False)
            return
        self._stress_generation += 1
        gen = self._stress_generation
        self.stress = StressSession(
            self.python,
            duration=self.stress_duration,
            extra_args=self.stress_args,
            env_overrides=self.env_overrides,
            monitor=self.stress_monitor,
            on_update=lambda kind: self.post_message(StressUpdated(gen)),
            run_as=target.privileges,
        )
        self._stress_started = time.monotonic()
        self.stress.start()
        if self._stress_ticker is None:
            self._stress_ticker = self.set_interval(0.5, self._stress_tick)
        self.query_one(StressView).update_lines()

    def _stress_tick(self) -> None:
        self.query_one(StressView).update_lines()

    def on_stress_updated(self, message: StressUpdated) -> None:
        if message.generation != self._stress_generation or self.stress is None:
            return
        if not self.stress.running:
            self._stress_ended = time.monotonic()
            if self._stress_ticker is not None:
                self._stress_ticker.stop()
                self._stress_ticker = None
        self.query_one(StressView).update_lines()

    def action_pick_interpreter(self) -> None:
        if not self.offers("interpreter"):
            return
        candidates = find_interpreters()

        def chosen(path: str | None) -> None:
            if path:
                self.python, self.target, self.picked = path, None, True
                self.python_label = label_for(path, candidates)
                self.refresh_header()
                self.start_diagnosis()

        self.app.push_screen(InterpreterPicker(candidates, self.python), chosen)

    def action_save(self) -> None:
        if self.running or self.stress_running:
            self.app.notify("Wait for the run to finish (or cancel it with x)", timeout=3)
            return
        if self.diagnosis is None and self.stress is None:
            self.app.notify("Nothing to save yet: press g to diagnose", timeout=3)
            return
        diagnosis = self.diagnosis if self.diagnosis is not None else Diagnosis(python=self.python)
        stress = self.stress.report() if self.stress is not None else None
        try:
            target = self.target.to_json() if self.target is not None and self.diagnosis is not None else None
            md, js = save_report(diagnosis, self.report_dir, stress, target)
        except OSError as exc:
            self.app.notify(clean(f"Cannot save the report: {exc}"), severity="error", markup=False)
            return
        self.saved = f"{md}  and  {js.name}"
        self.refresh_header()
        self.app.notify(clean(f"Report saved: {md} and {js}"), title="Saved", timeout=8, markup=False)

    def action_scroll(self, lines: int) -> None:
        self.query_one("#diag-body", VerticalScroll).scroll_relative(y=lines, animate=False)

    # ---- pane hooks ------------------------------------------------------------------

    def show_info(self, info: MachineInfo) -> None:
        pass

    def show_snapshot(self, info: MachineInfo | None, snapshot: Snapshot) -> None:
        pass
