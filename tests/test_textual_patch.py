"""The partial-update patch sends only the changed cells, and the picture stays the same."""

from __future__ import annotations

import asyncio

import pyte
from conftest import H200_X2, replay_app, run_to_tick
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from textual._compositor import ChopsUpdate, CompositorUpdate
from textual.strip import Strip

from gputui.ui import _textual_patch


def _update() -> ChopsUpdate:
    # one 40-cell widget line; cells 20..23 changed
    strip = Strip([Segment("a" * 20, Style(color="red")), Segment("WXYZ"), Segment("b" * 16)], 40)
    return ChopsUpdate([{0: strip}], [(0, 20, 24)], [[40]])


def test_only_the_dirty_span_is_sent():
    assert _textual_patch.install()
    console = Console(color_system="256", force_terminal=True, width=80)
    original = _textual_patch._state["original"](_update(), console)
    patched = _update().render_segments(console)
    assert "aaaa" in original  # stock Textual re-sends the line from its start
    assert "aaaa" not in patched
    assert "WXYZ" in patched
    assert "\x1b[1;21H" in patched  # moves to column 21 (1-based) first
    assert len(patched) < len(original) / 2


def test_the_screen_is_identical_with_and_without_the_patch():
    """Replay the same ticks twice through a pyte terminal: stock vs patched output."""

    async def capture(use_patch: bool) -> list[str]:
        from textual._compositor import ChopsUpdate as CU

        saved = CU.render_segments
        if not use_patch:
            CU.render_segments = _textual_patch._state["original"]
        try:
            app = replay_app(H200_X2)
            written: list[str] = []
            async with app.run_test(size=(160, 50)) as pilot:
                # render every screen update as the app would for a 256-colour terminal
                console = Console(color_system="256", force_terminal=True, width=160)

                def display(screen, renderable):
                    if isinstance(renderable, CompositorUpdate):
                        written.append(renderable.render_segments(console))

                app._display = display
                app.refresh()  # a full frame first, as a terminal gets at start
                await run_to_tick(pilot, 30)
                for tick in range(31, 46):  # then 15 ticks of partial updates
                    await run_to_tick(pilot, tick)
                await pilot.pause()
            screen = pyte.Screen(160, 50)
            pyte.Stream(screen).feed("".join(written))
            return list(screen.display)
        finally:
            CU.render_segments = saved

    async def both():
        return await capture(False), await capture(True)

    stock, patched = asyncio.run(both())
    assert patched == stock
    assert any("NVIDIA H200" in line for line in patched)


def test_the_patched_stream_is_much_smaller():
    """Same ticks, bytes sent: the reason the patch exists (a regression guard, not a timing)."""

    async def total(use_patch: bool) -> int:
        from textual._compositor import ChopsUpdate as CU

        saved = CU.render_segments
        if not use_patch:
            CU.render_segments = _textual_patch._state["original"]
        try:
            app = replay_app(H200_X2)
            sizes: list[int] = []
            async with app.run_test(size=(160, 50)) as pilot:
                await run_to_tick(pilot, 30)
                console = Console(color_system="256", force_terminal=True, width=160)

                def display(screen, renderable):
                    if isinstance(renderable, ChopsUpdate):
                        sizes.append(len(renderable.render_segments(console).encode()))

                app._display = display
                for tick in range(31, 61):
                    await run_to_tick(pilot, tick)
            return sum(sizes)
        finally:
            CU.render_segments = saved

    async def both():
        return await total(False), await total(True)

    stock, patched = asyncio.run(both())
    assert patched * 3 < stock, (stock, patched)
