"""What a new user met (issue 24 items 10, 11 and 13), driven with real key presses against
replays of real GPUs and the real no-NVML start: text wraps at words at 80 columns; a
narrowing or a filter is shown and one key undoes it; a GPU filter set on one machine is not
carried into another machine's recording; one key has one meaning on every tab."""

from __future__ import annotations

import asyncio
import re

import pytest
from conftest import H200_X2, replay_app, run_to_tick, screen_lines, wait_for
from textual.binding import Binding

from gputui.telemetry.nvml import NvmlSource
from gputui.ui.app import GpuTuiApp


def run(coro):
    return asyncio.run(coro)


def nvml_really_absent() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return True
    pynvml.nvmlShutdown()
    return False


# ---- item 10: the no-GPU panel at 80 columns ---------------------------------------------


@pytest.mark.skipif(not nvml_really_absent(), reason="this machine has an NVIDIA driver")
@pytest.mark.parametrize("width", [80, 60, 100])
def test_the_no_gpu_panel_wraps_at_words(width: int) -> None:
    async def go() -> list[str]:
        app = GpuTuiApp(source=NvmlSource(), interval=1.0, watch_terminal=False)
        async with app.run_test(size=(width, 40)) as pilot:
            await wait_for(pilot, lambda: app.snapshot is not None)
            await pilot.pause()
            return screen_lines(app)

    lines = run(go())
    inside = [re.sub(r"^[│ ]+|[│ ]+$", "", line) for line in lines]
    start = next(k for k, line in enumerate(inside) if line.startswith("Press d"))
    end = next(k for k in range(start, len(inside)) if inside[k].endswith("recorded)."))
    part = inside[start : end + 1]
    sentence = "Press d to open the bundled recording of real GPUs (clearly marked as recorded)."
    assert " ".join(part) == sentence
    words = sentence.split()
    for line in part:  # each line holds whole words only: never "record" + "ed)."
        assert all(w in words for w in line.split()), line
