"""The process list: the table of GPU processes, its keys and its one signal path, composed
by both the Overview (under the cards) and the Processes tab.

The table is a LineWidget (only changed cells cross the wire); sorting, filtering and the
cursor logic are plain functions in `gputui.ui.processes.lines`.  Marks, sort, filters and
search belong to each list; signals go through the one `SignalDesk` path
(`gputui.ui.processes.signals`) and its record is the app's, shared by both lists.

The Overview's list (`overview=True`) differs only in what it shows: largest GPU memory
first, narrowed to the selected card's GPU (f/F are the cards' choice there), starting
unfiltered; with no room for a table it is one line saying how many processes there are
and which key lists them.
"""

from __future__ import annotations

import getpass
from typing import TYPE_CHECKING, ClassVar

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container
from textual.widgets import Input

from gputui.telemetry.host.pidns import in_host_pid_namespace
from gputui.telemetry.model import MachineInfo, Snapshot
from gputui.ui.context import LOCKED, PaneContext
from gputui.ui.processes.job_view import open_job_view, open_stacks, verdict_lines
from gputui.ui.processes.lines import PS, RowNote, column_spans, notice_lines, summary_line, unlisted_memory
from gputui.ui.processes.rows import (
    COLUMNS,
    Ident,
    ProcessRow,
    RowBuilder,
    ViewState,
    arrange,
    view_state_for,
)
from gputui.ui.processes.signals import SignalDesk
from gputui.ui.processes.widgets import ProcessTable, SearchInput
from gputui.ui.render import Line, S
from gputui.ui.widgets.text import TextLines

if TYPE_CHECKING:
    from gputui.telemetry.hub import Hub
    from gputui.ui.processes.screens import ProcessDetailScreen
    from gputui.ui.processes.sent import SignalTarget, SignalWatch

OVERVIEW_SORT = "-gpu_memory"
"""The Overview's process list: largest GPU memory first."""

PROCESSES_TAB_KEY = "2"
"""The key of the tab that lists every process (said by the Overview's one-line list)."""


