"""Themes as registered Textual themes: each carries gputui's palette as theme variables
(`$gputui-green`, ...), on Textual's dark or light base, so Textual's own widgets and the
stylesheet follow the theme too.

The line builders draw with the default palette (gputui/palette.py); the app returns, from
Textual's public `get_line_filters`, a `ColorRemap` from those colours to the current
theme's variables.  "mono" drops colour entirely (as NO_COLOR does).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

from rich.color import Color
from rich.segment import Segment
from rich.style import Style
from textual.filter import LineFilter, NoColor
from textual.theme import BUILTIN_THEMES, Theme

from gputui.palette import DEFAULT_PALETTE, LIGHT_THEMES, THEME_COLORS

if TYPE_CHECKING:
    from textual.color import Color as TextualColor

    from gputui.config import UiConfig

PREFIX = "gputui-"
"""Textual theme names and theme variables are gputui's palette names with this prefix."""


def textual_theme(ui: UiConfig) -> Theme:
    """The Textual theme of `[ui] theme`, with `[ui.colors]` applied."""
    base = BUILTIN_THEMES["textual-light" if ui.theme in LIGHT_THEMES else "textual-dark"]
    palette = {**DEFAULT_PALETTE, **THEME_COLORS.get(ui.theme, {}), **ui.colors}
    return dataclasses.replace(
        base,
        name=PREFIX + ui.theme,
        variables={**base.variables, **{PREFIX + k: v for k, v in palette.items()}},
    )


def palette_of(theme: Theme) -> dict[str, str]:
    """gputui's colours by name, as the Textual theme defines them."""
    return {k: theme.variables.get(PREFIX + k, v) for k, v in DEFAULT_PALETTE.items()}


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


def filters_for(theme: Theme, mono: bool = False) -> list[LineFilter]:
    """The line filters that draw `theme` (the app returns them from Textual's public
    `get_line_filters`, after Textual's own)."""
    if mono:
        return [NoColor()]
    mapping = {DEFAULT_PALETTE[k]: v for k, v in palette_of(theme).items() if DEFAULT_PALETTE[k] != v}
    return [ColorRemap(mapping)] if mapping else []
