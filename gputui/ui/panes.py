"""Tabs: each is a Pane in the app's ContentSwitcher, listed in `GpuTuiApp.PANES`.

A pane gets the static facts once (`show_info`) and every tick while it is the visible tab
(`show_snapshot`); a hidden pane is not repainted, and gets the latest tick when it is shown
again.  To add a tab: subclass Pane, set PANE_ID/TAB_TITLE/TAB_KEY, and add the class to
`GpuTuiApp.PANES`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container, VerticalScroll
from textual.message import Message

from gputui.telemetry.model import MachineInfo, Snapshot
from gputui.ui.context import LOCKED, PaneContext
from gputui.ui.messages import GpuSelected
from gputui.ui.render import Line, S, line_len, pad_line
from gputui.ui.widgets.lines import LineWidget
from gputui.ui.widgets.overview import GpuBoard, HostPanel, NoGpuPanel

if TYPE_CHECKING:
    from gputui.telemetry.hub import Hub
    from gputui.ui.processes import OverviewProcesses


class Pane(Container):
    """One tab's content."""

    PANE_ID: ClassVar[str] = ""
    TAB_TITLE: ClassVar[str] = ""
    TAB_KEY: ClassVar[str] = ""
    KEYS: ClassVar[list[BindingType]] = []
    """The keys of the pane's widgets (they act while the tab is shown), for the help screen."""

    DEFAULT_CSS = """
    Pane { height: 1fr; }
    """

    def __init__(self, hub: Hub, context: PaneContext = LOCKED) -> None:
        super().__init__(id=self.PANE_ID)
        self.hub = hub
        self.context = context
        """The app's settings and source (read-only and sourceless unless the app says)."""

    def show_info(self, info: MachineInfo) -> None:
        """The static facts (a new source may bring new ones)."""

    def show_snapshot(self, info: MachineInfo | None, snapshot: Snapshot) -> None:
        """A tick, while this pane is visible."""

    @classmethod
    def help_sections(cls) -> list[tuple[str, list[BindingType]]]:
        """(title, bindings) for the help screen: the keys this tab adds (those shown in the
        footer or explained by a tooltip)."""
        bindings: list[BindingType] = [
            b for b in cls.BINDINGS if isinstance(b, Binding) and (b.show or b.tooltip)
        ]
        bindings += cls.KEYS
        return [(f"{cls.TAB_TITLE} tab ({cls.TAB_KEY})", bindings)] if bindings else []


@dataclass(frozen=True)
class PaneSpec:
    """A tab whose code is imported when it is first shown (or in the background shortly
    after start), not before the first frame: the overview is up before the other tabs'
    modules (processes, topology, diagnostics: ~150 ms of imports) have loaded."""

    PANE_ID: str
    TAB_TITLE: str
    TAB_KEY: str
    module: str
    name: str

    def load(self) -> type[Pane]:
        cls = getattr(importlib.import_module(self.module), self.name)
        if not (isinstance(cls, type) and issubclass(cls, Pane) and cls.PANE_ID == self.PANE_ID):
            raise TypeError(f"{self.module}.{self.name} is not the Pane {self.PANE_ID!r}")
        return cls

    def help_sections(self) -> list[tuple[str, list[BindingType]]]:
        return self.load().help_sections()


class PanePlaceholder(Pane):
    """Stands in for a tab that has not been opened yet (see PaneSpec)."""

    def __init__(self, hub: Hub, spec: PaneSpec, context: PaneContext = LOCKED) -> None:
        Container.__init__(self, id=spec.PANE_ID)
        self.hub = hub
        self.context = context
        self.spec = spec


