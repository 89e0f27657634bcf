"""The overview's content as lines: the board (cards or compact rows) and the host panel.

Pure functions of the data (no Textual), so layouts are tested as text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.style import Style

from gputui.config import CardConfig
from gputui.telemetry.hints import Hint
from gputui.telemetry.model import (
    DeviceInfo,
    GpuProcess,
    GpuSample,
    HostSample,
    MachineInfo,
)
from gputui.ui.cards import activity_items, boxed, events_line, join_items, kv, metric, short_name, temp_color
from gputui.ui.render import (
    CYAN,
    GREEN,
    NA,
    Line,
    S,
    clean,
    fmt_gib,
    fmt_mhz,
    fmt_pct,
    fmt_rate,
    fmt_temp,
    fmt_uptime,
    fmt_watts,
    level_color,
    line_len,
    pad,
    pad_line,
    ratio,
    sparkline_rows,
)
from gputui.ui.widgets.card import DEFAULT_CARD, MIN_CARD_WIDTH, SeriesFn, card_height, gpu_card

if TYPE_CHECKING:
    from gputui.telemetry.alerts import Alert

MAX_SPARK_ROWS = 6


@dataclass(frozen=True)
class BoardLayout:
    """How the GPU board is laid out at a width and height."""

    compact: bool
    cols: int
    spark_rows: int
    lines: int
    """Total lines the board needs."""


def plan_layout(n_gpus: int, width: int, height: int, mode: str = "auto", charts: int = 3) -> BoardLayout:
    """Cards when they fit (as many columns as the width allows, sparklines as tall as the
    height allows), else one compact line per GPU.  mode: auto | cards | compact."""
    if n_gpus <= 0:
        return BoardLayout(True, 1, 0, 0)
    cols = max(1, min(n_gpus, width // MIN_CARD_WIDTH))
    rows = math.ceil(n_gpus / cols)
    if mode != "compact" and width >= MIN_CARD_WIDTH:
        for s in range(MAX_SPARK_ROWS, 0, -1):
            if rows * card_height(s, charts) <= height:
                return BoardLayout(False, cols, s, rows * card_height(s, charts))
        if mode == "cards":
            return BoardLayout(False, cols, 1, rows * card_height(1, charts))
    return BoardLayout(True, 1, 0, n_gpus)


def alert_label(alerts: Sequence[Alert] | None) -> str | None:
    """ "⚠ 86°C" (+N when there are more) for a GPU with active alerts."""
    if not alerts:
        return None
    from gputui.telemetry.alerts import short_text  # (alerts exist: so does the engine)

    more = f" +{len(alerts) - 1}" if len(alerts) > 1 else ""
    return "⚠ " + short_text(alerts[0]) + more


def compact_row(
    dev: DeviceInfo,
    g: GpuSample | None,
    series: SeriesFn,
    width: int,
    name_w: int = 14,
    alert: str | None = None,
    selected: bool = False,
) -> Line:
    """One line per GPU for many GPUs or small terminals: the essentials, by priority."""
    index_style = S.warn if alert else S.index
    if selected:
        index_style = index_style + Style(reverse=True)
    head: Line = [
        (f"{dev.index:>2}", index_style),
        (" ", None),
        (pad(clean(short_name(dev.name)), name_w), S.title),
    ]
    if g is None:
        return [*head, (" waiting…", S.dim)]
    if g.lost:
        return [*head, (" GPU LOST ", S.lost), (" fell off the bus; see dmesg (Xid)", S.bad)]
    mem_frac = ratio(g.mem_used, dev.memory_total)
    limit = g.power_limit or dev.power_limit
    ev_text, ev_style = events_line(g.clock_event_reasons)
    flag: Line = [(ev_text.replace("clocks: ", ""), ev_style)] if ev_style in (S.bad, S.warn) else []
    if alert:
        flag = [(alert, S.warn)]
    util_part = metric("UTIL", ratio(g.gpu_util, 100), fmt_pct(g.gpu_util), GREEN, 20, 5, 5)
    mem_used = "N/A" if g.mem_used is None else f"{g.mem_used / 2**30:.0f}"
    mem_total = "?" if dev.memory_total is None else f"{dev.memory_total / 2**30:.0f}G"
    mem_part = metric("MEM", mem_frac, f"{mem_used}/{mem_total}", level_color(mem_frac), 22, 4, 9)
    temp: Line = [(pad(fmt_temp(g.temperature), 5, ">"), Style(color=temp_color(g.temperature, dev)))]
    power: Line = [(pad(fmt_watts(g.power_draw, limit), 9, ">"), S.value)]
    clock: Line = [(pad(fmt_mhz(g.sm_clock), 8, ">"), S.value)]
    items = [util_part, mem_part, temp, power, clock]
    out: Line = [*head]
    used = line_len(out)
    for item in items:
        n = line_len(item) + 1
        if used + n > width:
            break
        out.append((" ", None))
        out.extend(item)
        used += n
    rest = width - used - 1 - (line_len(flag) + 1 if flag else 0)
    if rest >= 8:
        spark = sparkline_rows(series(dev.index, "gpu_util", rest), rest, 1, 100.0)[0]
        out += [(" ", None), (spark, S.spark_util)]
        used += rest + 1
    if flag and used + line_len(flag) + 1 <= width:
        out += [(" ", None), *flag]
    return out


def compact_detail(
    dev: DeviceInfo,
    g: GpuSample | None,
    procs: Sequence[GpuProcess],
    series: SeriesFn,
    width: int,
    name_w: int = 14,
    alert: str | None = None,
    hints: Sequence[Hint] = (),
) -> Line:
    """The second line of a GPU in the compact layout: activity (GPM) and its hint,
    processes, link, P-state; the clock-event reasons when the first line had no room for
    them (an alert took their place), so nothing is said twice."""
    indent = 3 + name_w
    if g is None or g.lost:
        return []
    n = len(procs)
    used = sum(p.gpu_memory or 0 for p in procs)
    ev_text, ev_style = events_line(g.clock_event_reasons)
    link = NA if g.pcie_gen is None else f"Gen{g.pcie_gen} x{g.pcie_width}"
    activity, activity_prio = activity_items(g.gpm, hints)
    items: list[Line] = [
        *activity,
        [(f"{n} proc{'s' if n != 1 else ''}" + (f" {fmt_gib(used)}" if n else ""), S.label)],
        kv("PCIe", link),
        kv("RX", fmt_rate(g.pcie_rx)),
        kv("TX", fmt_rate(g.pcie_tx)),
        [(f"P{g.pstate}" if g.pstate is not None else "P-state " + NA, S.value)],
    ]
    prio = [*activity_prio, 3, 6, 7, 7, 8]
    shown_above = ev_style in (S.bad, S.warn) and not alert
    if not shown_above and ev_style in (S.bad, S.warn):
        items.insert(0, [(ev_text, ev_style)])
        prio.insert(0, 0)
    out: Line = [(" " * indent, None)]
    out += join_items(items, width - line_len(out), "  ", prio)
    return out


def board_lines(
    info: MachineInfo,
    gpus: dict[int, GpuSample],
    procs_by_gpu: dict[int, list[GpuProcess]],
    series: SeriesFn,
    width: int,
    height: int,
    mode: str = "auto",
    selected: int | None = None,
    alerts: Mapping[int, Sequence[Alert]] | None = None,
    card: CardConfig = DEFAULT_CARD,
    hints: Mapping[int, Sequence[Hint]] | None = None,
) -> tuple[BoardLayout, list[Line]]:
    devices = info.devices
    charts = len(card.sparklines)
    layout = plan_layout(len(devices), width, height, mode, charts)
    labels = {i: alert_label(a) for i, a in (alerts or {}).items()}
    if not devices:
        return layout, []
    if layout.compact:
        name_w = min(14, max(len(short_name(d.name)) for d in devices))
        two = len(devices) * 2 <= height
        rows: list[Line] = []
        for d in devices:
            g = gpus.get(d.index)
            label = labels.get(d.index)
            rows.append(compact_row(d, g, series, width, name_w, label, selected == d.index))
            if two:
                gpu_hints = (hints or {}).get(d.index, ())
                procs = procs_by_gpu.get(d.index, [])
                rows.append(compact_detail(d, g, procs, series, width, name_w, label, gpu_hints))
        return BoardLayout(True, 1, 0, len(rows)), rows
    lines: list[Line] = []
    cols = layout.cols
    base_w = width // cols
    for start in range(0, len(devices), cols):
        row_devs = devices[start : start + cols]
        cards = []
        for k, d in enumerate(row_devs):
            w = base_w + (width - base_w * cols if k == cols - 1 else 0)
            cards.append(
                gpu_card(
                    d,
                    gpus.get(d.index),
                    procs_by_gpu.get(d.index, []),
                    series,
                    w,
                    layout.spark_rows,
                    selected == d.index,
                    labels.get(d.index),
                    card,
                    (hints or {}).get(d.index, ()),
                )
            )
        for y in range(card_height(layout.spark_rows, charts)):
            line: Line = []
            for box in cards:
                line.extend(box[y])
            lines.append(line)
    return layout, lines


# --------------------------------------------------------------------------------------
# host panel
# --------------------------------------------------------------------------------------


def cores_per_glyph(n: int, width: int) -> int:
    """How many CPUs share one glyph of the cores strip (1 when each has its own)."""
    return 1 if n <= width or width <= 0 else math.ceil(n / width)


def core_strip(per_cpu: Sequence[float], width: int) -> str:
    """One glyph per core (busiest of each group when there are more cores than cells)."""
    if not per_cpu or width <= 0:
        return ""
    size = cores_per_glyph(len(per_cpu), width)
    vals = [max(per_cpu[i : i + size]) for i in range(0, len(per_cpu), size)]
    return sparkline_rows(vals, len(vals), 1, 100.0)[0].replace(" ", "▁")


def cores_item(per_cpu: Sequence[float], width: int) -> Line:
    """ "cores ▂▅█…" in `width` cells or less, saying "(N per glyph)" when CPUs share
    glyphs (each glyph then shows the busiest of its N)."""
    label = "  cores "
    strip_w = width - len(label)
    if cores_per_glyph(len(per_cpu), strip_w) > 1:
        strip_w = width - len("  cores (00 per glyph) ")
        label = f"  cores ({cores_per_glyph(len(per_cpu), strip_w)} per glyph) "
    return [(label, S.label), (core_strip(per_cpu, strip_w), S.spark_cpu)]


def host_lines(host: HostSample | None, hostname: str, width: int, compact: bool = False) -> list[Line]:
    ncpu = len(host.per_cpu) if host else 0
    load = host.load_avg if host else None
    load_text = " ".join(f"{v:.2f}" for v in load) if load else NA
    title: Line = [
        ("host ", S.label),
        (clean(hostname), S.title),
        (f" · {ncpu} CPUs" if ncpu else "", S.label),
    ]
    right: Line = [
        ("load ", S.label),
        (load_text, S.value),
        ("  up ", S.label),
        (fmt_uptime(host.uptime if host else None), S.value),
    ]
    if host is None:
        body: list[Line] = [[("waiting for the first sample…", S.dim)]]
        return body if compact else boxed(title, right, body, width)
    inner = width if compact else width - 4
    cpu_frac = ratio(host.cpu_percent, 100)
    mem_frac = ratio(host.mem_used, host.mem_total)
    swap_frac = ratio(host.swap_used, host.swap_total) if host.swap_total else 0.0
    cpu = metric(
        "CPU", cpu_frac, f"{host.cpu_percent:.1f}%" if host.cpu_percent is not None else NA, CYAN, 32, 4, 7
    )
    mem = metric("MEM", mem_frac, fmt_gib(host.mem_used, host.mem_total), level_color(mem_frac), 38, 4, 18)
    swap = metric(
        "SWP",
        swap_frac,
        fmt_gib(host.swap_used, host.swap_total) if host.swap_total else "none",
        level_color(swap_frac, 0.5, 0.8),
        30,
        4,
        16,
    )
    if compact:
        extra: Line = [("  load ", S.label), (load_text, S.value)]
        return [pad_line([*cpu, ("  ", None), *mem, ("  ", None), *swap, *extra], inner)]
    one = [*cpu, ("  ", None), *mem, ("  ", None), *swap]
    strip_w = inner - line_len(one) - 8
    if strip_w >= min(ncpu, 16):
        body = [[*one, *cores_item(host.per_cpu, inner - line_len(one))]]
    else:
        body = [
            [*cpu, *cores_item(host.per_cpu, inner - line_len(cpu))],
            [*mem, ("  ", None), *swap] if line_len(mem) + 2 + line_len(swap) <= inner else mem,
        ]
    return boxed(title, right, body, width)
