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
    "cursor": "#005f87",
    "cursor_dim": "#3a3a3a",
}
PALETTE_NAMES: tuple[str, ...] = tuple(DEFAULT_PALETTE)

#: gputui's themes: the colours each changes from the default, and whether it is light.
THEME_COLORS: dict[str, dict[str, str]] = {
    "default": {},
    # red/green colour-blindness: good/bad become blue/orange
    "colorblind": {"green": "#5fafff", "red": "#ff8700", "orange": "#d7af87"},
    # dark text on a light terminal background
    "light": {
        "green": "#008700",
        "cyan": "#0087af",
        "blue": "#005fd7",
        "magenta": "#8700af",
        "yellow": "#af8700",
        "orange": "#d75f00",
        "red": "#d70000",
        "grey": "#585858",
        "dim": "#8a8a8a",
        "track": "#d0d0d0",
        "border": "#a8a8a8",
        "text": "#262626",
        "white": "#000000",
        "cursor": "#afd7ff",
        "cursor_dim": "#dadada",
    },
    "mono": {},  # no colour at all (as NO_COLOR)
}
LIGHT_THEMES = frozenset({"light"})
