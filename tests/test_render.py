"""Rendering helpers and layout planning, as plain data (no Textual)."""

from __future__ import annotations

import math

import pytest

from gputui.telemetry.model import DeviceInfo
from gputui.ui.cards import boxed, events_line, join_items, short_name
from gputui.ui.overview.lines import core_strip, plan_layout
from gputui.ui.render import (
    S,
    bar,
    clean,
    fit,
    fmt_gib,
    fmt_mhz,
    fmt_rate,
    fmt_uptime,
    fmt_watts,
    line_len,
    pad_line,
    sparkline_rows,
)
from gputui.ui.widgets.card import CARD_FIXED_LINES, card_height
from gputui.ui.widgets.header import header_line


def text(line):
    return "".join(t for t, _ in line)


def test_bar_is_two_runs_of_exact_width():
    for width in (1, 5, 17, 40):
        for frac in (0.0, 0.01, 0.5, 0.999, 1.0):
            line = bar(frac, width, "#5fd75f")
            assert line_len(line) == width
            assert len(line) <= 2
    assert text(bar(1.0, 8, "#ffffff")) == "█" * 8
    assert text(bar(0.0, 8, "#ffffff")) == " " * 8
    assert text(bar(0.5, 8, "#ffffff")).startswith("████")
    assert "N/A" in text(bar(None, 8, "#ffffff"))


def test_sparkline_scales_right_aligns_and_shows_gaps():
    rows = sparkline_rows([0.0, 50.0, 100.0], 5, 1, 100.0)
    assert rows == ["   ▄█"]
    assert rows[0][:2] == "  "  # not enough history yet: right-aligned
    two = sparkline_rows([100.0, 25.0, math.nan], 3, 2, 100.0)
    assert two[0] == "█  "  # top row: only the full value reaches it
    assert two[1][0] == "█"
    assert two[1][2] == " "  # NaN (no sample) draws nothing
    tiny = sparkline_rows([0.1], 1, 1, 100.0)
    assert tiny == ["▁"]  # something non-zero always shows
    assert sparkline_rows([], 4, 1) == ["    "]


def cell_by_cell_sparkline(values, width, rows, top):
    """The sparkline's rule, one cell at a time (what sparkline_rows draws with tables)."""
    vals = list(values)[-width:]
    finite = [v for v in vals if not math.isnan(v)]
    scale = top if top else (max(finite) if finite else 0.0)
    out = [[" "] * width for _ in range(rows)]
    for x, v in enumerate(vals):
        if math.isnan(v) or scale <= 0:
            continue
        n = round(max(0.0, min(1.0, v / scale)) * rows * 8)
        n = 1 if v > 0 and n == 0 else n
        for r in range(rows):
            out[r][width - len(vals) + x] = " ▁▂▃▄▅▆▇█"[max(0, min(8, n - (rows - 1 - r) * 8))]
    return ["".join(row) for row in out]


def test_sparkline_draws_each_cell_by_the_rule_also_for_odd_values():
    import random

    rnd = random.Random(25)
    odd = [math.nan, math.inf, -math.inf, 0.0, -0.0, -1.0, 1e-12, 5e-324, 1e300, 100, 0]
    for _ in range(3000):
        vals = [
            rnd.choice(odd) if rnd.random() < 0.2 else rnd.uniform(-10, 110)
            for _ in range(rnd.randint(0, 60))
        ]
        width, rows = rnd.randint(1, 70), rnd.randint(1, 4)
        top = rnd.choice([None, 0.0, 100.0, 50.0, -5.0, math.nan, math.inf, 1e-9])
        assert sparkline_rows(vals, width, rows, top) == cell_by_cell_sparkline(vals, width, rows, top)
    # twice the same values (the heights are remembered): the same chart
    vals = [rnd.uniform(0, 100) for _ in range(40)]
    assert sparkline_rows(vals, 40, 2, 100.0) == sparkline_rows(vals, 40, 2, 100.0)
    assert sparkline_rows(vals, 40, 2, 50.0) == cell_by_cell_sparkline(vals, 40, 2, 50.0)


def test_clean_renders_untrusted_text_as_inert_cells():
    hostile = "\x1b[2J\x1b]0;title\x07[bold red]x[/]\u200b漢"
    out = clean(hostile)
    assert "\x1b" not in out
    assert "\x07" not in out
    assert "[bold red]x[/]" in out  # markup is just text here (drawn as Segments, not parsed)
    assert len(out) == len(hostile)  # one cell per character: wide/zero-width replaced
    assert "漢" not in out


def test_formats():
    assert fmt_gib(None) == "N/A"
    assert fmt_gib(21341 * 2**20, 150754820096) == "20.8/140.4 GiB"
    assert fmt_gib(615 * 2**20) == "615 MiB"
    assert fmt_rate(14_519_659_520) == "14.5 GB/s"
    assert fmt_rate(614_400) == "614 KB/s"
    assert fmt_rate(None) == "N/A"
    assert fmt_watts(675.177, 700.0) == "675/700 W"
    assert fmt_mhz(1830, 1980) == "1830/1980 MHz"
    assert fmt_uptime(3 * 86400 + 4 * 3600 + 12 * 60 + 5) == "3d 04:12"
    assert fit("NVIDIA H100 80GB HBM3", 10) == "NVIDIA H1…"
    assert short_name("NVIDIA H100 80GB HBM3") == "H100 80GB HBM3"


