"""Every GPU count from 1 to 16 at sizes from 80x24 up: well-formed boxes, every GPU shown
exactly once, nothing overlapping and nothing cut mid-word."""

from __future__ import annotations

import asyncio
import re

import pytest
from conftest import H200_X1, H200_X2, X8_240, X16_256, replay_app, run_to_tick, screen_lines

SIZES = [(80, 24), (100, 30), (120, 40), (160, 50), (220, 60)]
RECORDINGS = [(H200_X1, 1), (H200_X2, 2), (X8_240, 8), (X16_256, 16)]


def check_boxes(lines: list[str]) -> int:
    """Every ╭ closes with ╮ on its line and ╰ ╯ below in the same columns, with │ between."""
    boxes = 0
    for y, line in enumerate(lines):
        for x, ch in enumerate(line):
            if ch != "╭":
                continue
            right = line.index("╮", x)
            bottom = next(yy for yy in range(y + 1, len(lines)) if lines[yy][x] == "╰")
            assert lines[bottom][right] == "╯", (y, x, "box bottom misaligned")
            for yy in range(y + 1, bottom):
                assert lines[yy][x] == "│", (yy, x, "left border broken")
                assert lines[yy][right] == "│", (yy, right, "right border broken")
            boxes += 1
    return boxes


@pytest.mark.parametrize(("path", "n"), RECORDINGS, ids=[f"{n}gpu" for _, n in RECORDINGS])
@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_layout_is_clean(path, n, size):
    async def go():
        app = replay_app(path)
        async with app.run_test(size=size) as pilot:
            await run_to_tick(pilot, 40)
            procs = app.query_one("#overview-processes").region
            return screen_lines(app), app.query_one("GpuBoard").plan, range(procs.y, procs.bottom)

    lines, plan, process_list = asyncio.run(go())
    width, height = size
    assert len(lines) == height
    assert all(len(line) == width for line in lines)
    # (the process list's command lines end in … where they are longer than their column)
    outside = [ln for y, ln in enumerate(lines) if y not in process_list]
    assert "…" not in "\n".join(outside), "something was cut to fit"
    boxes = check_boxes(lines)
    board = lines[2:]  # below the header and the banner
    if plan.compact:
        rows = [ln for ln in board if re.match(r"^\s?\d{1,2} H200 ", ln)]
        assert [int(r.split()[0]) for r in rows] == list(range(n))
    else:
        titles = [int(m.group(1)) for ln in board for m in re.finditer(r"╭─ (\d+) NVIDIA H200 ", ln)]
        assert sorted(titles) == list(range(n))
        assert boxes == n + 1  # the cards and the host panel
    # the host panel is always there, whole
    assert any("host " in ln and "CPUs" in ln for ln in lines)
    assert any("CPU " in ln and "%" in ln for ln in lines)