class ProcessList(Container):
    """GPU processes: sort, filter, search, mark, inspect, signal (T K I, confirmed)."""

    DEFAULT_CSS = """
    ProcessList { height: 1fr; layout: vertical; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "T",
            "signal('TERM')",
            "SIGTERM",
            tooltip="SIGTERM to the selected or marked processes, after asking",
        ),
        Binding(
            "K",
            "signal('KILL')",
            "SIGKILL",
            tooltip="SIGKILL to the selected or marked processes, after asking",
        ),
        Binding(
            "I",
            "signal('INT')",
            "SIGINT",
            tooltip="SIGINT (Ctrl-C) to the selected or marked processes, after asking",
        ),
        Binding(
            "m",
            "mark",
            "Mark",
            tooltip="Mark or unmark the process and move to the next row (m m m marks three in a row)",
        ),
        Binding("v,f5", "tree", "Tree", key_display="v", tooltip="Tree: GPU processes under their launchers"),
        Binding("o", "by_job", "By job", show=False, tooltip="Group the rows by job (Slurm, pod, container)"),
        Binding(
            "O", "job_filter", "Job", show=False, tooltip="Only one job: each job in turn, then all again"
        ),
        Binding(
            "left",
            "hscroll(-8)",
            "Scroll left",
            key_display="←",
            show=False,
            tooltip="Scroll the commands left",
        ),
        Binding(
            "right",
            "hscroll(8)",
            "Scroll right",
            key_display="→",
            show=False,
            tooltip="Scroll the commands right",
        ),
        Binding(
            "enter",
            "detail",
            "Detail",
            tooltip="Details of the process: command, cwd, parent, children, history, environment",
        ),
        Binding(
            "slash",
            "search",
            "Search",
            key_display="/",
            tooltip="Search user, command line, job or PID (enter keeps it, esc clears it)",
        ),
        Binding(
            "s,greater_than_sign",
            "sort(1)",
            "Sort",
            key_display="s",
            tooltip="Sort by the next column (> too; or click a column's title)",
        ),
        Binding(
            "S,less_than_sign",
            "sort(-1)",
            "Sort back",
            key_display="S",
            show=False,
            tooltip="Sort by the previous column (< too)",
        ),
        Binding("r", "reverse", "Reverse", show=False, tooltip="Reverse the sort order"),
        Binding("u", "mine", "Mine", show=False, tooltip="Only my processes (toggle)"),
        Binding("f", "gpu_filter(1)", "GPU", show=False, tooltip="Only one GPU: 0, 1, ..., then all again"),
        Binding("F", "gpu_filter(-1)", "GPU back", show=False, tooltip="Only one GPU, going the other way"),
        Binding("t", "compute", "Compute", show=False, tooltip="Only compute processes (toggle)"),
        Binding(
            "escape",
            "clear",
            "Clear",
            show=False,
            tooltip="Clear the marks; pressed again: the search and filters",
        ),
        Binding("J", "job_view", "Job", show=False, tooltip="The process's job: ranks side by side, verdict"),
        Binding("P", "stacks", "Stacks", show=False, tooltip="Python stacks; a launcher's row: every rank"),
        # in a replay T K I and m are hidden (nothing to signal); pressed, they say why
        Binding(
            "T,K,I,m",
            "refused",
            show=False,
            tooltip="Signal or mark a process: not in a recording (pressed, says why)",
        ),
    ]

    def __init__(
        self, hub: Hub, context: PaneContext = LOCKED, *, overview: bool = False, id: str | None = None
    ) -> None:
        super().__init__(id=id)
        self.hub = hub
        self.context = context
        """The app's settings and source (read-only and sourceless unless the app says)."""
        self.overview = overview
        """The Overview's list (see the module's docstring)."""
        self.info: MachineInfo | None = None
        self.snapshot: Snapshot | None = None
        self.state = ViewState()
        self.builder = RowBuilder()
        self.all_rows: list[ProcessRow] = []
        self.launcher_rows: list[ProcessRow] = []
        """The launchers of the latest tick, as rows (shown in tree mode)."""
        self.shown: list[ProcessRow] = []
        self.marks: set[Ident] = set()
        self.restored: tuple[str, ...] = ()
        """The filters as the last run left them (shown as such while unchanged)."""
        self.machine: tuple[str, tuple[str | None, ...]] | None = None
        """The host name and GPU UUIDs of the data shown (a new machine drops its filters)."""
        self.signals = SignalDesk(self, self, context.signals)
        """The one signal path (its record is the app's, shared with the other list)."""
        self.me = _current_user()
        self.own_namespace: bool | None = None
        self._detail: ProcessDetailScreen | None = None
        self.room = True
        """The Overview's list: False when there is no room for the table, only the one
        line that says how to see it."""
        self.followed = not overview
        """True once the user has moved into the Overview's list (always, on the Processes
        tab): from then on the view follows the cursor's process; until then it shows the
        first rows, the largest GPU memory, whatever order the last tick brought."""

    # ---- layout ----------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield TextLines(self._header_lines, id="proc-summary")
        yield ProcessTable(id="proc-table")
        yield TextLines(self._status_lines, id="proc-status")
        search = SearchInput(placeholder="search user, command line, job or PID", id="proc-search")
        search.display = False
        yield search

    def on_mount(self) -> None:
        self.state = view_state_for(OVERVIEW_SORT if self.overview else self.context.default_sort)
        if not self.overview:  # the Overview's list starts unfiltered (a card's selection narrows it)
            self.initial_filters()

        ns = in_host_pid_namespace()
        self.own_namespace = None if ns is None else not ns

    def initial_filters(self) -> None:
        """The filters the last run left (gputui.state), marked as such until changed."""
        saved = self.context.filters
        self.state.mine = saved.mine
        self.state.compute_only = saved.compute_only
        self.state.gpu = saved.gpu
        self.state.search = saved.search
        self.query_one(SearchInput).value = saved.search
        self.restored = tuple(self.state.filters())

    def filter_note(self) -> str:
        """Said after the filters: where they come from and how to clear them."""
        if self.overview:
            return "(selected card · esc: all)" if self.state.gpu is not None else ""
        filters = tuple(self.state.filters())
        if filters and filters == self.restored:
            return "(from the last run · esc clears)"
        return ""

    def focus_list(self) -> None:
        """The search while it is open, else the table (the Processes tab, when shown)."""
        search = self.query_one(SearchInput)
        (search if search.display else self.table).focus()

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        if event.widget is self.table:
            self.followed = True

    @property
    def table(self) -> ProcessTable:
        return self.query_one(ProcessTable)

    def set_room(self, room: bool) -> None:
        """The Overview's list: the table, or (no room) only its one line."""
        if room == self.room:
            return
        self.room = room
        self.table.display = room
        self.query_one("#proc-summary", TextLines).update_lines()

    def narrow_to(self, gpu: int | None) -> None:
        """Only this GPU's processes (the Overview's selected card), or every GPU's."""
        if gpu != self.state.gpu:
            self.state.gpu = gpu
            self._refresh(reordered=True)

    # ---- capabilities ----------------------------------------------------------------

    @property
    def readonly(self) -> bool:
        return self.context.readonly

    @property
    def signals_possible(self) -> bool:
        """The processes are this machine's (live), so they can be signalled."""
        return self.context.sources.local_processes

    def check_signal(self) -> bool | None:
        """True: allowed; None: shown but disabled (a replay); False: hidden (--readonly)."""
        if self.readonly:
            return False
        return True if self.signals_possible else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("signal", "mark"):
            # not offered where they can do nothing: --readonly, or a replay (the footer
            # does not advertise them; `refused` says why when one is pressed anyway)
            return not self.readonly and self.signals_possible
        if action == "refused":
            return not self.readonly and not self.signals_possible
        if action == "gpu_filter" and self.overview:
            # on the Overview, selecting a card chooses the GPU (esc shows every GPU's again):
            # disabled, so f and F go on to the cards' and the app's keys, but not hidden
            # (they are the Processes tab's keys, which the help screen lists)
            return None
        return True

    def action_refused(self) -> None:
        self.notify(
            "Signals and marks are disabled: this is a recording, not this machine's processes.",
            severity="warning",
        )

    # ---- data ------------------------------------------------------------------------

    def show_info(self, info: MachineInfo) -> None:
        machine = (info.system.hostname, tuple(d.uuid for d in info.devices))
        if self.machine is not None and machine != self.machine:
            # another machine (the demo, another recording): this one's GPU, job and
            # search filters would hide its rows for no reason it can see
            self.state.gpu = self.state.job = None
            self.state.search = ""
            self.query_one(SearchInput).value = ""
        self.machine = machine
        self.info = info
        if self.state.gpu is not None and self.state.gpu >= len(info.devices):
            self.state.gpu = None

    def show_snapshot(self, info: MachineInfo | None, snapshot: Snapshot) -> None:
        self.info = info
        self.snapshot = snapshot
        self.all_rows = self.builder.rows(snapshot)
        self.launcher_rows = self.builder.launcher_rows(snapshot)
        present = {r.ident for r in [*self.all_rows, *self.launcher_rows] if r.ident is not None}
        self.marks &= present
        self.signals.expire(present)
        self._refresh()

    def _refresh(self, *, reordered: bool = False, to_top: bool = False) -> None:
        """Arrange the rows and redraw what changed (a tick, a sort, a filter, a mark)."""
        shown = arrange(self.all_rows, self.state, self.me, self.launcher_rows)
        self.shown = shown
        table = self.table
        table.state = self.state
        table.marks = self.marks
        table.notes = self.signals.notes()
        if not self.all_rows:
            table.empty_text = (
                "no GPU processes" if self.snapshot is not None else "waiting for the first sample…"
            )
        else:
            table.empty_text = "no process matches the filter (esc clears it)"
        table.set_rows(shown, reordered=reordered, to_top=to_top or not self.followed)
        self.query_one("#proc-summary", TextLines).update_lines()
        self.query_one("#proc-status", TextLines).update_lines()
        if self._detail is not None:
            self._detail.refresh_from(self.row_for(self._detail.key, self._detail.ident))

    def row_for(self, key: tuple[int, int], ident: Ident | None) -> ProcessRow | None:
        for r in [*self.all_rows, *self.launcher_rows]:
            if r.key == key and (ident is None or r.ident == ident):
                return r
        return None

    def _header_lines(self, width: int) -> list[Line]:
        if not self.room:
            n = len(self.all_rows)
            count = f" {n} GPU process{'es' if n != 1 else ''}"
            return [[(count, S.title), (f" · press {PROCESSES_TAB_KEY} to list them", S.label)]]
        gpus = len(self.info.devices) if self.info else 0
        summary = summary_line(
            self.shown,
            len(self.all_rows),
            self.state,
            width,
            marked=len(self.marks),
            gpus=gpus,
            note=self.filter_note(),
        )
        if self.readonly:
            summary = [*summary[:-1], ("   read-only", PS.note_warn)] if summary else summary
        lines = [summary]
        pids = {r.proc.pid for r in self.shown}
        lines += verdict_lines(self.hub.health_report(), pids, width)
        lines += notice_lines(
            self.all_rows,
            unlisted_memory(self.info, self.snapshot),
            width,
            live=self.signals_possible,
            own_namespace=self.own_namespace,
        )
        return lines

    def _status_lines(self, width: int) -> list[Line]:
        return self.signals.status_lines()

    # ---- signals (the one path: gputui.ui.processes.signals) ------------------------

    @property
    def watches(self) -> dict[Ident, SignalWatch]:
        return self.signals.watches

    def note_for(self, ident: Ident | None) -> RowNote | None:
        return self.signals.note_for(ident)

    def _targets(self, rows: list[ProcessRow]) -> tuple[list[SignalTarget], list[str]]:
        return self.signals.targets(rows)

    def signals_changed(self, *, sent: bool) -> None:
        """The signal desk's news: redraw; after a signal went out, the marks are done."""
        if sent:
            self.marks.clear()
        self._refresh()

    def selected_rows(self) -> list[ProcessRow]:
        """The marked processes (all their rows, filtered out or not), else the cursor's row."""
        if self.marks:
            return [r for r in self.all_rows if r.ident in self.marks]
        current = self.table.current
        return [current] if current is not None else []

    def ask_to_signal(self, rows: list[ProcessRow], name: str) -> None:
        self.signals.ask_to_signal(rows, name)

    def action_signal(self, name: str) -> None:
        self.ask_to_signal(self.selected_rows(), name)

    # ---- marks, sorting, filtering ---------------------------------------------------

    def action_mark(self) -> None:
        if not self.signals_possible:
            self.notify(
                "Marking is disabled: this is a recording, not this machine's processes.", severity="warning"
            )
            return
        row = self.table.current
        if row is None:
            return
        ident = row.ident
        if ident is None:
            self.notify(
                f"PID {row.proc.pid} is {row.command}: it cannot be marked.", severity="warning", markup=False
            )
            return
        if ident in self.marks:
            self.marks.discard(ident)
        else:
            self.marks.add(ident)
        self.table.move_to(self.table.cursor + 1)
        self._refresh()

    def action_clear(self) -> None:
        """esc: the marks first; then the search and filters.  On the Overview also the
        card's narrowing (the board selects no card, so nothing narrows the list without
        showing it)."""
        narrowed = not self.marks and self.overview and self.state.gpu is not None
        if self.marks:
            self.marks.clear()
        elif self.state.filters():
            self.state.gpu = None
            self.state.mine = False
            self.state.compute_only = False
            self.state.job = None
            self.state.search = ""
            self.query_one(SearchInput).value = ""
        self._refresh(reordered=True)
        if narrowed:
            from gputui.ui.overview.widgets import GpuBoard

            for board in self.screen.query(GpuBoard):
                board.action_unselect()

    def action_sort(self, step: int) -> None:
        keys = [c.key for c in COLUMNS]
        nxt = keys[(keys.index(self.state.sort_key) + step) % len(keys)]
        self._sort_by(nxt)

    def _sort_by(self, key: str) -> None:
        col = next(c for c in COLUMNS if c.key == key)
        self.state.sort_key = key
        self.state.descending = col.descending
        self._refresh(reordered=True, to_top=True)

    def action_reverse(self) -> None:
        self.state.descending = not self.state.descending
        self._refresh(reordered=True, to_top=True)

    def action_tree(self) -> None:
        self.state.tree = not self.state.tree
        if self.state.tree and not self.launcher_rows:
            self.notify("No launcher (torchrun, mpirun, srun, deepspeed, accelerate) above any GPU process.")
        self._refresh(reordered=True)

    def action_by_job(self) -> None:
        self.state.by_job = not self.state.by_job
        self._refresh(reordered=True, to_top=True)

    def action_job_filter(self) -> None:
        jobs = sorted({r.job for r in self.all_rows if r.job})
        if not jobs:
            self.notify("No process has a job (Slurm, Kubernetes pod, container, unit) that gputui can read.")
            return
        choices: list[str | None] = [None, *jobs]
        current = choices.index(self.state.job) if self.state.job in choices else 0
        self.state.job = choices[(current + 1) % len(choices)]
        self._refresh(reordered=True)

    def action_hscroll(self, step: int) -> None:
        """Scroll the commands sideways, no further than the end of the longest in view."""
        table = self.table
        shown = table.rows[table.top : table.top + table.body_height]
        longest = max((len(r.prefix) + len(r.command) for r in shown), default=0)
        spans = column_spans(table.columns, table.size.width)
        width = next((x1 - x0 for c, x0, x1 in spans if c.key == "command"), 0)
        self.state.hscroll = max(0, min(self.state.hscroll + step, max(0, longest - width + 1)))
        table.update_lines()

    def on_process_table_sort_requested(self, message: ProcessTable.SortRequested) -> None:
        if message.key == self.state.sort_key:
            self.action_reverse()
        else:
            self._sort_by(message.key)

    def on_process_table_row_clicked(self, message: ProcessTable.RowClicked) -> None:
        if message.double:
            self.action_detail()

    def action_mine(self) -> None:
        self.state.mine = not self.state.mine
        self._refresh(reordered=True)

    def action_compute(self) -> None:
        self.state.compute_only = not self.state.compute_only
        self._refresh(reordered=True)

    def action_gpu_filter(self, step: int) -> None:
        n = len(self.info.devices) if self.info else 0
        choices: list[int | None] = [None, *range(n)]
        current = choices.index(self.state.gpu) if self.state.gpu in choices else 0
        self.state.gpu = choices[(current + step) % len(choices)]
        self._refresh(reordered=True)

    def action_search(self) -> None:
        search = self.query_one(SearchInput)
        search.display = True
        search.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "proc-search":
            self.state.search = event.value
            self._refresh(reordered=True)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "proc-search":
            self._close_search()

    def on_search_input_cancelled(self, event: SearchInput.Cancelled) -> None:
        self.state.search = ""
        self._close_search()
        self._refresh(reordered=True)

    def _close_search(self) -> None:
        search = self.query_one(SearchInput)
        search.display = False
        self.table.focus()

    # ---- detail ----------------------------------------------------------------------

    def action_detail(self) -> None:
        from gputui.ui.processes.screens import ProcessDetailScreen

        row = self.table.current
        if row is None:
            return
        screen = self._detail = ProcessDetailScreen(self, row)

        def closed(_: None) -> None:
            self._detail = None

        self.app.push_screen(screen, closed)

    def action_job_view(self) -> None:
        open_job_view(self, self.hub, self.table.current, local=self.signals_possible)

    def open_verdicts_job(self) -> None:
        """J from the Overview's cards: the job of the verdict line under them (which says
        "J: job view"), else the cursor row's."""
        shown = {r.proc.pid for r in self.shown}
        open_job_view(self, self.hub, self.table.current, local=self.signals_possible, shown=shown)

    def action_stacks(self) -> None:
        open_stacks(self, self.hub, self.table.current, local=self.signals_possible)

    @classmethod
    def help_sections(cls, title: str) -> list[tuple[str, list[BindingType]]]:
        from gputui.ui.processes.screens import ProcessDetailScreen

        return [
            (title, [*cls.BINDINGS, *ProcessTable.BINDINGS]),
            ("Process detail (enter on a row)", list(ProcessDetailScreen.BINDINGS)),
        ]


def _current_user() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None
