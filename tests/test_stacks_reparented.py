"""`gputui stacks --job` on the ranks of a job whose launcher is gone or no longer above them
(issue 31, a planted-bug area): real process trees, the launcher (or the process between it
and a rank) SIGKILLed, the ranks re-parented to PID 1 or a subreaper.

* the launcher led its process group and died: the ranks left in that group are found;
* a process between the launcher and a rank died: the launcher still leads the rank's group,
  and is found through it;
* the launcher led no group of its own and died: nothing tells its ranks from the shell's
  other processes, and the command says so (exit 2), naming what it saw.

Every process is the test's own, killed by its process group at the end."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import gputui
from stacks_support import comm, require_py_spy, settled, write_child

from gputui.stacks.ranks import job_ranks
from gputui.telemetry.host.proctree import read_stat


@pytest.fixture(scope="module")
def script(tmp_path_factory) -> Path:
    return write_child(tmp_path_factory.mktemp("reparented"))


@pytest.fixture
def groups():
    """Process groups to SIGKILL at the end (the ranks outlive their launcher)."""
    started: list[int] = []
    yield started
    for pgid in started:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


# torchrun <- the file's name: gputui.telemetry.host.cmdline names the launcher by it.
# argv: SCRIPT WRAP; ranks run stackchild.py (rank 1 with a data-loader child), under a
# `wrapper` process when WRAP is "wrap"; prints "launcher wrapper... rank..." PIDs.
LAUNCHER = """
import os, subprocess, sys, time
script, wrap = sys.argv[1], sys.argv[2] == "wrap"
ranks, wrappers = [], []
for i in range(2):
    env = dict(os.environ, RANK=str(i), WORLD_SIZE="2")
    argv = [sys.executable, script, "ab"[i], *(["--worker"] if i else [])]
    if wrap:  # a shell-like process between the launcher and the rank, which execs nothing
        code = "import subprocess as s, sys; p = s.Popen(sys.argv[1:]); print(p.pid, flush=True); p.wait()"
        w = subprocess.Popen([sys.executable, "-c", code, *argv], env=env, stdout=subprocess.PIPE)
        wrappers.append(w.pid)
        pid = int(w.stdout.readline())
    else:
        pid = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL).pid
    ranks.append(pid)
