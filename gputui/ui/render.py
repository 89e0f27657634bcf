"""Pure rendering helpers: number formats, bars and sparklines as runs of styled text.

A line is a list of runs `(text, style)`; every character is one terminal cell (callers
pass text through `clean` first).  Runs of equal style are what cross the wire as one
colour escape, so these helpers emit as few runs as possible: a bar is two runs, a
sparkline row is one.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import Any

from rich.style import Style

from gputui.palette import DEFAULT_PALETTE
from gputui.telemetry.metric_types import Tint, Unit
from gputui.untrusted import label

Run = tuple[str, Style | None]
Line = list[Run]

NA = "N/A"

# The default palette (gputui/palette.py); themes remap it on the way to the terminal.
GREEN = DEFAULT_PALETTE["green"]
CYAN = DEFAULT_PALETTE["cyan"]
BLUE = DEFAULT_PALETTE["blue"]
MAGENTA = DEFAULT_PALETTE["magenta"]
YELLOW = DEFAULT_PALETTE["yellow"]
ORANGE = DEFAULT_PALETTE["orange"]
RED = DEFAULT_PALETTE["red"]
GREY = DEFAULT_PALETTE["grey"]
DIM = DEFAULT_PALETTE["dim"]
TRACK = DEFAULT_PALETTE["track"]
BORDER = DEFAULT_PALETTE["border"]
TEXT = DEFAULT_PALETTE["text"]
WHITE = DEFAULT_PALETTE["white"]
CURSOR = DEFAULT_PALETTE["cursor"]
"""The background of the process table's cursor row (focused)."""
CURSOR_DIM = DEFAULT_PALETTE["cursor_dim"]
"""The cursor row's background while the table is not focused."""


class S:
    """The styles used by the overview, built once."""

    text = Style(color=TEXT)
    label = Style(color=GREY)
    dim = Style(color=DIM)
    border = Style(color=BORDER)
    border_selected = Style(color=CYAN)
    border_alert = Style(color=YELLOW)
    title = Style(color=WHITE, bold=True)
    index = Style(color=CYAN, bold=True)
    index_selected = Style(color=CYAN, bold=True, reverse=True)
    value = Style(color=WHITE)
    ok = Style(color=GREEN)
    info = Style(color=CYAN)
    warn = Style(color=YELLOW, bold=True)
    bad = Style(color=RED, bold=True)
    lost = Style(color=RED, bold=True, reverse=True)
    banner = Style(color=YELLOW, reverse=True, bold=True)  # reverse: visible without colour
    live = Style(color=GREEN, bold=True)
    paused = Style(color=YELLOW, reverse=True, bold=True)
    spark_util = Style(color=GREEN)
    spark_mem = Style(color=MAGENTA)
    spark_power = Style(color=ORANGE)
    footer_key = Style(color=ORANGE, bold=True)
    spark_temp = Style(color=RED)
    spark_cpu = Style(color=CYAN)
    spark_clock = Style(color=BLUE)
    tab = Style(color=GREY)
    tab_key = Style(color=CYAN)
    tab_active = Style(color=WHITE, bold=True, underline=True)
    tab_key_active = Style(color=CYAN, bold=True, reverse=True)


_BAR_CACHE: dict[tuple[str, str], tuple[Style, Style]] = {}


def bar_styles(color: str) -> tuple[Style, Style]:
    key = (color, TRACK)
    styles = _BAR_CACHE.get(key)
    if styles is None:
        styles = _BAR_CACHE[key] = (Style(color=color, bgcolor=TRACK), Style(bgcolor=TRACK))
    return styles


# --------------------------------------------------------------------------------------
# text
# --------------------------------------------------------------------------------------


def clean(text: str) -> str:
    """Make untrusted text safe to draw as cells, for labels (GPU and host names): the
    rule of `gputui.untrusted.label` (controls lose their power and show as "?", whitespace
    controls as spaces, one character per cell).  Where the exact content matters (command
    lines, environment values) `gputui.untrusted.literal` escapes instead."""
    return label(text)


def fit(text: str, width: int) -> str:
    """Cut `text` to `width` cells, marking the cut with an ellipsis."""
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    return text[: width - 1] + "…" if width > 1 else text[:width]


def pad(text: str, width: int, align: str = "<") -> str:
    text = fit(text, width)
    if align == ">":
        return text.rjust(width)
    if align == "^":
        return text.center(width)
    return text.ljust(width)


