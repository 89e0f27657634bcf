"""The cluster screen's content as lines: one compact line per GPU grouped by host, the
summary line, and the order and filters of the list.  Pure functions of a `ClusterState`.

Everything from the network (host names, models, pods, errors) goes through `clean`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.style import Style

from gputui.cluster.model import ClusterGpu, ClusterState, HostState, Summary, gpu_flags
from gputui.telemetry.alerts import IdleRule
from gputui.telemetry.model import CLOCK_EVENT_SLOWDOWN_MASK
from gputui.ui.cards import events_line, metric, short_name, temp_color
from gputui.ui.render import (
    GREEN,
    Line,
    S,
    clean,
    fmt_pct,
    fmt_temp,
    fmt_watts,
    level_color,
    line_len,
    pad,
    pad_line,
    ratio,
)

#: filter key -> (flag it keeps, what the status line says); None keeps all.
FILTERS: dict[str, tuple[str | None, str]] = {
    "all": (None, "all GPUs"),
    "unhealthy": ("unhealthy", "unhealthy (down, Xid, ECC)"),
    "held_idle": ("held_idle", "memory held but idle"),
    "idle": ("idle", "idle"),
    "busy": ("busy", "busy"),
    "throttled": ("throttled", "throttled"),
    "xid": ("xid", "Xid errors"),
    "ecc": ("ecc", "ECC errors"),
    "down": ("down", "exporter down"),
}
SORTS = ("host", "util", "memory", "power", "temp", "problems")


def _problem_rank(flags: frozenset[str]) -> int:
    for k, f in enumerate(("down", "xid", "ecc", "throttled", "held_idle")):
        if f in flags:
            return k
    return 9


SORT_KEYS: dict[str, Callable[[ClusterGpu, frozenset[str]], float]] = {
    "util": lambda g, f: -(g.sample.gpu_util if g.sample.gpu_util is not None else -1),
    "memory": lambda g, f: -(g.sample.mem_used if g.sample.mem_used is not None else -1),
    "power": lambda g, f: -(g.sample.power_draw if g.sample.power_draw is not None else -1),
    "temp": lambda g, f: -(g.sample.temperature if g.sample.temperature is not None else -1),
    "problems": lambda g, f: _problem_rank(f),
}


@dataclass(frozen=True)
class Row:
    host: HostState
    gpu: ClusterGpu | None
    """None: the host's own line (a down host without known GPUs)."""
    flags: frozenset[str]
    first: bool
    """The first row of its host (the host name is written on it)."""


def rows(state: ClusterState, rule: IdleRule, sort: str = "host", filt: str = "all") -> list[Row]:
    want = FILTERS[filt][0]
    out: list[Row] = []
    for h in sorted(state.hosts, key=lambda h: h.name):
        if not h.gpus:
            flags = frozenset({"down", "unhealthy"}) if not h.up else frozenset()
            if want is None or want in flags:
                out.append(Row(h, None, flags, True))
            continue
        for g in h.gpus:
            flags = gpu_flags(g, h.up, rule)
            if want is None or want in flags:
                out.append(Row(h, g, flags, False))
    if sort != "host":
        key = SORT_KEYS[sort]
        out.sort(key=lambda r: (key(r.gpu, r.flags) if r.gpu else -1e18, r.host.name))
        return [Row(r.host, r.gpu, r.flags, True) for r in out]
    last = None
    marked = []
    for r in out:
        marked.append(Row(r.host, r.gpu, r.flags, r.host.key != last))
        last = r.host.key
    return marked


FLAG_TEXT = (
    ("down", "DOWN", S.lost),
    ("xid", "XID", S.bad),
    ("ecc", "ECC", S.bad),
    ("throttled", "SLOWDOWN", S.bad),
    ("held_idle", "HELD IDLE", S.warn),
)


