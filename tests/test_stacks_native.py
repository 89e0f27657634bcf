"""`gputui stacks --native` on real NCCL ranks (issue 31): identical rank stacks fold although
each process's unresolved addresses differ (ASLR: `0x7fbca0a2a1ca (libc.so.6)` in one rank is
`0x7efcbf62a1ca (libc.so.6)` in the next), and pybind11's ~1,700-character symbols are read at
a readable width.

Input: py-spy 0.4.3's own `dump --native` of each rank, recorded live on 4 H100s
(tests/fixtures/h100-x4-matrix/*/stacks-35.txt), read back into py-spy's JSON and through
gputui's parser."""

from __future__ import annotations

import json

import pytest
from stacks_support import MATRIX, recorded_dumps

from gputui.stacks.dump import parse_dump
from gputui.stacks.fold import fold_threads
from gputui.stacks.model import StackResult
from gputui.stacks.render import text, to_json
from gputui.stacks.symbols import READABLE, readable_symbol

FOLDERS = sorted(p.name for p in MATRIX.iterdir() if p.is_dir())


def ranks(folder: str, *pids: int, native: bool = True) -> list[StackResult]:
    dumps = recorded_dumps(folder, native=native)
    return [StackResult(pid, 1.0, threads=parse_dump(dumps[pid], pid), name="python3") for pid in pids]


def test_two_ranks_with_the_same_native_stack_are_printed_once() -> None:
    """2-exit-early-killed: rank 0 of each job, both in cudaDeviceSynchronize, the same frames
    but for the addresses py-spy could not name."""
    results = ranks("2-exit-early-killed", 1789, 1487)
    assert (
        results[0].threads[0].frames[0].function != results[1].threads[0].frames[0].function
    )  # 0x7ff1..., 0x7f51...
    (main,) = fold_threads(results)
    assert len(main.folded.tails) == 1
    out = text(results)
    assert 'Thread "MainThread", the same in all 2: PID 1789 python3 active, PID 1487 python3 active:' in out
    assert "    ? (libc.so.6)\n    <module> (scenario.py:136)\n" in out
    assert "    cuCtxSynchronize_v2 (libcuda.so.580.159.04)\n    ? (libcuda.so.580.159.04)\n" in out
    assert "0x7f" not in out


def test_ranks_that_part_in_the_driver_share_everything_above() -> None:
    """1-healthy-stopped: the healthy job's two ranks, both synchronizing, one inside
    clock_gettime: shared down to the driver, then their own tails."""
    results = ranks("1-healthy-stopped", 1241, 1242)
    (main,) = fold_threads(results)
    shared = [f.where() for f in main.folded.shared]
    assert shared[:4] == [
        "? (libc.so.6)",
        "<module> (scenario.py:136)",
        "main (scenario.py:128)",
        "synchronize (torch/cuda/__init__.py:1162)",
    ]
    assert "cuCtxSynchronize_v2 (libcuda.so.580.159.04)" in shared
    assert [f.where() for f in main.folded.tails[0].frames][-2:] == [
        "clock_gettime (libc.so.6)",
        "? ([vdso])",
    ]


@pytest.mark.parametrize("folder", FOLDERS)
def test_every_recorded_frame_is_printed_at_a_readable_width(folder) -> None:
    dumps = recorded_dumps(folder, native=True)
    results = ranks(folder, *dumps)
    for line in text(results).splitlines():
        assert len(line) <= READABLE + 60, line  # the frame, its library, the indent
    doc = json.loads(to_json(results, native=True, py_spy=None, seconds=0.0))
    for proc in doc["processes"]:
        for thread in proc["threads"]:
            for frame in thread["frames"]:
                assert len(frame["function"]) <= READABLE
                if frame["symbol"] is not None:  # the symbol in full, where shortened
                    assert readable_symbol(frame["symbol"]) == frame["function"]


def test_pybind11_frames_keep_their_names_and_lose_their_template_noise() -> None:
    (rank1,) = ranks("3-mismatch-slow-gpu", 2227)
    names = [f.function for f in rank1.threads[0].frames]
    assert "pybind11::cpp_function::initialize<…>(…)::{lambda(…)#1}::_FUN" in names
    assert "c10::impl::BoxedKernelWrapper<…>::call" in names
    assert "c10d::ProcessGroup::recv" in names  # a short name is left as it is
    full = next(
        f for f in rank1.threads[0].frames if f.function.startswith("pybind11::cpp_function::initialize")
    )
    assert full.symbol is not None and len(full.symbol) > 1000 and "c10d::ProcessGroup*" in full.symbol


def test_two_instantiations_that_read_alike_are_still_two_frames() -> None:
    """Folding compares the symbols in full: barrier's and recv's pybind11 lambdas both read
    `initialize<…>(…)::{lambda(…)#1}::_FUN`, and are not one shared frame."""
    (a,) = ranks("5-checkpoint-healthy", 3209)
    (b,) = ranks("3-mismatch-slow-gpu", 2227)
    fa = next(f for f in a.threads[0].frames if f.function.startswith("pybind11::cpp_function::initialize"))
    fb = next(f for f in b.threads[0].frames if f.function.startswith("pybind11::cpp_function::initialize"))
    assert fa.function == fb.function and fa != fb


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("c10d::ProcessGroup::recv", "c10d::ProcessGroup::recv"),
        (
            "std::vector<int, std::allocator<int> >::push_back",
            "std::vector<int, std::allocator<int> >::push_back",
        ),
        ("ns::f<" + "a, " * 60 + "b>::g", "ns::f<…>::g"),
        ("ns::operator<<<" + "T, " * 50 + "U>(x)", "ns::operator<<<…>(…)"),
        ("ns::C::operator()(" + "int, " * 40 + "int)", "ns::C::operator()(…)"),
        ("f<" * 70 + "x", ("f<" * 70 + "x")[: READABLE - 1] + "…"),  # never balanced: cut
        ("0x7fbca0a2a1ca", "0x7fbca0a2a1ca"),
    ],
)
def test_readable_symbol(raw, want) -> None:
    assert readable_symbol(raw) == want
    assert len(readable_symbol(raw)) <= READABLE
