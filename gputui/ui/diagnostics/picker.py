"""The interpreter chooser (`e` on the Diagnostics tab): the environments found, or a typed path."""

from __future__ import annotations

import os
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from gputui.diag.interpreters import Interpreter, find_interpreters


class InterpreterPicker(ModalScreen[str | None]):
    """Choose the interpreter to diagnose: the environments found, or a typed path."""

    DEFAULT_CSS = """
    InterpreterPicker { align: center middle; }
    InterpreterPicker > Vertical {
        width: 100; max-width: 95%; height: auto; max-height: 80%;
        border: round $accent; background: $surface; padding: 0 1;
    }
    InterpreterPicker OptionList { height: auto; max-height: 16; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "Close")]

    def __init__(self, candidates: list[Interpreter], current: str) -> None:
        super().__init__()
        self.candidates = candidates
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text("Diagnose which Python?  (enter picks, esc closes)", style="bold"))
            options = [
                Option(
                    Text.assemble(
                        (c.path, "bold" if c.path == self.current else ""), ("  " + c.label, "dim")
                    ),
                    id=str(k),
                )
                for k, c in enumerate(self.candidates)
            ]
            yield OptionList(*options, id="candidates")
            yield Static(Text("or type a path:", style="dim"))
            yield Input(placeholder="/path/to/python", id="path")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.candidates[int(event.option.id or 0)].path)

    @on(Input.Submitted)
    def _typed(self, event: Input.Submitted) -> None:
        path = os.path.expanduser(event.value.strip())
        self.dismiss(path or None)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


def label_for(path: str, candidates: list[Interpreter] | None = None) -> str:
    for c in candidates if candidates is not None else find_interpreters():
        if os.path.abspath(c.path) == os.path.abspath(path):
            return c.label
    return "typed path"
