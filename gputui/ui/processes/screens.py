"""The Processes tab's screens: the confirmation before a signal, and a process's detail
view.  Signals themselves are sent by the list's one path (gputui/ui/processes/signals.py);
the detail view uses the list it was opened from through `DetailHost` alone."""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, ClassVar, Protocol

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from gputui.ui.processes.detail_lines import DetailData, detail_lines
from gputui.ui.processes.lines import RowNote, fmt_mem
from gputui.ui.processes.rows import Ident, ProcessRow, RowKey
from gputui.ui.processes.sent import SignalTarget
from gputui.ui.render import Line, S, fit
from gputui.ui.widgets.lines import LineWidget
from gputui.ui.widgets.text import TextLines
from gputui.untrusted import literal

if TYPE_CHECKING:
    from gputui.telemetry.host.processes import ProcessDetail
    from gputui.telemetry.hub import Hub

# gputui.control.signals and gputui.telemetry.host.processes (psutil) are imported when first used:
# a replay never needs them, and the first frame comes ~15 ms sooner.

#: What each signal does, for the confirmation.
SIGNALS: dict[str, str] = {
    "TERM": "SIGTERM asks the process to exit: it may clean up first, or ignore it.",
    "KILL": "SIGKILL ends the process at once: it cannot clean up or refuse. Its GPU memory is "
    "freed when it is gone.",
    "INT": "SIGINT is Ctrl-C: Python raises KeyboardInterrupt; many training scripts save and exit.",
}
FACTS_EVERY_S = 5.0
"""The detail view re-reads its process's facts this often (off the UI thread)."""
COMMAND_IN_DIALOG = 400
"""Characters of each command line in the confirmation (the detail view has all of it)."""


# --------------------------------------------------------------------------------------
# the confirmation
# --------------------------------------------------------------------------------------


class SignalDialog(ModalScreen[bool]):
    """Shows exactly what will be signalled (PID, user, GPU, GPU memory, command, literally)
    and asks; nothing is sent before `y`, enter or the button."""

    DEFAULT_CSS = """
    SignalDialog { align: center middle; }
    SignalDialog > Vertical {
        width: 110; max-width: 100%; height: auto; max-height: 90%;
        border: thick $error; background: $surface; padding: 0 1;
    }
    SignalDialog #targets { height: auto; max-height: 24; }
    SignalDialog Horizontal { height: auto; align: center middle; margin-top: 1; }
    SignalDialog Button { margin: 0 2; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Send", tooltip="Send the signal"),
        Binding("n,escape", "answer(False)", "Cancel", key_display="n/esc", tooltip="Send nothing"),
    ]

    def __init__(
        self, targets: list[SignalTarget], sig: str, job: str | None = None, left_out: list[str] | None = None
    ) -> None:
        super().__init__()
        self.targets = targets
        self.sig = sig
        self.job = job
        """A whole job's title (its launcher), or None for the selected processes."""
        self.left_out = left_out or []
        """In a whole job: the processes in it that are not signalled, each with why."""

    def compose(self) -> ComposeResult:
        n = len(self.targets)
        what = f"{n} process{'es' if n != 1 else ''}"
        if self.job is not None:
            what = f"the whole job {self.job}: {what}"
        title = Text.assemble(
            ("Send ", "bold"),
            (f"SIG{self.sig}", "bold red" if self.sig == "KILL" else "bold yellow"),
            (f" to {what}?", "bold"),
        )
        table = Table(box=None, header_style="bold", padding=(0, 1), expand=True)
        table.add_column("PID", justify="right", no_wrap=True)
        table.add_column("USER", no_wrap=True, max_width=16)
        table.add_column("GPU", no_wrap=True)
        table.add_column("GPU MEM", justify="right", no_wrap=True)
        roles = any(t.role for t in self.targets)
        if roles:
            table.add_column("IN JOB", no_wrap=True, max_width=20)
        table.add_column("COMMAND", ratio=1, overflow="fold")
        for t in self.targets:
            ident = t.identity
            command = t.command
            if len(command) > COMMAND_IN_DIALOG:
                command = command[: COMMAND_IN_DIALOG - 1] + "…"
            cells = [
                Text(str(ident.pid)),
                Text(literal(ident.user or "?")),
                Text(",".join(str(g) for g in t.gpus) or "-"),
                Text(fmt_mem(t.gpu_memory) if t.gpus else "-"),
            ]
            if roles:
                cells.append(Text(t.role))
            table.add_row(*cells, Text(command))
        started = ", ".join(
            time.strftime("%H:%M:%S", time.localtime(t.identity.create_time)) for t in self.targets
        )
        note = Text(
            f"{SIGNALS.get(self.sig, '')}\nOnly these processes (started {fit(started, 60)}) are signalled: "
            "each was checked and is held by its pidfd since this dialog opened, so a PID that "
            "now belongs to another process is refused.",
            style="dim",
        )
        with Vertical():
            yield Static(title, id="title")
            with VerticalScroll(id="targets"):
                yield Static(table)
            if self.left_out:
                lines = "\n".join(literal(fit(line, 200)) for line in self.left_out[:20])
                more = f"\n… and {len(self.left_out) - 20} more" if len(self.left_out) > 20 else ""
                yield Static(
                    Text(f"Not signalled, though in the job:\n{lines}{more}", style="bold yellow"),
                    id="left-out",
                )
            yield Static(note, id="note")
            with Horizontal():
                yield Button(f"Send SIG{self.sig} (y)", variant="error", id="send")
                yield Button("Cancel (n)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#send", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "send")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


