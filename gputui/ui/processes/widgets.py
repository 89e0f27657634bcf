"""The processes view's widgets: the table (a LineWidget that diffs its cells), the summary
above it, the status line below it, and the search box."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Input

from gputui.ui.processes.lines import RowNote, column_spans, table_lines
from gputui.ui.processes.rows import Column, Ident, ProcessRow, RowKey, ViewState, place_cursor
from gputui.ui.render import Line
from gputui.ui.widgets.lines import LineWidget


class ProcessTable(LineWidget, can_focus=True):
    """The process rows: a header, then the rows that fit.  Only the visible rows are
    built; the cursor stays on the same process (by (GPU, PID)) across ticks, sorts and
    filters, and when its process ends it lands on the row that took its place."""

    DEFAULT_CSS = """
    ProcessTable { height: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "move(-1)", "Up", show=False, tooltip="Cursor up"),
        Binding("down,j", "move(1)", "Down", show=False, tooltip="Cursor down"),
        Binding("pageup", "page(-1)", "Page up", show=False, tooltip="One page up"),
        Binding("pagedown", "page(1)", "Page down", show=False, tooltip="One page down"),
        Binding("home", "edge(-1)", "First", show=False, tooltip="First row"),
        Binding("end", "edge(1)", "Last", show=False, tooltip="Last row"),
    ]

    @dataclass(eq=False)
    class SortRequested(Message):
        """A click on a column's title."""

        key: str

    @dataclass(eq=False)
    class RowClicked(Message):
        """A row was clicked (twice: `double`)."""

        row: ProcessRow
        double: bool

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[ProcessRow] = []
        """The rows in display order (filtered and sorted)."""
        self.state = ViewState()
        self.cursor = -1
        """Index into `rows` (-1: none)."""
        self.cursor_key: RowKey | None = None
        self.top = 0
        """Index of the first row on screen."""
        self.marks: set[Ident] = set()
        self.notes: dict[Ident, RowNote] = {}
        self.empty_text = "no GPU processes"
        self.columns: list[Column] = []

    # ---- data ------------------------------------------------------------------------

    @property
    def body_height(self) -> int:
        return max(1, self.size.height - 1)

    @property
    def current(self) -> ProcessRow | None:
        return self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None

    def set_rows(self, rows: list[ProcessRow], *, reordered: bool = False, to_top: bool = False) -> None:
        """New rows (a tick, or a new sort or filter: `reordered`): keep the cursor on its
        process; after a new sort (`to_top`) show the first rows, the cursor on the first."""
        if to_top:
            self.cursor, self.top, self.cursor_key = 0, 0, rows[0].key if rows else None
        keys = [r.key for r in rows]
        screen_row = self.cursor - self.top
        self.cursor, self.top = place_cursor(
            keys, self.cursor_key, self.cursor, screen_row, self.body_height, reordered=reordered
        )
        self.rows = rows
        if self.cursor >= 0:
            self.cursor_key = rows[self.cursor].key
        self.update_lines()

    def move_to(self, index: int) -> None:
        if not self.rows:
            return
        index = max(0, min(index, len(self.rows) - 1))
        body = self.body_height
        self.cursor = index
        self.cursor_key = self.rows[index].key
        if index < self.top:
            self.top = index
        elif index >= self.top + body:
            self.top = index - body + 1
        self.update_lines()

    # ---- drawing ---------------------------------------------------------------------

    def build(self, width: int, height: int) -> list[Line]:
        if height <= 0:
            return []
        body = max(0, height - 1)
        # the view may have grown (resize): keep it full
        self.top = max(0, min(self.top, max(0, len(self.rows) - body)))
        if self.cursor >= 0 and body and self.cursor >= self.top + body:
            self.top = self.cursor - body + 1
        cols, lines = table_lines(
            self.rows,
            self.state,
            width,
            height,
            top=self.top,
            cursor=self.cursor,
            focused=self.has_focus,
            marks=self.marks,
            notes=self.notes,
            empty_text=self.empty_text,
        )
        self.columns = cols
        return lines

    # ---- keys and mouse --------------------------------------------------------------

    def action_move(self, delta: int) -> None:
        self.move_to(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        self.move_to(self.cursor + direction * max(1, self.body_height - 1))

    def action_edge(self, direction: int) -> None:
        self.move_to(0 if direction < 0 else len(self.rows) - 1)

    def on_focus(self) -> None:
        # Widget._on_focus sets has_focus after this handler: redraw once it has
        self.call_later(self.update_lines)

    def on_blur(self) -> None:
        self.call_later(self.update_lines)

    def on_click(self, event: events.Click) -> None:
        if event.y == 0:
            for col, x0, x1 in column_spans(self.columns, self.size.width):
                if x0 <= event.x < x1 + 1:
                    self.post_message(self.SortRequested(col.key))
                    return
            return
        index = self.top + event.y - 1
        if 0 <= index < len(self.rows):
            self.move_to(index)
            self.post_message(self.RowClicked(self.rows[index], event.chain >= 2))

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self._scroll(3)
        event.stop()

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._scroll(-3)
        event.stop()

    def _scroll(self, delta: int) -> None:
        body = self.body_height
        top = max(0, min(self.top + delta, max(0, len(self.rows) - body)))
        if top == self.top:
            return
        self.top = top
        if (
            self.rows and self.cursor >= 0
        ):  # keep the cursor on screen, on the same screen row if it scrolled away
            if self.cursor < top:
                self.cursor = top
            elif self.cursor >= top + body:
                self.cursor = top + body - 1
            self.cursor_key = self.rows[self.cursor].key
        self.update_lines()


class SearchInput(Input):
    """`/`: the text typed filters the table as it is typed; enter keeps it, esc clears it."""

    DEFAULT_CSS = """
    /* :focus too: Textual's Input:focus border would take the one row, leaving no text */
    SearchInput, SearchInput:focus { height: 1; border: none; padding: 0 1; dock: bottom; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Clear search", tooltip="Clear the search and go back to the table"),
    ]

    class Cancelled(Message):
        pass

    def action_cancel(self) -> None:
        self.value = ""
        self.post_message(self.Cancelled())
