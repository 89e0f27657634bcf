"""The Diagnostics tab: run the diagnosis (and the stress benchmark) in a child interpreter,
stream its findings in, pick the interpreter, cancel, save the report.

The children run on the runner's threads; their events reach the pane as messages.  Nothing
here imports torch: the monitor process never initialises CUDA.
"""

from __future__ import annotations

import os
import socket
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from gputui.diag.interpreters import Interpreter, default_interpreter, find_interpreters
from gputui.diag.session import DEFAULT_TIMEOUT, DiagnosisSession, StressMonitor, StressSession
from gputui.diag.target import Target
from gputui.diag.verdicts import (
    EXIT_CODES,
    Diagnosis,
    Finding,
    report_json,
    report_markdown,
    stress_only_report,
    stress_table,
)
from gputui.safefile import save_new
from gputui.telemetry.model import CLOCK_EVENT_QUIET_MASK, MachineInfo, Snapshot, decode_clock_events
from gputui.ui.context import LOCKED, PaneContext
from gputui.ui.panes import Pane
from gputui.ui.render import (
    GREEN,
    ORANGE,
    Line,
    S,
    bar,
    clean,
    fit,
    fmt_mhz,
    fmt_temp,
    fmt_watts,
    plot_lines,
    ratio,
)
from gputui.ui.widgets.lines import LineWidget

if TYPE_CHECKING:
    from gputui.telemetry.hub import Hub

STATUS_STYLE = {"PASS": S.ok, "WARN": S.warn, "FAIL": S.bad, "SKIP": S.dim}
TITLE_WIDTH = 30
REVERSE = Style(reverse=True)


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
# lines (plain data)
# --------------------------------------------------------------------------------------


def _wrap(text: str, width: int, indent: int) -> list[str]:
    return textwrap.wrap(clean(text), max(10, width - indent)) or [""]


def finding_lines(f: Finding, width: int) -> list[Line]:
    """One line per check; the cause, its meaning and the fix under anything not PASS."""
    title = fit(clean(f.title), TITLE_WIDTH).ljust(TITLE_WIDTH)
    summary_width = max(10, width - 8 - TITLE_WIDTH)
    out: list[Line] = [
        [
            (" ", None),
            (f"{f.status:<4}", STATUS_STYLE.get(f.status, S.text)),
            ("  ", None),
            (title, S.label),
            (" ", None),
            (fit(clean(f.summary), summary_width), S.text),
        ]
    ]
    if f.status in ("WARN", "FAIL"):
        if f.summary and len(clean(f.summary)) > summary_width:
            out += [[("       ", None), (chunk, S.text)] for chunk in _wrap(f.summary, width, 8)]
        if f.cause_title:
            text = f"{f.cause_title}: {f.meaning or ''}"
            out += [[("       ", None), (chunk, S.label)] for chunk in _wrap(text, width, 8)]
        for line in f.fix:
            for k, chunk in enumerate(_wrap(line, width, 10)):
                out.append([("       ", None), ("→ " if k == 0 else "  ", S.info), (chunk, S.value)])
    elif f.note:
        out += [[("       ", None), (chunk, S.dim)] for chunk in _wrap("note: " + f.note, width, 8)]
    return out


def summary_line(diagnosis: Diagnosis | None, running: bool, phase: str | None, elapsed: float) -> Line:
    if diagnosis is None:
        return [(" press ", S.label), ("g", S.index), (" to diagnose this environment", S.label)]
    counts = diagnosis.counts()
    parts: Line = [(" ", None)]
    if running:
        parts += [("● running ", S.info), (f"{elapsed:.1f} s", S.value)]
        if phase:
            parts += [(": ", S.label), (clean(phase) + "…", S.text)]
        parts.append(("   ", None))
    elif diagnosis.child.get("cancelled"):
        parts += [("cancelled", S.warn), ("   ", None)]
    else:
        parts += [(f" {diagnosis.status} ", STATUS_STYLE[diagnosis.status] + REVERSE)]
        parts.append(("  ", None))
    for status in ("PASS", "WARN", "FAIL", "SKIP"):
        parts += [(str(counts[status]), STATUS_STYLE[status]), (f" {status.lower()}  ", S.label)]
    if not running and diagnosis.child.get("seconds") is not None:
        parts.append((f"in {diagnosis.child['seconds']:.1f} s", S.dim))
    return parts


def primary_lines(diagnosis: Diagnosis | None, width: int) -> list[Line]:
    if diagnosis is None:
        return []
    first = diagnosis.primary()
    if first is None:
        return []
    head = f"{first.cause_title or first.title}: {first.summary}"
    out: list[Line] = [[(" First fix: ", S.title), (fit(clean(head), max(10, width - 13)), S.text)]]
    for line in first.fix[:3]:
        out.append([("   → ", S.info), (fit(clean(line), max(10, width - 5)), S.value)])
    return out


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
        lines: list[Line] = [
            [
                (" python ", S.label),
                (fit(clean(p.python), max(10, width - 10 - len(label))), S.value),
                (label, S.dim),
            ],
        ]
        told = p.target.header() if p.target else []
        target: list[Line] = [[(fit(clean(t), width), S.dim)] for t in told]
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