PROC_ROWS = 6
"""Lines the Overview keeps for its process list under the cards (its summary, the column
titles and four rows) before the cards may grow taller sparklines."""


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
    ]

    @classmethod
    def help_sections(cls) -> list[tuple[str, list[BindingType]]]:
        from gputui.ui.detail import GpuDetailScreen

        return [
            (
                f"{cls.TAB_TITLE} tab ({cls.TAB_KEY})",
                [
                    *cls.KEYS,
                    Binding(
                        "tab",
                        "focus_next",
                        "Processes",
                        tooltip="Move between the cards and the process list below them "
                        "(T K I / enter work there as on the Processes tab; T K I / from the cards too)",
                    ),
                ],
            ),
            ("GPU detail view (enter on a card)", list(GpuDetailScreen.BINDINGS)),
        ]

    DEFAULT_CSS = """
    OverviewPane { layout: vertical; }
    OverviewPane #gpus { height: 1fr; scrollbar-size-vertical: 1; }
    """

    def __init__(self, hub: Hub, context: PaneContext = LOCKED) -> None:
        super().__init__(hub, context)
        self.processes: OverviewProcesses | None = None
        """The process list, mounted once the first frame with GPUs is up (its modules
        are not on the first frame's path)."""
        self._info: MachineInfo | None = None
        self._snapshot: Snapshot | None = None
        self._mounting = False
        self._host_height: tuple[tuple[int, bool], int] = ((-1, False), 0)
        """((width, sampled), the host panel's lines then)."""

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="gpus"):
            yield NoGpuPanel(id="nogpu")
            yield GpuBoard(self.hub, id="board", card=self.context.config.cards)
        yield HostPanel(id="host")

    async def _mount_processes(self) -> None:
        if self._mounting or not self.is_mounted or not self.app.is_running:
            return  # (once; the app may be shutting down)
        self._mounting = True
        from gputui.ui.processes import OverviewProcesses

        procs = OverviewProcesses(self.hub, self.context)
        await self.mount(procs, before=self.query_one(HostPanel))
        self.processes = procs  # ticks reach it from now on
        if self._info is not None:
            procs.show_info(self._info)
        procs.narrow_to(self.query_one(GpuBoard).selected)
        if self._snapshot is not None:
            procs.show_snapshot(self._info, self._snapshot)
        self._fit()

    def on_mount(self) -> None:
        self.query_one(NoGpuPanel).display = False
        # the board takes the arrow keys (GPU selection); the container still scrolls
        # with the mouse and page keys
        self.query_one("#gpus").can_focus = False
        self.query_one(GpuBoard).budget = self._board_budget

    def on_show(self) -> None:
        self.query_one(GpuBoard).focus()

    def _board_budget(self) -> int:
        """Lines the cards may plan for: the pane less the host panel and PROC_ROWS."""
        return self._room() - PROC_ROWS

    def _room(self) -> int:
        """Lines for the cards and the process list together."""
        host = self.query_one(HostPanel)
        key = (self.size.width, host.snapshot is not None)
        if self._host_height[0] != key:  # (not rebuilt every tick: its lines follow the width)
            self._host_height = (key, len(host.build(key[0], 0)) if key[0] > 0 else 0)
        return max(0, self.size.height - self._host_height[1])

    def _fit(self) -> None:
        """The cards get what their plan needs, the process list the rest (or its one line)."""
        board = self.query_one(GpuBoard)
        procs = self.processes
        if not board.display or board.plan is None or procs is None:
            return
        room = self._room()
        need = board.plan.lines
        fits = need <= room - PROC_ROWS
        # every GPU on screen comes first: when the cards need exactly the room, the
        # process line goes (the tab bar still says 2 lists them); when they need more,
        # they scroll anyway and the line stays
        procs.display = need != room
        height = need if need < room else room - (need > room)
        gpus = self.query_one("#gpus")
        if gpus.styles.height is None or gpus.styles.height.value != height:
            gpus.styles.height = height
        procs.set_room(fits)

    def action_processes(self, action: str, *args: str) -> None:
        procs = self.processes
        if procs is None or not procs.display:
            return
        if action == "signal":
            procs.action_signal(args[0])
        elif procs.room:
            procs.action_search()
        else:
            self.notify(f"No room for the process list here: press {procs.SHOWN_BY} to list them.", timeout=3)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "processes" and parameters and parameters[0] == "signal":
            return None if self.processes is None else self.processes.check_signal()
        return True

    def on_gpu_selected(self, message: GpuSelected) -> None:
        if self.processes is not None:
            self.processes.narrow_to(message.index)

    def show_info(self, info: MachineInfo) -> None:
        no_gpus = not info.devices
        nogpu = self.query_one(NoGpuPanel)
        nogpu.info = info
        nogpu.demo_available = self.context.sources.demo_available
        nogpu.display = no_gpus
        self.query_one(GpuBoard).display = not no_gpus
        self._info = info
        if self.processes is not None:
            self.processes.display = not no_gpus
        if no_gpus:
            self.query_one("#gpus").styles.height = "1fr"
            nogpu.relayout()

    def show_snapshot(self, info: MachineInfo | None, snapshot: Snapshot) -> None:
        board = self.query_one(GpuBoard)
        self._info, self._snapshot = info, snapshot
        if board.display:
            board.show(info, snapshot)
            if self.processes is None:
                self.call_after_refresh(self._mount_processes)  # after this first frame
            else:
                self.processes.show_snapshot(info, snapshot)
                self._fit()
        self.query_one(HostPanel).show(info.system.hostname if info else "", snapshot)

    def on_resize(self) -> None:
        def again() -> None:
            self.query_one(GpuBoard).relayout()
            self._fit()

        self.call_after_refresh(again)


class TabBar(LineWidget):
    """One line naming the tabs and their keys; hidden while there is only one tab."""

    DEFAULT_CSS = """
    TabBar { height: auto; }
    """

    def __init__(self, tabs: list[tuple[str, str, str]], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.tabs = tabs
        """(pane id, title, key) in order."""
        self.current = tabs[0][0] if tabs else ""
        self.spans: list[tuple[int, int, str]] = []
        """Each label's cells [x0, x1) and its pane (for clicks)."""

    @dataclass(eq=False)
    class Clicked(Message):
        """A click on a tab's label."""

        pane_id: str

    def build(self, width: int, height: int) -> list[Line]:
        self.spans = []
        if len(self.tabs) < 2:
            return []
        wide = self._line(width, narrow=False)
        line = wide if line_len(wide) <= width else self._line(width, narrow=True)
        return [pad_line(line, width)]

    def _line(self, width: int, *, narrow: bool) -> Line:
        """The labels (narrow: keys and initials only), noting where each one is."""
        line: Line = [(" ", None)]
        self.spans = []
        for pane_id, title, key in self.tabs:
            active = pane_id == self.current
            x0 = line_len(line)
            if narrow:
                line.append((f" {key} {title[:4]} ", S.tab_active if active else S.tab))
            else:
                line.append((f" {key} ", S.tab_key_active if active else S.tab_key))
                line.append((f"{title} ", S.tab_active if active else S.tab))
            self.spans.append((x0, line_len(line), pane_id))
            if not narrow:
                line.append((" ", None))
        return line

    def on_click(self, event: events.Click) -> None:
        for x0, x1, pane_id in self.spans:
            if x0 <= event.x < x1:
                self.post_message(self.Clicked(pane_id))
                return
