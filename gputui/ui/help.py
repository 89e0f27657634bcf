"""The help screen: every key the app answers to, generated from the bindings themselves."""

from __future__ import annotations

from typing import Any, ClassVar

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
        "enter": "enter",
        "left": "←",
        "right": "→",
        "up": "↑",
        "down": "↓",
    }
    return " / ".join(names.get(k, k) for k in keys)


def binding_rows(bindings: list[BindingType]) -> list[tuple[str, str]]:
    rows = []
    for b in bindings:
        if not isinstance(b, Binding):
            continue
        rows.append((key_names(b), b.tooltip or b.description))
    return rows


def help_sections(app: Any) -> list[tuple[str, list[BindingType]]]:
    """Every key: the app's, then each tab's (the pane's own bindings and its widgets',
    `Pane.KEYS`), then the GPU detail view's."""
    from gputui.ui.detail import GpuDetailScreen

    sections: list[tuple[str, list[BindingType]]] = [("", list(app.BINDINGS))]
    for pane in getattr(app, "PANES", []):
        own = [b for b in pane.BINDINGS if isinstance(b, Binding) and b.show]
        keys = [*own, *getattr(pane, "KEYS", [])]
        if keys:
            sections.append((f"{pane.TAB_TITLE} tab", keys))
    sections.append(("GPU detail view (enter)", list(GpuDetailScreen.BINDINGS)))
    return sections


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
        for section, bindings in help_sections(self.app):
            if section:
                table.add_row(Text(""), Text(""))
                table.add_row(Text(""), Text(section, style="bold"))
            for keys, what in binding_rows(bindings):
                table.add_row(Text(keys), Text(what))
        title = Text.assemble((f"gputui {__version__}", "bold"), " — keys\n")
        with VerticalScroll():
            yield Static(title)
            yield Static(table, id="keys")
            yield Static(Text("\nesc, q or ? closes this screen.", style="dim"))

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)
