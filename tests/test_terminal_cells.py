"""Only the cells that changed reach the terminal, and the terminal shows what Textual drew.

`TerminalCells` cuts Textual's screen updates to what the terminal does not already show.
Every test here feeds Textual's own stream and the cut one through a terminal emulator
(pyte) and compares the screens cell by cell (character, colours, attributes)."""

from __future__ import annotations

import asyncio
import itertools
import random

import pyte
import pytest
from conftest import H200_X2, replay_app, run_to_tick, wait_for
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual._compositor import ChopsUpdate, LayoutUpdate
from textual.geometry import Offset, Region, Size
from textual.strip import Strip

from gputui.ui import _textual_patch
from gputui.ui.cells_app import CellsApp

W, H = 24, 6
STYLES = [Style(), Style(color="red"), Style(bold=True), Style(color="green", bgcolor="blue")]


def console(width: int = W) -> Console:
    return Console(color_system="256", force_terminal=True, width=width, legacy_windows=False)


def cells(term: pyte.Screen) -> list[list[tuple[str, str, str, bool, bool]]]:
    return [
        [(c.data, c.fg, c.bg, c.bold, c.reverse) for c in (term.buffer[y][x] for x in range(term.columns))]
        for y in range(term.lines)
    ]


def stock(update) -> str:
    """The bytes Textual itself sends for an update (its own renderers, unpatched)."""
    if isinstance(update, LayoutUpdate):
        return update.render_segments(console())
    return _textual_patch._state["original"](update, console())


def random_row(rng: random.Random, width: int) -> Strip:
    segments, left = [], width
    while left:
        n = rng.randint(1, min(6, left))
        segments.append(Segment("".join(rng.choice("ab.x 1") for _ in range(n)), rng.choice(STYLES)))
        left -= n
    return Strip(segments, width)


def full(rows: list[Strip]) -> LayoutUpdate:
    return LayoutUpdate([[row] for row in rows], Region(0, 0, W, len(rows)))


def partial(rng: random.Random, rows: list[Strip], change: bool = True) -> tuple[ChopsUpdate, list[Strip]]:
    """A partial update as the compositor makes one: the rows cut into chops (widgets side by
    side) and a few dirty spans, where the new content differs (if `change`) only inside the
    spans.  Returns the update and the rows as they are after it."""
    chops, ends, spans, after = [], [], [], []
    for y, row in enumerate(rows):
        new = row
        if rng.random() < 0.6 or (y == 0 and not spans):
            x1 = rng.randrange(W)
            x2 = rng.randint(x1 + 1, W)
            spans.append((y, x1, x2))
            if change and rng.random() < 0.7:
                new = Strip.join([row.crop(0, x1), random_row(rng, x2 - x1), row.crop(x2)])
        after.append(new)
        cuts = sorted(rng.sample(range(1, W), rng.randint(0, 3)))
        edges = [0, *cuts, W]
        chops.append({x: new.crop(x, end) for x, end in itertools.pairwise(edges)})
        ends.append(edges[1:])
    return ChopsUpdate(chops, spans, ends), after


@pytest.fixture(autouse=True)
def _installed():
    assert _textual_patch.install()


@pytest.mark.parametrize("seed", range(40))
def test_random_updates_leave_the_same_screen_as_textuals_own(seed):
    rng = random.Random(seed)
    ours, theirs = pyte.Screen(W, H), pyte.Screen(W, H)
    ours_in, theirs_in = pyte.Stream(ours), pyte.Stream(theirs)
    model = _textual_patch.TerminalCells()
    rows = [random_row(rng, W) for _ in range(H)]
    sent = stock_sent = 0
    for step in range(30):
        if step == 0 or rng.random() < 0.3:  # a full paint: some rows new, the rest as they were
            rows = [random_row(rng, W) if step and rng.random() < 0.3 else row for row in rows]
            update: LayoutUpdate | ChopsUpdate = full(rows)
        else:
            update, rows = partial(rng, rows, change=rng.random() < 0.7)
        text = model.changes(update, console(), (W, H))
        ours_in.feed(text)
        theirs_in.feed(stock(update))
        assert cells(ours) == cells(theirs), f"step {step}"
        sent += len(text)
        stock_sent += len(stock(update))
    assert sent < stock_sent


