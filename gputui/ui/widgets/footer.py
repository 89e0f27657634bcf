"""The footer: the screen's keys on one line, only those that fit whole.

Textual's Footer is a row of one widget per key, rebuilt (recomposed) each time the
screen's bindings change: on every focus change, and whenever an action is enabled or
disabled.  At start-up that was seven rebuilds of about 20 ms each and a repaint of the
screen after the first frame; and at 80 columns it cut the last key mid-word (`g Diagnos`,
`? H`).  This one is a line widget: it reads the same active bindings, redraws only when
the keys shown change, leaves out whole the keys that do not fit (each screen lists its
most important keys first; `?` lists them all), and a click on a key presses it.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from textual import events
from textual.screen import Screen

from gputui.ui.render import Line, S
from gputui.ui.widgets.lines import LineWidget


@dataclass(frozen=True, slots=True)
class FooterKey:
    """One key the footer offers."""

    key: str
    """The key pressed when it is clicked."""
    display: str
    description: str
    enabled: bool

    @property
    def width(self) -> int:
        """Cells: " k " then "description "."""
        width = cell_len(self.display) + 2
        return width + cell_len(self.description) + 1 if self.description else width


def fitting(keys: list[FooterKey], width: int) -> list[tuple[int, FooterKey]]:
    """(x, key) of the keys that fit whole in `width` cells, the first ones first."""
    out: list[tuple[int, FooterKey]] = []
    x = 0
    for key in keys:
        if x + key.width > width:
            break
        out.append((x, key))
        x += key.width
    return out


class KeyFooter(LineWidget):
    DEFAULT_CSS = """
    KeyFooter { dock: bottom; height: 1; background: $footer-background; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.keys: list[FooterKey] = []

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self._collect()

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[object]) -> None:
        if self.is_attached and screen is self.screen:
            self._collect()

    def _collect(self) -> None:
        keys = self._active_keys()
        if keys != self.keys:
            self.keys = keys
            self.update_lines()

    def _active_keys(self) -> list[FooterKey]:
        """The keys to show: one per action (its first binding's), as Textual's footer."""
        keys: list[FooterKey] = []
        actions: set[str] = set()
        for _node, binding, enabled, _tooltip in self.screen.active_bindings.values():
            if not binding.show or binding.action in actions:
                continue
            actions.add(binding.action)
            display = self.app.get_key_display(binding)
            keys.append(FooterKey(binding.key, display, binding.description, enabled))
        return keys

    def build(self, width: int, height: int) -> list[Line]:
        # the bindings as they are now: Textual sends its "bindings changed" only after the
        # refresh that follows a focus change, so the first frame (the board focused at the
        # screen's start) would show the keys from before the focus, then repaint
        self.keys = self._active_keys()
        line: Line = []
        for _x, key in fitting(self.keys, width):
            line += [
                (f" {key.display} ", S.footer_key if key.enabled else S.dim),
                (f"{key.description} " if key.description else "", S.label if key.enabled else S.dim),
            ]
        return [line]

    def on_click(self, event: events.Click) -> None:
        for x, key in fitting(self.keys, self.size.width):
            if x <= event.x < x + key.width:
                if key.enabled:
                    self.app.simulate_key(key.key)
                else:
                    self.app.bell()
                return
