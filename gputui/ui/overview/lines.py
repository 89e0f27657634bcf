"""The overview's content as lines: GPU cards, compact rows, the host panel, the header.

Pure functions of the data (no Textual), so layouts are tested as text.
"""

from __future__ import annotations

import math
import textwrap
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import EllipsisType

from rich.style import Style

from gputui.config import CardConfig
from gputui.telemetry.alerts import Alert, short_text
from gputui.telemetry.hints import Hint
from gputui.telemetry.metrics import CARD_ITEMS, GPU_METRIC, temp_scale
from gputui.telemetry.model import (
    CLOCK_EVENT_QUIET_MASK,
    CLOCK_EVENT_SLOWDOWN_MASK,
    DeviceInfo,
    GpmSample,
    GpuProcess,
    GpuSample,
    HostSample,
    MachineInfo,
    decode_clock_events,
)
from gputui.ui.render import (
    BLUE,
    CYAN,
    DIM,
    GREEN,
    NA,
    TINT_STYLE,
    Line,
    S,
    bar,
    clean,
    fmt_gib,
    fmt_mhz,
    fmt_pct,
    fmt_rate,
    fmt_temp,
    fmt_uptime,
    fmt_value,
    fmt_watts,
    level_color,
    line_len,
    pad,
    pad_line,
    ratio,
    sparkline_rows,
)

MIN_CARD_WIDTH = 64
"""Cards narrower than this don't show bars legibly: below it the board goes compact."""
MAX_SPARK_ROWS = 6
CARD_FIXED_LINES = 8
"""Border (2) + bars (3) + info line + activity (GPM) line + events line."""
DEFAULT_CARD = CardConfig()

SeriesFn = Callable[[int, str, int], list[float]]


@dataclass(frozen=True)
class BoardLayout:
    compact: bool
    cols: int
    spark_rows: int
    lines: int
    """Total lines the board needs."""


def card_height(spark_rows: int, charts: int = 3) -> int:
    """Lines of a card with `charts` sparklines of `spark_rows` rows each."""
    return CARD_FIXED_LINES + charts * spark_rows


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
    more = f" +{len(alerts) - 1}" if len(alerts) > 1 else ""
    return "⚠ " + short_text(alerts[0]) + more


# --------------------------------------------------------------------------------------
# pieces
# --------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------
# GPU card
# --------------------------------------------------------------------------------------


def gpu_card(
    dev: DeviceInfo,
    g: GpuSample | None,
    procs: Sequence[GpuProcess],
    series: SeriesFn,
    width: int,
    spark_rows: int,
    selected: bool = False,
    alert: str | None = None,
    card: CardConfig = DEFAULT_CARD,
    hints: Sequence[Hint] = (),
    process_count: int | EllipsisType | None = ...,
) -> list[Line]:
    """One GPU's card.  `process_count`: how many processes use the GPU where `procs` does
    not list them all (a remote GPU: the exporter's count; None where unknown, shown as
    N/A, never as 0); by default, the processes listed."""
    inner = width - 4
    charts = len(card.sparklines)
    title: Line = [(f"{dev.index} ", S.index), (clean(dev.name), S.title)]
    right: Line = [(alert, S.warn)] if alert else [(dev.bus_id or "", S.dim)]
    if dev.mig_mode and not alert:
        migs = len(g.mig_devices) if g is not None else 0
        right = [(f"MIG {migs} device{'s' if migs != 1 else ''}", S.info), (" · ", S.dim), *right]
    if g is None:
        body: list[Line] = [[("waiting for the first sample…", S.dim)]]
        body += [[] for _ in range(card_height(spark_rows, charts) - 3)]
        return boxed(title, right, body, width, selected, bool(alert))
    if g.lost:
        title = [*title, ("  GPU LOST ", S.lost)]
        msg = (
            "NVML reports this GPU has fallen off the bus (GPU is lost). Check "
            "`dmesg` for Xid 79 or 48; the GPU needs a reset or the machine a reboot. "
            "The other GPUs keep updating."
        )
        height = card_height(spark_rows, charts)
        body = [[(t, S.bad)] for t in textwrap.wrap(msg, inner)]
        body += [[] for _ in range(height - 2 - len(body))]
        return boxed(title, right, body[: height - 2], width, selected, bool(alert))

    col = (inner - 2) // 2
    col2 = inner - 2 - col
    limit = g.power_limit or dev.power_limit
    tscale = temp_scale(dev)
    mem_total = dev.memory_total
    mem_frac = ratio(g.mem_used, mem_total)
    rows: list[Line] = [
        [
            *metric("UTIL", ratio(g.gpu_util, 100), fmt_pct(g.gpu_util), GREEN, col),
            ("  ", None),
            *metric("MEM", mem_frac, fmt_gib(g.mem_used, mem_total), level_color(mem_frac), col2),
        ],
        [
            *metric(
                "PWR",
                ratio(g.power_draw, limit),
                fmt_watts(g.power_draw, limit),
                level_color(ratio(g.power_draw, limit), 0.9, 0.98),
                col,
            ),
            ("  ", None),
            *metric(
                "TEMP",
                ratio(g.temperature, tscale),
                fmt_temp(g.temperature),
                temp_color(g.temperature, dev),
                col2,
            ),
        ],
        [
            *metric(
                "SMCLK", ratio(g.sm_clock, dev.max_sm_clock), fmt_mhz(g.sm_clock, dev.max_sm_clock), BLUE, col
            ),
            ("  ", None),
            *metric(
                "MCLK",
                ratio(g.mem_clock, dev.max_mem_clock),
                fmt_mhz(g.mem_clock, dev.max_mem_clock),
                BLUE,
                col2,
            ),
        ],
    ]
    link = NA
    if g.pcie_gen is not None and g.pcie_width is not None:
        link = f"Gen{g.pcie_gen} x{g.pcie_width}"
        if (
            dev.pcie_max_gen
            and dev.pcie_max_width
            and (g.pcie_gen, g.pcie_width) != (dev.pcie_max_gen, dev.pcie_max_width)
        ):
            link += f" (max Gen{dev.pcie_max_gen} x{dev.pcie_max_width})"
    items = []
    for key in card.info:
        m = CARD_ITEMS[key]
        value = m.value(g)
        text = link if key == "pcie" else fmt_value(m.unit, value)
        items.append(kv(m.label, text, S.bad if m.alarm and value else None))
    if g.xid_count and g.xid_last is not None:  # the driver reported a critical error: first
        more = f" ×{g.xid_count}" if g.xid_count > 1 else ""
        items.insert(0, kv("XID", f"{g.xid_last}{more}", S.bad))
    rows.append(join_items(items, inner))
    activity, prio = activity_items(g.gpm, hints)
    rows.append(join_items(activity, inner, " · ", prio))
    chart_w = max(1, inner - 6 - 12)
    for m in (GPU_METRIC[k] for k in card.sparklines):
        top = m.full_scale(dev, g) if m.full_scale is not None else None
        chart = sparkline_rows(series(dev.index, m.field, chart_w), chart_w, spark_rows, top)
        now = fmt_value(m.unit, m.value(g))
        for r, text in enumerate(chart):
            rows.append(
                [
                    (pad(m.label if r == 0 else "", 6), S.label),
                    (text, TINT_STYLE[m.tint]),
                    (pad(now if r == 0 else "", 12, ">"), S.value),
                ]
            )
    ev_text, ev_style = events_line(g.clock_event_reasons)
    n = len(procs) if process_count is ... else process_count
    used = sum(p.gpu_memory or 0 for p in procs)
    if n is None:
        proc_text = f"processes {NA}"
    else:
        proc_text = f"{n} process{'es' if n != 1 else ''}" + (f" · {fmt_gib(used)}" if procs else "")
    rows.append([(pad(ev_text, inner - len(proc_text) - 1), ev_style), (" ", None), (proc_text, S.label)])
    return boxed(title, right, rows, width, selected, bool(alert))


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