def line_len(line: Line) -> int:
    return sum(len(t) for t, _ in line)


def pad_line(line: Line, width: int, style: Style | None = None) -> Line:
    """Crop or pad a line to exactly `width` cells."""
    out: Line = []
    used = 0
    for text, st in line:
        if used >= width:
            break
        piece = text if used + len(text) <= width else text[: width - used]
        out.append((piece, st))
        used += len(piece)
    if used < width:
        out.append((" " * (width - used), style))
    return out


# --------------------------------------------------------------------------------------
# numbers
# --------------------------------------------------------------------------------------

GIB = 2**30
MIB = 2**20


def fmt_pct(value: float | None) -> str:
    return NA if value is None else f"{value:.0f}%"


def fmt_gib(value: int | None, total: int | None = None) -> str:
    """Memory as nvidia-smi users read it: GiB with one decimal (MiB when small)."""
    if value is None:
        return NA
    if total is None:
        return f"{value / GIB:.1f} GiB" if value >= GIB else f"{value / MIB:.0f} MiB"
    return f"{value / GIB:.1f}/{total / GIB:.1f} GiB"


RATE_WIDTH = 9
"""The widest `fmt_rate` text ("99.9 GB/s"): a rate right-aligned in it keeps what follows still."""


def fmt_rate(bytes_per_s: float | None) -> str:
    """Decimal units, as link speeds are quoted: 14.5 GB/s."""
    if bytes_per_s is None:
        return NA
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("KB/s", 1e3)):
        if bytes_per_s >= scale:
            v = bytes_per_s / scale
            return f"{v:.1f} {unit}" if v < 100 else f"{v:.0f} {unit}"
    return f"{bytes_per_s:.0f} B/s"


def fmt_watts(draw: float | None, limit: float | None = None) -> str:
    if draw is None:
        return NA
    if limit is None:
        return f"{draw:.0f} W"
    return f"{draw:.0f}/{limit:.0f} W"


def fmt_mhz(value: int | None, maximum: int | None = None) -> str:
    if value is None:
        return NA
    return f"{value}/{maximum} MHz" if maximum else f"{value} MHz"


def fmt_temp(value: int | None) -> str:
    return NA if value is None else f"{value}°C"


def fmt_uptime(seconds: float | None) -> str:
    if seconds is None:
        return NA
    s = int(seconds)
    days, rem = divmod(s, 86400)
    hours, rem = divmod(rem, 3600)
    minutes = rem // 60
    return f"{days}d {hours:02d}:{minutes:02d}" if days else f"{hours:02d}:{minutes:02d}"


def _or_na(fmt: Callable[[Any], str]) -> Callable[[Any], str]:
    return lambda v: NA if v is None else fmt(v)


#: How a value of each registry unit reads on a card or chart (`fmt_value`).
UNIT_TEXT: dict[Unit, Callable[[Any], str]] = {
    "%": fmt_pct,
    "B": fmt_gib,
    "B/s": fmt_rate,
    "W": fmt_watts,
    "MHz": fmt_mhz,
    "°C": fmt_temp,
    "mJ": _or_na(lambda v: f"{v} mJ"),
    "count": _or_na(str),
    "pstate": _or_na(lambda v: f"P{v}"),
    "mask": _or_na(lambda v: f"0x{v:x}"),
    "flag": _or_na(lambda v: "yes" if v else "no"),
    "s": fmt_uptime,
    "text": _or_na(lambda v: clean(str(v))),
    "command": _or_na(str),
}


def fmt_value(unit: Unit, value: Any) -> str:
    """A registry quantity's value as a card or chart shows it."""
    return UNIT_TEXT[unit](value)


#: The chart colour of each registry tint.
TINT_STYLE: dict[Tint, Style] = {
    "util": S.spark_util,
    "mem": S.spark_mem,
    "power": S.spark_power,
    "temp": S.spark_temp,
    "clock": S.spark_clock,
    "io": S.spark_cpu,
}


def ratio(value: float | None, total: float | None) -> float | None:
    if value is None or not total:
        return None
    return max(0.0, min(1.0, value / total))


# --------------------------------------------------------------------------------------
# glyphs
# --------------------------------------------------------------------------------------

_EIGHTHS = " ▏▎▍▌▋▊▉█"
_LEVELS = " ▁▂▃▄▅▆▇█"