print(os.getpid(), *wrappers, *ranks, flush=True)
time.sleep(600)
"""


def start_launcher(tmp_path: Path, script: Path, groups: list[int], *, wrap: bool, own_group: bool):
    """The launcher, in a process group of its own or inside a "shell" (a session and group
    leader that is not a launcher).  Returns (launcher, wrappers, ranks, the group)."""
    launcher_py = tmp_path / "torchrun"
    launcher_py.write_text(textwrap.dedent(LAUNCHER))
    argv = [sys.executable, str(launcher_py), str(script), "wrap" if wrap else "plain"]
    if own_group:
        shell = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True
        )
    else:  # the shell leads; the launcher is its child, in its group
        code = "import subprocess, sys; subprocess.Popen(sys.argv[1:]).wait()"
        shell = subprocess.Popen(
            [sys.executable, "-c", code, *argv],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    groups.append(shell.pid)
    assert shell.stdout is not None
    pids = [int(x) for x in shell.stdout.readline().split()]
    launcher, rest = pids[0], pids[1:]
    wrappers, ranks = (rest[:2], rest[2:]) if wrap else ([], rest)
    return launcher, wrappers, ranks, shell


def kill_and_wait_adopted(pid: int, children: list[int]) -> None:
    """SIGKILL `pid` and wait until each of `children` has another parent (re-parented)."""
    os.kill(pid, signal.SIGKILL)
    for child in children:
        st = read_stat(child, cmdline=False)
        while st is not None and st.ppid == pid:
            os.sched_yield()
            st = read_stat(child, cmdline=False)
        assert st is not None, f"rank {child} died with its parent"


def test_the_ranks_of_a_launcher_that_died_are_found_in_its_process_group(tmp_path, script, groups) -> None:
    launcher, _, ranks, shell = start_launcher(tmp_path, script, groups, wrap=False, own_group=True)
    assert launcher == shell.pid and os.getpgid(ranks[0]) == launcher
    assert [r for r, _ in job_ranks(ranks[0]).ranks] == ranks  # alive: found above the rank
    kill_and_wait_adopted(launcher, ranks)
    shell.wait(timeout=10)  # reaped: PID `launcher` names no process now
    for pid in ranks:
        job = job_ranks(pid)
        assert job.problem is None, job.problem
        assert [r for r, _ in job.ranks] == ranks  # rank 1's data loader is not a rank
        assert job.launcher is None and job.gone == launcher
    # the command says what it found, and dumps them
    if require_py_spy_or_none(script):
        settled(ranks)
        out = gputui("stacks", "--job", str(ranks[1]))
        assert out.returncode == 0, out.stderr
        first = out.stdout.splitlines()[0]
        assert first == (
            f"job: its launcher (PID {launcher}) has exited; 2 ranks left in its process group {launcher}"
        )
        py = comm(ranks[0])
        assert (
            f"PID {ranks[0]} (rank 0) {py} idle" in out.stdout
            and f"PID {ranks[1]} (rank 1) {py} idle" in out.stdout
        )
        doc = json.loads(gputui("stacks", "--job", str(ranks[0]), "--json").stdout)
        assert [p["rank"] for p in doc["processes"]] == [0, 1]


def test_a_rank_whose_wrapper_died_is_found_through_its_launchers_group(tmp_path, script, groups) -> None:
    launcher, wrappers, ranks, _ = start_launcher(tmp_path, script, groups, wrap=True, own_group=True)
    for wrapper, rank in zip(wrappers, ranks, strict=True):
        kill_and_wait_adopted(wrapper, [rank])
    assert all(read_stat(r, cmdline=False).ppid != launcher for r in ranks)  # not under it any more
    job = job_ranks(ranks[0])
    assert job.problem is None, job.problem
    assert job.launcher == launcher and job.kind == "torchrun"
    assert [r for r, _ in job.ranks] == ranks


def test_a_dead_launcher_that_led_no_group_is_said_so(tmp_path, script, groups) -> None:
    launcher, _, ranks, shell = start_launcher(tmp_path, script, groups, wrap=False, own_group=False)
    assert os.getpgid(ranks[0]) == shell.pid != launcher  # the shell's group
    kill_and_wait_adopted(launcher, ranks)
    job = job_ranks(ranks[0])
    assert job.ranks == () and job.problem is not None
    assert job.problem.startswith(f"PID {ranks[0]} is neither a launcher (torchrun")
    assert "its parent is PID " in job.problem
    assert f"its process group is led by PID {shell.pid} ({comm(shell.pid)}), not a launcher" in job.problem
    out = gputui("stacks", "--job", str(ranks[0]))
    assert out.returncode == 2 and out.stderr == f"gputui stacks: {job.problem}\n"


def require_py_spy_or_none(script: Path) -> bool:
    """True where py-spy can read this machine's processes (the job's discovery is tested
    either way; only the dump needs py-spy)."""
    try:
        require_py_spy(script)
    except pytest.skip.Exception:
        return False
    return True


def test_group_zero_is_no_dead_launchers_group() -> None:
    """Process group and session 0 are no group a launcher led: the kernel's threads and
    what ran before any setsid (PID 1 of a container) are in it.  `--job` on such a process
    listed kthreadd and PID 1 as "2 ranks left in its process group 0" (review of issue 31)."""
    from gputui.stacks.ranks import _orphans
    from gputui.telemetry.host.proctree import ProcStat

    me = read_stat(os.getpid())
    assert me is not None
    for shape in ({"pgid": 0, "sid": 0}, {"pgid": 0, "sid": me.sid}, {"pgid": me.pgid, "sid": 0}):
        st = ProcStat(me.pid, me.ppid, shape["pgid"], shape["sid"], me.start_ticks, me.name, None)
        found = _orphans(st)
        assert found.gone != 0 and all(pid != 2 for pid, _ in found.ranks), (shape, found)
    # on the real process table: whatever PID 1's group is, no kernel thread is a rank
    job = job_ranks(1)
    assert not any(read_stat(pid) is not None and read_stat(pid).ppid in (0, 2) for pid, _ in job.ranks), job
    r = gputui("stacks", "--job", "1", "--json")
    assert "process group 0" not in r.stdout + r.stderr and "kthreadd" not in r.stdout + r.stderr
