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

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container, VerticalScroll

from gputui.telemetry.model import MachineInfo, Snapshot
from gputui.ui.context import LOCKED, PaneContext
from gputui.ui.render import Line, S, line_len, pad_line
from gputui.ui.widgets.lines import LineWidget
from gputui.ui.widgets.overview import GpuBoard, HostPanel, NoGpuPanel

if TYPE_CHECKING:
    from gputui.telemetry.hub import Hub


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


class OverviewPane(Pane):
    """Every GPU (cards or compact rows) and the host; the no-GPU explanation instead of
    the GPUs when there are none."""

    PANE_ID = "overview"
    TAB_TITLE = "Overview"
    TAB_KEY = "1"
    KEYS = GpuBoard.BINDINGS

    @classmethod
    def help_sections(cls) -> list[tuple[str, list[BindingType]]]:
        from gputui.ui.detail import GpuDetailScreen

        return [
            *super().help_sections(),
            ("GPU detail view (enter on a card)", list(GpuDetailScreen.BINDINGS)),
        ]

    DEFAULT_CSS = """
    OverviewPane #gpus { height: 1fr; scrollbar-size-vertical: 1; }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="gpus"):
            yield NoGpuPanel(id="nogpu")
            yield GpuBoard(self.hub, id="board", card=self.context.config.cards)
        yield HostPanel(id="host")

    def on_mount(self) -> None:
        self.query_one(NoGpuPanel).display = False
        # the board takes the arrow keys (GPU selection); the container still scrolls
        # with the mouse and page keys
        self.query_one("#gpus").can_focus = False

    def on_show(self) -> None:
        self.query_one(GpuBoard).focus()

    def show_info(self, info: MachineInfo) -> None:
        no_gpus = not info.devices
        nogpu = self.query_one(NoGpuPanel)
        nogpu.info = info
        nogpu.demo_available = self.context.sources.demo_available
        nogpu.display = no_gpus
        self.query_one(GpuBoard).display = not no_gpus
        if no_gpus:
            nogpu.relayout()

    def show_snapshot(self, info: MachineInfo | None, snapshot: Snapshot) -> None:
        board = self.query_one(GpuBoard)
        if board.display:
            board.show(info, snapshot)
        self.query_one(HostPanel).show(info.system.hostname if info else "", snapshot)

    def on_resize(self) -> None:
        self.call_after_refresh(self.query_one(GpuBoard).relayout)


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

    def build(self, width: int, height: int) -> list[Line]:
        if len(self.tabs) < 2:
            return []
        line: Line = [(" ", None)]
        for pane_id, title, key in self.tabs:
            active = pane_id == self.current
            line.append((f" {key} ", S.tab_key_active if active else S.tab_key))
            line.append((f"{title} ", S.tab_active if active else S.tab))
            line.append((" ", None))
        if line_len(line) > width:  # narrow: keys and initials only
            line = [(" ", None)]
            for pane_id, title, key in self.tabs:
                active = pane_id == self.current
                line.append((f" {key} {title[:4]} ", S.tab_active if active else S.tab))
        return [pad_line(line, width)]
