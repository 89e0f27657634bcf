"""Where a rank is, from its Python stack (gputui.stacks.where), read with the parser the live
sampler uses (gputui.stacks.pyspy_text.parse_text): on the REAL py-spy dumps captured beside the 4x
H100 matrix's recordings (tests/fixtures/h100-x4-matrix/*/stacks-*.txt), and on real
processes of this machine (JSON and text of the same stack agree)."""

from __future__ import annotations

from pathlib import Path

import pytest
from matrix_support import fixture_stacks, slot, stack_sections

from gputui.stacks.dump import find_py_spy
from gputui.stacks.model import Frame, Missing, Reason, StackResult, ThreadStack
from gputui.stacks.pyspy_text import parse_text
from gputui.stacks.where import MAX_FRAMES, MAX_WORDS, locate, rank_where


def _where(name: str, pid: int, capture: int = 0):
    _, ev = fixture_stacks(slot(name))[capture]
    return next(w for w in ev.ranks if w.pid == pid)


@pytest.mark.parametrize(
    ("name", "pid", "place", "call", "at"),
    [
        # mismatch: rank 0 waits for its GPU after its all_reduce, rank 1 in a recv from rank 0
        ("3-mismatch-slow-gpu", 2226, "gpu_sync", "synchronize", "scenario.py:128"),
        ("3-mismatch-slow-gpu", 2227, "collective", "recv", "scenario.py:124"),
        # the loader stall: rank 1 waits on its DataLoader's queue
        ("4-slow-host-loader-stall", 2733, "loader", "_BaseDataLoaderIter.__next__", "scenario.py:110"),
        # the slow host: rank 1 sleeps in its own loop (time.sleep has no Python frame)
        ("4-slow-host-loader-stall", 2719, "elsewhere", "main", "scenario.py:115"),
        # the checkpoint: rank 0 in torch.save, rank 1 in the barrier
        ("5-checkpoint-healthy", 3208, "io", "torch.save", "scenario.py:70"),
        ("5-checkpoint-healthy", 3209, "collective", "barrier", "scenario.py:120"),
        # the healthy job's ranks wait for their GPUs each step
        ("5-checkpoint-healthy", 3194, "gpu_sync", "synchronize", "scenario.py:128"),
    ],
)
def test_where_the_real_ranks_were(name: str, pid: int, place: str, call: str, at: str) -> None:
    w = _where(name, pid)
    assert (w.place, w.call, w.at) == (place, call, at)
    assert w.reason is None and w.create_time is not None  # the recording's process


def test_the_frames_are_kept_innermost_first_and_bounded() -> None:
    w = _where("4-slow-host-loader-stall", 2733)
    assert w.frames[0] == "_PollLikeSelector.select (selectors.py:415)"
    assert len(w.frames) == MAX_FRAMES
    r = _where("3-mismatch-slow-gpu", 2227)
    assert r.frames[:2] == (
        "irecv (torch/distributed/distributed_c10d.py:2597)",
        "recv (torch/distributed/distributed_c10d.py:2659)",
    )


def test_the_text_parser_reads_the_real_dump() -> None:
    _, dumps = stack_sections(slot("4-slow-host-loader-stall").path / "stacks-35.txt")
    threads = parse_text(dumps[2733], 2733)
    assert [t.name for t in threads] == ["MainThread", "QueueFeederThread", "QueueFeederThread"]
    main = threads[0]
    assert main.os_thread_id == 2733 and not main.active
    assert main.frames[0] == Frame("<module>", "scenario.py", 136, "scenario.py")
    assert main.frames[-1].function == "_PollLikeSelector.select" and main.frames[-1].line == 415
    assert threads[1].os_thread_id == 2872


@pytest.mark.parametrize("raw", [b"", b"hello", b"Error: Failed to get stack traces\n", b"\x00\xff"])
def test_the_text_parser_refuses_what_is_not_a_dump(raw: bytes) -> None:
    with pytest.raises(ValueError):
        parse_text(raw, 1)


