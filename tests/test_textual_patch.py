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


def test_installed_only_on_the_textual_versions_it_was_checked_on():
    import textual

    assert _textual_patch.checked(textual.__version__)  # a new Textual: check the patch again
    assert not _textual_patch.checked("8.2.9")
    assert not _textual_patch.checked("9.0.0")
    # the quick answer (a dist-info directory's name) is the slow one (importlib.metadata)
    assert _textual_patch.textual_version() == textual.__version__


def test_not_installed_on_another_version(monkeypatch):
    # the patch as if checked only on another version than the one installed here
    monkeypatch.setattr(_textual_patch, "CHECKED_VERSIONS", frozenset({"8.2.7"}))
    monkeypatch.setitem(_textual_patch._state, "installed", False)
    saved = ChopsUpdate.render_segments
    try:
        assert _textual_patch.install() is False
        assert ChopsUpdate.render_segments is saved
    finally:
        ChopsUpdate.render_segments = saved


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


async def _rendered_updates(use_patch: bool, last_tick: int, full_first: bool) -> list[str]:
    """Replay ticks 30..last_tick of the 2x H200 recording and return every screen update
    as the bytes a 256-colour terminal would get, with or without the patch."""
    saved = ChopsUpdate.render_segments
    if not use_patch:
        ChopsUpdate.render_segments = _textual_patch._state["original"]
    try:
        app = replay_app(H200_X2)
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
    finally:
        ChopsUpdate.render_segments = saved


def test_the_screen_is_identical_with_and_without_the_patch():
    """Replay the same ticks twice through a pyte terminal: stock vs patched output."""

    def screen(updates: list[str]) -> list[str]:
        term = pyte.Screen(160, 50)
        pyte.Stream(term).feed("".join(updates))
        return list(term.display)

    async def both():
        return (
            screen(await _rendered_updates(False, 45, full_first=True)),
            screen(await _rendered_updates(True, 45, full_first=True)),
        )

    stock, patched = asyncio.run(both())
    assert patched == stock
    assert any("NVIDIA H200" in line for line in patched)


def test_the_patched_stream_is_much_smaller():
    """Same ticks, bytes sent: the reason the patch exists (a regression guard, not a timing)."""

    async def both():
        stock = await _rendered_updates(False, 60, full_first=False)
        patched = await _rendered_updates(True, 60, full_first=False)
        return sum(len(u.encode()) for u in stock), sum(len(u.encode()) for u in patched)

    stock, patched = asyncio.run(both())
    assert patched * 3 < stock, (stock, patched)