def bar(fraction: float | None, width: int, color: str) -> Line:
    """A horizontal bar in two runs: the filled part (with an eighth-cell tip) and the track."""
    if width <= 0:
        return []
    filled_style, track_style = bar_styles(color)
    if fraction is None:
        text = fit(NA, width).center(width)
        return [(text, Style(color=DIM, bgcolor=TRACK))]
    eighths = round(max(0.0, min(1.0, fraction)) * width * 8)
    full, part = divmod(eighths, 8)
    text = "█" * full + (_EIGHTHS[part] if part and full < width else "")
    return (
        [(text, filled_style), (" " * (width - len(text)), track_style)]
        if len(text) < width
        else [(text, filled_style)]
    )


def sparkline_rows(values: Sequence[float], width: int, rows: int = 1, top: float | None = None) -> list[str]:
    """The last `width` values as `rows` lines of block glyphs, newest on the right.

    Scaled to `top` (default: the largest value); NaN (no sample) draws as blank.  The
    chart is right-aligned so it grows from the right as history accumulates.
    """
    if width <= 0 or rows <= 0:
        return [""] * max(rows, 0)
    vals = list(values)[-width:]
    scale = top if top else max((v for v in vals if not math.isnan(v)), default=0.0)
    blank = " " * (width - len(vals))
    if scale <= 0:
        return [" " * width] * rows
    heights = "".join(map(_height, vals, repeat(scale), repeat(rows * 8)))
    return [blank + heights.translate(table) for table in _row_tables(rows)]


@functools.lru_cache(maxsize=8192)  # (a chart scrolls: the same values come back each tick)
def _height(value: float, scale: float, levels: int) -> str:
    """A value's height in a sparkline of `levels` eighths, as one character: NaN draws
    nothing, anything above 0 at least one eighth (something happened: show it)."""
    if math.isnan(value):
        return "\0"
    n = round(max(0.0, min(1.0, value / scale)) * levels)
    return chr(n or (1 if value > 0 else 0))


_ROW_TABLES: dict[int, list[dict[int, str]]] = {}


def _row_tables(rows: int) -> list[dict[int, str]]:
    """Per row of a `rows`-row sparkline (top first): height in eighths -> the row's glyph."""
    tables = _ROW_TABLES.get(rows)
    if tables is None:
        tables = _ROW_TABLES[rows] = [
            {n: _LEVELS[max(0, min(8, n - (rows - 1 - r) * 8))] for n in range(rows * 8 + 1)}
            for r in range(rows)
        ]
    return tables


def level_color(fraction: float | None, warn: float = 0.75, bad: float = 0.9) -> str:
    if fraction is None:
        return DIM
    if fraction >= bad:
        return RED
    if fraction >= warn:
        return YELLOW
    return GREEN


def ansi_lines(text: str) -> list[Line]:
    """ANSI-coloured text (e.g. plotext's output) as lines of styled runs.  Only SGR colour
    and attribute codes survive (rich parses them); other escapes are dropped, and the text
    goes through `clean`."""
    from rich.text import Text

    lines: list[Line] = []
    for raw in text.splitlines():
        parsed = Text.from_ansi(raw)
        runs: Line = []
        for span_text, style in _spans(parsed):
            runs.append((clean(span_text), style))
        lines.append(runs)
    return lines


def _spans(text: object) -> list[tuple[str, Style | None]]:
    """(text, style) pieces of a rich Text, in order, without rendering through a console."""
    from rich.text import Text

    assert isinstance(text, Text)
    plain = text.plain
    styles: list[Style | None] = [None] * len(plain)
    for span in text.spans:
        style = span.style if isinstance(span.style, Style) else Style.parse(str(span.style))
        for i in range(span.start, min(span.end, len(plain))):
            cur = styles[i]
            styles[i] = style if cur is None else cur + style
    out: list[tuple[str, Style | None]] = []
    for ch, st in zip(plain, styles, strict=True):
        if out and out[-1][1] == st:
            out[-1] = (out[-1][0] + ch, st)
        else:
            out.append((ch, st))
    return out


def plot_lines(build: Callable[[Any], None], width: int, height: int) -> list[Line]:
    """Run `build(plt)` on a fresh plotext figure of `width` x `height` cells and return the
    chart as lines.  plotext keeps global state: call this from one thread only (the UI)."""
    import plotext as plt

    plt.clear_figure()
    plt.plotsize(width, height)
    plt.theme("clear")
    build(plt)
    return ansi_lines(plt.build())
