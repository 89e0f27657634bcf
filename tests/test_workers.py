"""The CPU of a GPU process's children (its DataLoader workers): real child processes that
burn CPU or sleep, a forkserver-style grandchild, and, for what cannot be made to happen on
demand (a PID reused by another process, a /proc that hides a process's children), a /proc
tree written in a temporary directory (issue 26 item 5)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputui.telemetry.host.workers import RESCAN_EVERY, WorkerCpu, read_cpu_ticks

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
    assert cpu[1] > 10.0  # two burners: well above idle even on a loaded 2-core machine (18 % seen)
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


# ---- threads: the main thread's children every read, the others' every RESCAN_EVERY reads --

# A rank driven from its stdin: a thread other than the main one forks a sleeping child
# (and stays, or ends: its child then belongs to the main thread), short-lived threads come
# and go, the main thread forks one.  Each command prints a line back.
THREADED = r"""
import os, queue, sys, threading, time
def fork():
    pid = os.fork()
    if pid == 0:
        time.sleep(600)
        os._exit(0)
    return pid
def serve(asks, answers):  # the loader thread: forks on request, ends on None
    while asks.get() is not None:
        answers.put(fork())
asks, answers = queue.Queue(), queue.Queue()
loader = threading.Thread(target=serve, args=(asks, answers), daemon=True)
loader.start()
def start_server():  # a forkserver: forks workers (its own children) on request
    asks, ask = os.pipe()
    answer, answers = os.pipe()
    pid = os.fork()
    if pid == 0:
        while cmd := os.read(asks, 64).decode().split():
            if cmd[0] == "fork":
                os.write(answers, f"{fork()}\n".encode())
            else:
                os.kill(int(cmd[1]), 9)
                os.waitpid(int(cmd[1]), 0)
                os.write(answers, b"done\n")
        os._exit(0)
    return pid, ask, answer
def to_server(msg):
    os.write(server[1], msg.encode())
    return os.read(server[2], 64).decode().strip()
