"""`gputui cluster`: every GPU of every host, from Prometheus or the exporters, and a host's
GPUs as the Overview's cards with history charts.

The network is read on worker threads only (`ClusterPoller`, `@work(thread=True)` for range
queries); the UI applies each `ClusterState` when it arrives and shows how old it is, so a
slow or unreachable server is visible and never freezes the screen.
"""

from __future__ import annotations

import math
import time
from typing import Any, ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen

from gputui.cluster.model import ClusterGpu, ClusterState, HostState, published_hints, summarize
from gputui.cluster.sources import ClusterPoller, ClusterSource, History
from gputui.telemetry.alerts import IdleRule
from gputui.ui.base_app import BaseApp
from gputui.ui.cluster.jobs import JobRow, JobScreen, job_row_line, stuck_jobs, title_width
from gputui.ui.cluster.lines import FILTERS, SORTS, Row, row_line, rows, status_line, summary_line, visible
from gputui.ui.cluster.lines import host_width as _host_width
from gputui.ui.detail.charts import chart_lines
from gputui.ui.overview.card import MIN_CARD_WIDTH, gpu_card
from gputui.ui.processes.widgets import TextLines
from gputui.ui.render import Line, S, clean, line_len, pad, pad_line
from gputui.ui.widgets.footer import KeyFooter
from gputui.ui.widgets.lines import LineWidget

STATUS_TICK_S = 1.0


class StateReady(Message):
    """A refresh finished (posted from the poller's thread)."""

    def __init__(self, state: ClusterState) -> None:
        super().__init__()
        self.state = state

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, StateReady)


class ClusterTable(LineWidget, can_focus=True):
    """One line per GPU; draws only the rows in view (500+ GPUs stay cheap)."""

    DEFAULT_CSS = """
    ClusterTable { height: 1fr; }
    """

    def __init__(self) -> None:
        super().__init__(id="cluster-table")
        self.rows: list[Row | JobRow] = []
        """The jobs with a verdict (worst first), then the GPUs."""
        self.cursor = 0
        self.top = 0
        self.host_w = 8
        self.title_w = 8
        self.gpm = False

    def available_height(self) -> int:
        return max(1, self.size.height)

    def get_content_height(self, container: object, viewport: object, width: int) -> int:
        return max(1, self.size.height)

    def build(self, width: int, height: int) -> list[Line]:
        if not self.rows:
            empty: list[Line] = [[(" no GPU matches", S.dim)]]
            return empty + [[] for _ in range(max(0, height - 1))]
        self.top = visible(self.rows, self.cursor, self.top, height)
        out = [
            job_row_line(r, width, self.title_w, self.top + k == self.cursor)
            if isinstance(r, JobRow)
            else pad_line(row_line(r, width, self.host_w, self.top + k == self.cursor, self.gpm), width)
            for k, r in enumerate(self.rows[self.top : self.top + height])
        ]
        return out + [[] for _ in range(height - len(out))]

    def selected(self) -> Row | JobRow | None:
        return self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None


