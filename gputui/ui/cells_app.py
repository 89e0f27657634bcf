"""A Textual app that sends the terminal only the cells that changed (see
`_textual_patch.TerminalCells`), and redraws everything on ctrl+l."""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

from textual import events
from textual.app import App
from textual.binding import Binding, BindingType

from gputui.ui import _textual_patch

ReturnType = TypeVar("ReturnType")


class CellsApp(App[ReturnType]):
    """gputui's apps: Textual's, with its screen updates cut to what the terminal does not
    already show.  On a Textual version the cutting was not checked on, it is Textual's."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "ctrl+l",
            "redraw",
            "Redraw",
            show=False,
            tooltip="Repaint the whole screen (after another program wrote over it)",
        ),
    ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.terminal_cells = _textual_patch.TerminalCells() if _textual_patch.install() else None
        """What the terminal shows, as sent; None where Textual's updates go out as they are."""

    def _display(self, screen: Any, renderable: Any) -> None:
        cells = self.terminal_cells
        patch = _textual_patch
        if cells is not None and patch.is_screen_update(renderable) and patch.will_write(self):
            size = screen.outer_size  # (the layout the update was drawn for)
            text = cells.changes(renderable, self.console, (size.width, size.height))
            cursor = self.screen.outer_size.clamp_offset(self.cursor_position)
            position = (cursor.x, cursor.y)
            if not text and position == cells.cursor:
                self.post_display_hook()
                return  # the terminal already shows all of it: send nothing, not even a sync
            cells.cursor = position
            renderable = _textual_patch.sent_update(text)
        super()._display(screen, renderable)

    def on_mount(self) -> None:
        # (immediate: before any paint that follows; a suspend leaves the alternate screen)
        self.app_suspend_signal.subscribe(self, self._forget_terminal, immediate=True)
        self.app_resume_signal.subscribe(self, self._terminal_back, immediate=True)

    def on_resize(self, event: events.Resize) -> None:
        cells = self.terminal_cells
        if cells is not None and cells.size != (event.size.width, event.size.height):
            # a terminal may clear or reflow on a resize, even on one undone before the next
            # paint (where Textual, back at the size it drew, would repaint nothing)
            self._terminal_back()

    def _forget_terminal(self, _app: object = None) -> None:
        if self.terminal_cells is not None:
            self.terminal_cells.reset()

    def _terminal_back(self, _app: object = None) -> None:
        self._forget_terminal()
        self.refresh()

    def action_redraw(self) -> None:
        """Send the whole screen again: for when something else wrote to the terminal."""
        self._forget_terminal()
        self.refresh()
