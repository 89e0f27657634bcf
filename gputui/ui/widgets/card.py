"""One GPU's card (the Overview's cards, and the cluster view's): bars, info items, GPM
activity, sparklines, clock events and processes, in a box.  Pure (no Textual).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from types import EllipsisType

from gputui.config import CardConfig
from gputui.telemetry.hints import Hint
from gputui.telemetry.metrics import CARD_ITEMS, GPU_METRIC, temp_scale
from gputui.telemetry.model import (
    DeviceInfo,
    GpuProcess,
    GpuSample,
)
from gputui.ui.cards import activity_items, boxed, events_line, join_items, kv, metric, temp_color
from gputui.ui.render import (
    BLUE,
    GREEN,
    NA,
    RATE_WIDTH,
    TINT_STYLE,
    Line,
    S,
    clean,
    fmt_gib,
    fmt_mhz,
    fmt_pct,
    fmt_temp,
    fmt_value,
    fmt_watts,
    level_color,
    pad,
    ratio,
    sparkline_rows,
)

MIN_CARD_WIDTH = 64
"""Cards narrower than this don't show bars legibly: below it the board goes compact."""
CARD_FIXED_LINES = 8
"""Border (2) + bars (3) + info line + activity (GPM) line + events line."""
DEFAULT_CARD = CardConfig()

SeriesFn = Callable[[int, str, int], list[float]]


def card_height(spark_rows: int, charts: int = 3) -> int:
    """Lines of a card with `charts` sparklines of `spark_rows` rows each."""
    return CARD_FIXED_LINES + charts * spark_rows


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
        if m.unit == "B/s":  # a 20 ms window that jumps between MB/s and GB/s: the rest stays put
            text = pad(text, RATE_WIDTH, ">")
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
