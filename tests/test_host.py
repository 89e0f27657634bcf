"""The host side, on this machine: HostSampler, and ProcessInspector on real child processes."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator

import psutil
import pytest

from gputui.telemetry.host.processes import HostSampler, ProcessInspector
from gputui.telemetry.model import GpuProcess, Snapshot
from gputui.telemetry.recording import RecordingHeader

MARKER = f"gputui-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
SLEEP = "import time; time.sleep(60)"
BUSY = "while True: pass"

Spawn = Callable[[str, str], subprocess.Popen[bytes]]


@pytest.fixture
def spawn() -> Iterator[Spawn]:
    """Start `python -c CODE MARKER-TAG`; every child is killed and reaped at the end."""
    children: list[subprocess.Popen[bytes]] = []

    def start(code: str, tag: str) -> subprocess.Popen[bytes]:
        child = subprocess.Popen([sys.executable, "-c", code, f"{MARKER}-{tag}"])
        children.append(child)
        # Popen can return while the child is still inside exec, with an empty command line
        deadline = time.monotonic() + 30
        while f"{MARKER}-{tag}" not in psutil.Process(child.pid).cmdline():
            assert time.monotonic() < deadline, "the child did not start"
            time.sleep(0.01)
        return child

    yield start
    for child in children:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=10)


def cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def wait_for_cpu(pid: int, seconds: float) -> None:
    """Until the process has used `seconds` of CPU (no fixed sleeps: a busy machine is slower)."""
    deadline = time.monotonic() + 30
    while cpu_seconds(pid) < seconds:
        assert time.monotonic() < deadline, "the busy child got no CPU time"
        time.sleep(0.05)


def kill(child: subprocess.Popen[bytes]) -> None:
    child.kill()
    child.wait(timeout=10)


# --------------------------------------------------------------------------------------
# HostSampler
# --------------------------------------------------------------------------------------


def test_host_sample_is_sane() -> None:
    sampler = HostSampler()
    s = sampler.sample()
    assert len(s.per_cpu) == psutil.cpu_count()
    assert all(0.0 <= v <= 100.0 for v in s.per_cpu)
    assert s.cpu_percent is not None
    assert 0.0 <= s.cpu_percent <= 100.0
    assert s.cpu_percent == pytest.approx(sum(s.per_cpu) / len(s.per_cpu), abs=0.06)
    assert s.mem_total == psutil.virtual_memory().total
    assert s.mem_total > 0
    assert s.mem_used is not None
    assert s.mem_available is not None
    assert 0 < s.mem_used <= s.mem_total
    assert s.mem_used + s.mem_available == s.mem_total
    assert s.swap_total is not None
    assert s.swap_used is not None
    assert 0 <= s.swap_used <= s.swap_total or s.swap_total == 0
    assert s.load_avg is not None
    assert len(s.load_avg) == 3
    assert all(v >= 0 and round(v, 2) == v for v in s.load_avg)
    assert s.uptime is not None
    assert s.uptime > 0
    assert s.uptime == pytest.approx(time.time() - psutil.boot_time(), abs=2)
    later = sampler.sample()
    assert later.uptime is not None
    assert later.uptime >= s.uptime


def test_host_sample_sees_a_busy_child(spawn: Spawn) -> None:
    sampler = HostSampler()
    busy = spawn(BUSY, "busy-host")
    wait_for_cpu(busy.pid, 0.2)
    s = sampler.sample()
    assert max(s.per_cpu) > 0
    assert s.cpu_percent is not None
    assert s.cpu_percent > 0


# --------------------------------------------------------------------------------------
# ProcessInspector
# --------------------------------------------------------------------------------------


def test_enrich_describes_a_live_process(
    spawn: Spawn, x2_recording: tuple[RecordingHeader, list[Snapshot]]
) -> None:
    child = spawn(SLEEP, "sleeper")
    _, ticks = x2_recording
    recorded = ticks[58].processes[0]  # a real NVML process entry from the H200 recording
    assert recorded.cmdline is not None
    assert "bench/load/ddp_like.py" in recorded.cmdline
    inspector = ProcessInspector()
    t0 = time.time()
    (out,) = inspector.enrich([dataclasses.replace(recorded, pid=child.pid)], now=t0)
    ps = psutil.Process(child.pid)
    assert out.visible is True
    assert out.pid == child.pid
    assert out.cmdline == tuple(ps.cmdline())
    assert f"{MARKER}-sleeper" in out.cmdline
    assert out.name == ps.name()
    assert out.user == psutil.Process().username()
    assert out.create_time == ps.create_time()
    assert out.rss is not None
    assert out.rss > 0  # (small: the child may still be starting up)
    assert out.cpu_percent is not None
    assert out.cpu_percent >= 0
    # NVML's side is kept as it was
    for name in ("gpu_index", "type", "gpu_memory", "sm_util", "mem_util", "enc_util", "dec_util"):
        assert getattr(out, name) == getattr(recorded, name)

    # the next tick: the rate since the previous one, about 0 for a sleeper
    time.sleep(0.2)
    (again,) = inspector.enrich([GpuProcess(gpu_index=0, pid=child.pid)], now=time.time())
    assert again.cmdline == out.cmdline
    assert again.create_time == out.create_time
    assert again.cpu_percent is not None
    assert 0 <= again.cpu_percent < 50


def test_busy_process_shows_cpu_on_the_first_and_later_calls(spawn: Spawn) -> None:
    busy = spawn(BUSY, "busy")
    wait_for_cpu(busy.pid, 0.3)
    ps = psutil.Process(busy.pid)
    started = ps.create_time()
    inspector = ProcessInspector()

    # first call: the average since the process started
    before = cpu_seconds(busy.pid)
    t1 = time.time()
    (first,) = inspector.enrich([GpuProcess(gpu_index=0, pid=busy.pid)], now=t1)
    after = cpu_seconds(busy.pid)
    assert first.cpu_percent is not None
    assert first.cpu_percent > 0
    assert 100 * before / (t1 - started) - 0.1 <= first.cpu_percent <= 100 * after / (t1 - started) + 0.1

    # second call: the rate since the first
    wait_for_cpu(busy.pid, after + 0.2)
    before2 = cpu_seconds(busy.pid)
    t2 = time.time()
    (second,) = inspector.enrich([GpuProcess(gpu_index=0, pid=busy.pid)], now=t2)
    after2 = cpu_seconds(busy.pid)
    assert second.cpu_percent is not None
    assert second.cpu_percent > 0
    low = 100 * (before2 - after) / (t2 - t1)
    high = 100 * (after2 - before) / (t2 - t1)
    assert low - 0.1 <= second.cpu_percent <= high + 0.1


def test_a_dead_pid_is_not_visible(spawn: Spawn) -> None:
    child = spawn(SLEEP, "dead")
    pid = child.pid
    kill(child)
    inspector = ProcessInspector()
    (out,) = inspector.enrich([GpuProcess(gpu_index=0, pid=pid, gpu_memory=1 << 30)])
    assert out.visible is False
    assert out.gpu_memory == 1 << 30
    for name in ("name", "user", "cmdline", "cpu_percent", "rss", "create_time"):
        assert getattr(out, name) is None, name
    assert pid not in inspector._tracked


def test_a_process_that_exits_between_ticks_becomes_invisible(spawn: Spawn) -> None:
    child = spawn(SLEEP, "exits")
    inspector = ProcessInspector()
    assert inspector.enrich([GpuProcess(gpu_index=0, pid=child.pid)])[0].visible is True
    assert child.pid in inspector._tracked
    kill(child)
    (out,) = inspector.enrich([GpuProcess(gpu_index=0, pid=child.pid)])
    assert out.visible is False
    assert out.cmdline is None
    assert child.pid not in inspector._tracked


def test_processes_no_longer_listed_are_forgotten(spawn: Spawn) -> None:
    a = spawn(SLEEP, "a")
    b = spawn(SLEEP, "b")
    inspector = ProcessInspector()
    out = inspector.enrich([GpuProcess(gpu_index=0, pid=a.pid), GpuProcess(gpu_index=1, pid=b.pid)])
    assert [p.cmdline[-1] for p in out if p.cmdline] == [f"{MARKER}-a", f"{MARKER}-b"]
    assert set(inspector._tracked) == {a.pid, b.pid}
    inspector.enrich([GpuProcess(gpu_index=1, pid=b.pid)])
    assert set(inspector._tracked) == {b.pid}
    inspector.enrich([])
    assert inspector._tracked == {}


def test_one_pid_on_two_gpus_is_described_once(spawn: Spawn) -> None:
    child = spawn(SLEEP, "two-gpus")
    out = ProcessInspector().enrich(
        [GpuProcess(gpu_index=0, pid=child.pid), GpuProcess(gpu_index=1, pid=child.pid)]
    )
    assert [p.gpu_index for p in out] == [0, 1]
    assert out[0].cmdline == out[1].cmdline
    assert out[0].cpu_percent == out[1].cpu_percent


def test_a_record_that_does_not_match_the_process_is_replaced(spawn: Spawn) -> None:
    """White-box: the tracked record says another process (other start time, command line,
    CPU total) had this PID; the next call must describe the process afresh, not mix them."""
    busy = spawn(BUSY, "reuse")
    wait_for_cpu(busy.pid, 0.2)
    inspector = ProcessInspector()
    (first,) = inspector.enrich([GpuProcess(gpu_index=0, pid=busy.pid)])
    record = inspector._tracked[busy.pid]
    record.create_time -= 1000
    record.cmdline = ("stale",)
    record.name = "stale"
    record.cpu_total = 1e9  # a rate from this would be negative, shown as 0
    (out,) = inspector.enrich([GpuProcess(gpu_index=0, pid=busy.pid)])
    assert inspector._tracked[busy.pid] is not record
    assert out.cmdline == first.cmdline
    assert out.name == first.name
    assert out.create_time == psutil.Process(busy.pid).create_time()
    assert out.cpu_percent is not None
    assert out.cpu_percent > 0  # the average since start, from a fresh record


def _spawn_with_pid(spawn: Spawn, pid: int, tag: str) -> subprocess.Popen[bytes] | None:
    """Start a child that gets `pid` (root only: ns_last_pid); None if it cannot be done."""
    for _ in range(20):
        try:
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                f.write(str(pid - 1))
        except OSError:
            return None
        child = spawn(SLEEP, tag)
        if child.pid == pid:
            return child
        kill(child)  # another process took the PID first: try again
    return None


def test_a_really_reused_pid_is_described_as_the_new_process(spawn: Spawn) -> None:
    """A PID reused by another process (made to happen with ns_last_pid, which needs root).
    psutil caches a Process's create_time(), so this needs a fresh reading to be seen."""
    old = spawn(SLEEP, "old")
    inspector = ProcessInspector()
    (before,) = inspector.enrich([GpuProcess(gpu_index=0, pid=old.pid)])
    assert before.cmdline is not None
    assert f"{MARKER}-old" in before.cmdline
    time.sleep(0.05)  # creation times have 10 ms resolution
    kill(old)
    new = _spawn_with_pid(spawn, old.pid, "new")
    if new is None:
        pytest.skip("cannot choose the next PID here (needs root and a writable ns_last_pid)")
    (after,) = inspector.enrich([GpuProcess(gpu_index=0, pid=new.pid)])
    assert after.visible is True
    assert after.cmdline is not None
    assert f"{MARKER}-new" in after.cmdline
    assert after.create_time == psutil.Process(new.pid).create_time()
    assert before.create_time is not None
    assert after.create_time is not None
    assert after.create_time > before.create_time


