"""The Processes tab driven with real key presses: on replays of real recordings, and on a
real recording whose processes are put on real child processes (tests/gpu_children.py),
so that killing through the dialog kills real processes."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import subprocess

import psutil
import pytest
from conftest import FROZEN, H200_X2, X8_240, replay_app, run_to_tick, screen_lines, wait_for
from gpu_children import (
    ReplayOntoChildren,
    alive,
    can_choose_pids,
    start_child,
    start_child_with_pid,
    start_stubborn,
)

from gputui.telemetry.host.cmdline import readable_command
from gputui.telemetry.recording import read_recording
from gputui.ui.app import GpuTuiApp
from gputui.ui.processes.lines import column_spans, fmt_mem
from gputui.ui.processes.pane import ProcessesPane
from gputui.ui.processes.process_list import ProcessList
from gputui.ui.processes.rows import NOT_VISIBLE, RowBuilder, ViewState, arrange
from gputui.ui.processes.screens import ProcessDetailScreen, SignalDialog
from gputui.ui.processes.widgets import ProcessTable

HOLDER, RANK0, RANK1 = 567, 650, 651
"""The real processes of the 2x H200 recording: the idle 8 GiB holder (GPU 1) and two DDP ranks."""
TICK = 60  # all three on their GPUs, the ranks at ~100 % SM


def run(coro):
    return asyncio.run(coro)


def replay_from(path, tick: int, **kwargs) -> GpuTuiApp:
    """A frozen replay whose first frame is recorded tick `tick` (as `--start` does)."""
    app = replay_app(path, **kwargs)
    app.source.seek(tick - 2)
    return app


def children_app(mapping: dict[int, int], **kwargs) -> GpuTuiApp:
    verify = kwargs.pop("verify_gpu_files", False)
    source = ReplayOntoChildren(H200_X2, mapping, verify_gpu_files=verify)
    return GpuTuiApp(source=source, interval=FROZEN, watch_terminal=False, **kwargs)


@contextlib.asynccontextmanager
async def tab_on_children(mapping: dict[int, int], size: tuple[int, int] = (160, 40), **kwargs):
    """The app on the real recording with its processes on `mapping`'s children, on the
    Processes tab at tick TICK: yields (app, pilot)."""
    app = children_app(mapping, **kwargs)
    async with app.run_test(size=size) as pilot:
        await open_tab(pilot)
        yield app, pilot


def three(children) -> dict[str, subprocess.Popen[bytes]]:
    kids = {"holder": start_child("holder"), "rank0": start_child("rank0"), "rank1": start_child("rank1")}
    children.extend(kids.values())
    return kids


def mapping_of(kids) -> dict[int, int]:
    return {HOLDER: kids["holder"].pid, RANK0: kids["rank0"].pid, RANK1: kids["rank1"].pid}


def table(app) -> ProcessTable:
    return app.query_one("#processes ProcessTable", ProcessTable)


def pane(app) -> ProcessList:
    return app.query_one("#processes", ProcessesPane).list


def text(app) -> str:
    return "\n".join(screen_lines(app))


async def open_tab(pilot, tick: int = TICK) -> None:
    await run_to_tick(pilot, tick)
    await pilot.press("2")
    await wait_for(pilot, lambda: table(pilot.app).rows)
    await pilot.pause()


async def cursor_to(pilot, pid: int) -> None:
    """Move the cursor with real keys (home or end, pages, then arrows) onto `pid`."""
    t = table(pilot.app)
    target = next((i for i, r in enumerate(t.rows) if r.proc.pid == pid), None)
    assert target is not None, f"PID {pid} is not in the table"
    page = max(1, t.body_height - 1)
    if abs(target - t.cursor) > page:
        await pilot.press("home" if target < len(t.rows) // 2 else "end")
    while abs(target - t.cursor) > page:
        await pilot.press("pagedown" if t.cursor < target else "pageup")
    while t.cursor != target:
        await pilot.press("down" if t.cursor < target else "up")
    assert t.current is not None and t.current.proc.pid == pid


async def ask(pilot, key: str) -> None:
    """Press a signal key and wait for the confirmation."""
    await pilot.press(key)
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, SignalDialog))
    await pilot.pause()


async def answer(pilot, key: str) -> None:
    """Answer the confirmation and wait for it to close."""
    await pilot.press(key)
    await wait_for(pilot, lambda: not isinstance(pilot.app.screen, SignalDialog))


async def step(pilot) -> None:
    app = pilot.app
    before = app.query_one("HeaderBar").position[0]
    app.poller.step(1)
    await wait_for(pilot, lambda: app.query_one("HeaderBar").position[0] != before)
    await pilot.pause()


# ---- the table on replays ----------------------------------------------------------------


def test_table_shows_every_recorded_process_with_its_values():
    _, ticks = read_recording(H200_X2)
    snap = ticks[TICK - 1]

    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(160, 40)) as pilot:
            await open_tab(pilot)
            screen = text(app)
            assert "3 processes on 2 GPUs" in screen
            for p in snap.processes:
                line = next(ln for ln in screen_lines(app) if f" {p.pid} " in ln)
                assert fmt_mem(p.gpu_memory) in line
                assert f" {p.sm_util} " in line
                assert p.user in line
                # the script and its arguments first, the interpreter after: "ddp_like.py ... (python3)"
                assert readable_command(p.cmdline)[:40] in line
            # the default order: GPU memory, largest first; ties by GPU, then PID
            assert "sort GPU MEM▼" in screen
            assert [r.proc.pid for r in table(app).rows] == [RANK0, RANK1, HOLDER]

    run(go())


def test_sorting_by_keys_and_by_clicking_a_title():
    _, ticks = read_recording(X8_240)

    async def go():
        app = replay_from(X8_240, 40)
        async with app.run_test(size=(160, 50)) as pilot:
            await open_tab(pilot, 40)
            rows = RowBuilder().rows(ticks[39])
            t = table(app)
            state = pane(app).state
            assert (state.sort_key, state.descending) == ("gpu_memory", True)  # the default
            assert [r.key for r in t.rows] == [r.key for r in arrange(rows, state, None)]
            await pilot.press("S", "S", "S", "S")  # back: TYPE, USER, PID, GPU
            assert (state.sort_key, state.descending) == ("gpu", False)
            assert "sort GPU▲" in text(app)
            assert [r.key for r in t.rows] == sorted(r.key for r in rows)
            await pilot.press("s", "s", "s", "s")  # forward again: GPU MEM, largest first
            assert (state.sort_key, state.descending) == ("gpu_memory", True)
            await pilot.press("r")
            assert not state.descending and "sort GPU MEM▲" in text(app)
            mems = [r.proc.gpu_memory for r in t.rows]
            assert mems == sorted(mems)
            # click the SM% title: sorted by it (largest first); click again: reversed
            x = next(x0 for c, x0, _ in column_spans(t.columns, t.size.width) if c.key == "sm_util")
            await pilot.click("#processes ProcessTable", offset=(x + 1, 0))
            assert state.sort_key == "sm_util" and state.descending
            sm = [r.proc.sm_util for r in t.rows]
            assert sm == sorted(sm, reverse=True)
            await pilot.click("#processes ProcessTable", offset=(x + 1, 0))
            assert not state.descending
            await pilot.press("greater_than_sign")  # > as in htop: the next column
            assert state.sort_key == "mem_util"

    run(go())


def test_filters_search_and_clearing():
    async def go():
        app = replay_from(X8_240, 40)
        async with app.run_test(size=(160, 50)) as pilot:
            await open_tab(pilot, 40)
            t = table(app)
            total = len(t.rows)
            assert total == 240
            await pilot.press("f", "f", "f", "f")  # all -> 0 -> 1 -> 2 -> 3
            assert {r.key[0] for r in t.rows} == {3}
            assert "filter GPU 3" in text(app)
            assert f"{len(t.rows)} of 240 processes" in text(app)
            await pilot.press("F")
            assert {r.key[0] for r in t.rows} == {2}
            await pilot.press("t")  # compute only: these are all compute
            assert "GPU 2 · compute" in text(app)
            await pilot.press("escape")  # no marks: clears the filters
            assert len(t.rows) == total and "filter none" in text(app)
            await pilot.press("slash")
            await pilot.press(*"hold_mem")
            assert t.rows and all("hold_memory" in r.command for r in t.rows)
            assert "/hold_mem" in text(app)
            await pilot.press("enter")  # keeps the search, back to the table
            assert t.has_focus and pane(app).state.search == "hold_mem"
            await pilot.press("slash", "escape")  # esc in the search box clears it
            assert pane(app).state.search == "" and len(t.rows) == total and t.has_focus
            await pilot.press("u")  # mine: the recorded user is root
            mine = len(t.rows)
            assert mine == (total if pane(app).me == "root" else 0)

    run(go())


def test_cursor_stays_on_its_process_across_ticks_sorts_and_filters():
    async def go():
        app = replay_from(X8_240, 45)
        async with app.run_test(size=(160, 50)) as pilot:
            await open_tab(pilot, 45)
            t = table(app)
            await cursor_to(pilot, 20097)
            await pilot.press("down", "down", "up", "up")
            key = t.current.key
            screen_row = t.cursor - t.top
            for _ in range(3):  # ticks: same process, same screen row
                await step(pilot)
                assert t.current.key == key and t.cursor - t.top == screen_row
            await pilot.press("s", "s", "s", "s")  # a new sort shows the top (test_process_bugs.py)
            assert (t.cursor, t.top) == (0, 0)
            await cursor_to(pilot, 20097)
            await pilot.press("down", "down", "up", "up")
            assert t.current.key == key
            await pilot.press("slash", *"hold", "enter")  # a search that keeps it
            assert "hold_memory" in t.current.command and t.current.key == key
            await pilot.press("escape", "escape")  # (no marks) filters cleared: still on it
            assert t.current.key == key
            await pilot.press("f")  # GPU 0 only: its process (GPU 7) is filtered out
            assert t.current is not None and t.current.key[0] == 0

    run(go())


def test_a_process_that_ends_leaves_the_cursor_where_it_was():
    _, ticks = read_recording(X8_240)

    async def go():
        app = replay_from(X8_240, 76, default_sort="gpu_index")  # GPU 3's rows mid-table
        async with app.run_test(size=(160, 30)) as pilot:
            await open_tab(pilot, 76)
            t = table(app)
            await cursor_to(pilot, 20000)  # GPU 3; it ends at tick 78
            await pilot.press("up", "up", "down", "down")
            index, screen_row = t.cursor, t.cursor - t.top
            await step(pilot)
            assert t.current.key == (3, 20000)
            await step(pilot)  # tick 78: it has ended
            expected = arrange(RowBuilder().rows(ticks[77]), pane(app).state, None)
            assert all(r.key != (3, 20000) for r in t.rows)
            assert t.cursor == index and t.cursor - t.top == screen_row  # no jump
            assert t.current.key == expected[index].key  # the row that took its place

    run(go())


def test_replays_disable_signals_and_readonly_hides_them():
    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(160, 40)) as pilot:
            await open_tab(pilot)
            p = pane(app)
            # not offered (nothing to signal); pressed anyway they say why (test_process_bugs.py)
            assert p.check_action("signal", ("TERM",)) is False and p.check_signal() is None
            assert p.check_action("refused", ()) is True
            await pilot.press("T", "K", "I", "m")
            assert not isinstance(app.screen, SignalDialog) and not p.marks
            assert "SIGTERM" not in screen_lines(app)[-1]
        app = replay_app(H200_X2, readonly=True, default_sort="pid")  # as the config file sets them
        async with app.run_test(size=(160, 40)) as pilot:
            await open_tab(pilot)
            p = pane(app)
            for action in ("signal", "mark"):
                assert p.check_action(action, ()) is False
            footer = screen_lines(app)[-1]
            assert "SIGTERM" not in footer and "SIGKILL" not in footer and "Mark" not in footer
            assert "read-only" in text(app)
            assert "sort PID▲" in text(app)
            assert [r.proc.pid for r in table(app).rows] == [HOLDER, RANK0, RANK1]
            await pilot.press("T", "K", "I", "m")
            assert not isinstance(app.screen, SignalDialog)
            await pilot.press("question_mark")
            from gputui.ui.help import HelpScreen

            await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
            help_text = app.screen.help_text()  # all of it, not just what fits on screen
            assert "Send SIGTERM" not in help_text and "Mark or unmark" not in help_text
            assert "Sort by the next column" in help_text

    run(go())


# ---- signalling real processes -----------------------------------------------------------


def test_kill_the_selected_process_through_the_dialog(children):
    kids = three(children)
    holder = kids["holder"]

    async def go():
        async with tab_on_children(mapping_of(kids)) as (app, pilot):
            await cursor_to(pilot, holder.pid)
            await ask(pilot, "T")
            dialog = text(app)
            assert "Send SIGTERM to 1 process?" in dialog
            row = next(ln for ln in screen_lines(app) if f" {holder.pid} " in ln)
            owner = psutil.Process(holder.pid).username()  # whoever runs the tests
            assert f" {owner} " in row and " 1 " in row and "8.6GiB" in row  # user, GPU, GPU memory
            assert "holder" in dialog  # the command line
            assert alive(holder.pid)  # nothing sent before the answer
            await pilot.press("enter")
            assert holder.wait(timeout=30) == -signal.SIGTERM
            await wait_for(pilot, lambda: "exited" in text(app))
            assert f"PID {holder.pid} exited" in text(app)
            assert alive(kids["rank0"].pid) and alive(kids["rank1"].pid)
            await step(pilot)  # the next tick: its row is gone, the others stay
            assert {r.proc.pid for r in table(app).rows} == {kids["rank0"].pid, kids["rank1"].pid}

    run(go())


def test_cancel_sends_nothing(children):
    kids = three(children)

    async def go():
        async with tab_on_children(mapping_of(kids)) as (_app, pilot):
            await cursor_to(pilot, kids["rank0"].pid)
            await ask(pilot, "K")
            await answer(pilot, "n")
            await ask(pilot, "K")
            await answer(pilot, "escape")
            await pilot.pause(0.2)
            assert all(alive(k.pid) for k in kids.values())

    run(go())


def test_mark_several_and_kill_them_together(children):
    kids = three(children)

    async def go():
        async with tab_on_children(mapping_of(kids)) as (app, pilot):
            await cursor_to(pilot, kids["rank0"].pid)
            await pilot.press("m")
            await cursor_to(pilot, kids["rank1"].pid)
            await pilot.press("m")
            assert "2 marked" in text(app)
            await cursor_to(pilot, kids["holder"].pid)  # the cursor elsewhere: the marks count
            await ask(pilot, "K")
            assert "Send SIGKILL to 2 processes?" in text(app)
            assert f" {kids['holder'].pid} " not in text(app)
            await pilot.press("y")
            assert kids["rank0"].wait(timeout=30) == -signal.SIGKILL
            assert kids["rank1"].wait(timeout=30) == -signal.SIGKILL
            assert alive(kids["holder"].pid)
            await wait_for(pilot, lambda: not pane(app).marks)

    run(go())


def test_a_process_that_ignores_sigterm_offers_sigkill(children):
    stubborn = start_stubborn()
    children.append(stubborn)

    async def go():
        async with tab_on_children({HOLDER: stubborn.pid}) as (app, pilot):
            await cursor_to(pilot, stubborn.pid)
            await ask(pilot, "T")
            await pilot.press("y")
            await wait_for(pilot, lambda: "SIGTERM sent · still running after" in text(app))
            assert "K: SIGKILL" in text(app)
            await ask(pilot, "K")
            await pilot.press("y")
            assert stubborn.wait(timeout=30) == -signal.SIGKILL

    run(go())


@pytest.mark.skipif(not can_choose_pids(), reason="cannot set ns_last_pid here (needs CAP_SYS_ADMIN)")
def test_a_reused_pid_is_refused(children):
    """The selected process exits, a new process gets its PID, and the next tick shows the
    new one in the same row: the signal for the one the user saw is refused."""
    kids = three(children)
    holder = kids["holder"]
    mapping = mapping_of(kids)

    async def go():
        async with tab_on_children(mapping) as (app, pilot):
            await cursor_to(pilot, holder.pid)
            seen = table(app).current.ident
            holder.kill()
            holder.wait(timeout=10)
            await asyncio.sleep(0.05)  # a start time in a later clock tick
            new = start_child_with_pid(holder.pid, "newcomer")
            if new is None:
                pytest.skip("other processes kept taking the PID")
            children.append(new)
            await step(pilot)  # the table data now has the new process under that PID
            row = table(app).current
            assert row.proc.pid == holder.pid and row.ident != seen
            # ... but the user acts on the row as it was when selected (the old process)
            old_row = dataclasses.replace(row, proc=dataclasses.replace(row.proc, create_time=seen[1]))
            pane(app).ask_to_signal([old_row], "KILL")
            await wait_for(pilot, lambda: "different process" in text(app))
            assert not isinstance(app.screen, SignalDialog)  # refused before asking
            assert alive(new.pid)

    run(go())


@pytest.mark.skipif(not can_choose_pids(), reason="cannot set ns_last_pid here (needs CAP_SYS_ADMIN)")
def test_a_pid_reused_while_the_dialog_is_open_is_never_signalled(children):
    kids = three(children)
    holder = kids["holder"]

    async def go():
        async with tab_on_children(mapping_of(kids)) as (app, pilot):
            await cursor_to(pilot, holder.pid)
            await ask(pilot, "K")
            holder.kill()  # it exits while the user reads the dialog, and its PID is reused
            holder.wait(timeout=10)
            new = start_child_with_pid(holder.pid, "while-asking")
            if new is None:
                pytest.skip("other processes kept taking the PID")
            children.append(new)
            await pilot.press("y")
            await wait_for(pilot, lambda: any(i[0] == holder.pid for i in pane(app).watches))
            (watch,) = pane(app).watches.values()
            assert not watch.result.sent, watch.result
            assert watch.result.outcome.value in ("gone", "reused")
            await pilot.pause(0.3)
            assert alive(new.pid)

    run(go())


def test_escape_sequences_and_markup_render_literally_everywhere(children):
    nasty = start_child("nasty", "\x1b[2J", "\x1b]0;title\x07", "[bold red]x[/]")
    children.append(nasty)
    wanted = ("\\x1b[2J", "\\x1b]0;title\\x07", "[bold red]x[/]")

    async def go():
        # wide: the command line starts with the interpreter's path, whose length depends on
        # where the checkout is; the hostile arguments come after it
        async with tab_on_children({HOLDER: nasty.pid}, size=(400, 40)) as (app, pilot):
            screen = text(app)
            for w in wanted:
                assert w in screen, w  # the table
            await ask(pilot, "T")
            folded = "".join(text(app).replace("█", "").split())  # the dialog wraps the command
            for w in wanted:
                assert "".join(w.split()) in folded, w  # the dialog
            await answer(pilot, "n")
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, ProcessDetailScreen))
            await wait_for(pilot, lambda: app.screen.data.facts is not None)
            await pilot.pause()
            for w in wanted:
                assert w in text(app), w  # the detail view
            assert alive(nasty.pid)

    run(go())


def test_detail_view_shows_what_the_process_is(children, tmp_path):
    # a small environment of its own: the expanded list must fit the screen on any machine
    # (a GPU host's environment holds dozens of variables that sort before OTHER_VAR)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "CUDA_VISIBLE_DEVICES": "3",
        "NCCL_DEBUG": "INFO",
        "MY_API_TOKEN": "s3cr3t",
        "OTHER_VAR": "x",
    }
    kid = subprocess.Popen(
        ["python3", "-c", "import os, time; os.fork() or time.sleep(600); time.sleep(600)", "detail-child"],
        cwd=tmp_path,
        env=env,
    )
    children.append(kid)

    async def go():
        await wait_started_with_child(kid.pid)
        async with tab_on_children({RANK0: kid.pid}, size=(160, 50)) as (app, pilot):
            for _ in range(3):
                await step(pilot)
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, ProcessDetailScreen))
            await wait_for(pilot, lambda: app.screen.data.facts is not None)
            await pilot.pause()
            screen = text(app)
            assert f"PID {kid.pid}" in screen and "on GPU 0" in screen
            assert "detail-child" in screen
            assert str(tmp_path) in screen  # cwd
            assert f"{os.getpid()} " in screen  # its parent: this test
            child_pid = psutil.Process(kid.pid).children()[0].pid
            assert f"{child_pid} python3" in screen  # its child
            assert "CUDA_VISIBLE_DEVICES=3" in screen and "NCCL_DEBUG=INFO" in screen
            assert "OTHER_VAR" not in screen and "more variables: press e" in screen
            assert "GPU memory" in screen and "SM %" in screen
            await pilot.press("e")
            await pilot.pause()
            screen = text(app)
            assert "OTHER_VAR=x" in screen
            assert "MY_API_TOKEN=(hidden" in screen and "s3cr3t" not in screen
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, ProcessDetailScreen))
        for p in psutil.Process(kid.pid).children():
            p.kill()

    run(go())


async def wait_started_with_child(pid: int) -> None:
    for _ in range(500):
        try:
            if psutil.Process(pid).children():
                return
        except psutil.NoSuchProcess:
            break
        await asyncio.sleep(0.01)
    raise AssertionError("the child did not fork")


# ---- containers --------------------------------------------------------------------------


def test_processes_not_visible_from_this_namespace(children):
    """The container check for real: our children hold no /dev/nvidia* file, so to a
    gputui that verifies (as it does outside the host's PID namespace) they are some other
    local processes that happen to have NVML's PIDs."""
    kids = three(children)

    async def go():
        async with tab_on_children(mapping_of(kids), verify_gpu_files=True) as (app, pilot):
            screen = text(app)
            assert "3 GPU processes not visible from this PID namespace" in screen
            assert "--pid=host" in screen
            assert screen.count(NOT_VISIBLE) >= 3
            assert "holder" not in screen  # the local process's facts are not shown as the GPU one's
            await cursor_to(pilot, kids["holder"].pid)
            await pilot.press("T", "m")
            await pilot.pause()
            assert not isinstance(app.screen, SignalDialog) and not pane(app).marks
            assert all(alive(k.pid) for k in kids.values())

    run(go())


def test_unlisted_memory_is_shown(children):
    kids = three(children)

    async def go():
        ours = {RANK0: kids["rank0"].pid, RANK1: kids["rank1"].pid}  # the holder: not ours
        async with tab_on_children(ours) as (app, _pilot):
            assert "GPU memory used by no listed process: GPU 1 8.6GiB" in text(app)

    run(go())


def test_view_state_defaults_sort_by_gpu_then_pid():
    assert ViewState().sort_key == "gpu" and not ViewState().descending


def test_readonly_flag_from_the_command_line():
    """`gputui --demo --readonly` in a real pseudo-terminal: no kill key anywhere."""
    import fcntl
    import pty
    import select
    import struct
    import sys
    import termios
    import time

    import pyte

    cols, rows = 160, 40
    env = dict(os.environ, TERM="xterm-256color")
    pid, fd = pty.fork()
    if pid == 0:
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        os.execvpe(sys.executable, [sys.executable, "-m", "gputui", "--demo", "--readonly"], env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    screen = pyte.Screen(cols, rows)
    stream = pyte.ByteStream(screen)

    def pump(until: str, seconds: float = 20.0) -> str:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            r, _, _ = select.select([fd], [], [], 0.05)
            if r:
                stream.feed(os.read(fd, 65536))
            text = "\n".join(screen.display)
            if until in text:
                return text
        raise AssertionError(f"{until!r} not on screen")

    try:
        pump("NVIDIA H200")
        os.write(fd, b"2")
        pump("read-only")
        text = pump("Search")  # the footer, redrawn with the tab's keys
        assert "processes on 2 GPUs" in text or "no GPU processes" in text
        footer = next(line for line in screen.display if "Search" in line)
        assert "SIGTERM" not in footer and "SIGKILL" not in footer and "Mark" not in footer
        assert "Search" in footer
    finally:
        os.write(fd, b"q")
        for _ in range(100):
            if os.waitpid(pid, os.WNOHANG)[0]:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)


def test_mouse_click_selects_and_double_click_opens_the_detail():
    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(160, 40)) as pilot:
            await open_tab(pilot)
            t = table(app)
            await pilot.click("#processes ProcessTable", offset=(20, 3))  # header + 3rd row
            assert t.cursor == 2 and t.current.proc.pid == HOLDER
            await pilot.click("#processes ProcessTable", offset=(20, 2), times=2)
            await wait_for(pilot, lambda: isinstance(app.screen, ProcessDetailScreen))
            assert app.screen.key == (1, RANK1)
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, ProcessDetailScreen))
            await pilot.press("enter")  # enter opens it too
            await wait_for(pilot, lambda: isinstance(app.screen, ProcessDetailScreen))
            samples = len(app.screen.data.sm)
            await step(pilot)  # ticks reach the detail view while it is open
            await step(pilot)
            assert len(app.screen.data.sm) == samples + 2

    run(go())
