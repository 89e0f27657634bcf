"""`/` finds a process by its PID (issue 31: it searched only user, command line and job):
digits match the PIDs that are or begin with them, beside the text matches.  Real key presses
on the REAL 2x H200 recording (tests/fixtures: PIDs 650 and 651, ranks of ddp_like.py; 567,
hold_memory.py; no command line holds "65" or "56")."""

from __future__ import annotations

import asyncio

import pytest
from conftest import H200_X2, replay_app, run_to_tick, wait_for

from gputui.ui.processes.pane import ProcessesPane
from gputui.ui.processes.rows import RowBuilder, ViewState, filter_rows
from gputui.ui.processes.widgets import ProcessTable


async def search(needle: str) -> tuple[set[int], str]:
    app = replay_app(H200_X2)
    async with app.run_test(size=(120, 30)) as pilot:
        await run_to_tick(pilot, 60)
        await pilot.press("2")
        table = app.query_one("#processes ProcessTable", ProcessTable)
        await wait_for(pilot, lambda: len(table.rows) == 3)
        await pilot.press("slash", *needle, "enter")
        await pilot.pause()
        assert app.query_one("#processes", ProcessesPane).list.state.search == needle
        return {r.proc.pid for r in table.rows}, table.empty_text


@pytest.mark.parametrize(
    ("needle", "pids"),
    [
        ("650", {650}),  # exact
        ("65", {650, 651}),  # prefix
        ("56", {567}),  # prefix of 567
        ("6511", set()),  # longer than any: none
        ("50", set()),  # inside a PID, not its start: not a PID match (nor any command's)
        ("ddp", {650, 651}),  # text as before
        ("8", {567}),  # digits in a command line still match it (--gib 8)
    ],
)
def test_slash_finds_a_process_by_its_pid(needle, pids) -> None:
    shown, empty = asyncio.run(search(needle))
    assert shown == pids
    if not pids:
        assert "no process matches" in empty


def test_a_pid_search_finds_a_row_whose_process_is_not_visible() -> None:
    """A PID NVML reports that gputui cannot see (another PID namespace) has no user or command
    to search, but its PID is on its row."""
    from gputui.telemetry.model import GpuProcess, Snapshot

    proc = GpuProcess(gpu_index=0, pid=424242, visible=False)
    rows = RowBuilder().rows(Snapshot(seq=0, timestamp=0.0, processes=(proc,)))
    assert [r.proc.pid for r in filter_rows(rows, ViewState(search="4242"), None)] == [424242]
    assert filter_rows(rows, ViewState(search="2424"), None) == []
