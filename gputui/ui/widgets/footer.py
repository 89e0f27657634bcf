"""The footer: Textual's, showing only the keys that fit whole.

Textual's Footer lays its keys out in one scrolling row and cuts the last one at the edge
(`g Diagnos`, `? H` at 80 columns).  This one leaves out, whole, the keys that do not fit;
the first ones (each screen lists its most important keys first) stay.  `?` lists them all.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey


def key_width(key: FooterKey) -> int:
    """Cells of a key in the footer's (non-compact) style: " k " then "description "."""
    width = cell_len(key.key_display) + 2
    return width + cell_len(key.description) + 1 if key.description else width


class WholeKeyFooter(Footer):
    def compose(self) -> ComposeResult:
        room = self.size.width or self.app.size.width
        used = 0
        for widget in super().compose():
            if isinstance(widget, FooterKey):
                used += key_width(widget)
                if used > room:
                    return
            yield widget

    def on_resize(self, event: events.Resize) -> None:
        self.call_after_refresh(self.recompose)
