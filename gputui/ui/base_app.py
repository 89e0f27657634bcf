"""The base of gputui's Textual apps: stock Textual, its partial updates cropped to their
dirty cells where a probe allows (`textual_crop`), and ctrl+l to repaint the screen."""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

from textual.app import App
from textual.binding import Binding, BindingType

from gputui.ui import textual_crop

ReturnType = TypeVar("ReturnType")


class BaseApp(App[ReturnType]):
    """What the monitor and the cluster view share beyond Textual's App."""

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
        self.cropped_updates = textual_crop.install()
        """Partial screen updates go out cropped to their dirty cells (see textual_crop)."""

    def action_redraw(self) -> None:
        """Send the whole screen again: for when something else wrote to the terminal."""
        self.screen.refresh(repaint=True, layout=True)
