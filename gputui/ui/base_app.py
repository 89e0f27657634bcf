"""The base of gputui's Textual apps: stock Textual, plus ctrl+l to repaint the screen."""

from __future__ import annotations

from typing import ClassVar, TypeVar

from textual.app import App
from textual.binding import Binding, BindingType

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

    def action_redraw(self) -> None:
        """Send the whole screen again: for when something else wrote to the terminal."""
        self.screen.refresh(repaint=True, layout=True)
