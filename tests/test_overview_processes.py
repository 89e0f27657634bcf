"""The Overview's process list, driven with real key presses and clicks: on replays of real
recordings, and on a real recording whose processes are put on real child processes
(tests/gpu_children.py), so that a kill from the Overview kills a real process."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from conftest import FROZEN, H200_X2, X8_240, X16_256, replay_app, run_to_tick, screen_lines, wait_for
from gpu_children import ReplayOntoChildren, alive, start_child

import gputui.ui.app
from gputui.ui.app import GpuTuiApp
from gputui.ui.overview.pane import OverviewPane
from gputui.ui.overview.widgets import GpuBoard
from gputui.ui.processes.process_list import ProcessList
from gputui.ui.processes.screens import ProcessDetailScreen, SignalDialog
from gputui.ui.processes.widgets import ProcessTable

HOLDER, RANK0, RANK1 = 567, 650, 651
"""The real processes of the 2x H200 recording: the idle 8 GiB holder (GPU 1) and two DDP ranks."""
TICK = 60


def run(coro):
    return asyncio.run(coro)


def procs(app) -> ProcessList:
    return app.query_one("#overview-processes", ProcessList)


def table(app) -> ProcessTable:
    return app.query_one("#overview-processes ProcessTable", ProcessTable)


def text(app) -> str:
    return "\n".join(screen_lines(app))


async def at_tick(pilot, tick: int = TICK) -> None:
    await run_to_tick(pilot, tick)
    await wait_for(pilot, lambda: table(pilot.app).rows)
    await pilot.pause()


def test_the_overview_lists_the_processes_largest_gpu_memory_first_with_their_gpu():
    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(160, 50)) as pilot:
            await at_tick(pilot)
            rows = table(app).rows
            mems = [r.proc.gpu_memory or 0 for r in rows]
            assert mems == sorted(mems, reverse=True)
            assert {(r.proc.gpu_index, r.proc.pid) for r in rows} == {(0, RANK0), (1, RANK1), (1, HOLDER)}
            lines = screen_lines(app)
            titles = next(ln for ln in lines if " PID " in ln and " COMMAND" in ln)
            assert titles.split()[0] == "GPU"
            holder = next(ln for ln in lines if f" {HOLDER} " in ln and "hold_memory" in ln)
            assert holder.split()[0] == "1"  # its GPU
            assert "8.6GiB" in holder
            # the list is below the cards, above the host panel, and nothing overlaps
            board = app.query_one(GpuBoard).region
            tab = table(app).region
            host = app.query_one("#host").region
            assert board.bottom <= tab.y and tab.bottom <= host.y

    run(go())


def test_nothing_moves_as_the_list_grows():
    """From the first tick (no process yet) to a tick with three, the cards and the
    process table keep their places and sizes."""

    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 2)
            await pilot.pause()
            before = (app.query_one(GpuBoard).region, table(app).region, app.query_one("#host").region)
            assert len(table(app).rows) < 3
            await at_tick(pilot)
            assert len(table(app).rows) == 3
            after = (app.query_one(GpuBoard).region, table(app).region, app.query_one("#host").region)
            assert after == before

    run(go())


def test_selecting_a_card_narrows_the_list_to_its_gpu():
    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(160, 50)) as pilot:
            await at_tick(pilot)
            await pilot.press("right")  # selects GPU 0
            assert {r.proc.gpu_index for r in table(app).rows} == {0}
            await pilot.press("right")
            assert {r.proc.pid for r in table(app).rows} == {RANK1, HOLDER}
            assert "filter GPU 1" in text(app)

    run(go())


def test_clicking_a_card_selects_it_and_a_double_click_opens_its_detail():
    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(160, 50)) as pilot:
            await at_tick(pilot)
            board = app.query_one(GpuBoard)
            right = board.size.width - 10  # inside the second card
            await pilot.click(GpuBoard, offset=(right, 3))
            assert board.selected == 1
            assert {r.proc.gpu_index for r in table(app).rows} == {1}
            await pilot.click(GpuBoard, offset=(5, 3), times=2)
            await wait_for(pilot, lambda: type(app.screen).__name__ == "GpuDetailScreen")
            assert board.selected == 0

    run(go())


def test_with_no_room_one_line_says_how_many_and_which_key():
    async def go():
        app = replay_app(X16_256)
        async with app.run_test(size=(80, 20)) as pilot:  # the 16 compact rows scroll
            await run_to_tick(pilot, 40)
            await wait_for(pilot, lambda: not procs(app).room)
            await pilot.pause()
            n = len(procs(app).all_rows)
            assert n > 100
            assert f"{n} GPU processes · press 2 to list them" in text(app)
            assert not table(app).display
            assert procs(app).region.height == 1
            await pilot.resize_terminal(80, 24)  # the 16 rows fit exactly: every GPU first
            await wait_for(pilot, lambda: not procs(app).display)
            assert "press 2 to list them" not in text(app)
            assert "15 H200" in text(app)

    run(go())


def test_enter_and_search_on_the_overview_list():
    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(160, 50)) as pilot:
            await at_tick(pilot)
            await pilot.press("slash")  # from the cards
            await pilot.press(*"hold_memory")
            await pilot.press("enter")
            assert [r.proc.pid for r in table(app).rows] == [HOLDER]
            assert table(app).has_focus
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, ProcessDetailScreen))
            assert f"{HOLDER}" in text(app)

    run(go())


def test_replays_disable_the_overview_kill_keys():
    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(160, 50)) as pilot:
            await at_tick(pilot)
            await pilot.press("K")
            await pilot.pause()
            assert not isinstance(app.screen, SignalDialog)
            pane = app.query_one(OverviewPane)
            assert pane.check_action("processes", ("signal", "KILL")) is None

    run(go())


def test_kill_from_the_overview_through_the_same_dialog(children):
    """SIGTERM from the Overview to a real child process mapped onto the recording's idle
    holder: the confirmed, pinned (PID + start time) path of the Processes tab."""
    kids = {"holder": start_child("holder"), "rank0": start_child("rank0"), "rank1": start_child("rank1")}
    children.extend(kids.values())
    holder = kids["holder"]
    mapping = {HOLDER: holder.pid, RANK0: kids["rank0"].pid, RANK1: kids["rank1"].pid}

    async def go():
        app = GpuTuiApp(source=ReplayOntoChildren(H200_X2, mapping), interval=FROZEN, watch_terminal=False)
        async with app.run_test(size=(160, 50)) as pilot:
            await at_tick(pilot)
            assert app.query_one(GpuBoard).has_focus
            await pilot.press("tab")  # into the process list
            t = table(app)
            assert t.has_focus
            while t.current is None or t.current.proc.pid != holder.pid:
                before = t.cursor
                await pilot.press("down")
                assert t.cursor != before, "the holder is not in the list"
            await pilot.press("T")
            await wait_for(pilot, lambda: isinstance(app.screen, SignalDialog))
            await pilot.pause()
            assert "Send SIGTERM to 1 process?" in text(app)
            assert alive(holder.pid)  # nothing sent before the answer
            await pilot.press("enter")
            assert holder.wait(timeout=30) == -signal.SIGTERM
            await wait_for(pilot, lambda: f"PID {holder.pid} exited" in text(app))
            assert alive(kids["rank0"].pid) and alive(kids["rank1"].pid)

    run(go())


def test_the_kill_keys_work_from_the_cards_too(children):
    """K pressed with the cards focused asks about the list's cursor row (the largest)."""
    kid = start_child("rank0")
    children.append(kid)

    async def go():
        app = GpuTuiApp(
            source=ReplayOntoChildren(H200_X2, {RANK0: kid.pid}), interval=FROZEN, watch_terminal=False
        )
        async with app.run_test(size=(160, 50)) as pilot:
            await at_tick(pilot)
            await pilot.press("right")  # GPU 0: only the rank on our child
            assert app.query_one(GpuBoard).has_focus
            assert [r.proc.pid for r in table(app).rows] == [kid.pid]
            await pilot.press("K")
            await wait_for(pilot, lambda: isinstance(app.screen, SignalDialog))
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, SignalDialog))
            await pilot.pause(0.2)
            assert alive(kid.pid)  # cancelled: nothing sent

    run(go())


