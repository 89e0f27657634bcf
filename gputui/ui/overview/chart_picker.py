"""`C` on the Overview: tick the history charts each GPU card draws.  The cards follow each
tick at once; the choice is remembered with the other settings (gputui.state).  The
choices, their labels and the 1-to-4 limit come from the metric registry and the config
file's [cards] sparklines option, not from this screen."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import SelectionList, Static
from textual.widgets.selection_list import Selection

from gputui.config import CARD_SPARKLINES, CardConfig
from gputui.options import limits
from gputui.telemetry.metrics import GPU_METRIC


def chosen_after(current: tuple[str, ...], key: str, on: bool) -> tuple[str, ...]:
    """The charts after ticking (`on`) or unticking `key`: the others keep their order, a new
    one goes last (the bottom of the card)."""
    if on:
        return current if key in current else (*current, key)
    return tuple(k for k in current if k != key)


TICKED = "[x]"
UNTICKED = "[ ]"
"""Each line says whether its chart is on in a glyph, not only in the box's colour."""


def prompt(key: str, ticked: bool) -> Text:
    m = GPU_METRIC[key]
    return Text.assemble((TICKED if ticked else UNTICKED) + " ", (f"{m.label:<6}", "bold"), f" {m.doc}")


class ChartPicker(ModalScreen[None]):
    """The cards' charts, ticked as they are; space ticks, escape (or C) closes."""

    DEFAULT_CSS = """
    ChartPicker { align: center middle; }
    ChartPicker > Vertical {
        width: 72; max-width: 95%; height: auto; max-height: 90%;
        border: round $accent; background: $surface; padding: 0 1;
    }
    ChartPicker SelectionList { height: auto; max-height: 20; }
    ChartPicker #why { height: 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,C,q", "close", "Close", tooltip="Close (the charts stay as ticked)"),
    ]

    def __init__(self, current: tuple[str, ...], apply: Callable[[tuple[str, ...]], None]) -> None:
        super().__init__()
        self.current = current
        self.apply = apply
        self.least, self.most = limits(CardConfig, "sparklines")

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(
                Text(
                    f"Charts on each GPU card ({self.least} to {self.most}; space ticks, esc closes)",
                    style="bold",
                )
            )
            yield SelectionList[str](
                *(
                    Selection(prompt(k, k in self.current), k, k in self.current, id=k)
                    for k in CARD_SPARKLINES
                ),
                id="charts",
            )
            yield Static("", id="why")

    def on_mount(self) -> None:
        self.query_one(SelectionList).focus()

    @on(SelectionList.SelectionToggled)
    def _toggled(self, event: SelectionList.SelectionToggled[str]) -> None:
        key = event.selection.value
        ticked = key in event.selection_list.selected
        chosen = chosen_after(self.current, key, ticked)
        why = self.query_one("#why", Static)
        if not self.least <= len(chosen) <= self.most:
            with event.selection_list.prevent(SelectionList.SelectionToggled):
                if ticked:
                    event.selection_list.deselect(key)
                else:
                    event.selection_list.select(key)
            why.update(
                Text(
                    f"at least {self.least} chart: tick another before this one goes"
                    if len(chosen) < self.least
                    else f"at most {self.most} charts: untick one first",
                    style="bold",
                )
            )
            return
        why.update("")
        event.selection_list.replace_option_prompt(key, prompt(key, ticked))
        self.current = chosen
        self.apply(chosen)

    def action_close(self) -> None:
        self.dismiss(None)
