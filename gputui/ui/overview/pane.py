"""The Overview tab: every GPU (cards or compact rows), the processes on them, and the
host.  Its own module so that `panes.py` (the base every tab imports) imports no tab: the
Overview's process list is the Processes tab's widget (`ProcessList`), drawn in the first
frame with the cards."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll

from gputui.telemetry.model import MachineInfo, Snapshot
from gputui.ui.context import LOCKED, PaneContext
from gputui.ui.messages import ChartsChosen, GpuSelected
from gputui.ui.overview.widgets import GpuBoard, HostPanel, NoGpuPanel
from gputui.ui.panes import Pane
from gputui.ui.processes.process_list import PROCESSES_TAB_KEY, ProcessList
from gputui.ui.widgets.lines import LineWidget

if TYPE_CHECKING:
    from gputui.telemetry.hub import Hub


PROC_ROWS = 6
"""Lines the Overview keeps for its process list under the cards (its summary, the column
titles and four rows) before the cards may grow taller sparklines."""


CHARTS = Binding("C", "charts", "Charts", show=False, tooltip="Choose the GPU cards' charts (remembered)")


class CardScroll(VerticalScroll, can_focus=False):
    """The cards' container: it scrolls (mouse, page keys) but the board takes the focus,
    and the arrow keys (GPU selection); never focusable, so the screen focuses the board
    first and only once (each focus change repaints the whole screen)."""


class OverviewPane(Pane):
    """Every GPU (cards or compact rows), the processes on them, and the host; the no-GPU
    explanation instead of the GPUs when there are none.

    The cards are planned for the pane's height less PROC_ROWS, so the process list below
    them always has its rows; it takes the rest (its height never follows its row count, so
    nothing moves as the list grows).  When the cards need more than that, the list is one
    line saying how many processes there are and which key lists them; when the cards need
    exactly every line, not even that."""

    PANE_ID = "overview"
    TAB_TITLE = "Overview"
    TAB_KEY = "1"
    KEYS = GpuBoard.BINDINGS

    BINDINGS: ClassVar[list[BindingType]] = [
        # the process list's signal and search keys, from the cards too
        Binding("T", "processes('signal', 'TERM')", "SIGTERM", show=False),
        Binding("K", "processes('signal', 'KILL')", "SIGKILL", show=False),
        Binding("I", "processes('signal', 'INT')", "SIGINT", show=False),
        Binding("slash", "processes('search')", "Search", key_display="/", show=False),
        Binding("J", "processes('job_view')", "Job", show=False),
        CHARTS,
    ]

    @classmethod
    def help_sections(cls) -> list[tuple[str, list[BindingType]]]:
        from gputui.ui.detail.screen import GpuDetailScreen

        return [
            (
                f"{cls.TAB_TITLE} tab ({cls.TAB_KEY})",
                [
                    *cls.KEYS,
                    CHARTS,
                    Binding(
                        "tab",
                        "focus_next",
                        "Processes",
                        tooltip="Move between the cards and the process list below them "
                        "(enter, /, J, T, K and I work there as on the Processes tab; /, T, K and I "
                        "from the cards too, and J for the job of the verdict line)",
                    ),
                ],
            ),
            ("GPU detail view (enter on a card)", list(GpuDetailScreen.BINDINGS)),
        ]

    DEFAULT_CSS = """
    OverviewPane { layout: vertical; }
    OverviewPane #gpus { height: auto; overflow-y: hidden; scrollbar-size-vertical: 1; }
    """

    def __init__(self, hub: Hub, context: PaneContext = LOCKED) -> None:
        super().__init__(hub, context)
        self.processes = ProcessList(hub, context, overview=True, id="overview-processes")
        """The process list under the cards, in the first frame (mounted later, it drew the
        whole screen a second time a few hundred ms after the first)."""
        self._host_height: tuple[tuple[int, bool], int] = ((-1, False), 0)
        """((width, sampled), the host panel's lines then)."""

    def compose(self) -> ComposeResult:
        with CardScroll(id="gpus"):
            yield NoGpuPanel(id="nogpu")
            yield GpuBoard(self.hub, id="board", card=self.context.config.cards)
        yield self.processes
        yield HostPanel(id="host")

    def on_mount(self) -> None:
        self.query_one(NoGpuPanel).display = False
        self.query_one(GpuBoard).budget = self._board_budget

    def on_show(self) -> None:
        board = self.query_one(GpuBoard)
        if not board.has_focus:  # (focus() repaints even the focused widget)
            board.focus()

    def _board_budget(self) -> int:
        """Lines the cards may plan for: the pane less the host panel and PROC_ROWS."""
        return self._room() - PROC_ROWS

    def _room(self) -> int:
        """Lines for the cards and the process list together."""
        host = self.query_one(HostPanel)
        width, height = self.size if self.size.height else self._expected_size()
        key = (width, host.snapshot is not None)
        if self._host_height[0] != key:  # (not rebuilt every tick: its lines follow the width)
            self._host_height = (key, len(host.build(key[0], 0)) if key[0] > 0 else 0)
        return max(0, height - self._host_height[1])

    def _expected_size(self) -> tuple[int, int]:
        """The pane's size before its first layout: the screen less the app's other rows
        (line widgets: the header, the banner, the tabs, the footer).  The first layout
        then plans the cards for the room they will have, rather than drawing them once
        for no room and again a moment later; on_resize corrects a wrong guess."""
        screen = self.screen
        width = screen.size.width
        outside = sum(
            len(w.build(width, 0)) for w in screen.children if isinstance(w, LineWidget) and w.display
        )
        return width, max(0, screen.size.height - outside)

    def _fit(self) -> None:
        """The cards get what their plan needs, the process list the rest (or its one line)."""
        board = self.query_one(GpuBoard)
        procs = self.processes
        if not board.display or board.plan is None:
            return
        if not self.size.height:
            return  # not laid out yet: on_resize fits it
        room = self._room()
        need = board.plan.lines
        fits = need <= room - PROC_ROWS
        # every GPU on screen comes first: when the cards need exactly the room, the
        # process line goes (the tab bar still says 2 lists them); when they need more,
        # they scroll anyway and the line stays
        procs.display = need != room
        # the cards' own height (auto) while they fit; else the room, less the list's line
        height = None if need < room else room - (need > room)
        gpus = self.query_one("#gpus")
        current = gpus.styles.height
        if height is None:
            if current is not None and not current.is_auto:
                gpus.styles.height = "auto"
        elif current is None or current.is_auto or current.value != height:
            gpus.styles.height = height
        # a scroll bar only where the cards scroll: one that comes and goes while the sizes
        # settle takes a column from the cards and redraws them twice more
        overflow = "auto" if need > room else "hidden"
        if gpus.styles.overflow_y != overflow:
            gpus.styles.overflow_y = overflow
        procs.set_room(fits)

    def action_processes(self, action: str, *args: str) -> None:
        procs = self.processes
        if not procs.display:
            return
        if action == "signal":
            procs.action_signal(args[0])
        elif action == "job_view":
            procs.open_verdicts_job()
        elif procs.room:
            procs.action_search()
        else:
            self.notify(
                f"No room for the process list here: press {PROCESSES_TAB_KEY} to list them.", timeout=3
            )

    def action_charts(self) -> None:
        from gputui.ui.overview.chart_picker import ChartPicker

        board = self.query_one(GpuBoard)
        self.app.push_screen(ChartPicker(board.card.sparklines, self.show_charts))

    def show_charts(self, chosen: tuple[str, ...]) -> None:
        """Draw `chosen` on the cards from now on, and remember them."""
        board = self.query_one(GpuBoard)
        board.card = replace(board.card, sparklines=chosen)
        self.post_message(ChartsChosen(chosen))
        board.relayout()
        self._fit()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "processes" and parameters and parameters[0] == "signal":
            return self.processes.check_signal()
        return True

    def on_gpu_selected(self, message: GpuSelected) -> None:
        self.processes.narrow_to(message.index)

    def show_info(self, info: MachineInfo) -> None:
        no_gpus = not info.devices
        nogpu = self.query_one(NoGpuPanel)
        nogpu.info = info
        nogpu.demo_available = self.context.sources.demo_available
        nogpu.display = no_gpus
        board = self.query_one(GpuBoard)
        board.display = not no_gpus
        if not no_gpus and self.display and self.screen.focused is None:
            board.focus()  # GPUs again (the demo opened from the no-GPU screen): keys work at once
        self.processes.show_info(info)
        self.processes.display = not no_gpus
        if no_gpus:  # the explanation takes the room, and scrolls on a small terminal
            gpus = self.query_one("#gpus")
            gpus.styles.height = "1fr"
            gpus.styles.overflow_y = "auto"
            nogpu.relayout()

    def show_snapshot(self, info: MachineInfo | None, snapshot: Snapshot) -> None:
        board = self.query_one(GpuBoard)
        if board.display:
            board.show(info, snapshot)
            self.processes.show_snapshot(info, snapshot)
            self._fit()
        self.query_one(HostPanel).show(info.system.hostname if info else "", snapshot)

    def on_resize(self) -> None:
        def again() -> None:
            self.query_one(GpuBoard).relayout()
            self._fit()

        self.call_after_refresh(again)  # (at once, the board's new height may be lost)
