"""What goes wrong reading stacks, on real processes (issue 31):

* a stack py-spy cannot read because it is too deep: a Python process 5,000 frames deep in a
  recursion makes py-spy give up (it reads at most 4,096 frames of a thread, and says it found
  no interpreter), and gputui said "not a Python process".  It must say what happened: py-spy's
  own error, and that the stack is too deep.  A process 3,000 deep is read;
* dumps cancelled while py-spy is being started leave no py-spy child, running or a zombie
  (tests/test_stacks.py's cancel test caught it one run in three on a busy machine)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import gputui
from stacks_support import py_spy_children, require_py_spy, start_waiter, write_child

from gputui.stacks import dump
from gputui.stacks.dump import dump_many, dump_many_async
from gputui.stacks.model import Reason

DEEP = textwrap.dedent(
    """
    import os, sys, threading
    sys.setrecursionlimit(100_000)

    def down(n):
        if n == 0:
            os.write(1, b"ready\\n")
            threading.Event().wait()
        down(n - 1)

    down(int(sys.argv[1]))
    """
)


@pytest.fixture(scope="module")
def script(tmp_path_factory) -> Path:
    return write_child(tmp_path_factory.mktemp("stacks"))


@pytest.fixture(scope="module")
def can_dump(script) -> None:
    require_py_spy(script)


def deep(depth: int, children: list) -> subprocess.Popen[bytes]:
    child = subprocess.Popen(
        [sys.executable, "-c", DEEP, str(depth)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE
    )
    children.append(child)
    assert child.stdout is not None and child.stdout.readline() == b"ready\n"
    return child


def test_a_stack_too_deep_for_py_spy_is_said_so_not_not_python(can_dump, children) -> None:
    child = deep(5000, children)
    (res,) = dump_many([child.pid])
    m = res.missing
    assert m is not None and m.reason is Reason.STACK_TOO_DEEP, m
    assert "not a Python process" not in m.message
    assert "stack too deep" in m.message and "4096 frames" in m.message
    assert m.detail is not None and "python interpreter" in m.detail.lower()  # py-spy's own words
    name = Path(f"/proc/{child.pid}/comm").read_text().strip()
    out = gputui("stacks", str(child.pid))
    assert out.returncode == 1
    assert f"PID {child.pid} ({name}) runs Python" in out.stdout and "stack too deep" in out.stdout
    assert "py-spy said: " in out.stdout and "not a Python process" not in out.stdout


def test_a_deep_stack_within_py_spys_reach_is_read(can_dump, children) -> None:
    child = deep(3000, children)
    (res,) = dump_many([child.pid])
    assert res.ok, res.missing
    assert sum(f.function == "down" for f in res.threads[0].frames) == 3001


def test_dumps_cancelled_while_py_spy_starts_leave_no_child(script, children, tmp_path, monkeypatch) -> None:
    """The cancellation arrives after py-spy was started and before gputui holds it (a slow
    start, made certain here by holding the spawn's answer until the test has cancelled).  A
    stand-in py-spy that never answers, so that it is still there to be killed."""
    kids = [start_waiter(script, children) for _ in range(3)]
    stand_in = tmp_path / "py-spy"
    stand_in.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(600)\n")
    stand_in.chmod(0o755)
    real = asyncio.create_subprocess_exec
    spawned, release = asyncio.Event(), asyncio.Event()
    started: list[asyncio.subprocess.Process] = []

    async def slow_start(*args, **kw):
        proc = await real(*args, **kw)
        started.append(proc)
        spawned.set()
        await release.wait()  # its answer held until the test has cancelled
        return proc

    monkeypatch.setattr(dump.asyncio, "create_subprocess_exec", slow_start)

    async def go() -> None:
        task = asyncio.ensure_future(dump_many_async([k.pid for k in kids], timeout=60, py_spy=str(stand_in)))
        await spawned.wait()
        assert py_spy_children()  # started
        task.cancel()
        await asyncio.sleep(0)  # the cancellation is delivered
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        # the cancelled call returns once every py-spy it started is killed and reaped
        assert started and [p.returncode for p in started] == [-9] * len(started)

    try:
        asyncio.run(go())
        assert py_spy_children() == []  # none running, none a zombie
    finally:
        for leaked in py_spy_children():
            leaked.kill()
            leaked.wait(10)