class ClusterApp(BaseApp[int]):
    """The cluster view.  Give it a source (Prometheus or direct); `deliver` states in tests."""

    TITLE = "gputui cluster"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    Screen { background: $background; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", tooltip="Quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
        Binding("question_mark,f1", "help", "Help", key_display="?", tooltip="List every key"),
        Binding(
            "enter",
            "drill",
            "Open",
            tooltip="Open the selected row: a job's nodes, ranks and verdicts; a host's GPUs as cards "
            "with history",
        ),
        Binding("s", "sort(1)", "Sort", tooltip="Sort by the next key: " + ", ".join(SORTS)),
        Binding("S", "sort(-1)", "Sort back", show=False, tooltip="Sort by the previous key"),
        Binding("f", "filter_next", "Filter", tooltip="Show the next group: " + ", ".join(FILTERS)),
        Binding(
            "exclamation_mark,u",
            "filter('unhealthy')",
            "Unhealthy",
            key_display="!",
            tooltip="Only unhealthy GPUs: exporter down, Xid, ECC errors",
        ),
        Binding(
            "r",
            "filter('held_idle')",
            "Held idle",
            tooltip="Only GPUs whose memory is held while they do nothing (reserved but idle)",
        ),
        Binding("i", "filter('idle')", "Idle", show=False, tooltip="Only idle GPUs"),
        Binding("b", "filter('busy')", "Busy", show=False, tooltip="Only busy GPUs"),
        Binding(
            "t",
            "filter('throttled')",
            "Throttled",
            show=False,
            tooltip="Only GPUs whose clocks are held back (power cap, thermal, HW slowdown)",
        ),
        Binding("x", "filter('xid')", "Xid", show=False, tooltip="Only GPUs that reported an Xid error"),
        Binding("e", "filter('ecc')", "ECC", show=False, tooltip="Only GPUs with uncorrectable ECC errors"),
        Binding("d", "filter('down')", "Down", show=False, tooltip="Only GPUs whose exporter is down"),
        Binding("a,escape", "filter('all')", "All", tooltip="Show every GPU"),
        Binding("R,f5", "refresh_now", "Refresh", show=False, tooltip="Refresh now"),
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("pageup", "move(-20)", "Page up", show=False),
        Binding("pagedown", "move(20)", "Page down", show=False),
        Binding("home", "move(-1000000)", "Top", show=False),
        Binding("end", "move(1000000)", "Bottom", show=False),
    ]

    def __init__(
        self,
        source: ClusterSource | None,
        refresh: float = 5.0,
        idle_rule: IdleRule | None = None,
        history_minutes: float = 15.0,
    ) -> None:
        super().__init__()
        self.source = source
        self.refresh_s = refresh
        self.idle_rule = idle_rule or IdleRule(True, 30.0, 0, 1024)
        self.history_s = history_minutes * 60
        self.state: ClusterState | None = None
        self.sort = "host"
        self.filt = "all"
        self.poller: ClusterPoller | None = None
        self.table = ClusterTable()
        self.states_applied = 0
        """States drawn so far (tests wait on it)."""

    def compose(self) -> ComposeResult:
        yield TextLines(self._summary_lines, id="cluster-summary")
        yield TextLines(self._status_lines, id="cluster-status")
        yield self.table
        yield KeyFooter()

    def on_mount(self) -> None:
        self.table.focus()
        if self.source is not None:
            self.poller = ClusterPoller(self.source, self.refresh_s, self.deliver)
            self.poller.start()
        self.set_interval(STATUS_TICK_S, self._tick_status)

    def on_unmount(self) -> None:
        if self.poller is not None:
            self.poller.stop()

    def deliver(self, state: ClusterState) -> None:
        """Thread-safe: hand a new state to the UI."""
        self.post_message(StateReady(state))

    # ---- drawing -------------------------------------------------------------------

    def _summary_lines(self, width: int) -> list[Line]:
        if self.state is None:
            return [[(" gputui cluster", S.title)]]
        state = self.state
        return [summary_line(summarize(state, self.idle_rule), state, width, stuck_jobs(state))]

    def _status_lines(self, width: int) -> list[Line]:
        busy = None
        if self.poller is not None and self.poller.busy_since is not None:
            busy = time.monotonic() - self.poller.busy_since
        return [status_line(self.state, width, self.sort, self.filt, busy, self.refresh_s)]

    def _tick_status(self) -> None:
        self.query_one("#cluster-status", TextLines).update_lines()

    def on_state_ready(self, message: StateReady) -> None:
        self.apply_state(message.state)

    def apply_state(self, state: ClusterState) -> None:
        self.state = state
        with self.batch_update():
            self._rebuild_rows()
            self.query_one("#cluster-summary", TextLines).update_lines()
            self.query_one("#cluster-status", TextLines).update_lines()
            if isinstance(self.screen, (HostScreen, JobScreen)):
                self.screen.new_state(state)
        self.states_applied += 1

    def _rebuild_rows(self) -> None:
        table = self.table
        if self.state is None:
            return
        old_key = _row_key(table.selected())
        table.rows = [
            *(JobRow(j) for j in self.state.jobs),
            *rows(self.state, self.idle_rule, self.sort, self.filt),
        ]
        table.host_w = _host_width(self.state, table.size.width or 120)
        table.title_w = title_width(self.state.jobs, table.size.width or 120)
        table.gpm = any(
            g.sample.gpm is not None and g.sample.gpm.tensor_active is not None for g in self.state.gpus
        )
        if old_key is not None:
            for k, r in enumerate(table.rows):
                if _row_key(r) == old_key:
                    table.cursor = k
                    break
        table.cursor = max(0, min(table.cursor, len(table.rows) - 1))
        table.update_lines()

    # ---- actions -------------------------------------------------------------------

    def action_sort(self, step: int) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + step) % len(SORTS)]
        self._changed_view()

    def action_filter(self, name: str) -> None:
        self.filt = name
        self.table.cursor = 0
        self._changed_view()

    def action_filter_next(self) -> None:
        names = list(FILTERS)
        self.action_filter(names[(names.index(self.filt) + 1) % len(names)])

    def _changed_view(self) -> None:
        self._rebuild_rows()
        self.query_one("#cluster-status", TextLines).update_lines()

    def action_move(self, step: int) -> None:
        table = self.table
        table.cursor = max(0, min(len(table.rows) - 1, table.cursor + step))
        table.update_lines()

    def action_help(self) -> None:
        from gputui.ui.help import HelpScreen

        self.push_screen(HelpScreen())

    def action_refresh_now(self) -> None:
        if self.poller is not None:
            self.poller.refresh_now()

    def action_drill(self) -> None:
        row = self.table.selected()
        if isinstance(row, JobRow):
            self.push_screen(JobScreen(row.job.key, self.state))
        elif row is not None:
            self.push_screen(HostScreen(row.host.key, row.gpu.key if row.gpu else None))