def test_an_identical_repaint_sends_nothing():
    rng = random.Random(1)
    rows = [random_row(rng, W) for _ in range(H)]
    model = _textual_patch.TerminalCells()
    assert model.changes(full(rows), console(), (W, H))  # the first paint goes out whole
    assert model.changes(full(rows), console(), (W, H)) == ""
    assert model.changes(partial(rng, rows, change=False)[0], console(), (W, H)) == ""
    rows[3] = Strip([Segment("changed".ljust(W))], W)
    text = model.changes(full(rows), console(), (W, H))
    assert "changed" in text
    assert text.count("\x1b[") < 12  # one row moved to and drawn, not six


def test_a_piece_that_differs_only_in_colour_is_sent():
    row = Strip([Segment("same text".ljust(W), Style(color="red"))], W)
    model = _textual_patch.TerminalCells()
    model.changes(full([row] * H), console(), (W, H))
    green = Strip([Segment("same text".ljust(W), Style(color="green"))], W)
    assert model.changes(full([green] * H), console(), (W, H))


def test_a_new_size_or_a_reset_sends_everything_again():
    rng = random.Random(2)
    rows = [random_row(rng, W) for _ in range(H)]
    model = _textual_patch.TerminalCells()
    first = model.changes(full(rows), console(), (W, H))
    assert model.changes(full(rows), console(), (W + 1, H)) == first  # resized: all of it
    model.reset()
    assert model.changes(full(rows), console(), (W + 1, H)) == first


def test_a_row_never_sent_whole_is_not_taken_as_known():
    rng = random.Random(3)
    rows = [random_row(rng, W) for _ in range(H)]
    model = _textual_patch.TerminalCells()
    one = ChopsUpdate([{0: row.crop(0, 8), 8: row.crop(8)} for row in rows], [(2, 0, 8)], [[8, W]] * H)
    assert model.changes(one, console(), (W, H))
    assert model.changes(one, console(), (W, H))  # what else is on that row is unknown


# --- the app: its own updates, written through its own `_display` -----------------------------


async def _run(use_cells: bool, last_tick: int, then=None) -> tuple[list[str], pyte.Screen]:
    """Replay the 2x H200 recording to `last_tick` at 160x50 with the terminal writes kept:
    the app as in a terminal (not headless), its driver's writes captured."""
    app = replay_app(H200_X2)
    writes: list[str] = []
    async with app.run_test(size=(160, 50)) as pilot:
        if not use_cells:
            app.terminal_cells = None
        driver = app._driver
        driver.write = writes.append
        # a terminal's driver, as far as `_display` asks: not headless
        driver.__class__ = type("TerminalLike", (type(driver),), {"is_headless": property(lambda d: False)})
        app.refresh()  # the whole screen, as a terminal gets it first
        await pilot.pause()
        for tick in range(2, last_tick + 1):
            await run_to_tick(pilot, tick)
        await pilot.pause()
        if then is not None:
            await then(app, pilot, writes)
    term = pyte.Screen(160, 50)
    pyte.Stream(term).feed("".join(writes))
    return writes, term


def test_the_app_shows_the_same_screen_and_sends_less():
    async def both():
        return await _run(False, 12), await _run(True, 12)

    (stock_writes, stock_term), (our_writes, our_term) = asyncio.run(both())
    assert cells(our_term) == cells(stock_term)
    assert any("NVIDIA H200" in line for line in our_term.display)
    ours, theirs = sum(map(len, our_writes)), sum(map(len, stock_writes))
    assert ours < theirs, (ours, theirs)


