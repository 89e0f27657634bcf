"""The Processes tab: every process on every GPU, sorted and filtered, and signalled safely.

The tab is one `ProcessList` (gputui.ui.processes.process_list), the same widget the
Overview composes under its cards: its table, keys and signal path are the list's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import events
from textual.app import ComposeResult
from textual.binding import BindingType

from gputui.telemetry.model import MachineInfo, Snapshot
from gputui.ui.context import LOCKED, PaneContext
from gputui.ui.panes import Pane
from gputui.ui.processes.process_list import PROCESSES_TAB_KEY, ProcessList

if TYPE_CHECKING:
    from gputui.telemetry.hub import Hub


class ProcessesPane(Pane):
    """Every process on every GPU: sort, filter, search, inspect, signal."""

    PANE_ID = "processes"
    TAB_TITLE = "Processes"
    TAB_KEY = PROCESSES_TAB_KEY
    KEYS_WIDGET = ProcessList
    """(The Overview's list is mounted before this tab is: the help asks it.)"""

    DEFAULT_CSS = """
    ProcessesPane { layout: vertical; }
    """

    def __init__(self, hub: Hub, context: PaneContext = LOCKED) -> None:
        super().__init__(hub, context)
        self.list = ProcessList(hub, context, id="proc-list")

    def compose(self) -> ComposeResult:
        yield self.list

    def on_show(self, event: events.Show) -> None:
        self.list.focus_list()

    def show_info(self, info: MachineInfo) -> None:
        self.list.show_info(info)

    def show_snapshot(self, info: MachineInfo | None, snapshot: Snapshot) -> None:
        self.list.show_snapshot(info, snapshot)

    @classmethod
    def help_sections(cls) -> list[tuple[str, list[BindingType]]]:
        return ProcessList.help_sections(f"{cls.TAB_TITLE} tab ({cls.TAB_KEY})")