def test_events_line_says_how_loud():
    assert events_line(None) == ("clocks: N/A", S.dim)
    assert events_line(0x1) == ("clocks: idle", S.dim)
    assert events_line(0x0)[0] == "clocks: full speed"
    msg, style = events_line(0x4)
    assert msg == "clocks: SW power cap"
    assert style is S.warn
    msg, style = events_line(0x40 | 0x4)
    assert msg.startswith("⚠")
    assert "HW thermal" in msg
    assert style is S.bad


@pytest.mark.parametrize(
    ("n", "width", "height", "compact", "cols"),
    [
        (1, 80, 17, False, 1),
        (2, 80, 17, True, 1),  # two cards don't fit in 17 lines
        (2, 160, 44, False, 2),
        (1, 160, 44, False, 1),
        (8, 160, 44, False, 2),  # 4 rows of 10-line cards
        (16, 160, 44, True, 1),
        (16, 80, 17, True, 1),
        (4, 300, 60, False, 4),
        (3, 60, 100, True, 1),  # narrower than a card: compact
    ],
)
def test_plan_layout(n, width, height, compact, cols):
    plan = plan_layout(n, width, height)
    assert plan.compact == compact
    assert plan.cols == cols
    if not compact:
        rows = math.ceil(n / cols)
        assert plan.lines == rows * card_height(plan.spark_rows) <= height
        assert plan.spark_rows >= 1


def test_plan_layout_modes():
    assert plan_layout(16, 160, 44, "cards").compact is False  # forced cards (scrolls)
    assert plan_layout(1, 160, 44, "compact").compact is True
    assert card_height(1) == CARD_FIXED_LINES + 3


def test_boxed_is_exactly_the_width_asked():
    for width in (20, 64, 80, 81):
        box = boxed([("0 NVIDIA H200", None)], [("00000000:00:06.0", None)], [[("x", None)]], width)
        assert {line_len(line) for line in box} == {width}
        top, _, bottom = (text(b) for b in box)
        assert top[0] == "╭" and top[-1] == "╮"
        assert bottom[0] == "╰" and bottom[-1] == "╯"


def test_join_items_drops_whole_items_by_priority():
    items = [[("aaaa", None)], [("bbbb", None)], [("cc", None)]]
    assert text(join_items(items, 10, " ")) == "aaaa bbbb"
    assert text(join_items(items, 7, " ", priority=[2, 1, 0])) == "bbbb cc"


def test_header_keeps_the_state_when_narrow():
    from gputui.telemetry.model import MachineInfo, SystemInfo

    info = MachineInfo(SystemInfo("node-17", "580.159.04", "13.0"), (DeviceInfo(0, "NVIDIA H200"),))
    wide = text(
        header_line(
            info, 160, live=True, label="live", interval=1.0, paused=False, position=None, timestamp=0.0
        )
    )
    assert "driver 580.159.04" in wide and "CUDA 13.0" in wide and "1 GPU" in wide
    narrow = text(
        header_line(
            info, 60, live=False, label="x", interval=1.0, paused=True, position=(3, 10), timestamp=0.0
        )
    )
    assert "PAUSED" in narrow and "3/10" in narrow
    assert len(narrow) == 60


def test_core_strip_bins_many_cores():
    assert core_strip([100.0] * 16, 40) == "█" * 16
    strip = core_strip([0.0] * 127 + [100.0], 32)  # 128 cores into 32 cells: busiest wins
    assert len(strip) == 32
    assert strip[-1] == "█"


def test_pad_line_crops_and_pads():
    line = [("abc", None), ("defg", None)]
    assert text(pad_line(line, 5)) == "abcde"
    assert text(pad_line(line, 9)) == "abcdefg  "


def test_ansi_lines_keeps_colours_and_drops_other_escapes():
    from gputui.ui.render import ansi_lines

    lines = ansi_lines("\x1b[38;5;12mbar\x1b[0m ok\n\x1b]0;title\x07\x1b[2Jplain")
    assert text(lines[0]) == "bar ok"
    assert lines[0][0][1] is not None
    assert lines[0][0][1].color is not None  # the colour survived as a Style
    assert "\x1b" not in text(lines[1])
    assert "\x07" not in text(lines[1])


def test_stress_chart_is_a_plotext_bar_chart_of_every_gpu_and_precision():
    from gputui.ui.diagnostics.lines import stress_plot

    report = {
        "gpus": [
            {"index": 0, "matmul": {"bf16": {"tflops": 773.0}, "fp32": {"tflops": 51.0}}},
            {"index": 1, "matmul": {"bf16": {"tflops": 760.0}, "fp32": {"tflops": 50.0}}},
        ]
    }
    lines = [text(ln) for ln in stress_plot(report, 90)]
    joined = "\n".join(lines)
    assert "matmul TFLOP/s" in joined
    assert "GPU 0" in joined and "GPU 1" in joined
    assert "bf16" in joined and "fp32" in joined
    assert "773" in joined  # the axis reaches the fastest value
    assert max(len(ln) for ln in lines) <= 90
