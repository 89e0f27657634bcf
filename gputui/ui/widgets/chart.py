"""A line chart in braille dots, with a value axis and time labels, as plain lines of runs.

Each character cell holds 2 x 4 dots, so a chart W cells wide shows 2W points.  Samples are
placed by their timestamps (a pause in a live session or a gap in a recording stays a gap)
and, when there are more samples than dot columns, each column shows the mean of its
samples.  Pure: tested as text, drawn by a LineWidget.  Used where one chart is looked at
(the GPU detail view), rebuilt on a slow cadence there.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.style import Style

from gputui.ui.render import Line, S, pad

_BRAILLE = 0x2800
# dot bit for (x in 0..1, y in 0..3 from the top) within one cell
_DOTS = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))
GAP_FACTOR = 3.0
"""Consecutive samples further apart than this many median intervals are not joined."""


@dataclass(frozen=True)
class Series:
    values: Sequence[float]
    """Oldest first; NaN = no sample.  Aligned with the newest timestamps."""
    style: Style
    label: str = ""


def _columns(values: Sequence[float], times: Sequence[float], dots: int, t0: float, t1: float) -> list[float]:
    """Mean value per dot column (NaN where no sample falls)."""
    sums = [0.0] * dots
    counts = [0] * dots
    span = t1 - t0
    for v, t in zip(values, times, strict=False):
        if math.isnan(v):
            continue
        x = dots - 1 if span <= 0 else round((t - t0) / span * (dots - 1))
        x = max(0, min(dots - 1, x))
        sums[x] += v
        counts[x] += 1
    return [s / c if c else math.nan for s, c in zip(sums, counts, strict=True)]


def _joinable(times: Sequence[float], dots: int, t0: float, t1: float) -> float:
    """How many dot columns apart two consecutive samples may be and still be joined."""
    if len(times) < 2 or t1 <= t0:
        return 2.0
    steps = sorted(b - a for a, b in itertools.pairwise(times) if b > a)
    if not steps:
        return 2.0
    median = steps[len(steps) // 2]
    return max(2.0, GAP_FACTOR * median / (t1 - t0) * (dots - 1))


def braille_chart(
    series: Sequence[Series],
    times: Sequence[float],
    width: int,
    height: int,
    lo: float,
    hi: float,
    y_fmt: Callable[[float], str],
    t_fmt: Callable[[float], str],
) -> list[Line]:
    """`height` rows of plot, then the time axis and its labels: height + 2 lines, each
    exactly `width` cells."""
    labels = [y_fmt(hi), y_fmt((hi + lo) / 2), y_fmt(lo)]
    label_w = max(len(t) for t in labels) + 1
    plot_w = max(1, width - label_w - 1)
    dots_x, dots_y = plot_w * 2, height * 4
    cells = [[0] * plot_w for _ in range(height)]
    owner: list[list[Style | None]] = [[None] * plot_w for _ in range(height)]
    n = min(len(times), max((len(s.values) for s in series), default=0))
    times = list(times)[len(times) - n :] if n else []
    t0, t1 = (times[0], times[-1]) if times else (0.0, 0.0)
    scale = hi - lo if hi > lo else 1.0
    join = _joinable(times, dots_x, t0, t1)

    def dot(x: int, y: int, style: Style) -> None:  # y in dots from the bottom
        row = height - 1 - y // 4
        cells[row][x // 2] |= _DOTS[x % 2][3 - y % 4]
        owner[row][x // 2] = style

    for s in series:
        values = list(s.values)[len(s.values) - n :] if n else []
        cols = _columns(values, times, dots_x, t0, t1)
        prev: tuple[int, int] | None = None
        for x, v in enumerate(cols):
            if math.isnan(v):
                continue
            y = max(0, min(dots_y - 1, round((v - lo) / scale * (dots_y - 1))))
            if prev is not None and x - prev[0] <= join:
                # join to the previous point: a straight line, column by column
                x0, y0 = prev
                last = y0
                for xx in range(x0 + 1, x + 1):
                    yy = round(y0 + (y - y0) * (xx - x0) / (x - x0))
                    a, b = sorted((last, yy))
                    for yv in range(a, b + 1):
                        dot(xx, yv, s.style)
                    last = yy
            else:
                dot(x, y, s.style)
            prev = (x, y)

    if height > 2:
        label_rows = {0: labels[0], height // 2: labels[1], height - 1: labels[2]}
    else:
        label_rows = {0: labels[0], height - 1: labels[2]}
    out: list[Line] = []
    for r in range(height):
        text = label_rows.get(r)
        line: Line = [(pad(text or "", label_w - 1, ">") + " ", S.label), ("┤" if text else "│", S.dim)]
        run_style: Style | None = None
        run: list[str] = []
        for c in range(plot_w):
            ch = chr(_BRAILLE + cells[r][c]) if cells[r][c] else " "
            st = owner[r][c] if cells[r][c] else None
            if st is not run_style and run:
                line.append(("".join(run), run_style))
                run = []
            run_style = st
            run.append(ch)
        if run:
            line.append(("".join(run), run_style))
        out.append(line)
    out.extend(_time_axis(times, label_w, plot_w, t_fmt))
    return out


def _time_axis(
    times: Sequence[float], label_w: int, plot_w: int, t_fmt: Callable[[float], str]
) -> list[Line]:
    axis = ["─"] * plot_w
    text = [" "] * plot_w
    if times:
        t0, t1 = times[0], times[-1]
        size = len(t_fmt(t0))
        # centred labels, clamped at the ends: one every 1.5 labels + 2 cells at least
        ticks = max(1, (plot_w - 1) // (size + size // 2 + 2))
        last_end = -1
        for k in range(ticks + 1) if t1 > t0 else [ticks]:
            pos = round(k * (plot_w - 1) / ticks)
            t = t0 + (t1 - t0) * pos / max(1, plot_w - 1)
            label = t_fmt(t)
            start = min(max(0, pos - len(label) // 2), plot_w - len(label))
            if start <= last_end or start < 0:
                continue
            axis[pos] = "┬"
            text[start : start + len(label)] = list(label)
            last_end = start + len(label)
    return [
        [(" " * label_w, None), ("└" + "".join(axis), S.dim)],
        [(" " * (label_w + 1), None), ("".join(text), S.label)],
    ]