def test_clicking_a_tab_label_switches_tab():
    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(160, 50)) as pilot:
            await at_tick(pilot)
            tabs = app.query_one("TabBar")
            for x0, _x1, pane_id in list(tabs.spans):
                await pilot.click("TabBar", offset=(x0 + 1, 0))
                await wait_for(pilot, lambda pane_id=pane_id: pane_id == app.current_pane().PANE_ID)
            assert [s[2] for s in tabs.spans] == ["overview", "processes", "topology", "diagnostics"]
            await pilot.click("TabBar", offset=(tabs.spans[0][0] + 2, 0))
            await wait_for(pilot, lambda: app.current_pane().PANE_ID == "overview")
        async with replay_app(H200_X2).run_test(size=(40, 24)) as pilot:  # narrow labels
            await run_to_tick(pilot, 2)
            tabs = pilot.app.query_one("TabBar")
            x0, _x1, pane_id = tabs.spans[1]
            await pilot.click("TabBar", offset=(x0 + 1, 0))
            await wait_for(pilot, lambda: pilot.app.current_pane().PANE_ID == "processes")

    run(go())


def test_the_list_shows_its_largest_rows_until_the_user_moves_into_it():
    """The Overview's list shows its first rows (largest GPU memory) whichever tick it was
    mounted at: the view does not follow a process as memory changes reorder the rows
    (under load, the 8-GPU snapshot came out scrolled by one row).  Once the user moves
    into the list (tab), it follows the cursor as the Processes tab does."""

    async def go():
        app = replay_app(X8_240)
        async with app.run_test(size=(160, 50)) as pilot:
            for tick in (5, 20, 35, 50, 65):
                await at_tick(pilot, tick)
                t = table(app)
                assert (t.top, t.cursor) == (0, 0), tick
                mems = [r.proc.gpu_memory or 0 for r in t.rows]
                assert t.rows[0].proc.gpu_memory == max(mems)
            # into the list, two rows down: the cursor's process is then kept in view
            await pilot.press("tab")
            await wait_for(pilot, lambda: table(app).has_focus)
            await pilot.press("down", "down")
            key = table(app).cursor_key
            await at_tick(pilot, 70)
            assert table(app).cursor_key == key

    run(go())