STRESS_PHASES = ("matmul", "memory", "burn")


def stress_lines(session: StressSession, width: int, elapsed: float) -> list[Line]:
    """Live per-GPU telemetry (sampled by the monitor), a progress bar per phase, and at the
    end the verdict table."""
    results = session.results
    running = session.running
    out: list[Line] = []
    head: Line = [(" Stress ", S.title)]
    if running:
        phase = results.current_phase()
        head += [("● running ", S.info), (f"{elapsed:.0f} s", S.value)]
        if phase:
            head += [(": ", S.label), (clean(phase) + "…", S.text)]
    else:
        report = session.report()
        status = "cancelled" if report.get("cancelled") else report["status"]
        head.append((f" {status} ", STATUS_STYLE.get(status, S.warn) + REVERSE))
    out.append(head)
    latest = session.monitor.snapshot()[0] if session.monitor is not None else {}
    for g in sorted(results.gpus.values(), key=lambda x: x.index):
        line: Line = [(f" {g.index} ", S.index), (fit(clean(g.name), 22).ljust(22), S.text)]
        sample = latest.get(g.nvml_index) if g.nvml_index is not None else None
        if sample is not None:
            power = ratio(sample.power_draw, sample.power_limit)
            reasons = decode_clock_events((sample.clock_event_reasons or 0) & ~CLOCK_EVENT_QUIET_MASK)
            line += [
                (f" {fmt_temp(sample.temperature):>5} ", S.value),
                *bar(power, 10, ORANGE),
                (f" {fmt_watts(sample.power_draw, sample.power_limit):>10} ", S.value),
                (f" SM {fmt_mhz(sample.sm_clock):>9} ", S.value),
                (" " + ", ".join(reasons) if reasons else "", S.warn),
            ]
        else:
            line.append((" (no telemetry for this device)", S.dim))
        out.append(line)
        bars: Line = [("    ", None)]
        for phase in STRESS_PHASES:
            frac = g.progress.get(phase)
            bars += [
                (f"{phase} ", S.label),
                *bar(frac or 0.0, 8, GREEN),
                (f" {100 * (frac or 0):3.0f}%  ", S.dim),
            ]
        live = g.live
        if live.get("tflops") is not None:
            errors = int(live.get("mismatches") or 0) + int(live.get("nonfinite") or 0)
            bars += [
                (f"{live['tflops']:g} TFLOP/s ", S.value),
                (f"{errors} errors", S.bad if errors else S.ok),
            ]
        out.append(bars)
    if not running and results.gpus:
        report = session.report()
        rows = stress_table(report)
        widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
        for n, row in enumerate(rows):
            cells: Line = [(" ", None)]
            for k, cell in enumerate(row):
                style = S.label if n == 0 else STATUS_STYLE.get(cell, S.text) if k == 1 else S.value
                cells += [(clean(cell).ljust(widths[k]), style), ("  ", None)]
            out.append(cells)
        for g in report["gpus"]:
            for reason in g["reasons"]:
                out.append(
                    [(f"   GPU {g['index']}: ", S.label), (fit(clean(reason), max(10, width - 12)), S.text)]
                )
        out += stress_error_lines(report, width)
        if any(g["matmul"] for g in report["gpus"]):
            out += stress_plot(report, width)  # the figure; the table above has the % of peak
    elif not running:
        out += stress_error_lines(session.report(), width)  # no GPU got as far as a result
    out.append([("─" * width, S.border)])
    return out


def stress_error_lines(report: dict[str, Any], width: int) -> list[Line]:
    """Why the run failed, as the CLI says it (the child's errors, a crash, a timeout)."""
    return [
        [(" error: ", S.bad), (fit(clean(str(err.get("message"))), max(10, width - 8)), S.text)]
        for err in report.get("errors") or []
    ]


PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")


def stress_plot(report: dict[str, Any], width: int) -> list[Line]:
    """A plotext bar chart of matmul TFLOP/s per precision, one bar per GPU."""
    gpus = report["gpus"]
    labels = [
        p
        for p in PRECISIONS
        if any(isinstance((g["matmul"].get(p) or {}).get("tflops"), int | float) for g in gpus)
    ]
    if not labels:
        return []
    series = [[float((g["matmul"].get(p) or {}).get("tflops") or 0.0) for p in labels] for g in gpus]

    def build(plt: Any) -> None:
        if len(series) == 1:
            plt.bar(labels, series[0], color="green")
        else:
            plt.multiple_bar(labels, series, labels=[f"GPU {g['index']}" for g in gpus])
        plt.title("matmul TFLOP/s")

    return plot_lines(build, min(width - 2, 100), 14)


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


