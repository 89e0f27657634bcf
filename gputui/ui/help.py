"""The help screen: every key the app answers to, generated from the bindings themselves."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gputui import __version__


def key_names(binding: Binding) -> str:
    keys = [k.strip() for k in binding.key.split(",")]
    names = {
        "question_mark": "?",
        "plus": "+",
        "equals_sign": "=",
        "minus": "-",
        "space": "space",
        "full_stop": ".",
        "comma": ",",
        "ctrl+c": "ctrl+c",
        "escape": "esc",
    }
    return " / ".join(names.get(k, k) for k in keys)


def binding_rows(bindings: list[BindingType]) -> list[tuple[str, str]]:
    rows = []
    for b in bindings:
        if not isinstance(b, Binding):
            continue
        rows.append((key_names(b), b.tooltip or b.description))
    return rows


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
    }
    HelpScreen > VerticalScroll {
        width: 76;
        max-width: 100%;
        height: auto;
        max-height: 90%;
        border: round $accent;
        background: $surface;
        padding: 0 1;
    }
    HelpScreen Static {
        width: 1fr;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark,f1", "dismiss", "Close", key_display="esc"),
    ]

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=False, padding=(0, 2, 0, 0))
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        for keys, what in binding_rows(list(self.app.BINDINGS)):
            table.add_row(Text(keys), Text(what))
        for pane in getattr(self.app, "PANES", []):
            own = [b for b in pane.BINDINGS if isinstance(b, Binding) and b.show]
            for keys, what in binding_rows(list(own)):
                table.add_row(Text(keys), Text(what))
        title = Text.assemble((f"gputui {__version__}", "bold"), " — keys\n")
        with VerticalScroll():
            yield Static(title)
            yield Static(table, id="keys")
            yield Static(Text("\nesc, q or ? closes this screen.", style="dim"))

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)