def test_quitting_as_the_first_frame_is_drawn_is_clean():
    """`q` (or a hang-up) right after the first frame, before the process list is mounted
    under the cards: the app ends without a MountError traceback."""

    class QuitsAtOnce(GpuTuiApp):
        CSS_PATH = str(Path(gputui.ui.app.__file__).with_name("gputui.tcss"))

        def _show_snapshot(self, snap, position) -> None:  # type: ignore[no-untyped-def]
            # (every snapshot's one path: a replay's first comes at mount, not as a message)
            first = self.snapshot is None
            super()._show_snapshot(snap, position)
            if first:  # queued behind the pane's mount of its process list
                self.call_after_refresh(self.exit, 0)

    async def go():
        from gputui.telemetry.recording import ReplaySource

        app = QuitsAtOnce(source=ReplaySource(H200_X2), interval=FROZEN, watch_terminal=False)
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_for(pilot, lambda: not app.is_running, timeout=10)
        return app

    app = run(go())
    assert app.return_code == 0


def test_one_process_list_and_one_signal_record_for_both_tabs(children):
    """The Overview's list and the Processes tab's are the same widget, and a signal sent
    from one is on the other's rows and status line: one signal path, one record (before,
    the Overview's list was a subclass of the Processes pane with its own record, and the
    Processes tab knew nothing of a SIGTERM sent from the Overview)."""
    holder = start_child("holder")
    children.append(holder)

    async def go():
        app = GpuTuiApp(
            source=ReplayOntoChildren(H200_X2, {HOLDER: holder.pid}), interval=FROZEN, watch_terminal=False
        )
        async with app.run_test(size=(160, 50)) as pilot:
            await at_tick(pilot)
            await pilot.press("tab")  # into the Overview's list
            t = table(app)
            while t.current is None or t.current.proc.pid != holder.pid:
                before = t.cursor
                await pilot.press("down")
                assert t.cursor != before, "the holder is not in the list"
            await pilot.press("T")
            await wait_for(pilot, lambda: isinstance(app.screen, SignalDialog))
            await pilot.press("enter")
            assert holder.wait(timeout=30) == -signal.SIGTERM
            await wait_for(pilot, lambda: f"PID {holder.pid} exited" in text(app))

            await pilot.press("2")
            await wait_for(pilot, lambda: app.query("#processes ProcessTable"))
            tab_list = app.query_one("#processes ProcessList", ProcessList)
            assert type(tab_list) is type(procs(app)) is ProcessList
            await wait_for(pilot, lambda: tab_list.table.rows)
            await pilot.pause()
            ident = next(r.ident for r in tab_list.all_rows if r.proc.pid == holder.pid)
            assert ident in tab_list.watches  # the Overview's signal, on this tab's row
            lines = screen_lines(app)
            row = next(ln for ln in lines if f" {holder.pid} " in ln)
            assert "exited" in row and "after SIGTERM" in row
            assert any(f"PID {holder.pid} exited" in ln for ln in lines)  # its status line

    run(go())