class InterpreterPicker(ModalScreen[str | None]):
    """Choose the interpreter to diagnose: the environments found, or a typed path."""

    DEFAULT_CSS = """
    InterpreterPicker { align: center middle; }
    InterpreterPicker > Vertical {
        width: 100; max-width: 95%; height: auto; max-height: 80%;
        border: round $accent; background: $surface; padding: 0 1;
    }
    InterpreterPicker OptionList { height: auto; max-height: 16; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "Close")]

    def __init__(self, candidates: list[Interpreter], current: str) -> None:
        super().__init__()
        self.candidates = candidates
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text("Diagnose which Python?  (enter picks, esc closes)", style="bold"))
            options = [
                Option(
                    Text.assemble(
                        (c.path, "bold" if c.path == self.current else ""), ("  " + c.label, "dim")
                    ),
                    id=str(k),
                )
                for k, c in enumerate(self.candidates)
            ]
            yield OptionList(*options, id="candidates")
            yield Static(Text("or type a path:", style="dim"))
            yield Input(placeholder="/path/to/python", id="path")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.candidates[int(event.option.id or 0)].path)

    @on(Input.Submitted)
    def _typed(self, event: Input.Submitted) -> None:
        path = os.path.expanduser(event.value.strip())
        self.dismiss(path or None)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


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
        self.python = context.diag_python or default_interpreter()
        """The interpreter diagnosed.  In a browser session of `gputui serve` only serve's
        command line chooses it (the page may neither pick nor type one)."""
        self.python_label = _label_for(self.python)
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
        """Burn seconds for `s`."""
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

    def start_diagnosis(self, target: Target | None = None) -> None:
        if self.running:
            self.app.notify("A diagnosis is already running (x cancels it)", timeout=3)
            return
        if target is not None:
            self.target = target
            self.python, self.python_label = target.python, ""
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
            base_env=self.target.env if self.target is not None else None,
            on_finding=lambda f: self.post_message(FindingArrived(f, gen)),
            on_phase=lambda t: self.post_message(PhaseChanged(t, gen)),
            on_done=lambda d: self.post_message(DiagnosisDone(d, gen)),
        )
        self.diagnosis = self.session.diagnosis
        self._started = time.monotonic()
        self.session.start()
        if self._ticker is None:
            self._ticker = self.set_interval(0.25, self._tick)
        self.refresh_header()

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
        self._stress_generation += 1
        gen = self._stress_generation
        self.stress = StressSession(
            self.python,
            duration=self.stress_duration,
            extra_args=self.stress_args,
            env_overrides=self.env_overrides,
            monitor=self.stress_monitor,
            on_update=lambda kind: self.post_message(StressUpdated(gen)),
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
                self.python_label = _label_for(path, candidates)
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
            md, js = save_report(diagnosis, self.report_dir, stress)
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


def _label_for(path: str, candidates: list[Interpreter] | None = None) -> str:
    for c in candidates if candidates is not None else find_interpreters():
        if os.path.abspath(c.path) == os.path.abspath(path):
            return c.label
    return "typed path"


def report_stem(diagnosis: Diagnosis) -> str:
    """The name a saved report starts with: host and time (predictable: see `save_report`)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(diagnosis.created))
    return f"gputui-diag-{clean(socket.gethostname()).replace('/', '_')}-{stamp}"


def save_report(
    diagnosis: Diagnosis, directory: Path | None = None, stress: dict[str, Any] | None = None
) -> tuple[Path, Path]:
    """Write the report as Markdown and JSON; returns both paths.

    The name is predictable, so another user could plant a link there: each file is written
    to a new temporary file (O_EXCL | O_NOFOLLOW, mode 0600), then linked to its name, which
    fails rather than replace anything there (a link is never followed); a taken name gets a
    "-2", "-3"... suffix.  Nothing half-written ever appears under the final name."""
    stem = report_stem(diagnosis)
    candidates = [directory] if directory is not None else [Path.cwd(), Path.home()]
    last: OSError | None = None
    if stress is not None and not diagnosis.findings:
        report = stress_only_report(diagnosis.context.python, stress)
    else:
        report = diagnosis.to_json(stress)
        if stress is not None and EXIT_CODES[stress["status"]] > report["exit_code"]:
            report["status"], report["exit_code"] = stress["status"], EXIT_CODES[stress["status"]]
    texts = {".md": report_markdown(report), ".json": report_json(report)}
    for folder in candidates:
        try:
            return _save_pair(folder, stem, texts)
        except OSError as exc:
            last = exc
    assert last is not None
    raise last


def _save_pair(folder: Path, stem: str, texts: dict[str, str]) -> tuple[Path, Path]:
    md, js = save_new(folder, stem, texts)  # gputui.safefile: 0600, never follows a planted link
    return md, js