def test_a_repaint_of_an_unchanged_screen_writes_nothing():
    async def then(app, pilot, writes):
        before = len(writes)
        app.refresh()  # Textual repaints the whole screen; the terminal already shows it
        await pilot.pause()
        await pilot.pause()
        assert len(writes) == before, [w[:3000] for w in writes[before:]]

    asyncio.run(_run(True, 3, then))


def test_a_moved_cursor_is_still_sent():
    async def then(app, pilot, writes):
        before = len(writes)
        app.cursor_position = Offset(7, 3)  # (where Textual puts the terminal's cursor, for IMEs)
        app.refresh()
        await pilot.pause()
        await pilot.pause()
        assert "".join(writes[before:]).endswith("\x1b[4;8H")

    asyncio.run(_run(True, 3, then))


def test_ctrl_l_sends_the_whole_screen_again():
    async def then(app, pilot, writes):
        before = sum(map(len, writes))
        await pilot.press("ctrl+l")
        await pilot.pause()
        await pilot.pause()
        again = sum(map(len, writes)) - before
        assert again > 160 * 50  # every cell, at least a byte each

    asyncio.run(_run(True, 3, then))


def test_a_resize_sends_the_whole_screen_again():
    async def then(app, pilot, writes):
        await pilot.resize_terminal(120, 40)
        await wait_for(pilot, lambda: app.terminal_cells.size == (120, 40))
        before = len(writes)
        await pilot.resize_terminal(160, 50)
        await wait_for(pilot, lambda: app.terminal_cells.size == (160, 50))
        await pilot.pause()
        assert sum(map(len, writes[before:])) > 160 * 50

    asyncio.run(_run(True, 3, then))


def test_a_resize_undone_before_the_next_paint_still_sends_the_whole_screen():
    """A terminal may clear or reflow on a resize; back at the old size before gputui drew at
    the new one, the terminal is not what was sent."""

    async def then(app, pilot, writes):
        before = len(writes)
        app.post_message(events.Resize(Size(120, 40), Size(120, 40)))
        for _ in range(5):  # the app takes the event; Textual's 1/120 s resize timer waits
            await asyncio.sleep(0)
        app.post_message(events.Resize(Size(160, 50), Size(160, 50)))
        await pilot.pause()
        await pilot.pause()
        await pilot.pause()
        assert sum(map(len, writes[before:])) > 160 * 50

    asyncio.run(_run(True, 3, then))


def test_a_suspend_forgets_what_the_terminal_showed():
    async def then(app, pilot, writes):
        assert app.terminal_cells.rows
        app.app_suspend_signal.publish(app)
        assert not app.terminal_cells.rows  # at once: the alternate screen is left
        app.terminal_cells.rows[0] = "stale"
        app.app_resume_signal.publish(app)
        assert not app.terminal_cells.rows
        await pilot.pause()
        await pilot.pause()
        assert app.terminal_cells.rows  # and the whole screen sent again

    asyncio.run(_run(True, 3, then))


def test_an_update_textual_drops_is_not_counted_as_shown():
    async def then(app, pilot, writes):
        model = app.terminal_cells
        model.reset()
        app._batch_count += 1  # inside a batch, Textual's _display writes nothing
        try:
            app._display(app.screen, full([Strip([Segment(" " * 160)], 160)] * 50))
        finally:
            app._batch_count -= 1
        assert not model.rows

    asyncio.run(_run(True, 2, then))


def test_on_a_textual_it_was_not_checked_on_the_app_sends_textuals_updates(monkeypatch):
    monkeypatch.setitem(_textual_patch._state, "installed", False)
    monkeypatch.setattr(_textual_patch, "CHECKED_VERSIONS", frozenset({"8.2.7"}))
    saved = ChopsUpdate.render_segments
    try:
        app = CellsApp()
        assert app.terminal_cells is None
    finally:
        ChopsUpdate.render_segments = saved
