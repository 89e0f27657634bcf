"""The Processes tab: every process on every GPU, sorted and filtered, and signalled safely.

The table is a LineWidget (only changed cells cross the wire); sorting, filtering and the
cursor logic are plain functions in `process_lines`.  Signals go through
`gputui.control.signals` on a worker thread, after a confirmation that lists exactly the
processes (PID and start time) that will be signalled; the rows then show what happened.
"""

from __future__ import annotations

import dataclasses
import getpass
import signal
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Input

from gputui.telemetry.model import MachineInfo, Snapshot
from gputui.telemetry.pidns import in_host_pid_namespace
from gputui.ui.context import LOCKED, PaneContext
from gputui.ui.panes import Pane
from gputui.ui.processes.lines import (
    COLUMNS,
    PS,
    Ident,
    ProcessRow,
    RowBuilder,
    RowNote,
    ViewState,
    arrange,
    column_spans,
    notice_lines,
    summary_line,
    unlisted_memory,
    view_state_for,
)
from gputui.ui.processes.widgets import ProcessTable, SearchInput, TextLines
from gputui.ui.render import Line, S, clean
from gputui.untrusted import literal

if TYPE_CHECKING:
    from gputui.control.jobs import JobMember, JobMembers
    from gputui.control.signals import PinnedProcess, ProcessIdentity, SignalResult
    from gputui.telemetry.hub import Hub
    from gputui.ui.processes.screens import ProcessDetailScreen, SignalTarget, SignalWatch

# gputui.control.signals and gputui.telemetry.host (psutil) are imported when first used:
# a replay never needs them, and the first frame comes ~15 ms sooner.  So are the dialogs
# and the detail screen (process_screens): the Overview's list is in the first frame, and
# they are only needed at a key press (~10 ms less before it).

WATCH_S = 120.0
"""How long after a signal gputui watches for the process to exit."""
FAILED_NOTE_S = 20.0
"""How long a refusal or failure stays on its row."""
EXITED_NOTE_S = 10.0


