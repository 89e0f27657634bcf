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
from textual.binding import Binding, BindingType
from textual.containers import Container
from textual.message import Message
from textual.widget import Widget

from gputui.telemetry.model import MachineInfo, Snapshot
from gputui.ui.context import LOCKED, PaneContext
from gputui.ui.render import Line, S, line_len, pad_line
from gputui.ui.widgets.lines import LineWidget

if TYPE_CHECKING:
    from gputui.telemetry.hub import Hub


class Pane(Container):
    """One tab's content."""

    PANE_ID: ClassVar[str] = ""
    TAB_TITLE: ClassVar[str] = ""
    TAB_KEY: ClassVar[str] = ""
    KEYS: ClassVar[list[BindingType]] = []
    """The keys of the pane's widgets (they act while the tab is shown), for the help screen."""
    KEYS_WIDGET: ClassVar[type[Widget] | None] = None
    """The widget whose keys the tab lists, when they are not the pane's own: the help
    screen asks a mounted one which of them it hides (e.g. T K I in a replay)."""

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


def tab_bindings(panes: list[type[Pane] | PaneSpec]) -> list[Binding]:
    return [
        Binding(
            p.TAB_KEY,
            f"show_tab('{p.PANE_ID}')",
            p.TAB_TITLE,
            show=False,
            tooltip=f"Show the {p.TAB_TITLE} tab",
        )
        for p in panes
        if p.TAB_KEY
    ]
