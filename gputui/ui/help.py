"""The help screen: every key the app answers to, generated from the bindings themselves."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.dom import DOMNode
from textual.keys import key_to_character
from textual.screen import ModalScreen
from textual.widgets import Static

from gputui import __version__
from gputui.ui.panes import Pane, PaneSpec


def key_names(binding: Binding) -> str:
    """The binding's keys as a user types them: "! / u", not Textual's "exclamation_mark"."""
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
        "slash": "/",
        "greater_than_sign": ">",
        "less_than_sign": "<",
        "pageup": "pgup",
        "pagedown": "pgdn",
        "enter": "enter",
        "left": "←",
        "right": "→",
        "up": "↑",
        "down": "↓",
    }
    return " / ".join(names.get(k) or _character(k) for k in keys)


def _character(key: str) -> str:
    """A printable key's character (Textual names "!" exclamation_mark), else the name."""
    char = key_to_character(key)
    return char if char is not None and char.isprintable() and not char.isspace() else key


def binding_rows(bindings: list[BindingType]) -> list[tuple[str, str]]:
    rows = []
    for b in bindings:
        if not isinstance(b, Binding):
            continue
        rows.append((key_names(b), b.tooltip or b.description))
    return rows


def own_bindings(node: DOMNode) -> list[BindingType]:
    """The keys gputui's own classes give `node` (an app: its class's and its base's, such
    as ctrl+l from `BaseApp`), the subclass's first; not Textual's built-in ones."""
    return [
        binding
        for cls in type(node).__mro__
        if cls.__module__.startswith("gputui.")
        for binding in cls.__dict__.get("BINDINGS", ())
    ]


def _hidden(node: DOMNode, binding: BindingType) -> bool:
    if not isinstance(binding, Binding):
        return False
    action = binding.action.split("(", 1)[0]
    return node.check_action(action, ()) is False


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
    }
    HelpScreen > VerticalScroll {
        width: 84;
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

    def __init__(self, panes: Sequence[type[Pane] | PaneSpec] = (), current: str | None = None) -> None:
        super().__init__()
        self.panes = panes
        """The app's tabs, whose keys are listed with the app's own."""
        self.current = current
        """The tab on screen (its PANE_ID): its keys come first, then those that work
        everywhere, then the other tabs'."""

    def compose(self) -> ComposeResult:
        tabs: list[tuple[str, list[tuple[str | None, list[tuple[str, str]]]]]] = []
        for entry in self.panes:
            pane = entry.load() if isinstance(entry, PaneSpec) else entry
            mounted = list(self.app.query(pane.KEYS_WIDGET or pane))
            own: list[tuple[str | None, list[tuple[str, str]]]] = []
            for pane_title, bindings in pane.help_sections():
                # leave out what the tab hides (e.g. the kill keys with --readonly)
                shown = [b for b in bindings if not (mounted and _hidden(mounted[0], b))]
                own.append((pane_title, binding_rows(shown)))
            tabs.append((pane.PANE_ID, own))
        everywhere: tuple[str | None, list[tuple[str, str]]] = (
            "Everywhere" if tabs else None,
            binding_rows(own_bindings(self.app)),
        )
        first = [own for pane_id, own in tabs if pane_id == self.current]
        rest = [own for pane_id, own in tabs if pane_id != self.current]
        sections = [*(s for own in first for s in own), everywhere, *(s for own in rest for s in own)]
        self.sections = sections
        key_width = max((len(keys) for _, rows in sections for keys, _ in rows), default=8)
        parts: list[Text | Table] = []
        for heading, rows in sections:
            if heading is not None:
                parts.append(Text("\n" + heading, style="bold"))
            table = Table(box=None, show_header=False, padding=(0, 2, 0, 0))
            table.add_column(style="bold cyan", no_wrap=True, min_width=key_width)
            table.add_column()
            for keys, what in rows:
                table.add_row(Text(keys), Text(what))
            parts.append(table)
        title = Text.assemble((f"gputui {__version__}", "bold"), " — keys\n")
        with VerticalScroll():
            yield Static(title)
            yield Static(Group(*parts), id="keys")
            yield Static(Text("\nesc, q or ? closes this screen.", style="dim"))

    def help_text(self) -> str:
        """Everything the screen lists, as plain text (what scrolling would show)."""
        lines = []
        for heading, rows in self.sections:
            if heading:
                lines.append(heading)
            lines += [f"{keys}  {what}" for keys, what in rows]
        return "\n".join(lines)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)
