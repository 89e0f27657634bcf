"""Regression tests for the kill-loop bugs of issue 14, each written before its fix and
driven with real key presses (on replays of real recordings, or on real child processes)."""

from __future__ import annotations

import asyncio
import signal
import time

from conftest import X8_240, screen_lines, wait_for
from gpu_children import start_stubborn
from test_processes import (
    H200_X2,
    HOLDER,
    RANK0,
    answer,
    ask,
    cursor_to,
    open_tab,
    pane,
    replay_app,
    run,
    tab_on_children,
    table,
    three,
)

from gputui.ui.processes.screens import SignalDialog
from gputui.ui.processes.widgets import SearchInput


def notifications(app) -> list[str]:
    return [n.message for n in app._notifications]


def test_the_search_box_shows_what_is_typed(children):
    """`/` used to draw only the box's borders (Textual's Input:focus border beat the
    one-row style): the typed text must be on screen in the box itself."""
    kids = three(children)

    async def go():
        async with tab_on_children({HOLDER: kids["holder"].pid, RANK0: kids["rank0"].pid}) as (app, pilot):
            await pilot.press("slash", *"rank0")
            await pilot.pause()
            box = app.query_one("#processes SearchInput", SearchInput)
            assert box.has_focus and box.size.height == 1
            row = screen_lines(app)[box.region.y]
            assert "rank0" in row and "filter" not in row, row

    run(go())


def test_time_to_exit_after_sigkill_counts_from_the_sigkill(children):
    """T, wait, K: the note said "exited 7.1 s after SIGKILL", counted from the SIGTERM."""
    stubborn = start_stubborn()
    children.append(stubborn)

    async def go():
        async with tab_on_children({HOLDER: stubborn.pid}) as (app, pilot):
            await cursor_to(pilot, stubborn.pid)
            await ask(pilot, "T")
            await answer(pilot, "y")
            # the SIGTERM is ignored; let time pass before the SIGKILL (the bug adds this gap)
            await wait_for(pilot, lambda: "still running after" in "\n".join(screen_lines(app)))
            await asyncio.sleep(2.0)
            await ask(pilot, "K")
            before_kill = time.monotonic()
            await answer(pilot, "y")
            assert stubborn.wait(timeout=30) == -signal.SIGKILL
            ident = table(app).rows[0].ident if table(app).rows else None
            watches = pane(app).watches

            def exited() -> bool:
                return any(w.exited_after is not None for w in watches.values())

            await wait_for(pilot, exited, timeout=30)
            # both watchers (the SIGTERM's and the SIGKILL's) report the exit: let both finish
            await wait_for(
                pilot, lambda: not any(w.is_running for w in app.workers if w.group == "signals"), timeout=30
            )
            await pilot.pause()
            after = next(w.exited_after for w in watches.values() if w.exited_after is not None)
            assert after is not None and after <= time.monotonic() - before_kill, (after, ident)

    run(go())


def test_sorting_shows_the_top_of_the_table():
    """After `s` the view followed the cursor's process, leaving the first rows (the
    busiest, with a descending sort) off-screen."""

    async def go():
        app = replay_app(X8_240)
        async with app.run_test(size=(160, 40)) as pilot:
            await open_tab(pilot, 20)
            t = table(app)
            await pilot.press("pagedown", "pagedown", "pagedown")
            assert t.top > 0
            await pilot.press("s")
            await pilot.pause()
            assert (t.top, t.cursor) == (0, 0)

    run(go())


def test_m_marks_and_moves_the_cursor_down(children):
    """`m` marks the row and moves to the next one (so m m m marks three rows in a row): the
    documented behaviour, in the help and the README."""
    kids = three(children)

    async def go():
        mapping = {HOLDER: kids["holder"].pid, RANK0: kids["rank0"].pid}
        async with tab_on_children(mapping) as (app, pilot):
            t = table(app)
            await pilot.press("home")
            first = t.current
            await pilot.press("m")
            assert first is not None and first.ident in pane(app).marks and t.cursor == 1
            from gputui.ui.processes.process_list import ProcessList

            tooltip = next(b.tooltip for b in ProcessList.BINDINGS if getattr(b, "action", "") == "mark")
            assert "move to the next row" in tooltip

    run(go())


def test_in_a_replay_the_kill_and_mark_keys_say_why_they_do_nothing():
    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(160, 40)) as pilot:
            await open_tab(pilot)
            for key in ("T", "K", "I", "m"):
                before = len(notifications(app))
                await pilot.press(key)
                await pilot.pause()
                assert not isinstance(app.screen, SignalDialog) and not pane(app).marks
                new = notifications(app)[before:]
                assert new and "recording" in new[-1], (key, new)

    run(go())


def test_in_a_replay_the_detail_view_says_why_it_cannot_signal():
    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(160, 40)) as pilot:
            await open_tab(pilot)
            await pilot.press("enter")
            await pilot.pause()
            before = len(notifications(app))
            await pilot.press("K")
            await pilot.pause()
            assert not isinstance(app.screen, SignalDialog)
            new = notifications(app)[before:]
            assert new and "recording" in new[-1], new

    run(go())
