"""The processes view as plain data (no Textual): rows from real recordings, sorting,
filtering, search, the cursor's placement, formatting, escaping, and per-process history."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest
from conftest import H200_X2, X8_240

from gputui.telemetry.history import MAX_PROCESSES, History
from gputui.telemetry.host.cmdline import readable_command
from gputui.telemetry.model import GpuProcess, Snapshot
from gputui.telemetry.recording import read_recording
from gputui.ui.processes.lines import (
    fmt_elapsed,
    fmt_mem,
    literal,
    notice_lines,
    row_line,
    summary_line,
    table_lines,
    unlisted_memory,
    visible_columns,
)
from gputui.ui.processes.rows import (
    COLUMNS,
    NOT_VISIBLE,
    RowBuilder,
    ViewState,
    arrange,
    command_text,
    filter_rows,
    place_cursor,
    sort_rows,
    view_state_for,
)


@pytest.fixture(scope="module")
def x8():
    return read_recording(X8_240)


@pytest.fixture(scope="module")
def x2():
    return read_recording(H200_X2)


def text(line) -> str:
    return "".join(t for t, _ in line)


# ---- untrusted text ----------------------------------------------------------------------


def test_escape_sequences_and_markup_are_shown_as_text():
    argv = ["python", "\x1b[2J", "\x1b]0;title\x07", "[bold red]x[/]", "tab\there", "wide：字"]
    cmd = command_text(argv)
    assert "\x1b" not in cmd and "\x07" not in cmd and "\t" not in cmd
    assert "\\x1b[2J" in cmd
    assert "\\x1b]0;title\\x07" in cmd
    assert "[bold red]x[/]" in cmd
    assert "'tab\\x09here'" in cmd  # quoted: it held whitespace
    assert "\\uff1a\\u5b57" in cmd  # double-width characters: one cell per character, always
    assert all(ch.isprintable() for ch in cmd)
    assert literal("plain text") == "plain text"


def test_command_text_quotes_arguments_with_spaces_and_names_kernel_threads():
    assert (
        command_text(["python", "train.py", "--name", "my run", ""]) == "python train.py --name 'my run' ''"
    )
    assert command_text(["sh", "-c", "echo 'hi'"]) == "sh -c 'echo '\\''hi'\\'''"
    assert command_text(None, "kworker/0:1") == "[kworker/0:1]"
    assert command_text((), None) == "?"


# ---- rows from a real recording --------------------------------------------------------


def test_rows_are_one_per_process_and_gpu_with_the_recorded_values(x2):
    _, ticks = x2
    snap = ticks[59]
    rows = RowBuilder().rows(snap)
    assert [r.key for r in rows] == [(p.gpu_index, p.pid) for p in snap.processes]
    for r, p in zip(rows, snap.processes, strict=True):
        assert r.proc is p
        # the script and its arguments first, the interpreter after (readable_command)
        assert r.command == literal(readable_command(p.cmdline) or "") or r.command == command_text(
            None, p.name
        )
        assert command_text(p.cmdline, p.name).lower() in r.haystack  # the full line stays searchable
        assert r.elapsed == pytest.approx(snap.timestamp - p.create_time)
    # the table's totals agree with the overview card's "N processes · X GiB" per GPU
    for gpu in (0, 1):
        mine = [r for r in rows if r.key[0] == gpu]
        line = text(summary_line(mine, len(mine), ViewState(gpu=gpu), 160))
        n = len(mine)
        assert f"{n} process{'es' if n != 1 else ''}" in line
        assert fmt_mem(sum(r.proc.gpu_memory or 0 for r in mine)) in line


def test_not_visible_rows_carry_no_host_facts_and_say_so(x2):
    _, ticks = x2
    snap = ticks[59]
    hidden = dataclasses.replace(
        snap,
        processes=tuple(
            GpuProcess(p.gpu_index, p.pid, p.type, p.gpu_memory, p.sm_util, visible=False)
            for p in snap.processes
        ),
    )
    rows = RowBuilder().rows(hidden)
    assert all(r.command == NOT_VISIBLE and r.ident is None for r in rows)
    line = text(row_line(rows[0], visible_columns(160), 160))
    assert NOT_VISIBLE in line and "root" not in line
    notes = [text(x) for x in notice_lines(rows, [], 160, live=True, own_namespace=True)]
    joined = " ".join(notes)
    assert f"{len(rows)} GPU processes not visible from this PID namespace" in joined
    assert "--pid=host" in joined and "own PID namespace" in joined


# ---- sorting and filtering -------------------------------------------------------------


@pytest.mark.parametrize("key", [c.key for c in COLUMNS])
@pytest.mark.parametrize("descending", [False, True])
def test_every_column_sorts_with_ties_by_gpu_and_pid_and_unknowns_last(x8, key, descending):
    _, ticks = x8
    rows = RowBuilder().rows(ticks[39])
    # a row without a value (a process NVML gave no memory for) goes last either way
    rows[5].proc = dataclasses.replace(rows[5].proc, gpu_memory=None, cpu_percent=None, user=None)
    out = sort_rows(rows, key, descending)
    assert sorted(r.key for r in out) == sorted(r.key for r in rows)

    def value(r):
        return {
            "gpu": r.key[0],
            "pid": r.key[1],
            "elapsed": r.elapsed,
            "command": r.command.lower(),
            "user": (r.proc.user or "").lower(),
            "type": r.proc.type,
        }.get(key, getattr(r.proc, key, None))

    known = [r for r in out if value(r) is not None]
    assert out[: len(known)] == known  # unknowns at the end
    for a, b in itertools.pairwise(known):
        va, vb = value(a), value(b)
        assert (va >= vb) if descending else (va <= vb)
        if va == vb:
            assert a.key < b.key  # ties: GPU, then PID, ascending


def test_filters_and_search(x8, x2):
    _, ticks = x8
    rows = RowBuilder().rows(ticks[39])
    assert {r.key[0] for r in filter_rows(rows, ViewState(gpu=3), None)} == {3}
    holders = filter_rows(rows, ViewState(search="HOLD_memory"), None)  # case-insensitive
    assert holders and all("hold_memory" in r.command for r in holders)
    assert filter_rows(rows, ViewState(search="root"), None) == rows  # the user is searched
    assert filter_rows(rows, ViewState(mine=True), "root") == rows
    assert filter_rows(rows, ViewState(mine=True), "alice") == []
    assert filter_rows(rows, ViewState(compute_only=True), None) == rows  # all compute here
    graphics = [dataclasses.replace(rows[0], proc=dataclasses.replace(rows[0].proc, type="G"))]
    assert filter_rows(graphics, ViewState(compute_only=True), None) == []
    both = [dataclasses.replace(rows[0], proc=dataclasses.replace(rows[0].proc, type="C+G"))]
    assert filter_rows(both, ViewState(compute_only=True), None) == both
    state = ViewState(gpu=1, search="hold", sort_key="gpu_memory", descending=True)
    out = arrange(rows, state, None)
    assert out and all(r.key[0] == 1 and "hold" in r.command for r in out)
    assert [r.proc.gpu_memory for r in out] == sorted((r.proc.gpu_memory for r in out), reverse=True)
    assert state.filters() == ["GPU 1", "/hold"]


# ---- the cursor --------------------------------------------------------------------------


def test_cursor_follows_its_process_and_keeps_its_screen_row():
    keys = [(0, p) for p in range(100)]
    # rows appear above: same process, same screen row (the view scrolls with it)
    index, top = place_cursor([(0, -1), (0, -2), *keys], (0, 50), 50, 10, 20)
    assert index == 52 and index - top == 10
    # its process ends: the row that took its place (same index), same screen row
    gone = [k for k in keys if k != (0, 50)]
    index, top = place_cursor(gone, (0, 50), 50, 10, 20)
    assert gone[index] == (0, 51) and index - top == 10
    # the last row ends: the new last row
    index, _ = place_cursor(keys[:-1], (0, 99), 99, 19, 20)
    assert index == 98
    # no rows: no cursor
    assert place_cursor([], (0, 1), 3, 3, 20) == (-1, 0)
    # after a new sort, the first page is shown when the process is on it
    index, top = place_cursor(keys, (0, 5), 70, 19, 20, reordered=True)
    assert (index, top) == (5, 0)
    # near the end, the view does not scroll past the last row
    index, top = place_cursor(keys, (0, 98), 98, 2, 20)
    assert top == 80


# ---- the table ---------------------------------------------------------------------------


def test_table_lines_fill_the_height_and_mark_the_sort(x8):
    _, ticks = x8
    rows = RowBuilder().rows(ticks[39])
    state = ViewState(sort_key="sm_util", descending=True)
    ordered = arrange(rows, state, None)
    cols, lines = table_lines(ordered, state, 160, 30, top=0, cursor=0, focused=True, marks=set(), notes={})
    assert len(lines) == 30
    assert all(len(text(line)) == 160 for line in lines)
    assert "SM%▼" in text(lines[0])
    # all fit at 160; JOB only when a process has a job (none in this recording)
    assert [c.key for c in cols] == [c.key for c in COLUMNS if c.key != "job"]
    narrow = [c.key for c in visible_columns(80)]
    assert {"gpu", "pid", "gpu_memory", "sm_util", "command"} <= set(narrow)
    assert "enc_util" not in narrow
    _, lines = table_lines(ordered, state, 80, 10, top=0, cursor=0, focused=True, marks=set(), notes={})
    assert all(len(text(line)) == 80 for line in lines)


def test_quiet_formats_change_rarely():
    assert [fmt_elapsed(s) for s in (0, 59, 60, 3599, 3600, 3661, 86400 * 2 + 3 * 3600)] == [
        "0s",
        "59s",
        "1m",
        "59m",
        "1h00m",
        "1h01m",
        "2d03h",
    ]
    assert fmt_mem(None) == "N/A"
    assert fmt_mem(8 * 2**30 + 2**20) == "8.0GiB"
    assert fmt_mem(512 * 2**20) == "512MiB"
    assert fmt_mem(141 * 2**30) == "141GiB"


# ---- memory no listed process holds ------------------------------------------------------


def test_unlisted_memory_is_quiet_on_real_recordings_and_shows_a_missing_process(x2, x8):
    header, ticks = x2
    for snap in ticks:  # the CUDA contexts' few MiB are not "unlisted"
        assert unlisted_memory(header.machine, snap) == []
    h8, t8 = x8
    assert all(unlisted_memory(h8.machine, s) == [] for s in t8)
    # derived from the real tick: the idle 8 GiB holder on GPU 1 is not listed to us
    snap = ticks[59]
    holder = next(p for p in snap.processes if p.cmdline and "hold_memory.py" in " ".join(p.cmdline))
    without = dataclasses.replace(snap, processes=tuple(p for p in snap.processes if p is not holder))
    ((gpu, extra),) = unlisted_memory(header.machine, without)
    assert gpu == holder.gpu_index
    assert extra >= holder.gpu_memory
    line = " ".join(text(x) for x in notice_lines([], [(gpu, extra)], 160, live=True, own_namespace=False))
    assert f"GPU memory used by no listed process: GPU {gpu} {fmt_mem(extra)}" in line
    assert "other containers or VMs" in line
    # in a PID namespace of its own, current drivers list only that namespace's processes
    # (what gputui showed inside `unshare --pid` on a real H200): the note says so, and the fix
    line = " ".join(text(x) for x in notice_lines([], [(gpu, extra)], 160, live=True, own_namespace=True))
    assert f"GPU memory used by no listed process: GPU {gpu} {fmt_mem(extra)}" in line
    assert "its own PID namespace" in line and "--pid=host" in line and "hostPID: true" in line
    # a recording says nothing about the namespace of whoever replays it
    line = " ".join(text(x) for x in notice_lines([], [(gpu, extra)], 160, live=False, own_namespace=True))
    assert "--pid=host" not in line


# ---- per-process history -----------------------------------------------------------------


def test_process_history_follows_each_process_and_drops_the_ended(x8):
    _, ticks = x8
    h = History(capacity=50)
    for snap in ticks[:60]:
        h.append(snap)
    snap = ticks[59]
    p = snap.processes[0]
    mem = h.process_series(p.gpu_index, p.pid, "gpu_memory")
    assert mem[-1] == p.gpu_memory and len(mem) <= 50
    sm = h.process_series(p.gpu_index, p.pid, "sm_util", 5)
    assert len(sm) == 5 and sm[-1] == p.sm_util
    assert h.process_count == len(snap.processes)  # processes that ended at tick 50 are gone
    assert h.process_series(7, 20097, "gpu_memory") == []
    # a reused PID starts a fresh history
    reused = dataclasses.replace(
        snap, processes=(dataclasses.replace(p, create_time=(p.create_time or 0) + 5),)
    )
    h.append(reused)
    assert len(h.process_series(p.gpu_index, p.pid, "gpu_memory")) == 1
    assert h.process_count == 1


def test_process_history_is_bounded():
    h = History(capacity=10)
    procs = tuple(GpuProcess(0, pid, gpu_memory=pid, create_time=1.0) for pid in range(MAX_PROCESSES + 50))
    h.append(Snapshot(seq=1, timestamp=1.0, processes=procs))
    assert h.process_count == MAX_PROCESSES
    assert h.process_series(0, MAX_PROCESSES + 10, "gpu_memory") == []
    assert math.isclose(h.process_series(0, 3, "gpu_memory")[0], 3)


def test_default_sort_setting_maps_onto_the_columns():
    from gputui.config import SORT_KEYS

    for field in SORT_KEYS:  # every value the config file accepts is a column
        for sort in (field, f"-{field}"):
            state = view_state_for(sort)
            assert state.sort_key in {c.key for c in COLUMNS}, sort
    assert (view_state_for("-gpu_memory").sort_key, view_state_for("-gpu_memory").descending) == (
        "gpu_memory",
        True,
    )
    assert view_state_for("gpu_index").sort_key == "gpu" and not view_state_for("gpu_index").descending
    # the oldest process first is the longest running first
    assert view_state_for("create_time").sort_key == "elapsed" and view_state_for("create_time").descending
    assert view_state_for(None) == ViewState() == view_state_for("no_such_field")
