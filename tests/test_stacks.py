"""`gputui stacks` and gputui.stacks against real processes: Python children blocked in a
known function, a stopped child, `sleep`, a child that exited, py-spy missing, ptrace refused
(as `nobody`), a dump that runs out of time.  Every child is killed at the end."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import textwrap
import threading
import time
from pathlib import Path

import pytest
from conftest import gputui
from stacks_support import (
    WAIT_LINE,
    comm,
    py_spy_children,
    require_py_spy,
    settled,
    start_waiter,
    wait_state,
    write_child,
)

from gputui.extras import install_hint
from gputui.stacks.dump import _run, dump_in_background, dump_many, dump_many_async, find_py_spy, parse_dump
from gputui.stacks.fold import fold, fold_threads
from gputui.stacks.model import Frame, Reason
from gputui.telemetry.host.starttime import start_time

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def script(tmp_path_factory) -> Path:
    return write_child(tmp_path_factory.mktemp("stacks"))


@pytest.fixture(scope="module")
def can_dump(script):
    require_py_spy(script)


def main_frames(res):
    return res.threads[0].frames


# ---- a real Python process blocked in wait_here -----------------------------------------


def test_the_stack_of_a_child_blocked_in_wait_here(can_dump, script, children) -> None:
    child = start_waiter(script, children, "--thread")
    (res,) = settled([child.pid])
    assert res.ok and res.pid == child.pid
    import psutil

    assert res.create_time == start_time(psutil.Process(child.pid))
    main = res.threads[0]
    assert main.name == "MainThread" and main.os_thread_id == child.pid
    assert main.active is False  # waiting on a lock: idle
    names = [f.function for f in main.frames]
    # call order: the module first, the frame running now last
    assert names[0] == "<module>" and names[1:4] == ["main", "branch_a", "wait_here"]
    assert names[-1] == "Condition.wait"
    here = main.frames[3]
    assert (here.file, here.line, here.path) == ("stackchild.py", WAIT_LINE, str(script))
    assert here.where() == f"wait_here (stackchild.py:{WAIT_LINE})"
    assert not any(f.native for f in main.frames)
    worker = next(t for t in res.threads if t is not main)
    assert worker.name == "wörker\x1b[31m"  # kept exact; escaped only when shown
    assert "wait_here" in [f.function for f in worker.frames]


def test_native_frames_come_with_native(can_dump, script, children) -> None:
    child = start_waiter(script, children)
    settled([child.pid])
    (res,) = dump_many([child.pid], native=True)
    assert res.ok
    frames = main_frames(res)
    assert any(f.native and f.line is None for f in frames)  # libc, libpython: no line
    assert any(f.function == "wait_here" and f.line == WAIT_LINE and not f.native for f in frames)


# ---- why a stack is missing, each its own reason ---------------------------------------


def test_a_stopped_process_is_told_without_running_py_spy(can_dump, script, children) -> None:
    child = start_waiter(script, children)
    os.kill(child.pid, signal.SIGSTOP)
    wait_state(child.pid, "T")
    (res,) = dump_many([child.pid])
    m = res.missing
    assert m is not None and m.reason is Reason.STOPPED, m
    assert m.state == "T"
    assert "stopped (state T" in m.message and "py-spy cannot read a stopped process" in m.message
    assert m.hint == f"kill -CONT {child.pid}   resumes it"
    assert m.detail is None  # py-spy was not run (it would have said "Failed to suspend process")
    assert py_spy_children() == []
    os.kill(child.pid, signal.SIGCONT)


def test_a_process_that_is_not_python_shows_its_state_and_wait_channel(can_dump, children) -> None:
    sleeper = subprocess.Popen(["sleep", "60"])
    children.append(sleeper)
    wait_state(sleeper.pid, "S")
    (res,) = dump_many([sleeper.pid])
    m = res.missing
    assert m is not None and m.reason is Reason.NOT_PYTHON, m
    assert m.state == "S"
    assert m.message.startswith(f"PID {sleeper.pid} (sleep) is not a Python process: state S (sleeping)")
    with open(f"/proc/{sleeper.pid}/wchan") as f:
        wchan = f.read().strip()
    if wchan and wchan != "0":  # the kernel shows it (as root, or to the owner)
        assert m.wchan == wchan and m.message.endswith(f", waiting in {wchan}")
    assert res.name == "sleep"


def test_a_process_that_exited_or_whose_pid_was_reused(can_dump, script, children) -> None:
    child = start_waiter(script, children)
    import psutil

    seen = start_time(psutil.Process(child.pid))
    # the caller saw an older process with this PID: refused, not dumped
    (res,) = dump_many([(child.pid, seen - 5.0)])
    assert res.missing is not None and res.missing.reason is Reason.EXITED
    assert "now belongs to another process" in res.missing.message
    assert res.create_time == seen - 5.0
    (same,) = dump_many([(child.pid, seen)])
    assert same.missing is None or same.missing.reason is not Reason.EXITED
    # exited, not yet reaped: a zombie
    child.kill()
    wait_state(child.pid, "Z")
    (res,) = dump_many([child.pid])
    assert res.missing is not None and res.missing.reason is Reason.EXITED
    assert "zombie" in res.missing.message
    # reaped: no such process
    child.wait(timeout=10)
    (res,) = dump_many([child.pid])
    assert res.missing is not None and res.missing.reason is Reason.EXITED
    assert res.missing.message == f"PID {child.pid}: no such process"


def test_py_spy_absent_says_the_one_command_that_installs_it(tmp_path, script, children) -> None:
    assert find_py_spy(path="", beside=str(tmp_path / "python")) is None
    assert find_py_spy(path=str(tmp_path), beside=str(tmp_path / "python")) is None
    (tmp_path / "py-spy").write_text("#!/bin/sh\n")
    (tmp_path / "py-spy").chmod(0o755)
    assert find_py_spy(path="", beside=str(tmp_path / "python")) == str(tmp_path / "py-spy")
    child = start_waiter(script, children)
    (res,) = dump_many([child.pid], py_spy=None)
    m = res.missing
    assert m is not None and m.reason is Reason.NO_PY_SPY
    assert m.message == "py-spy is not installed (neither on PATH nor beside this Python)"
    assert m.hint == install_hint("stacks", "py-spy")  # (from this checkout: gputui/extras.py)


def test_a_dump_past_its_time_is_killed_and_leaves_no_child(can_dump, script, children, tmp_path) -> None:
    child = start_waiter(script, children)
    settled([child.pid])
    # a py-spy that cannot answer in time whatever the machine's load (a real one may have
    # finished before a loaded event loop starts its clock: the limit counts from the spawn)
    slow = tmp_path / "py-spy"
    slow.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(60)\n")
    slow.chmod(0o755)
    (res,) = dump_many([child.pid], timeout=0.001, py_spy=str(slow))
    m = res.missing
    assert m is not None and m.reason is Reason.TIMEOUT, m
    assert m.message == "py-spy did not answer within 0.001 s and was killed"
    assert py_spy_children() == []
    wait_state(child.pid, "S")  # py-spy killed mid-dump left it running (a tracee left stopped: never S)
    (again,) = dump_many([child.pid])
    assert again.ok
    # killed, not waited for: the child's own exit status is SIGKILL's (a child that cannot
    # answer in time whatever the machine's speed: a real py-spy may finish in a millisecond)
    rc, out, _err, timed_out = asyncio.run(_run(["sleep", "30"], 0.001))
    assert (rc, out, timed_out) == (-signal.SIGKILL, None, True)
    assert py_spy_children() == []


# ---- ptrace refused, for real: the dump runs as nobody ----------------------------------

AS_NOBODY = textwrap.dedent(
    """
    import json, os, sys
    from gputui.stacks.dump import dump_many
    # everything imported while still root (a Python under /root is unreadable to nobody):
    # /bin/false stands in for py-spy once, so every module of the dump's path is loaded
    dump_many([int(sys.argv[1])], py_spy="/bin/false")
    os.setgroups([]); os.setgid(65534); os.setuid(65534)
    (r,) = dump_many([int(sys.argv[1])], py_spy=sys.argv[2])
    print(json.dumps(r.to_json()))
    """
)
needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root (and setpriv) to run the dump as another user",
)


def as_nobody(pid: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", AS_NOBODY, str(pid), str(find_py_spy())],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@needs_root
def test_another_users_process_is_refused_without_running_py_spy(can_dump, script, children) -> None:
    child = start_waiter(script, children)  # owned by root
    res = as_nobody(child.pid)
    m = res["missing"]
    assert m["reason"] == "ptrace-refused"
    assert m["message"] == "ptrace refused: the process belongs to root, not to you"
    assert m["hint"] == "run it as root (`sudo gputui stacks ...`)"
    assert m["detail"] is None  # told before running py-spy


@needs_root
def test_a_process_with_privileges_the_tracer_lacks_is_refused_by_the_kernel(can_dump, script, children):
    """Same user, but the target holds a capability we lack: the kernel refuses, py-spy says
    so, and the reason is still "ptrace refused" (with py-spy's words kept)."""
    child = subprocess.Popen(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=+net_bind_service",
            "--ambient-caps=+net_bind_service",
            sys.executable,
            "-c",
            script.read_text(),  # the file is in a directory only root may read
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
    )
    children.append(child)
    assert child.stdout is not None and child.stdout.readline() == b"ready\n"
    res = as_nobody(child.pid)
    m = res["missing"]
    assert m["reason"] == "ptrace-refused", m
    assert m["message"].startswith("ptrace refused")
    assert m["detail"]  # py-spy ran and was refused


# ---- never blocking a caller ---------------------------------------------------------


def test_the_async_api_leaves_the_event_loop_running(script, children, tmp_path) -> None:
    """While the dumps run, the caller's loop keeps turning: each (stand-in) py-spy answers only
    once the loop has signalled it (SIGUSR1, sent by a task on the same loop), so a dump that
    blocked the loop would never end (it would time out).  No clock is read."""
    kids = [start_waiter(script, children) for _ in range(3)]
    stand_in = tmp_path / "py-spy"
    stand_in.write_text(
        textwrap.dedent(
            f"""\
            #!{sys.executable}
            import os, signal, sys
            signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGUSR1}})
            open(os.path.join({str(tmp_path)!r}, f"ready-{{os.getpid()}}"), "w").close()
            signal.sigwait({{signal.SIGUSR1}})
            print("[]")
            """
        )
    )
    stand_in.chmod(0o755)
    arrived: list[int] = []
    woken: set[int] = set()

    async def main():
        stop = asyncio.Event()

        async def waker():  # runs only while the loop turns
            while not stop.is_set():
                for ready in tmp_path.glob("ready-*"):
                    pid = int(ready.name.removeprefix("ready-"))
                    if pid not in woken:
                        woken.add(pid)
                        os.kill(pid, signal.SIGUSR1)
                await asyncio.sleep(0.005)

        t = asyncio.create_task(waker())
        got = await dump_many_async(
            [k.pid for k in kids], on_result=lambda r: arrived.append(r.pid), py_spy=str(stand_in), timeout=60
        )
        stop.set()
        await t
        return got

    results = asyncio.run(main())
    assert [r.pid for r in results] == [k.pid for k in kids]  # in the order asked
    assert sorted(arrived) == sorted(k.pid for k in kids)
    assert all(r.ok for r in results), [r.missing for r in results]
    assert len(woken) == 3  # each answered because the loop woke it


def test_background_dumps_return_at_once_and_call_back(can_dump, script, children) -> None:
    kids = [start_waiter(script, children) for _ in range(2)]
    settled([k.pid for k in kids])
    arrived: list[tuple[int, str]] = []
    done = threading.Event()
    finished: list = []
    t0 = time.monotonic()
    bg = dump_in_background(
        [k.pid for k in kids],
        on_result=lambda r: arrived.append((r.pid, threading.current_thread().name)),
        on_done=lambda rs: (finished.extend(rs), done.set()),
    )
    assert time.monotonic() - t0 < 0.1  # the caller (a UI thread) did not wait
    assert done.wait(30)
    assert bg.join(5)
    assert sorted(p for p, _ in arrived) == sorted(k.pid for k in kids)
    assert {name for _, name in arrived} == {"gputui-stacks"}
    assert len(finished) == 2 and all(r.ok for r in finished)


def test_cancelling_background_dumps_kills_their_py_spy(can_dump, script, children) -> None:
    kids = [start_waiter(script, children) for _ in range(4)]
    done = threading.Event()
    bg = dump_in_background([k.pid for k in kids], on_done=lambda rs: done.set(), timeout=60)
    bg.cancel()
    assert done.wait(30) and bg.join(5)
    assert py_spy_children() == []
    assert len(bg.results) <= 4


# ---- folding the frames ranks share ---------------------------------------------------


def F(name: str, line: int = 1, file: str = "x.py") -> Frame:
    return Frame(name, file, line, f"/src/{file}")


def test_fold_shares_the_common_outer_frames_and_groups_identical_tails() -> None:
    a = [F("<module>"), F("main"), F("all_reduce", 3075), F("wait")]
    b = [F("<module>"), F("main"), F("forward", 42)]
    folded = fold([a, b, a])
    assert folded.shared == (F("<module>"), F("main"))
    assert [(t.members, t.frames) for t in folded.tails] == [
        ((0, 2), (F("all_reduce", 3075), F("wait"))),
        ((1,), (F("forward", 42),)),
    ]


def test_fold_boundaries() -> None:
    a = [F("<module>"), F("main")]
    assert fold([]).shared == () and fold([]).tails == ()
    one = fold([a])  # one stack shares nothing with anyone: all tail
    assert one.shared == () and one.tails[0].frames == tuple(a)
    same = fold([a, a, a])
    assert same.shared == tuple(a) and [(t.members, t.frames) for t in same.tails] == [((0, 1, 2), ())]
    # the same function on another line is another frame
    split = fold([[F("<module>", 19)], [F("<module>", 20)]])
    assert split.shared == () and len(split.tails) == 2
    # one stack a prefix of another
    pre = fold([a, [*a, F("deeper")]])
    assert pre.shared == tuple(a)
    assert [(t.members, t.frames) for t in pre.tails] == [((0,), ()), ((1,), (F("deeper"),))]
    assert fold([[], a]).shared == ()


def test_fold_real_dumps_of_three_children_sharing_outer_frames(can_dump, script, children) -> None:
    kids = [start_waiter(script, children, arg) for arg in ("a", "b", "a")]
    results = settled([k.pid for k in kids])
    (main, *_others) = fold_threads(results)
    assert main.name == "MainThread"
    assert [p.pid for p in main.processes] == [k.pid for k in kids]
    assert [f.function for f in main.folded.shared] == ["<module>", "main"]
    tails = main.folded.tails
    assert [t.members for t in tails] == [(0, 2), (1,)]
    assert [f.function for f in tails[0].frames] == ["branch_a", "wait_here", "Event.wait", "Condition.wait"]
    assert next(f.function for f in tails[1].frames) == "branch_b"
    assert tails[1].frames[1].line == WAIT_LINE


# ---- the command line -------------------------------------------------------------------


def test_cli_text_folds_the_shared_frames(can_dump, script, children) -> None:
    kids = [start_waiter(script, children, arg, "--thread", "--hostile") for arg in ("a", "b", "a")]
    settled([k.pid for k in kids])
    out = gputui("stacks", *(str(k.pid) for k in kids))
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    text = out.stdout
    assert text.startswith("3 of 3 stacks read in ")
    a0, b, a2 = (k.pid for k in kids)
    py = comm(a0)  # python, python3, python3.11: the interpreter's own name
    assert 'Thread "MainThread" of 3 processes:\n  shared by all 3:\n    <module> (stackchild.py:' in text
    # outside text (function and thread names) is shown escaped, never obeyed
    assert "\n    main\\x1b]0;owned\\x07 (stackchild.py:" in text  # a shared frame
    assert f"  then PID {a0} {py} idle, PID {a2} {py} idle:\n    branch_a\\u202e (stackchild.py:" in text
    assert f"  then PID {b} {py} idle:\n    branch_b (stackchild.py:" in text
    assert f"wait_here (stackchild.py:{WAIT_LINE})" in text
    assert 'Thread "wörker\\x1b[31m", the same in all 3: ' in text
    assert "\n    thread\\x1b[2Jmain (stackchild.py:" in text
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text


def test_cli_json(can_dump, script, children) -> None:
    kids = [start_waiter(script, children, arg, "--thread", "--hostile") for arg in ("a", "b")]
    settled([k.pid for k in kids])
    gone = subprocess.Popen(["true"])
    gone.wait(timeout=10)
    out = gputui("stacks", "--json", *(str(k.pid) for k in kids), str(gone.pid))
    assert out.returncode == 1, out.stderr  # one process missing
    assert "\x1b" not in out.stdout and "\u202e" not in out.stdout  # escaped in the JSON text
    doc = json.loads(out.stdout)
    assert doc["native"] is False and doc["py_spy"] == find_py_spy()
    procs = doc["processes"]
    assert [p["pid"] for p in procs] == [kids[0].pid, kids[1].pid, gone.pid]
    frames = procs[0]["threads"][0]["frames"]
    assert {k: v for k, v in frames[3].items() if k in ("function", "file", "line")} == {
        "function": "wait_here",
        "file": "stackchild.py",
        "line": WAIT_LINE,
    }
    assert procs[0]["threads"][1]["name"] == "wörker\x1b[31m"  # exact once decoded
    assert frames[2]["function"] == "branch_a\u202e"
    assert procs[2]["missing"]["reason"] == "exited" and procs[2]["threads"] == []
    main = doc["folded"][0]
    assert main["thread"] == "MainThread"
    assert [f["function"] for f in main["shared"]] == ["<module>", "main\x1b]0;owned\x07"]
    assert [t["pids"] for t in main["tails"]] == [[kids[0].pid], [kids[1].pid]]


def test_cli_missing_reasons_in_text(can_dump, script, children) -> None:
    stopped = start_waiter(script, children)
    os.kill(stopped.pid, signal.SIGSTOP)
    wait_state(stopped.pid, "T")
    sleeper = subprocess.Popen(["sleep", "60"])
    children.append(sleeper)
    out = gputui("stacks", str(stopped.pid), str(sleeper.pid))
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert lines[0].startswith("0 of 2 stacks read")
    assert (
        f"PID {stopped.pid} ({comm(stopped.pid)}) is stopped (state T: SIGSTOP, Ctrl-Z or a debugger)"
        in out.stdout
    )
    assert f"  kill -CONT {stopped.pid}   resumes it" in lines
    assert f"PID {sleeper.pid} (sleep) is not a Python process: state S (sleeping)" in out.stdout


NEITHER = "gputui stacks: name processes (gputui stacks PID ...) or a job (--job PID), not both"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["abc"], "argument PID: not a process id: 'abc'"),
        (["--", "-5"], "argument PID: not a process id: '-5'"),
        ([], "gputui stacks: name processes (gputui stacks PID ...) or a job (--job PID), not both"),
        (
            ["1", "--job", "1"],
            "gputui stacks: name processes (gputui stacks PID ...) or a job (--job PID), not both",
        ),
        (["--timeout", "0", "1"], "must be greater than 0"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(args, message) -> None:
    out = gputui("stacks", *args)
    assert out.returncode == 2
    assert message in out.stderr
    assert "Traceback" not in out.stderr


def test_cli_without_py_spy_says_how_to_install_it(tmp_path, script, children) -> None:
    """A Python with no py-spy beside it, and a PATH without one: the install command, exit 2."""
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python").symlink_to(base)
    if shutil.which("py-spy", path="/usr/bin:/bin"):
        pytest.skip("py-spy is installed system-wide here")
    paths = sysconfig.get_paths()
    child = start_waiter(script, children)
    out = subprocess.run(
        [str(bindir / "python"), "-m", "gputui", "stacks", str(child.pid)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": os.pathsep.join([str(ROOT), paths["purelib"], paths["platlib"]]),
        },
    )
    assert out.returncode == 2, out.stderr
    # one line; from this checkout, the extra from this checkout (gputui/extras.py)
    assert out.stderr.startswith("gputui stacks: py-spy is not installed: "), out.stderr
    assert f"'{ROOT}[stacks]'" in out.stderr and out.stderr.endswith(" install py-spy)\n"), out.stderr
    assert len(out.stderr.splitlines()) == 1, out.stderr


def test_cli_job_dumps_the_ranks_of_a_launcher(can_dump, script, children, tmp_path) -> None:
    launcher_py = tmp_path / "torchrun"
    launcher_py.write_text(
        textwrap.dedent(
            f"""
            import os, subprocess, sys, time
            ranks = []
            for i in range(3):
                env = dict(os.environ, RANK=str(i), LOCAL_RANK=str(i), WORLD_SIZE="3")
                ranks.append(subprocess.Popen([sys.executable, {str(script)!r}, "ab"[i % 2], "--worker"],
                                              env=env, stdout=subprocess.PIPE))
            for r in ranks:
                r.stdout.readline()
            print(" ".join(str(r.pid) for r in ranks), flush=True)
            time.sleep(600)
            """
        )
    )
    launcher = subprocess.Popen(
        [sys.executable, str(launcher_py), "--nproc-per-node", "3", "train.py"],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert launcher.stdout is not None
        ranks = [int(x) for x in launcher.stdout.readline().split()]
        settled(ranks)
        py = comm(ranks[0])
        for pid in (launcher.pid, ranks[1]):  # the launcher, or any rank of it
            out = gputui("stacks", "--job", str(pid))
            assert out.returncode == 0, out.stderr
            assert out.stdout.startswith(f"job: torchrun PID {launcher.pid}, 3 ranks\n3 of 3 stacks read")
            assert f"PID {ranks[0]} (rank 0) {py} idle, PID {ranks[2]} (rank 2) {py} idle:" in out.stdout
            assert f"then PID {ranks[1]} (rank 1) {py} idle:\n    branch_b" in out.stdout
        doc = json.loads(gputui("stacks", "--job", str(launcher.pid), "--json").stdout)
        assert [p["rank"] for p in doc["processes"]] == [0, 1, 2]  # the workers are not ranks
        # one rank stopped: the others' stacks, and that rank named with why
        os.kill(ranks[1], signal.SIGSTOP)
        wait_state(ranks[1], "T")
        out = gputui("stacks", "--job", str(launcher.pid))
        assert out.returncode == 1
        assert f"rank 1: PID {ranks[1]} ({py}) is stopped (state T" in out.stdout
        assert (
            f'Thread "MainThread", the same in all 2: PID {ranks[0]} (rank 0) {py} idle, '
            f"PID {ranks[2]} (rank 2) {py} idle:\n    <module> (stackchild.py:"
        ) in out.stdout
        # (a session of its own: in the runner's session, whose leader may be gone, the
        # processes other tests left with RANK set would read as a crashed job's ranks)
        alone = start_waiter(script, children, start_new_session=True)
        out = gputui("stacks", "--job", str(alone.pid))
        assert out.returncode == 2
        assert out.stderr.startswith(f"gputui stacks: PID {alone.pid} is neither a launcher (torchrun")
    finally:
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait(timeout=10)


# ---- py-spy's output is outside text too --------------------------------------------------


def test_the_parser_refuses_what_is_not_py_spys_json() -> None:
    for bad in (b"", b"not json", b"{}", b"[1]", b'[{"frames": 3}]', b"\xff\xfe"):
        with pytest.raises(ValueError):
            parse_dump(bad, 1)


def test_the_parser_keeps_bounds_and_types() -> None:
    thread = {
        "thread_id": True,  # a bool is not an id
        "os_thread_id": 7,
        "thread_name": "x" * 5000,
        "active": "yes",  # only true is true
        "owns_gil": True,
        "frames": [
            {"name": "inner", "filename": "/a/b.py", "short_filename": "b.py", "line": 3, "module": None},
            "not a frame",
            {"name": 5, "filename": "/usr/lib/libc.so.6", "line": 0, "module": "/usr/lib/libc.so.6"},
            {"name": "outer", "filename": "/a/c.py", "short_filename": "", "line": -1},
        ],
    }
    main = {"thread_id": 1, "os_thread_id": 9, "thread_name": None, "frames": []}
    (first, second) = parse_dump(json.dumps([thread, main]).encode(), 9)
    assert first.os_thread_id == 9 and first.name is None  # the main thread (TID = PID) first
    assert second.thread_id == 0 and second.active is False and second.owns_gil is True
    assert len(second.name or "") == 1000
    assert [f.where() for f in second.frames] == ["outer (c.py)", "? (libc.so.6)", "inner (b.py:3)"]
    assert [f.native for f in second.frames] == [False, True, False]


def test_the_stacks_package_imports_no_textual() -> None:
    from conftest import fresh_python

    out = fresh_python(
        "import sys, gputui.stacks.dump, gputui.stacks.fold, gputui.stacks.render, gputui.stacks.ranks, "
        "gputui.commands.stacks; print('textual' in sys.modules)"
    )
    assert out.stdout.strip() == "False", out.stderr


def test_which_ptrace_rule_refuses() -> None:
    """The decision from the facts read in /proc (Yama's scope, CapEff bit 19, the owners):
    refused before running py-spy only where the kernel is certain to refuse."""
    from gputui.stacks.procfs import PtraceFacts, certain_refusal, refusal

    def facts(uid=1000, cap=False, yama=None, owner=1000):
        return PtraceFacts(uid, cap, yama, (owner, owner, owner, owner), "alice" if owner != uid else None)

    assert certain_refusal(facts()) is None
    assert certain_refusal(facts(cap=True, owner=0)) is None  # root with CAP_SYS_PTRACE
    assert certain_refusal(facts(owner=0))[0] == "ptrace refused: the process belongs to alice, not to you"
    # Yama 1: a process that asked for it (PR_SET_PTRACER) may still allow it: py-spy tries
    assert certain_refusal(facts(yama=1)) is None
    why, hint = refusal(facts(yama=1))
    assert "ptrace_scope is 1" in why and "sudo sysctl kernel.yama.ptrace_scope=0" in hint
    assert "ptrace_scope is 2" in certain_refusal(facts(yama=2))[0]
    assert certain_refusal(facts(cap=True, yama=2)) is None
    assert "ptrace_scope is 3" in certain_refusal(facts(cap=True, yama=3))[0]
    # root in a container without SYS_PTRACE
    why, hint = certain_refusal(facts(uid=0, owner=1000))
    assert "root here lacks CAP_SYS_PTRACE" in why and "--cap-add SYS_PTRACE" in hint
    why, hint = refusal(facts(uid=0, owner=0))
    assert "lacks CAP_SYS_PTRACE" in why and "SYS_PTRACE" in hint
