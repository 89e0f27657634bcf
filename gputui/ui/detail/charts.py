"""The GPU detail view's history charts: what each chart draws (`chart_specs`), a chart in
its box, and every chart, two side by side when the width allows.  Pure (no Textual).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.style import Style

from gputui.telemetry.model import (
    DeviceInfo,
)
from gputui.ui.cards import boxed
from gputui.ui.render import (
    Line,
    S,
    fmt_rate,
    line_len,
    pad,
    pad_line,
)
from gputui.ui.widgets.chart import Series, braille_chart

SeriesFn = Callable[[int, str], list[float]]
CHART_ROWS = 6


@dataclass(frozen=True)
class ChartSpec:
    title: str
    metrics: tuple[tuple[str, str, Style], ...]
    """(history metric, legend label, style)."""
    lo: float
    hi: float
    y_fmt: Callable[[float], str]
    scale: float = 1.0
    """Multiply the history values by this (bytes -> GiB)."""


def percent_chart(title: str, *metrics: tuple[str, str, Style]) -> ChartSpec:
    """A chart of percentages, 0-100 %."""
    return ChartSpec(title, metrics, 0.0, 100.0, lambda v: f"{v:.0f}%")


@functools.cache
def chart_metrics() -> tuple[str, ...]:
    """Every history series the charts draw, in order (what the detail view copies out of
    the history for them): read off the charts themselves."""
    specs = chart_specs(DeviceInfo(index=0, name=""), lambda gpu, metric: [])
    return tuple(dict.fromkeys(metric for spec in specs for metric, _, _ in spec.metrics))


def chart_specs(dev: DeviceInfo, series: SeriesFn) -> list[ChartSpec]:
    def top(metric: str, default: float) -> float:
        seen = [v for v in series(dev.index, metric) if not math.isnan(v)]
        return max([default, *seen]) if seen else default

    mem_gib = (dev.memory_total or top("mem_used", 1.0)) / 2**30
    power = max(dev.power_max_limit or 0.0, dev.power_limit or 0.0) or top("power_draw", 100.0)
    temp = float(max(dev.temp_shutdown or 0, int(top("temperature", 90.0)) + 5))
    clocks = float(max(dev.max_sm_clock or 0, dev.max_mem_clock or 0) or top("sm_clock", 1000.0))
    traffic = (
        ("gpm_pcie_rx", "PCIe RX", S.spark_util),
        ("gpm_pcie_tx", "PCIe TX", S.spark_cpu),
        ("gpm_nvlink_rx", "NVLink RX", S.spark_mem),
        ("gpm_nvlink_tx", "NVLink TX", S.spark_power),
    )
    return [
        percent_chart(
            "Utilization", ("gpu_util", "GPU", S.spark_util), ("mem_util", "memory bandwidth", S.spark_cpu)
        ),
        ChartSpec(
            "Memory used",
            (("mem_used", "GiB", S.spark_mem),),
            0.0,
            mem_gib,
            lambda v: f"{v:.0f} GiB",
            1 / 2**30,
        ),
        percent_chart(
            "Activity (GPM)",
            ("sm_active", "SM act", S.spark_util),
            ("tensor_active", "tensor", S.spark_power),
            ("dram_active", "DRAM", S.spark_mem),
            ("graphics_active", "graphics engine", S.spark_cpu),
        ),
        percent_chart(
            "Pipes (GPM)",
            ("fp32_active", "FP32", S.spark_power),
            ("fp16_active", "FP16", S.spark_util),
            ("fp64_active", "FP64", S.spark_temp),
            ("sm_occupancy", "occupancy", S.spark_mem),
        ),
        percent_chart(
            "Tensor pipes (GPM)",
            ("tensor_active", "any", S.spark_power),
            ("tensor_hmma_active", "HMMA", S.spark_util),
            ("tensor_imma_active", "IMMA", S.spark_mem),
            ("tensor_dfma_active", "DFMA", S.spark_temp),
        ),
        ChartSpec("Traffic (GPM)", traffic, 0.0, max(top(m, 1e6) for m, _, _ in traffic), fmt_rate),
        ChartSpec("Power", (("power_draw", "W", S.spark_power),), 0.0, power, lambda v: f"{v:.0f} W"),
        ChartSpec("Temperature", (("temperature", "°C", S.spark_temp),), 0.0, temp, lambda v: f"{v:.0f}°C"),
        ChartSpec(
            "Clocks",
            (("sm_clock", "SM clk", S.spark_util), ("mem_clock", "memory", S.spark_mem)),
            0.0,
            clocks,
            lambda v: f"{v:.0f} MHz",
        ),
    ]


def chart_box(
    spec: ChartSpec, dev: DeviceInfo, series: SeriesFn, times: Sequence[float], width: int, live: bool
) -> list[Line]:
    def t_fmt(t: float) -> str:
        return time.strftime("%H:%M:%S", time.localtime(t) if live else time.gmtime(t))

    data = [
        Series([v * spec.scale for v in series(dev.index, metric)], style, label)
        for metric, label, style in spec.metrics
    ]
    body = braille_chart(data, times, width - 4, CHART_ROWS, spec.lo, spec.hi, spec.y_fmt, t_fmt)
    if not any(not math.isnan(v) for s in data for v in s.values):
        note = "N/A: no samples (NVML does not report this here)"
        body[CHART_ROWS // 2] = [
            *body[CHART_ROWS // 2][:2],
            (pad(note, width - 4 - line_len(body[0][:2]), "^"), S.dim),
        ]
    legend: Line = []
    if len(spec.metrics) > 1:
        for _, label, style in spec.metrics:
            legend += [("■ ", style), (label + " ", S.label)]
    return boxed([(spec.title, S.title)], legend, body, width)


def chart_lines(
    dev: DeviceInfo, series: SeriesFn, times: Sequence[float], width: int, live: bool
) -> list[Line]:
    """Every history chart, two side by side when the width allows."""
    specs = chart_specs(dev, series)
    cols = 2 if width >= 2 * 60 else 1
    base = width // cols
    out: list[Line] = []
    span = ""
    if len(times) >= 2:
        span = f"the last {_duration(times[-1] - times[0])} ({len(times)} samples)"
    out.append([(" History ", S.title), (span, S.label)])
    for start in range(0, len(specs), cols):
        row = specs[start : start + cols]
        boxes = []
        for k, spec in enumerate(row):
            w = base + (width - base * cols if k == cols - 1 else 0)
            boxes.append(chart_box(spec, dev, series, times, w, live))
        for y in range(len(boxes[0])):
            line: Line = []
            for box in boxes:
                line.extend(box[y])
            out.append(pad_line(line, width))
    return out


def _duration(seconds: float) -> str:
    s = round(seconds)
    if s < 300:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    return f"{s / 3600:.1f} h"