class ProcessesPane(Pane):
    """Every process on every GPU: sort, filter, search, inspect, signal."""

    PANE_ID = "processes"
    TAB_TITLE = "Processes"
    TAB_KEY = "2"

    DEFAULT_CSS = """
    ProcessesPane { layout: vertical; }
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
            tooltip="Search user and command line (enter keeps it, esc clears it)",
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
        # in a replay T K I and m are hidden (nothing to signal); pressed, they say why
        Binding("T,K,I,m", "refused", show=False),
    ]

    def __init__(self, hub: Hub, context: PaneContext = LOCKED) -> None:
        super().__init__(hub, context)
        self.info: MachineInfo | None = None
        self.snapshot: Snapshot | None = None
        self.state = ViewState()
        self.builder = RowBuilder()
        self.all_rows: list[ProcessRow] = []
        self.launcher_rows: list[ProcessRow] = []
        """The launchers of the latest tick, as rows (shown in tree mode)."""
        self.job_batch: tuple[str, list[Ident]] | None = None
        """The latest whole-job signal: its title and its members (the status line's summary)."""
        self.shown: list[ProcessRow] = []
        self.marks: set[Ident] = set()
        self.restored: tuple[str, ...] = ()
        """The filters as the last run left them (shown as such while unchanged)."""
        self.machine: tuple[str, tuple[str | None, ...]] | None = None
        """The host name and GPU UUIDs of the data shown (a new machine drops its filters)."""
        self.watches: dict[Ident, SignalWatch] = {}
        self.status: dict[int, Line] = {}
        """The outcome of the latest signals, by PID (the line under the table)."""
        self.me = _current_user()
        self.own_namespace: bool | None = None
        self._detail: ProcessDetailScreen | None = None

    # ---- layout ----------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield TextLines(self._header_lines, id="proc-summary")
        yield ProcessTable(id="proc-table")
        yield TextLines(self._status_lines, id="proc-status")
        search = SearchInput(placeholder="search user and command line", id="proc-search")
        search.display = False
        yield search

    def on_mount(self) -> None:
        self.state = view_state_for(self.initial_sort())
        self.initial_filters()

        ns = in_host_pid_namespace()
        self.own_namespace = None if ns is None else not ns

    def initial_sort(self) -> str | None:
        return self.context.default_sort

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
        filters = tuple(self.state.filters())
        if filters and filters == self.restored:
            return "(from the last run · esc clears)"
        return ""

    def on_show(self, event: events.Show) -> None:
        search = self.query_one(SearchInput)
        (search if search.display else self.query_one(ProcessTable)).focus()

    @property
    def table(self) -> ProcessTable:
        return self.query_one(ProcessTable)

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
        self._expire_watches(present)
        self._refresh()

    def _refresh(self, *, reordered: bool = False, to_top: bool = False) -> None:
        """Arrange the rows and redraw what changed (a tick, a sort, a filter, a mark)."""
        shown = arrange(self.all_rows, self.state, self.me, self.launcher_rows)
        self.shown = shown
        table = self.table
        table.state = self.state
        table.marks = self.marks
        table.notes = self._notes()
        if not self.all_rows:
            table.empty_text = (
                "no GPU processes" if self.snapshot is not None else "waiting for the first sample…"
            )
        else:
            table.empty_text = "no process matches the filter (esc clears it)"
        table.set_rows(shown, reordered=reordered, to_top=to_top)
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
        lines += notice_lines(
            self.all_rows,
            unlisted_memory(self.info, self.snapshot),
            width,
            live=self.signals_possible,
            own_namespace=self.own_namespace,
        )
        return lines

    def _status_lines(self, width: int) -> list[Line]:
        lines = list(self.status.values())[-4:]
        if self.job_batch is not None:
            lines = [self._job_summary(*self.job_batch), *lines[-3:]]
        return lines

    def _job_summary(self, title: str, members: list[Ident]) -> Line:
        """Which members of the latest signalled job exited, are still running, or were refused."""
        exited, running, refused = [], [], []
        for ident in members:
            w = self.watches.get(ident)
            if w is None or not w.result.sent:
                refused.append(ident[0])
            elif w.exited_after is not None:
                exited.append(ident[0])
            else:
                running.append(ident[0])
        parts = []
        if exited:
            parts.append((f"{len(exited)} exited ({', '.join(map(str, exited))})", PS.note_ok))
        if running:
            parts.append((f"{len(running)} still running ({', '.join(map(str, running))})", PS.note_warn))
        if refused:
            parts.append((f"{len(refused)} not signalled ({', '.join(map(str, refused))})", PS.note_bad))
        line: Line = [(f" {title}: ", S.title)]
        for i, part in enumerate(parts):
            line.append(("; " if i else "", S.label))
            line.append(part)
        return line

    # ---- signals: what happened ------------------------------------------------------

    def note_for(self, ident: Ident | None) -> RowNote | None:
        if ident is None:
            return None
        w = self.watches.get(ident)
        if w is None:
            return None
        name = _signal_name(w.result.signal)
        if not w.result.sent:
            return RowNote(f"✗ {name}: {_short(w.result)}", PS.note_bad)
        if w.exited_after is not None:
            return RowNote(f"✓ exited {w.exited_after:.1f} s after {name}", PS.note_ok)
        running = int(time.monotonic() - w.at)
        offer = " · K: SIGKILL" if w.result.signal != signal.SIGKILL else ""
        return RowNote(f"{name} sent · still running after {running} s{offer}", PS.note_warn)

    def _notes(self) -> dict[Ident, RowNote]:
        out = {}
        for ident in self.watches:
            note = self.note_for(ident)
            if note is not None:
                out[ident] = note
        return out

    def _expire_watches(self, present: set[Ident]) -> None:
        now = time.monotonic()
        for ident, w in list(self.watches.items()):
            done = (not w.result.sent and now - w.at > FAILED_NOTE_S) or (
                w.exited_after is not None and now - w.at - w.exited_after > EXITED_NOTE_S
            )
            if done or (ident not in present and now - w.at > WATCH_S):
                del self.watches[ident]

    # ---- signals: asking and sending -------------------------------------------------

    def _targets(self, rows: list[ProcessRow]) -> tuple[list[SignalTarget], list[str]]:
        """Merge rows into processes (one per PID and start time); say why others are left out."""
        from gputui.ui.processes.screens import SignalTarget  # (not on the first frame's path)

        targets: dict[Ident, SignalTarget] = {}
        problems: list[str] = []
        for r in rows:
            p = r.proc
            ident = r.ident
            if not p.visible:
                problems.append(f"PID {p.pid} is {r.command}: gputui cannot signal it")
                continue
            if ident is None:
                problems.append(f"PID {p.pid}: its start time could not be read, so it cannot be verified")
                continue
            t = targets.get(ident)
            if t is None:
                from gputui.control.signals import ProcessIdentity

                t = targets[ident] = SignalTarget(
                    ProcessIdentity(p.pid, ident[1], p.user, p.name), command=r.command
                )
            t.gpus.append(p.gpu_index)
            if p.gpu_memory is not None:
                t.gpu_memory = (t.gpu_memory or 0) + p.gpu_memory
        return list(targets.values()), problems

    def selected_rows(self) -> list[ProcessRow]:
        """The marked processes (all their rows, filtered out or not), else the cursor's row."""
        if self.marks:
            return [r for r in self.all_rows if r.ident in self.marks]
        current = self.table.current
        return [current] if current is not None else []

    def ask_to_signal(self, rows: list[ProcessRow], name: str) -> None:
        from gputui.ui.processes.screens import SignalDialog, signal_number

        allowed = self.check_signal()
        if not allowed:
            why = (
                "gputui runs --readonly"
                if allowed is False
                else "this is a recording, not this machine's processes"
            )
            self.notify(f"Signals are disabled: {why}.", severity="warning")
            return
        if not rows:
            self.notify("No process selected.", severity="warning")
            return
        launcher = next((r for r in rows if r.launcher is not None), None)
        if launcher is not None:
            self._list_job(launcher, name)
            return
        from gputui.control.signals import pin

        targets, problems = self._targets(rows)
        sig = signal_number(name)
        # Pin each process now, while the user looks at it: what is sent later goes to
        # exactly these processes.  One already gone, reused or not ours is said now.
        ready: list[SignalTarget] = []
        for t in targets:
            t.pinned = pin(t.identity)
            if t.pinned.problem is not None:
                refused = dataclasses.replace(t.pinned.problem, signal=sig)
                problems.append(refused.message)
                self._record([refused], time.monotonic())
                continue
            ready.append(t)
        for problem in problems:
            self.notify(clean(problem), severity="warning", timeout=8, markup=False)
        if not ready:
            self._refresh()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._send(ready, sig)
            else:
                for t in ready:
                    if t.pinned is not None:
                        t.pinned.close()

        self.app.push_screen(SignalDialog(ready, name), answered)

    def action_signal(self, name: str) -> None:
        self.ask_to_signal(self.selected_rows(), name)

    # ---- a whole job ------------------------------------------------------------------

    @work(thread=True, exit_on_error=False, group="job-list")
    def _list_job(self, row: ProcessRow, name: str) -> None:
        """Off the UI thread: list the launcher's job (descendants, its own process group
        or session) and pin every member, then ask."""
        from gputui.control.jobs import job_members
        from gputui.control.signals import ProcessIdentity, pin

        lp = row.launcher
        assert lp is not None
        members = job_members(ProcessIdentity(lp.pid, lp.create_time, lp.user, lp.name))
        pinned = [(m, pin(m.identity)) for m in members.members]
        if not self._tell_ui(self._confirm_job, row, name, members, pinned):
            for _, p in pinned:
                p.close()

    def _confirm_job(
        self, row: ProcessRow, name: str, members: JobMembers, pinned: list[tuple[JobMember, PinnedProcess]]
    ) -> None:
        from gputui.telemetry.cmdline import readable_command
        from gputui.ui.processes.screens import SignalDialog, SignalTarget, signal_number

        lp = row.launcher
        assert lp is not None
        title = f"{lp.kind} (PID {lp.pid})"
        if members.problem is not None:
            self.notify(clean(members.problem), severity="warning", timeout=8, markup=False)
            return
        sig = signal_number(name)
        ready: list[SignalTarget] = []
        for m, p in pinned:
            if p.problem is not None:
                refused = dataclasses.replace(p.problem, signal=sig)
                self.notify(clean(refused.message), severity="warning", timeout=8, markup=False)
                self._record([refused], time.monotonic())
                continue
            rows = [r for r in self.all_rows if r.proc.pid == m.identity.pid]
            mems = [r.proc.gpu_memory for r in rows if r.proc.gpu_memory is not None]
            readable = readable_command(m.cmdline)
            role = m.why
            if members.group is not None and m.why.startswith("process group"):
                role = f"group {members.group}"
            ready.append(
                SignalTarget(
                    m.identity,
                    gpus=[r.key[0] for r in rows],
                    gpu_memory=sum(mems) if mems else None,
                    command=literal(readable) if readable else f"[{literal(m.identity.name or '?')}]",
                    pinned=p,
                    role=role,
                )
            )
        if not ready:
            self._refresh()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.job_batch = (
                    f"job {title} after SIG{name}",
                    [(t.identity.pid, t.identity.create_time) for t in ready],
                )
                self._send(ready, sig)
            else:
                for t in ready:
                    if t.pinned is not None:
                        t.pinned.close()

        left_out = [f"PID {m.identity.pid} ({m.identity.name or '?'}) {m.why}" for m in members.left_out]
        self.app.push_screen(SignalDialog(ready, name, job=title, left_out=left_out), answered)

    @work(thread=True, exit_on_error=False, group="signals")
    def _send(self, targets: list[SignalTarget], sig: int) -> None:
        """Off the UI thread: send, then watch the processes that got it until they exit."""
        from gputui.control.signals import is_running, send_signal

        results = []
        for t in targets:
            if t.pinned is not None:
                with t.pinned:
                    results.append(send_signal(t.pinned, sig))
            else:
                results.append(send_signal(t.identity, sig))
        sent_at = time.monotonic()
        if not self._tell_ui(self._on_sent, results, sent_at):
            return
        pending = [r.identity for r in results if r.sent]
        deadline = sent_at + WATCH_S
        delay = 0.05
        while pending and time.monotonic() < deadline:
            time.sleep(delay)
            delay = min(0.5, delay * 1.5)
            for identity in list(pending):
                if not is_running(identity):
                    pending.remove(identity)
                    if not self._tell_ui(self._on_exited, identity, sig, time.monotonic()):
                        return

    def _tell_ui(self, callback: Callable[..., None], *args: object) -> bool:
        """Run `callback` on the UI thread; False once the app has gone (stop watching)."""
        try:
            self.app.call_from_thread(callback, *args)
        except RuntimeError:
            return False
        return True

    def _record(self, results: list[SignalResult], at: float) -> None:
        """Remember each result for its row and the status line."""
        from gputui.ui.processes.screens import SignalWatch

        for r in results:
            self.watches[(r.identity.pid, r.identity.create_time)] = SignalWatch(r, at)
            style = PS.note_ok if r.sent else PS.note_bad
            self.status[r.identity.pid] = [(" " + r.message, style)]

    def _on_sent(self, results: list[SignalResult], at: float) -> None:
        self.status = {}
        if self.job_batch is not None and {(r.identity.pid, r.identity.create_time) for r in results} != set(
            self.job_batch[1]
        ):
            self.job_batch = None  # a later signal to other processes
        self._record(results, at)
        for r in results:
            if not r.sent:
                self.notify(clean(r.message), severity="warning", timeout=8, markup=False)
        self.marks.clear()
        self._refresh()

    def _on_exited(self, identity: ProcessIdentity, sig: int, at: float) -> None:
        """The process is gone (seen at monotonic time `at`): counted from the latest signal
        sent to it (a SIGKILL after an ignored SIGTERM counts from the SIGKILL)."""
        w = self.watches.get((identity.pid, identity.create_time))
        if w is not None and w.exited_after is None:
            after = max(0.0, at - w.at)
            w.exited_after = after
            name = _signal_name(w.result.signal)
            self.status[identity.pid] = [
                (f" PID {identity.pid} exited {after:.1f} s after {name}", PS.note_ok)
            ]
        self._refresh()

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

    @classmethod
    def help_sections(cls) -> list[tuple[str, list[BindingType]]]:
        from gputui.ui.processes.screens import ProcessDetailScreen

        return [
            (f"{cls.TAB_TITLE} tab ({cls.TAB_KEY})", [*cls.BINDINGS, *ProcessTable.BINDINGS]),
            ("Process detail (enter on a row)", list(ProcessDetailScreen.BINDINGS)),
        ]


def _short(result: SignalResult) -> str:
    return {
        "gone": "already exited",
        "reused": "PID reused by another process, refused",
        "protected": "protected, refused",
        "denied": f"permission denied (owner {result.owner or '?'})",
    }.get(result.outcome.value, result.outcome.value)


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _current_user() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


OVERVIEW_SORT = "-gpu_memory"
"""The Overview's process list: largest GPU memory first."""


class OverviewProcesses(ProcessesPane):
    """The Overview's process list, below the cards: the Processes tab's table, keys,
    confirmed signal dialog and detail (this class only narrows what is shown), largest
    GPU memory first, narrowed to the selected card's GPU.  With no room for a table it is
    one line: how many processes there are and which key shows them."""

    PANE_ID = "overview-processes"
    TAB_KEY = ""
    SHOWN_BY = ProcessesPane.TAB_KEY
    """The key of the tab that lists every process."""

    DEFAULT_CSS = """
    OverviewProcesses { height: 1fr; layout: vertical; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        b
        for b in ProcessesPane.BINDINGS
        # selecting a card chooses the GPU here (esc shows every GPU's processes again)
        if not (isinstance(b, Binding) and b.action.startswith("gpu_filter"))
    ]

    def __init__(self, hub: Hub, context: PaneContext = LOCKED) -> None:
        super().__init__(hub, context)
        self.room = True
        """False: no room for the table, only the one line that says how to see it."""
        self.followed = False
        """True once the user has moved into the list: from then on the view follows the
        cursor's process (as in the Processes tab); until then it shows the first rows, the
        largest GPU memory, whatever order the last tick brought."""

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        if event.widget is self.table:
            self.followed = True

    def _refresh(self, *, reordered: bool = False, to_top: bool = False) -> None:
        super()._refresh(reordered=reordered, to_top=to_top or not self.followed)

    def initial_sort(self) -> str | None:
        return OVERVIEW_SORT

    def initial_filters(self) -> None:
        """The Overview's list starts unfiltered (a card's selection narrows it)."""

    def filter_note(self) -> str:
        return "(selected card · esc: all)" if self.state.gpu is not None else ""

    def on_show(self, event: events.Show) -> None:
        """The Overview's focus stays on the cards (tab moves it here)."""
        event.prevent_default()  # not the Processes tab's on_show, which focuses the table

    def set_room(self, room: bool) -> None:
        if room == self.room:
            return
        self.room = room
        self.table.display = room
        self.query_one("#proc-summary", TextLines).update_lines()

    def narrow_to(self, gpu: int | None) -> None:
        """Only this GPU's processes (the selected card), or every GPU's."""
        if gpu != self.state.gpu:
            self.state.gpu = gpu
            self._refresh(reordered=True)

    def action_clear(self) -> None:
        """esc: the marks first; then the filters and the card's narrowing (the board
        selects no card, so nothing narrows the list without showing it)."""
        from gputui.ui.overview.widgets import GpuBoard

        if self.marks:
            super().action_clear()
            return
        narrowed = self.state.gpu is not None
        super().action_clear()
        if narrowed:
            for board in self.screen.query(GpuBoard):
                board.action_unselect()

    def _header_lines(self, width: int) -> list[Line]:
        if self.room:
            return super()._header_lines(width)
        n = len(self.all_rows)
        count = f" {n} GPU process{'es' if n != 1 else ''}"
        return [[(count, S.title), (f" · press {self.SHOWN_BY} to list them", S.label)]]