NAMESPACE_PROBE = """
import json, sys
from gputui.telemetry.host.processes import ProcessInspector, in_host_pid_namespace
from gputui.telemetry.model import GpuProcess
inspector = ProcessInspector()
host_pid = int(sys.argv[1])
# NVML's PIDs are the host's: one that does not exist here, and PID 1, which here is this
# very script (a local process with that number, holding no /dev/nvidia* file)
out = inspector.enrich([GpuProcess(gpu_index=0, pid=host_pid), GpuProcess(gpu_index=0, pid=1)])
print(json.dumps({"host_ns": in_host_pid_namespace(), "verify": inspector.verify_gpu_files,
                  "visible": [p.visible for p in out], "names": [p.name for p in out]}))
"""


def test_inside_a_real_pid_namespace_host_pids_are_not_taken_for_local_processes(spawn: Spawn) -> None:
    """What a container without --pid=host sees, for real: `unshare --pid` gives the probe a
    new PID namespace where NVML's host PIDs either don't exist or are other processes."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) here")
    child = spawn(SLEEP, "host-side")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", NAMESPACE_PROBE, str(child.pid)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": repo},
        check=False,
    )
    if r.returncode != 0 and ("Operation not permitted" in r.stderr or "cannot" in r.stderr.lower()):
        pytest.skip(f"no new PID namespace here: {r.stderr.strip()[:200]}")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["host_ns"] is False  # it knows it is not in the host's namespace
    assert got["verify"] is True  # so it checks each PID for an open NVIDIA device file
    assert got["visible"] == [False, False]  # neither is taken for the GPU process
    assert got["names"] == [None, None]  # and no facts of the wrong process leak into the row
    assert psutil.Process(child.pid).is_running()  # (the host-side process was there all along)