print("ready", flush=True)
for line in sys.stdin:
    cmd = line.split()
    if cmd[0] == "server":
        server = start_server()
        print(server[0], flush=True)
    elif cmd[0] == "server-fork":
        print(to_server("fork"), flush=True)
    elif cmd[0] == "server-reap":
        print(to_server(f"reap {cmd[1]}"), flush=True)
    if cmd[0] == "thread":  # the loader thread forks a child
        asks.put(1)
        print(answers.get(), flush=True)
    elif cmd[0] == "thread-then-end":  # a new thread forks a child and ends
        got = []
        t = threading.Thread(target=lambda: got.append(fork()))
        t.start()
        t.join()
        print(got[0], flush=True)
    elif cmd[0] == "main":
        print(fork(), flush=True)
    elif cmd[0] == "reap":  # a child ends and is waited for (a DataLoader's epoch ends)
        os.kill(int(cmd[1]), 9)
        os.waitpid(int(cmd[1]), 0)
        print("done", flush=True)
    elif cmd[0] == "threads":
        ts = [threading.Thread(target=time.sleep, args=(0.001,)) for _ in range(int(cmd[1]))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        print("done", flush=True)
"""


class Driven:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", THREADED], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.children: list[int] = []
        assert self.ask("") == "ready"

    def ask(self, cmd: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if cmd:
            self.proc.stdin.write(cmd + "\n")
            self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def fork(self, where: str) -> int:
        pid = int(self.ask(where))
        self.children.append(pid)
        return pid

    def end(self) -> None:
        for pid in reversed(self.children):  # a forkserver's workers first
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def driven():
    d = Driven()
    try:
        yield d
    finally:
        d.end()


def reads(w: WorkerCpu, key: tuple[int, float | None], n: int) -> list[tuple[float, ...] | None]:
    out = []
    for _ in range(n):
        time.sleep(0.002)  # windows of a few ms: the figures do not matter, which children do
        out.append(w.get([key], time.time())[key])
    return out


def skip_a_full_listing(w: WorkerCpu, key: tuple[int, float | None]) -> None:
    """Reads until the next one lists only the threads known to fork."""
    while w.lists_every_thread(key[0]):
        reads(w, key, 1)


def counted(got: list[tuple[float, ...] | None]) -> list[int | None]:
    return [None if g is None else len(g) for g in got]


def test_a_child_forked_by_another_thread_before_the_first_read_is_found_at_once(driven) -> None:
    driven.fork("thread")
    w = WorkerCpu(interval=0.0)
    key = (driven.proc.pid, 1.0)
    # first read: seen (not measured yet); then measured at every read, not only at the
    # reads that list every thread: the thread that had it is remembered
    assert counted(reads(w, key, 2 * RESCAN_EVERY + 2)) == [None] + [1] * (2 * RESCAN_EVERY + 1)


def test_a_child_forked_later_by_another_thread_is_found_within_rescan_every_reads(driven) -> None:
    w = WorkerCpu(interval=0.0)
    key = (driven.proc.pid, 1.0)
    assert reads(w, key, 1) == [()]
    driven.fork("thread")
    got = counted(reads(w, key, RESCAN_EVERY + 2 * RESCAN_EVERY))
    first = next(i for i, g in enumerate(got) if g != 0)
    assert first < RESCAN_EVERY  # within RESCAN_EVERY reads (10 s apart: two minutes)
    assert got[first:] == [None] + [1] * (len(got) - first - 1)


def test_a_child_forked_by_the_main_thread_is_found_at_the_next_read(driven) -> None:
    w = WorkerCpu(interval=0.0)
    key = (driven.proc.pid, 1.0)
    assert reads(w, key, 2) == [(), ()]
    skip_a_full_listing(w, key)
    driven.fork("main")
    assert counted(reads(w, key, 2)) == [None, 1]


def test_a_forkservers_workers_are_found_within_rescan_every_reads_then_at_every_read(driven) -> None:
    driven.fork("server")
    w = WorkerCpu(interval=0.0)
    key = (driven.proc.pid, 1.0)
    assert counted(reads(w, key, 2)) == [None, 1]  # the forkserver, no workers yet
    worker = driven.fork("server-fork")
    # a worker seen at its first read is not in the figures (not measured yet): 2 from the next
    got = counted(reads(w, key, 2 * RESCAN_EVERY))
    first = got.index(2)
    assert first <= RESCAN_EVERY
    assert got[first:] == [2] * (len(got) - first)
    # an epoch ends, the forkserver's workers with it; the next epoch's are found at once:
    # the forkserver is remembered (it has had children)
    assert driven.ask(f"server-reap {worker}") == "done"
    assert counted(reads(w, key, RESCAN_EVERY)) == [1] * RESCAN_EVERY
    skip_a_full_listing(w, key)
    driven.fork("server-fork")
    assert counted(reads(w, key, 2)) == [1, 2]


def test_threads_that_come_and_go_lose_no_child(driven) -> None:
    driven.fork("main")
    driven.fork("thread")
    w = WorkerCpu(interval=0.0)
    key = (driven.proc.pid, 1.0)
    assert counted(reads(w, key, 1)) == [None]
    got = []
    for k in range(2 * RESCAN_EVERY):
        assert driven.ask("threads 20") == "done"
        if k == RESCAN_EVERY // 2:
            # the thread forks a child and ends: the child becomes the main thread's
            driven.fork("thread-then-end")
        got += counted(reads(w, key, 1))
    at = RESCAN_EVERY // 2
    assert got[: at + 1] == [2] * (at + 1)  # the third child: seen, not measured yet
    assert got[at + 1 :] == [3] * (len(got) - at - 1)


def test_a_thread_whose_children_ended_is_still_read(driven) -> None:
    # the loader thread's workers end (an epoch ends) and it forks new ones later: it is
    # still read at every read, though every thread was listed while it had none
    first = driven.fork("thread")
    w = WorkerCpu(interval=0.0)
    key = (driven.proc.pid, 1.0)
    assert counted(reads(w, key, 2)) == [None, 1]
    assert driven.ask(f"reap {first}") == "done"
    assert reads(w, key, RESCAN_EVERY) == [()] * RESCAN_EVERY  # one of them lists every thread
    skip_a_full_listing(w, key)
    driven.fork("thread")
    assert counted(reads(w, key, 2)) == [None, 1]


def test_a_rank_that_ends_between_reads_is_none(driven) -> None:
    driven.fork("thread")
    w = WorkerCpu(interval=0.0)
    key = (driven.proc.pid, 1.0)
    assert counted(reads(w, key, 2)) == [None, 1]
    skip_a_full_listing(w, key)  # the next read reads the main thread first
    driven.proc.kill()
    driven.proc.wait()
    assert reads(w, key, 1) == [None]


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


def fake_rank(
    root: Path, rank: int, threads: dict[int, dict[int, tuple[int, int]]], own_start: int | None = None
) -> None:
    """/proc with process `rank` (afresh; with a stat when `own_start` is given) whose threads are
    {TID: {child: (start, cpu ticks)}}: the main thread's TID is `rank`."""
    shutil.rmtree(root / str(rank), ignore_errors=True)
    if own_start is not None:
        (root / str(rank)).mkdir(parents=True)
        (root / str(rank) / "stat").write_text(stat_line(rank, own_start, 0))
    for tid, kids in threads.items():
        task = root / str(rank) / "task" / str(tid)
        task.mkdir(parents=True)
        (task / "children").write_text(" ".join(str(c) for c in kids) + " ")
        for pid, (start, cpu) in kids.items():
            if not (root / str(pid) / "task").exists():
                (root / str(pid) / "task" / str(pid)).mkdir(parents=True)
                (root / str(pid) / "task" / str(pid) / "children").write_text("")
            (root / str(pid) / "stat").write_text(stat_line(pid, start, cpu))


def test_a_reused_rank_pid_has_all_its_threads_listed_at_once(tmp_path: Path) -> None:
    hz = os.sysconf("SC_CLK_TCK")
    w = WorkerCpu(str(tmp_path), interval=0.0, rescan_every=1000)  # no scan of every thread by turn
    fake_rank(tmp_path, 10, {10: {}, 13: {14: (500, 0)}})
    old, new = (10, 1.0), (10, 2.0)
    assert w.get([old], 100.0)[old] is None
    fake_rank(tmp_path, 10, {10: {}, 13: {14: (500, 5 * hz)}})
    assert w.get([old], 105.0)[old] == (100.0,)
    # the rank ends and a new process takes PID 10: its child, forked by another thread, is
    # found at its first read (a new identity: every thread listed), not after 1000 reads
    fake_rank(tmp_path, 10, {10: {}, 15: {16: (900, 0)}})
    assert w.get([new], 110.0)[new] is None
    fake_rank(tmp_path, 10, {10: {}, 15: {16: (900, 5 * hz)}})
    assert w.get([new], 115.0)[new] == (100.0,)


def test_a_reused_forkserver_pid_has_all_its_threads_listed_at_once(tmp_path: Path) -> None:
    hz = os.sysconf("SC_CLK_TCK")
    w = WorkerCpu(str(tmp_path), interval=0.0, rescan_every=1000)
    key = (20, 1.0)
    # rank 20's child 21 (a forkserver) has a child forked by its thread 23
    fake_rank(tmp_path, 20, {20: {}})
    (tmp_path / "20" / "task" / "20" / "children").write_text("21 ")
    fake_rank(tmp_path, 21, {21: {}, 23: {24: (600, 0)}}, own_start=500)
    assert w.get([key], 100.0)[key] is None
    fake_rank(tmp_path, 21, {21: {}, 23: {24: (600, 5 * hz)}}, own_start=500)
    assert w.get([key], 105.0)[key] == (100.0, 0.0)
    # PID 21 is now another process (another start time), whose child comes from thread 25
    fake_rank(tmp_path, 21, {21: {}, 25: {26: (900, 0)}}, own_start=800)
    assert w.get([key], 110.0)[key] is None  # both new
    fake_rank(tmp_path, 21, {21: {}, 25: {26: (900, 5 * hz)}}, own_start=800)
    assert w.get([key], 115.0)[key] == (100.0, 0.0)
