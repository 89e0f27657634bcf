"""Line pieces the GPU screens share (the Overview's cards and rows, the detail screen, the
topology tab, the cluster view): a rounded box, a labelled bar, items that fit a width, the
clock-event and GPM items, short GPU names.  Pure functions of the data (no Textual).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.style import Style

from gputui.telemetry.hints import Hint
from gputui.telemetry.metrics import temp_scale
from gputui.telemetry.model import (
    CLOCK_EVENT_QUIET_MASK,
    CLOCK_EVENT_SLOWDOWN_MASK,
    DeviceInfo,
    GpmSample,
    decode_clock_events,
)
from gputui.ui.render import (
    DIM,
    NA,
    Line,
    S,
    bar,
    clean,
    level_color,
    line_len,
    pad,
    pad_line,
)


def short_name(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'H100 80GB HBM3' for tight spaces."""
    for prefix in ("NVIDIA ", "Tesla ", "GeForce "):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def temp_color(temp: int | None, dev: DeviceInfo | None) -> str:
    if temp is None:
        return DIM
    limit = temp_scale(dev)
    return level_color(temp / limit, warn=(limit - 15) / limit, bad=(limit - 5) / limit)


def metric(
    label: str,
    fraction: float | None,
    value: str,
    color: str,
    width: int,
    label_w: int = 5,
    value_w: int = 15,
) -> Line:
    """'LABEL ▕bar▏ value' in exactly `width` cells."""
    bar_w = max(1, width - label_w - value_w - 1)
    return [
        (pad(label, label_w), S.label),
        *bar(fraction, bar_w, color),
        (pad(value, value_w, ">"), S.value),
    ]


def join_items(
    items: Sequence[Line],
    width: int,
    sep: str = "  ",
    priority: Sequence[int] | None = None,
    *,
    skip: bool = True,
) -> Line:
    """As many items as fit in `width`, separated by `sep`, shown in their given order.

    With `priority` (one number per item, lower first), items are chosen by priority when
    not all fit — a smaller, less important item takes the room a larger one left, unless
    `skip=False`: then nothing less important than an item that did not fit is shown.
    Without priority the first ones win."""
    order = sorted(range(len(items)), key=lambda k: priority[k]) if priority else range(len(items))
    chosen: set[int] = set()
    used = 0
    for k in order:
        extra = line_len(items[k]) + (len(sep) if chosen else 0)
        if used + extra > width:
            if priority and skip:
                continue
            break
        chosen.add(k)
        used += extra
    out: Line = []
    for k in sorted(chosen):
        if out:
            out.append((sep, S.dim))
        out.extend(items[k])
    return out


def kv(label: str, value: str, style: Style | None = None) -> Line:
    return [(label + " ", S.label), (value, style or S.value)]


def events_line(mask: int | None) -> tuple[str, Style]:
    """What the clock-event reasons say, and how loudly."""
    if mask is None:
        return "clocks: N/A", S.dim
    names = decode_clock_events(mask & ~CLOCK_EVENT_QUIET_MASK)
    if mask & CLOCK_EVENT_SLOWDOWN_MASK:
        return "⚠ " + ", ".join(names), S.bad
    if names:
        return "clocks: " + ", ".join(names), S.warn
    if mask & CLOCK_EVENT_QUIET_MASK:
        return "clocks: idle", S.dim
    return "clocks: full speed", S.ok


def _gpm_pct(v: float | None) -> str:
    return NA if v is None else f"{v:.0f}%"


def activity_items(w: GpmSample | None, hints: Sequence[Hint] = ()) -> tuple[list[Line], list[int]]:
    """What the SMs, tensor cores and memory did (GPM), then the first hint: items for
    `join_items` and their priorities.  N/A (with the reason, if it fits) where GPM gave
    nothing — never a 0."""
    items: list[Line]
    if w is not None and w.unavailable is None:
        items = [
            kv("SM act", _gpm_pct(w.sm_active)),
            kv("TENSOR", _gpm_pct(w.tensor_active)),
            kv("DRAM", _gpm_pct(w.dram_active)),
        ]
        prio = [1, 2, 4]
    elif w is not None:
        items = [[("GPM N/A", S.dim)], [(clean(w.unavailable or ""), S.dim)]]
        prio = [1, 5]
    else:
        items = [[(f"{label} ", S.label), (NA, S.dim)] for label in ("SM act", "TENSOR", "DRAM")]
        prio = [1, 2, 4]
    if hints:
        items.append([("» " + hints[0].short, S.warn)])
        prio.append(3)
    return items, prio


def boxed(
    title: Line, right: Line, body: list[Line], width: int, selected: bool = False, alert: bool = False
) -> list[Line]:
    """A rounded box `width` wide around `body`, with a title (left) and a note (right) on
    the top border; the note is dropped, then the title cut, when they don't fit.  The
    border is in the warning colour while `alert`."""
    border = S.border_alert if alert else S.border_selected if selected else S.border
    inner = width - 4
    avail = width - 6  # "╭─ " + title + ... + " ─╮"
    if line_len(title) + line_len(right) + 4 > avail:
        right = []
    if line_len(title) > avail:
        title = pad_line(title, avail)
    top: Line = [("╭─ ", border), *title]
    tail: Line = [(" ", border), *right, (" ─╮", border)] if right else [("─╮", border)]
    fill = width - line_len(top) - line_len(tail) - 1
    top.append((" " + "─" * max(0, fill), border))
    top.extend(tail)
    out = [pad_line(top, width, border)]
    for line in body:
        out.append([("│ ", border), *pad_line(line, inner), (" │", border)])
    out.append([("╰" + "─" * (width - 2) + "╯", border)])
    return out
