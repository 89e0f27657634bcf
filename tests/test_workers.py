"""The CPU of a GPU process's children (its DataLoader workers): real child processes that
burn CPU or sleep, a forkserver-style grandchild, and, for what cannot be made to happen on
demand (a PID reused by another process, a /proc that hides a process's children), a /proc
tree written in a temporary directory (issue 26 item 5)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputui.telemetry.host.workers import WorkerCpu, read_cpu_ticks

# A "rank": one child burning CPU, one sleeping, and a child that starts a burning
# grandchild (what a forkserver does); it prints the PIDs and waits.
RANK = r"""
import os, sys, time
def burn():
    while True:
        pass
def child(fn):
    pid = os.fork()
    if pid == 0:
        try:
            fn()
        finally:
            os._exit(0)
    return pid
burner = child(burn)
sleeper = child(lambda: time.sleep(600))
def server():
    child(burn)
    time.sleep(600)
fork_server = child(server)
print(burner, sleeper, fork_server, flush=True)
time.sleep(600)
"""


@pytest.fixture
def rank():
    proc = subprocess.Popen([sys.executable, "-c", RANK], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        pids = [int(w) for w in proc.stdout.readline().split()]
        deadline = time.monotonic() + 10  # the fork server's own child may not be forked yet
        while time.monotonic() < deadline and not _grandchildren(pids[2]):
            time.sleep(0.01)
        yield proc, pids
    finally:
        _kill_grandchildren(pids[2])  # while the forkserver-like child still lists them
        proc.kill()
        proc.wait()
        for pid in pids:  # the rank's children are reparented when it dies: end them too
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)


def _grandchildren(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []


def _kill_grandchildren(pid: int) -> None:
    for w in _grandchildren(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(w), 9)


def ident(proc: subprocess.Popen[str]) -> tuple[int, float | None]:
    return (proc.pid, 1.0)


def test_real_children_busy_and_idle(rank) -> None:
    proc, _pids = rank
    w = WorkerCpu(interval=0.0)
    key = ident(proc)
    first = w.get([key], time.time())
    assert first[key] is None  # children, none measured yet: not "no CPU"
    time.sleep(1.5)
    cpu = w.get([key], time.time())[key]
    assert cpu is not None
    # the burner, the forkserver's burning grandchild, the sleeper, the idle server
    assert len(cpu) == 4
    assert cpu == tuple(sorted(cpu, reverse=True))
    assert cpu[1] > 25.0  # two burners (on a shared 2-core machine: well above idle)
    assert cpu[2] < 5.0 and cpu[3] < 5.0


def test_a_process_without_children_has_none_to_show() -> None:
    w = WorkerCpu(interval=0.0)
    me = (os.getpid(), None)
    # this test process may have children of its own from other tests: a fresh sleeper has none
    lone = subprocess.Popen(["sleep", "30"])
    try:
        key = (lone.pid, None)
        assert w.get([key, me], time.time())[key] == ()
    finally:
        lone.kill()
        lone.wait()


def test_a_process_that_does_not_exist_is_none_not_zero() -> None:
    w = WorkerCpu(interval=0.0)
    assert w.get([(2**22 + 7, None)], time.time()) == {(2**22 + 7, None): None}


def test_between_reads_the_last_window_is_kept(rank) -> None:
    proc, _ = rank
    w = WorkerCpu(interval=60.0)
    key = ident(proc)
    now = time.time()
    w.get([key], now)
    assert w.reads == 1
    w.get([key], now + 1)
    assert w.reads == 1  # not due yet: no read
    w.get([key], now + 61)
    assert w.reads == 2


# ---- a /proc tree in a temporary directory --------------------------------------------


def stat_line(pid: int, start: int, cpu: int) -> str:
    # fields after "(comm)": state ppid pgrp session tty tpgid flags minflt cminflt majflt
    # cmajflt utime stime cutime cstime priority nice threads itrealvalue starttime
    rest = ["S", "1", "1", "1", "0", "-1", "0", "0", "0", "0", "0", str(cpu), "0", "0", "0", "20", "0"]
    rest += ["1", "0", str(start)]
    return f"{pid} (a (weird) name) " + " ".join(rest) + "\n"


def fake_proc(root: Path, rank: int, children: dict[int, tuple[int, int]]) -> None:
    """/proc with `rank` (one thread) whose children are {pid: (start ticks, cpu ticks)}."""
    task = root / str(rank) / "task" / str(rank)
    task.mkdir(parents=True, exist_ok=True)
    (task / "children").write_text(" ".join(str(c) for c in children) + " ")
    for pid, (start, cpu) in children.items():
        d = root / str(pid)
        (d / "task" / str(pid)).mkdir(parents=True, exist_ok=True)
        (d / "task" / str(pid) / "children").write_text("")
        (d / "stat").write_text(stat_line(pid, start, cpu))


def test_stat_with_a_parenthesis_in_the_name(tmp_path: Path) -> None:
    fake_proc(tmp_path, 10, {11: (500, 1234)})
    assert read_cpu_ticks(11, str(tmp_path)) == (500, 1234)


def test_a_reused_pid_is_another_child_and_never_charged_with_the_old_ones_cpu(tmp_path: Path) -> None:
    hz = os.sysconf("SC_CLK_TCK")
    w = WorkerCpu(str(tmp_path), interval=0.0)
    fake_proc(tmp_path, 10, {11: (500, 0), 12: (500, 0)})
    assert w.get([(10, 1.0)], 100.0)[(10, 1.0)] is None
    fake_proc(tmp_path, 10, {11: (500, 5 * hz), 12: (500, 0)})  # 5 s of CPU in 5 s
    assert w.get([(10, 1.0)], 105.0)[(10, 1.0)] == (100.0, 0.0)
    # PID 11 exits and a new process takes its PID: its CPU since it started is not a rate
    # over this window, and the old process's count is not subtracted from it
    fake_proc(tmp_path, 10, {11: (900, 40 * hz), 12: (500, 0)})
    assert w.get([(10, 1.0)], 110.0)[(10, 1.0)] == (0.0,)
    fake_proc(tmp_path, 10, {11: (900, 45 * hz), 12: (500, 0)})
    assert w.get([(10, 1.0)], 115.0)[(10, 1.0)] == (100.0, 0.0)


def test_children_that_cannot_be_read_give_none(tmp_path: Path) -> None:
    w = WorkerCpu(str(tmp_path), interval=0.0)
    (tmp_path / "10").mkdir()  # the process exists, its task list is hidden (hidepid)
    assert w.get([(10, 1.0)], 100.0) == {(10, 1.0): None}
    fake_proc(tmp_path, 20, {21: (500, 0)})
    (tmp_path / "20" / "task" / "20" / "children").unlink()  # no children file, not the real /proc
    assert w.get([(20, 1.0)], 101.0) == {(20, 1.0): None}


def test_the_inspector_puts_the_childrens_cpu_on_the_gpu_process(rank) -> None:
    from gputui.telemetry.host.processes import ProcessInspector
    from gputui.telemetry.model import GpuProcess

    proc, _ = rank
    inspector = ProcessInspector(verify_gpu_files=False)
    inspector.workers.interval = 0.0
    row = GpuProcess(gpu_index=0, pid=proc.pid)
    (first,) = inspector.enrich([row])
    assert first.worker_cpu is None
    time.sleep(1.0)
    (second,) = inspector.enrich([row])
    assert second.worker_cpu is not None and len(second.worker_cpu) == 4