# --------------------------------------------------------------------------------------
# the detail view
# --------------------------------------------------------------------------------------


class DetailView(LineWidget):
    DEFAULT_CSS = """
    DetailView { height: auto; }
    """

    def __init__(self, data: DetailData) -> None:
        super().__init__()
        self.data = data

    def build(self, width: int, height: int) -> list[Line]:
        return detail_lines(self.data, width)


class DetailHost(Protocol):
    """What the detail view uses of the process list it was opened from (`ProcessList`)."""

    @property
    def hub(self) -> Hub: ...
    @property
    def readonly(self) -> bool: ...
    @property
    def signals_possible(self) -> bool: ...
    def check_signal(self) -> bool | None: ...
    def row_for(self, key: RowKey, ident: Ident | None) -> ProcessRow | None: ...
    def note_for(self, ident: Ident | None) -> RowNote | None: ...
    def ask_to_signal(self, rows: list[ProcessRow], name: str) -> None: ...
    def action_refused(self) -> None: ...


class ProcessDetailScreen(ModalScreen[None]):
    """Enter on a row: the whole command line, cwd, user, start time, parent and children,
    GPU memory and SM % history, environment (GPU-related variables; `e` for all)."""

    DEFAULT_CSS = """
    ProcessDetailScreen { align: center middle; }
    ProcessDetailScreen > Vertical {
        width: 100%; height: 100%; border: round $accent; background: $surface;
    }
    ProcessDetailScreen VerticalScroll { height: 1fr; scrollbar-size-vertical: 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,enter", "close", "Back", key_display="esc", tooltip="Back to the table"),
        Binding("e", "toggle_env", "All env", tooltip="Show every environment variable, or the GPU ones"),
        Binding("T", "signal('TERM')", "SIGTERM", tooltip="Send SIGTERM to this process (asks first)"),
        Binding("K", "signal('KILL')", "SIGKILL", tooltip="Send SIGKILL to this process (asks first)"),
        Binding("I", "signal('INT')", "SIGINT", tooltip="Send SIGINT to this process (asks first)"),
        Binding(  # a replay: hidden above, pressed says why
            "T,K,I",
            "refused",
            show=False,
            tooltip="Signal this process: not in a recording (pressed, says why)",
        ),
    ]

    def __init__(self, pane: DetailHost, row: ProcessRow) -> None:
        super().__init__()
        self.pane = pane
        self.key = row.key
        self.ident = row.ident
        self.data = DetailData(row, row.key[0], row.key[1], live=pane.signals_possible)
        self._reading = False

    def compose(self) -> ComposeResult:
        with Vertical():
            with VerticalScroll():
                yield DetailView(self.data)
            yield TextLines(self._hint, id="hint")

    def _hint(self, width: int) -> list[Line]:
        keys = "esc back · e all environment variables"
        if self.pane.check_signal():
            keys += " · T SIGTERM · K SIGKILL · I SIGINT"
        return [[(" " + keys, S.label)]]

    def on_mount(self) -> None:
        self.refresh_from(self.pane.row_for(self.key, self.ident))
        if self.data.live and self.data.row is not None and self.data.row.proc.visible:
            self._read_facts()
            self.set_interval(FACTS_EVERY_S, self._read_facts)

    def refresh_from(self, row: ProcessRow | None) -> None:
        """The latest tick's row for this process (None once it has gone)."""
        d = self.data
        d.row = row
        hub = self.pane.hub
        width = max(20, self.size.width or 100)
        gpu, pid = self.key
        d.memory = hub.process_series(gpu, pid, "gpu_memory", width) if row else d.memory
        d.sm = hub.process_series(gpu, pid, "sm_util", width) if row else d.sm
        d.note = self.pane.note_for(self.ident)
        if self.is_mounted:
            self.query_one(DetailView).update_lines()

    def _read_facts(self) -> None:
        if self._reading or self.ident is None:
            return
        self._reading = True
        self._facts_worker(self.ident)

    @work(thread=True, exit_on_error=False)
    def _facts_worker(self, ident: Ident) -> None:
        from gputui.telemetry.host.processes import describe_process

        facts = describe_process(ident[0], ident[1])
        with contextlib.suppress(RuntimeError):  # the app has gone meanwhile
            self.app.call_from_thread(self._got_facts, facts)

    def _got_facts(self, facts: ProcessDetail) -> None:
        self._reading = False
        self.data.facts = facts
        if self.is_mounted:
            self.query_one(DetailView).update_lines()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "signal":  # not offered in a replay (nothing to signal) or --readonly
            return not self.pane.readonly and self.pane.signals_possible
        if action == "refused":  # ... where pressing one says why nothing is sent
            return not self.pane.readonly and not self.pane.signals_possible
        return True

    def action_refused(self) -> None:
        self.pane.action_refused()

    def action_close(self) -> None:
        self.dismiss(None)

    def action_toggle_env(self) -> None:
        self.data.show_all_env = not self.data.show_all_env
        self.query_one(DetailView).update_lines()

    def action_signal(self, name: str) -> None:
        row = self.data.row
        if row is None:
            self.notify("The process is no longer on this GPU.", severity="warning")
            return
        self.pane.ask_to_signal([row], name)
