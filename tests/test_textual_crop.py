"""Partial updates cropped to their dirty cells: installed where Textual behaves as the crop
expects (probed, no version list), the picture identical, the stream much smaller.

CI runs this file against the pinned Textual and against the newest Textual 8.x."""

from __future__ import annotations

import asyncio

import pyte
import pytest
from conftest import H200_X2, replay_app, run_to_tick
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from textual._compositor import ChopsUpdate, CompositorUpdate
from textual.strip import Strip

from gputui.ui import textual_crop


@pytest.fixture
def stock():
    """Textual's own render_segments, put back after the test."""
    textual_crop.uninstall()
    saved = ChopsUpdate.render_segments
    yield saved
    ChopsUpdate.render_segments = saved


def _update() -> ChopsUpdate:
    # one 40-cell widget line; cells 20..23 changed
    strip = Strip([Segment("a" * 20, Style(color="red")), Segment("WXYZ"), Segment("b" * 16)], 40)
    return ChopsUpdate([{0: strip}], [(0, 20, 24)], [[40]])


def test_the_probe_passes_on_this_textual_and_only_the_dirty_span_is_sent(stock):
    console = Console(color_system="256", force_terminal=True, width=80)
    original = stock(_update(), console)
    assert textual_crop.install()
    cropped = _update().render_segments(console)
    assert "aaaa" in original  # stock Textual re-sends the line from its start
    assert "aaaa" not in cropped
    assert "WXYZ" in cropped
    assert "\x1b[1;21H" in cropped  # moves to column 21 (1-based) first
    assert len(cropped) < len(original) / 2


def test_not_installed_where_textual_already_crops(stock, monkeypatch):
    """The probe reads behaviour: a Textual whose own method crops is left alone."""
    monkeypatch.setattr(ChopsUpdate, "render_segments", textual_crop.render_cropped)
    assert textual_crop.install() is False
    assert ChopsUpdate.render_segments is textual_crop.render_cropped  # untouched


def test_not_installed_where_the_update_is_built_differently(stock, monkeypatch):
    def other(self, console):  # an update class whose fields moved
        raise AttributeError("chop_ends")

    monkeypatch.setattr(ChopsUpdate, "render_segments", other)
    assert textual_crop.install() is False
    assert ChopsUpdate.render_segments is other


def test_the_escape_hatch_leaves_textual_alone(stock, monkeypatch):
    monkeypatch.setenv("GPUTUI_NO_TEXTUAL_CROP", "1")
    assert textual_crop.install() is False
    assert ChopsUpdate.render_segments is stock


async def _rendered_updates(crop: bool, last_tick: int, full_first: bool) -> list[str]:
    """Replay ticks 30..last_tick of the 2x H200 recording; every screen update as the bytes
    a 256-colour terminal would get, cropped or not."""
    app = replay_app(H200_X2)
    textual_crop.uninstall()
    if crop:
        assert textual_crop.install()
    written: list[str] = []
    async with app.run_test(size=(160, 50)) as pilot:
        console = Console(color_system="256", force_terminal=True, width=160)

        def display(screen, renderable):
            if isinstance(renderable, CompositorUpdate) and (
                full_first or isinstance(renderable, ChopsUpdate)
            ):
                written.append(renderable.render_segments(console))

        if full_first:
            app._display = display
            app.refresh()  # a full frame first, as a terminal gets at start
        await run_to_tick(pilot, 30)
        app._display = display
        for tick in range(31, last_tick + 1):
            await run_to_tick(pilot, tick)
        await pilot.pause()
    return written


def test_the_screen_is_identical_cropped_or_not(stock):
    """The same ticks twice through a pyte terminal: Textual's stream and the cropped one."""

    def screen(updates: list[str]) -> list[str]:
        term = pyte.Screen(160, 50)
        pyte.Stream(term).feed("".join(updates))
        return list(term.display)

    async def both():
        return (
            screen(await _rendered_updates(False, 45, full_first=True)),
            screen(await _rendered_updates(True, 45, full_first=True)),
        )

    plain, cropped = asyncio.run(both())
    assert cropped == plain
    assert any("NVIDIA H200" in line for line in cropped)


def test_the_cropped_stream_is_much_smaller(stock):
    """Same ticks, bytes sent: why the crop exists (a regression guard, not a timing)."""

    async def both():
        plain = await _rendered_updates(False, 60, full_first=False)
        cropped = await _rendered_updates(True, 60, full_first=False)
        return sum(len(u.encode()) for u in plain), sum(len(u.encode()) for u in cropped)

    plain, cropped = asyncio.run(both())
    assert cropped * 3 < plain, (plain, cropped)