def test_the_text_parser_bounds_and_skips_locals() -> None:
    raw = (
        b"Process 7: x\nPython v3.12.3 (/usr/bin/python3)\n\n"
        b'Thread 0x7F12 (active+gil): "w\x1b[31m"\n'
        b"    f" + b"x" * 5000 + b" (a.py:3)\n"
        b"        Arguments:\n            y: 1\n"
        b"    native_thing (libc.so.6)\n"
        b"    g (b.py:0)\n"
    )
    (t,) = parse_text(raw, 7)
    assert t.owns_gil and t.active and t.os_thread_id is None and t.thread_id == 0x7F12
    assert [f.function[:2] for f in t.frames] == ["g", "na", "fx"]
    assert t.frames[0].line is None and t.frames[1].file == "libc.so.6" and len(t.frames[2].function) == 1000


def test_the_text_parser_reads_a_coloured_dump() -> None:
    """py-spy colours its dump where CLICOLOR_FORCE is set: the same frames, no escape kept."""
    raw = (
        b"Process 7: x\nPython v3.12.3 (/usr/bin/python3)\n\n"
        b'Thread \x1b[1;33m7\x1b[0m (idle): "MainThread"\n'
        b"    \x1b[32mrecv\x1b[0m (\x1b[36mtorch/distributed/distributed_c10d.py\x1b[0m:\x1b[2m2659\x1b[0m)\n"
    )
    (t,) = parse_text(raw, 7)
    assert t.os_thread_id == 7
    assert t.frames == (
        Frame("recv", "torch/distributed/distributed_c10d.py", 2659, "torch/distributed/distributed_c10d.py"),
    )


def test_locate_bounds_what_it_keeps() -> None:
    huge = Frame("f" * 10_000, "g" * 10_000, 3, "/x")
    thread = ThreadStack(1, 1, "MainThread", True, False, (Frame("<module>", "t.py", 1, "t.py"), huge))
    place, call, at, frames = locate((thread,))
    assert place == "elsewhere" and call is not None and at is not None
    assert len(call) == MAX_WORDS and len(at) <= MAX_WORDS + 2 and all(len(f) < 3 * MAX_WORDS for f in frames)


def test_a_collective_under_a_full_path_is_found() -> None:
    """JSON dumps give the full path: the part after site-packages/ is matched."""
    path = "/opt/venv/lib/python3.12/site-packages/torch/distributed/distributed_c10d.py"
    frames = (
        Frame("main", "/home/u/train.py", 42, "/home/u/train.py"),
        Frame("all_reduce", path, 3075, path),
    )
    place, call, at, _ = locate((ThreadStack(1, 1, "MainThread", False, False, frames),))
    assert (place, call, at) == ("collective", "all_reduce", "/home/u/train.py:42")


def test_a_stack_that_could_not_be_read_says_why() -> None:
    res = StackResult(5, 1.5, missing=Missing(Reason.PTRACE_REFUSED, "not allowed"))
    w = rank_where(res, 10.0)
    assert (w.place, w.reason, w.message, w.taken, w.create_time) == (
        "unread",
        "ptrace-refused",
        "not allowed",
        10.0,
        1.5,
    )


def test_no_thread_is_elsewhere_without_a_site() -> None:
    assert locate(()) == ("elsewhere", None, None, ())


@pytest.mark.skipif(find_py_spy() is None, reason="py-spy is not installed (pip install 'gputui[stacks]')")
def test_text_and_json_of_a_real_stack_agree(tmp_path: Path, children) -> None:
    """A real Python child blocked in a known function, read both ways (as root, or with
    ptrace allowed for the user)."""
    from stacks_support import settled, start_waiter, write_child

    from gputui.stacks.dump import dump_many

    child = start_waiter(write_child(tmp_path), children)
    (as_json,) = settled([child.pid])
    if not as_json.ok:
        pytest.skip(f"py-spy cannot read a child here: {as_json.missing}")
    (as_text,) = dump_many([child.pid], text=True)
    assert as_text.ok, as_text.missing
    simple = [(f.function, f.line) for f in as_json.main_thread().frames]
    assert [(f.function, f.line) for f in as_text.main_thread().frames] == simple
    assert locate(as_text.threads)[0] == "elsewhere"