def host_width(state: ClusterState, width: int) -> int:
    longest = max((len(clean(h.name)) for h in state.hosts), default=4)
    return max(6, min(longest, 24, width // 5))


def row_line(r: Row, width: int, host_w: int, selected: bool = False, gpm: bool = False) -> Line:
    host_style = S.title + Style(reverse=True) if selected else S.title
    head: Line = [(pad(clean(r.host.name) if r.first or selected else "", host_w), host_style), (" ", None)]
    g = r.gpu
    if g is None:
        why = clean(r.host.error or "no GPU series")
        return [*head, (" DOWN ", S.lost), (" " + why, S.bad)] if not r.host.up else [*head, (why, S.dim)]
    s = g.sample
    dev = g.device
    out: Line = [*head, (f"{dev.index:>2} ", S.index), (pad(clean(short_name(dev.name)), 12), S.text)]
    flags: Line = []
    for f, text, style in FLAG_TEXT:
        if f in r.flags:
            shown, shown_style = (f"XID {s.xid_last}" if f == "xid" and s.xid_last else text), style
            if f == "throttled" and not (s.clock_event_reasons or 0) & CLOCK_EVENT_SLOWDOWN_MASK:
                shown, shown_style = "power cap", S.label  # at its power limit: held back, not in trouble
            flags += [(" ", None), (shown, shown_style)]
    if "down" in r.flags:
        why = clean(r.host.error or "")
        return [*out, *flags, (" " + why, S.bad)]
    mem_frac = ratio(s.mem_used, dev.memory_total)
    used = "N/A" if s.mem_used is None else f"{s.mem_used / 2**30:.0f}"
    total = "?" if dev.memory_total is None else f"{dev.memory_total / 2**30:.0f}G"
    items: list[Line] = [
        metric("", ratio(s.gpu_util, 100), fmt_pct(s.gpu_util), GREEN, 14, 0, 5),
        metric("", mem_frac, f"{used}/{total}", level_color(mem_frac), 17, 0, 9),
        [(pad(fmt_temp(s.temperature), 5, ">"), Style(color=temp_color(s.temperature, dev)))],
        [(pad(fmt_watts(s.power_draw), 6, ">"), S.value)],
    ]
    if gpm:
        tensor = None if s.gpm is None or s.gpm.tensor_active is None else s.gpm.tensor_active / 100
        items.append(
            [("T", S.label), (pad("N/A" if tensor is None else f"{tensor * 100:.0f}%", 4, ">"), S.value)]
        )
    for item in items:
        if line_len(out) + 1 + line_len(item) + line_len(flags) > width:
            break
        out += [(" ", None), *item]
    ev_text, ev_style = events_line(s.clock_event_reasons)
    work = clean(g.workload)
    rest = width - line_len(out) - line_len(flags) - 1
    if work and rest > 8:
        out += [(" ", None), (pad(work, min(rest - 1, 40)), S.info)]
    elif ev_style is S.bad and rest > 8 and "throttled" not in r.flags:
        out += [(" ", None), (pad(ev_text, rest - 1), ev_style)]
    return pad_line([*out, *flags], width) if flags else out


def summary_line(summary: Summary, state: ClusterState, width: int, stuck: int | None = None) -> Line:
    """GPUs and hosts, stuck jobs (where the exporters judge jobs: None is unknown, not 0),
    then the GPUs by state."""
    down = f" ({summary.hosts_down} down)" if summary.hosts_down else ""
    jobs: list[Line] = []
    if stuck is not None:
        jobs.append([("stuck jobs ", S.label), (str(stuck), S.lost if stuck else S.value)])
    items: list[Line] = [
        [(f"{summary.gpus} GPUs", S.title), (f" on {summary.hosts} hosts{down}", S.label)],
        *jobs,
        [("busy ", S.label), (str(summary.busy), S.ok)],
        [("idle ", S.label), (str(summary.idle), S.value)],
        [("reserved but idle ", S.label), (str(summary.held_idle), S.warn if summary.held_idle else S.value)],
        [("unhealthy ", S.label), (str(summary.unhealthy), S.bad if summary.unhealthy else S.value)],
        [("throttled ", S.label), (str(summary.throttled), S.warn if summary.throttled else S.value)],
    ]
    out: Line = [(" ", None)]
    for item in items:
        if line_len(out) + line_len(item) + 3 > width:
            break
        if len(out) > 1:
            out.append(("  ·  ", S.dim))
        out += item
    return out


def status_line(
    state: ClusterState | None, width: int, sort: str, filt: str, busy_for: float | None, refresh: float
) -> Line:
    """Source, age of the data, and what is slow or failing, plus sort and filter."""
    left: Line = []
    if state is None:
        left = [(" waiting for the first answer…", S.dim)]
    else:
        tail: Line = []
        if state.fetched_at:
            age = time.time() - state.fetched_at
            tail += [(f"  {time.strftime('%H:%M:%S', time.localtime(state.fetched_at))}", S.value)]
            if age > 3 * refresh:
                tail += [(f" ({age:.0f} s old)", S.warn)]
        if state.error:
            tail += [("  ✗ ", S.bad), (clean(state.error), S.bad)]
        if state.note:
            tail += [("  ⚠ ", S.warn), (clean(state.note), S.warn)]
        if state.jobs_left_out:
            tail += [(f"  ⚠ {state.jobs_left_out:,} job series over the caps left out", S.warn)]
        # the source (a URL) is cut before the error's reason is
        source = " " + clean(state.source)
        room = max(12, width - line_len(tail))
        left = [(pad(source, room) if len(source) > room else source, S.label), *tail]
    if busy_for is not None and busy_for > 2.0:
        left += [(f"  ⧗ waiting for an answer for {busy_for:.0f} s", S.warn)]
    right: Line = [
        ("sort ", S.label),
        (sort, S.value),
        ("  show ", S.label),
        (FILTERS[filt][1], S.warn if filt != "all" else S.value),
        (" ", None),
    ]
    gap = width - line_len(left) - line_len(right)
    if gap < 1:
        return pad_line(left, width)
    return [*left, (" " * gap, None), *right]


def visible(rows_: Sequence[object], cursor: int, top: int, height: int) -> int:
    """The first row to show so that the cursor is in view."""
    if height <= 0:
        return 0
    if cursor < top:
        return cursor
    if cursor >= top + height:
        return cursor - height + 1
    return max(0, min(top, max(0, len(rows_) - height)))
