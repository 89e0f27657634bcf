"""Real child processes that stand in for GPU processes, for the processes view's tests.

CI has no GPU, so no process of ours can be on one.  `ReplayOntoChildren` is a TEST-ONLY
source: it replays a REAL recording (every GPU sample, and each process's GPU memory and
utilization, exactly as NVML recorded them) but puts each recorded process's row on the PID
of a real child process started by the test.  Host facts (user, command line, CPU %, RSS,
start time) then come from that real child through the real `ProcessInspector`, and the
signals the tests send through the UI reach real processes.  A child that has exited is
dropped from the rows, as NVML stops listing a process that has exited.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import psutil
import pytest

from gputui.telemetry.host.processes import ProcessInspector
from gputui.telemetry.model import GpuProcess, MachineInfo, Snapshot, Topology
from gputui.telemetry.recording import ReplaySource

MARKER = f"gputui-test-child-{os.getpid()}-{uuid.uuid4().hex[:6]}"
SLEEP = "import time; time.sleep(600)"
NS_LAST_PID = Path("/proc/sys/kernel/ns_last_pid")


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


SLEEP_INTERRUPTIBLE = (
    "import signal, time; signal.pthread_sigmask(signal.SIG_SETMASK, []); "
    "signal.signal(signal.SIGINT, signal.default_int_handler); time.sleep(600)"
)
"""A sleeper that SIGINT ends whatever its launcher left: a shell's background job starts
with SIGINT ignored, and `su` can leave it blocked (seen running the suite as a user)."""


def start_child(
    tag: str, *extra: str, env: dict[str, str] | None = None, code: str = SLEEP
) -> subprocess.Popen[bytes]:
    """`python -c CODE MARKER-tag *extra`, returned once its command line is readable."""
    child = subprocess.Popen(
        [sys.executable, "-c", code, f"{MARKER}-{tag}", *extra],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_started(child.pid, f"{MARKER}-{tag}")
    return child


def start_stubborn() -> subprocess.Popen[bytes]:
    """A child that ignores SIGTERM (only SIGKILL ends it), returned once that is set up."""
    child = subprocess.Popen(
        [
            "python3",
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); "
            "time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
    return child


def wait_started(pid: int, marker: str) -> None:
    # Popen can return while the child is still inside exec, with an empty command line
    deadline = time.monotonic() + 30
    while marker not in psutil.Process(pid).cmdline():
        assert time.monotonic() < deadline, "the child did not start"
        time.sleep(0.01)


def stop(children: Sequence[subprocess.Popen[bytes]]) -> None:
    for child in children:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=10)


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    """A list the test appends its children to; all are killed and reaped at the end."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    stop(started)


def can_choose_pids() -> bool:
    """Whether this process may set the next PID (root with CAP_SYS_ADMIN over the PID
    namespace): how a test reuses a PID for real."""
    try:
        with NS_LAST_PID.open("r+") as f:
            f.write(f.read().strip())
        return True
    except OSError:
        return False


def start_child_with_pid(pid: int, tag: str, attempts: int = 200) -> subprocess.Popen[bytes] | None:
    """A child that gets exactly `pid` (which must be free), by setting ns_last_pid just
    before forking; None if other processes keep taking it first."""
    for _ in range(attempts):
        NS_LAST_PID.write_text(str(pid - 1))
        child = subprocess.Popen(
            [sys.executable, "-c", SLEEP, f"{MARKER}-{tag}"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if child.pid == pid:
            wait_started(pid, f"{MARKER}-{tag}")
            return child
        child.kill()
        child.wait()
    return None


class ReplayOntoChildren:
    """TEST-ONLY: a real recording whose processes are put on real children's PIDs.

    `mapping` is {recorded PID: child PID}; recorded processes not in it are left out (as
    processes NVML would not show us).  It may be changed between ticks (a test that
    replaces a process).  `verify_gpu_files` is passed to the ProcessInspector (True: the
    container check, which marks the children not visible: they hold no /dev/nvidia*)."""

    live = False
    local_processes = True

    def __init__(self, path: Path, mapping: dict[int, int], *, verify_gpu_files: bool = False) -> None:
        self.inner = ReplaySource(path)
        self.label = f"{self.inner.label} (test: processes on real children)"
        self.header = self.inner.header
        self.ticks = self.inner.ticks
        self.mapping = mapping
        self.inspector = ProcessInspector(verify_gpu_files=verify_gpu_files)

    @property
    def position(self) -> int:
        return self.inner.position

    @property
    def interval(self) -> float:
        return self.inner.interval

    @property
    def seekable(self) -> ReplayOntoChildren:
        return self

    def open(self) -> MachineInfo:
        return self.inner.open()

    def sample(self) -> Snapshot:
        snap = self.inner.sample()
        rows = []
        for p in snap.processes:
            pid = self.mapping.get(p.pid)
            if pid is None or not alive(pid):
                continue
            rows.append(
                GpuProcess(
                    gpu_index=p.gpu_index,
                    pid=pid,
                    type=p.type,
                    gpu_memory=p.gpu_memory,
                    sm_util=p.sm_util,
                    mem_util=p.mem_util,
                    enc_util=p.enc_util,
                    dec_util=p.dec_util,
                )
            )
        now = time.time()
        procs = tuple(self.inspector.enrich(rows, now))
        return dataclasses.replace(snap, timestamp=now, processes=procs, launchers=self.inspector.launchers)

    def seek(self, position: int) -> None:
        self.inner.seek(position)

    def read_topology(self) -> Topology | None:
        return self.inner.read_topology()

    def notes(self) -> list[str]:
        return []

    def close(self) -> None:
        pass
