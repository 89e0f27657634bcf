"""Themes: the palette of gputui/palette.py remapped as a Textual line filter.

Renderers keep using the default palette; a `ColorRemap` filter swaps colours on the way to
the terminal, so a theme or a `[ui.colors]` override changes every widget at once without
touching the line builders.  "mono" drops colour entirely (as NO_COLOR does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from rich.color import Color
from rich.segment import Segment
from rich.style import Style
from textual.filter import LineFilter, NoColor

from gputui.config import default_palette

if TYPE_CHECKING:
    from textual.color import Color as TextualColor

    from gputui.config import UiConfig

#: Named themes: palette name -> colour (xterm-256 colours: exact over SSH).
THEMES: dict[str, dict[str, str]] = {
    "default": {},
    # red/green colour-blindness: good/bad become blue/orange
    "colorblind": {"green": "#5fafff", "red": "#ff8700", "orange": "#d7af87"},
    "mono": {},
}


class ColorRemap(LineFilter):
    """Replaces foreground and background colours by triplet."""

    def __init__(self, mapping: Mapping[str, str]) -> None:
        super().__init__()
        self._map = {Color.parse(old).triplet: Color.parse(new) for old, new in mapping.items()}
        self._cache: dict[Style, Style] = {}

    def _style(self, style: Style) -> Style:
        out = self._cache.get(style)
        if out is None:
            color = self._map.get(style.color.triplet) if style.color is not None else None
            bg = self._map.get(style.bgcolor.triplet) if style.bgcolor is not None else None
            out = style + Style(color=color, bgcolor=bg) if color or bg else style
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[style] = out
        return out

    def apply(self, segments: list[Segment], background: TextualColor) -> list[Segment]:
        style_of = self._style
        return [
            Segment(text, style_of(style), control) if style is not None else Segment(text, style, control)
            for text, style, control in segments
        ]


def remap_for(ui: UiConfig) -> dict[str, str]:
    """Default colour -> themed colour, for the colours that change."""
    palette = default_palette()
    wanted = {**THEMES.get(ui.theme, {}), **ui.colors}
    return {palette[name]: colour for name, colour in wanted.items() if palette[name] != colour}


def filters_for(ui: UiConfig) -> list[LineFilter]:
    """The line filters that draw the theme (the app returns them from Textual's public
    `get_line_filters`, after Textual's own)."""
    if ui.theme == "mono":
        return [NoColor()]
    mapping = remap_for(ui)
    return [ColorRemap(mapping)] if mapping else []
