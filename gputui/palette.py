"""The default colours by name: what a theme or `[ui.colors]` can change.

Colours from the xterm 256-colour cube, so an SSH session without COLORTERM=truecolor shows
exactly these (no nearest-colour guessing).  Standard library only: the config file's
reader and `--print-config` need the names and defaults without importing the UI.
"""

from __future__ import annotations

DEFAULT_PALETTE: dict[str, str] = {
    "green": "#5fd75f",
    "cyan": "#5fd7ff",
    "blue": "#5f87ff",
    "magenta": "#d787ff",
    "yellow": "#ffd75f",
    "orange": "#ffaf5f",
    "red": "#ff5f5f",
    "grey": "#8a8a8a",
    "dim": "#626262",
    "track": "#303030",
    "border": "#4e4e4e",
    "text": "#d0d0d0",
    "white": "#eeeeee",
}
PALETTE_NAMES: tuple[str, ...] = tuple(DEFAULT_PALETTE)