def _row_key(row: Row | JobRow | None) -> tuple[str, str | None] | None:
    """What keeps the cursor on its row across refreshes."""
    if row is None:
        return None
    if isinstance(row, JobRow):
        return ("job", row.job.key)
    return (row.host.key, row.gpu.key if row.gpu else None)


# --------------------------------------------------------------------------------------
# one host: the Overview's cards, and history charts from range queries
# --------------------------------------------------------------------------------------


class HistoryReady(Message):
    def __init__(self, host: str, history: History, gpus: tuple[ClusterGpu, ...]) -> None:
        super().__init__()
        self.host = host
        self.history = history
        self.gpus = gpus
        """Every field of the host's GPUs (the list has only what it shows)."""


class HostBoard(LineWidget):
    """The host's cards and charts, as tall as they are (the screen scrolls)."""

    def __init__(self, owner: HostScreen) -> None:
        super().__init__(id="host-board")
        self.owner = owner

    def build(self, width: int, height: int) -> list[Line]:
        return self.owner.board_lines(width, height)


class HostScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "app.pop_screen", "Back", tooltip="Back to every GPU"),
        # ↑ ↓ pgup pgdn home end scroll the cards and charts
        Binding("left,h", "select(-1)", "Previous GPU", key_display="←"),
        Binding("right,l", "select(1)", "Next GPU", key_display="→"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, host_key: str, gpu_key: str | None) -> None:
        super().__init__()
        self.host_key = host_key
        self.selected_key = gpu_key
        self.history = History()
        self.gpus: tuple[ClusterGpu, ...] = ()
        """The host's GPUs with every field, from the last details query."""
        self.history_pending = False
        self.board = HostBoard(self)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="host-scroll"):
            yield self.board
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#host-scroll").focus()
        self.load_history()

    @property
    def cluster(self) -> ClusterApp:
        app = self.app
        assert isinstance(app, ClusterApp)
        return app

    def host(self) -> HostState | None:
        state = self.cluster.state
        if state is None:
            return None
        return next((h for h in state.hosts if h.key == self.host_key), None)

    def new_state(self, state: ClusterState) -> None:
        self.board.relayout()
        self.load_history()

    @work(thread=True, exclusive=True, group="history")
    def load_history(self) -> None:
        """Range queries off the UI thread; the charts show what arrived last."""
        host = self.host()
        source = self.cluster.source
        if host is None or source is None or not host.gpus:
            return
        self.history_pending = True
        gpus = source.details(host)
        history = source.history(host, self.cluster.history_s, 240)
        self.post_message(HistoryReady(host.key, history, gpus))

    def on_history_ready(self, message: HistoryReady) -> None:
        self.history_pending = False
        if message.host == self.host_key:
            self.history = message.history
            self.gpus = message.gpus
            self.board.relayout()

    def action_select(self, step: int) -> None:
        host = self.host()
        if host is None or not host.gpus:
            return
        keys = [g.key for g in host.gpus]
        k = keys.index(self.selected_key) if self.selected_key in keys else 0
        self.selected_key = keys[(k + step) % len(keys)]
        self.board.update_lines()

    def _series_fn(self, gpu: ClusterGpu):  # type: ignore[no-untyped-def]
        series = self.history.series

        def by_width(index: int, metric: str, width: int) -> list[float]:
            return [v for v in series.get((gpu.key, metric), []) if not math.isnan(v)][-width:]

        def full(index: int, metric: str) -> list[float]:
            return series.get((gpu.key, metric), [])

        return by_width, full

    def board_lines(self, width: int, height: int) -> list[Line]:
        host = self.host()
        if host is None:
            return [[(" this host is no longer reported", S.dim)]]
        title: Line = [(" " + clean(host.name), S.title), ("  " + clean(host.instance), S.dim)]
        if host.driver:
            title += [("  driver " + clean(host.driver), S.label)]
        if not host.up:
            title += [("  DOWN ", S.lost), (" " + clean(host.error or ""), S.bad)]
        hint: Line = [("esc back  ←/→ GPU ", S.label)]
        gap = width - line_len(title) - line_len(hint)
        out: list[Line] = [[*title, (" " * max(1, gap), None), *hint] if gap > 0 else title]
        if self.history.error:
            out.append([(" history: " + clean(self.history.error), S.warn)])
        gpus = self.gpus if host.up and self.gpus else host.gpus
        if not gpus:
            return [*out, [(" no GPUs known for this host", S.dim)]]
        keys = [g.key for g in gpus]
        if self.selected_key not in keys:
            self.selected_key = keys[0]
        cols = max(1, min(len(gpus), width // MIN_CARD_WIDTH))
        card_w = width // cols
        for start in range(0, len(gpus), cols):
            cards = []
            for g in gpus[start : start + cols]:
                by_width, _ = self._series_fn(g)
                cards.append(card_of(g, card_w, by_width, g.key == self.selected_key))
            for y in range(len(cards[0])):
                line: Line = []
                for c in cards:
                    line += pad_line(c[y], card_w)
                out.append(line)
        chosen = next(g for g in gpus if g.key == self.selected_key)
        _, full = self._series_fn(chosen)
        if self.history.times:
            out += chart_lines(chosen.device, full, self.history.times, width, live=True)
        elif self.history_pending:
            out.append([(" loading history…", S.dim)])
        return out


def card_of(g: ClusterGpu, width: int, series: Any = None, selected: bool = False) -> list[Line]:
    """A remote GPU as the Overview's card: the exporter's process count (the per-process
    series may be absent: `--no-processes`, a Prometheus view), its efficiency hints, and
    the Kubernetes pod under it."""
    card = gpu_card(
        g.device,
        g.sample,
        g.procs,
        series or _no_series,
        width,
        1,
        selected=selected,
        hints=published_hints(g),
        process_count=g.process_count,
    )
    return [*card, workload_line(g, width)]


def _no_series(index: int, metric: str, width: int) -> list[float]:
    return []


def workload_line(g: ClusterGpu, width: int) -> Line:
    """Under a card: the Kubernetes pod holding the GPU (dcgm-exporter's pod labels)."""
    if not g.workload:
        return [(" " * width, None)]
    return [(pad(clean(f"  pod {g.workload}"), width), S.info)]