# --------------------------------------------------------------------------------------
# header
# --------------------------------------------------------------------------------------


def header_line(
    info: MachineInfo | None,
    width: int,
    *,
    live: bool,
    label: str,
    interval: float,
    paused: bool,
    position: tuple[int, int] | None,
    timestamp: float | None,
    alerts: int = 0,
) -> Line:
    sys_ = info.system if info else None
    left: Line = [(" gputui ", S.title)]
    items: list[Line] = []
    if sys_ and sys_.nvml_problem is not None:
        items.append([(clean(sys_.hostname), S.value)])
        items.append([("NVML unavailable", S.bad)])
    elif sys_:
        items.append([(clean(sys_.hostname), S.value)])
        items.append(kv("driver", clean(sys_.driver_version or NA)))
        items.append(kv("CUDA", clean(sys_.cuda_driver_version or NA)))
        n = len(info.devices) if info else 0
        items.append([(f"{n} GPU{'s' if n != 1 else ''}", S.label)])
    if paused:
        state: Line = [(" ⏸ PAUSED ", S.paused)]
    elif live:
        state = [("● live", S.live)]
    else:
        state = [("▶ replay", S.warn)]
    if position is not None:
        state.append((f" {position[0]}/{position[1]}", S.label))
    state.append((f" every {interval:g}s", S.label))
    when = ""
    if timestamp is not None:
        # live: the local wall clock; a recording: when it was recorded, in UTC so the same
        # file reads the same everywhere
        if live:
            when = time.strftime("%H:%M:%S", time.localtime(timestamp))
        else:
            when = time.strftime("recorded %Y-%m-%d %H:%M:%S UTC", time.gmtime(timestamp))
            if width < 100:  # the banner already says it is recorded: room for the host
                when = time.strftime("%m-%d %H:%M:%S UTC", time.gmtime(timestamp))
    right: Line = [(when + " ", S.value)]
    # by priority: active alerts, the state (live/replay/paused), the host, then driver, CUDA,
    # GPU count; a less important item never takes the place of a more important one
    priority = [*[1, 2, 3, 4][: len(items)], 0]
    if alerts:
        items.append([(f"⚠ {alerts} alert{'s' if alerts != 1 else ''}", S.warn)])
        priority.insert(len(items) - 1, 0)
    avail = width - line_len(left) - line_len(right) - 1
    if avail < line_len(state) + 2:
        right = []
        avail = width - line_len(left) - 1
    middle = join_items([*items, state], avail, "  ", priority, skip=False)
    gap = width - line_len(left) - line_len(middle) - line_len(right)
    return pad_line([*left, *middle, (" " * max(1, gap), None), *right], width)


def banner_line(text: str, width: int) -> Line:
    """The banner from "|"-separated parts, each starting with a priority digit: parts are
    dropped whole, least important first, until the rest fit; shown in their given order."""
    raw = [p.strip() for p in text.split("|") if p.strip()]
    prio = [int(p[0]) if p[0].isdigit() else 9 for p in raw]
    parts = [p[1:] if p[0].isdigit() else p for p in raw]
    line = join_items([[(p, S.banner)] for p in parts], width - 2, " · ", prio)
    return [(" ", S.banner), *pad_line(line, width - 1, S.banner)]
