"""The stacks the verdicts want, read off the UI thread (gputui.stacks.sampler), on real
processes: a real gloo job whose rank 0 blocks in all_reduce while rank 1 sleeps in its own
loop, a real child blocked in a known function, and a stand-in py-spy that waits for the test
(to see that asking never waits, and that closing leaves no child)."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from matrix_support import job_in, judge, slot, with_stacks
from stacks_support import py_spy_children, require_py_spy, start_waiter, write_child

from gputui.stacks.sampler import Evidence, StackSampler, for_source
from gputui.telemetry.health import HealthEngine
from gputui.telemetry.health_config import HealthConfig
from gputui.telemetry.host.starttime import start_time
from gputui.telemetry.model import Snapshot
from gputui.telemetry.recording import RecordingWriter, read_recording


def _snap() -> Snapshot:
    return Snapshot(seq=0, timestamp=time.time())


def _ident(pid: int) -> tuple[int, float]:
    import psutil

    return pid, start_time(psutil.Process(pid))


def _read(sampler: StackSampler, targets: list[tuple[int, float | None]]):
    assert sampler.want(targets)
    assert sampler.join(60)
    ev = sampler.attach(_snap()).stacks
    assert ev is not None
    return {w.pid: w for w in ev.ranks}


RANKS = textwrap.dedent(
    """
    import os, sys, time
    import torch, torch.distributed as dist

    def own_loop():
        while True:
            time.sleep(1)  # SLEEP LINE

    dist.init_process_group("gloo")
    t = torch.ones(4)
    os.write(1, b"ready\\n")
    if dist.get_rank() == 0:
        dist.all_reduce(t)  # ALL_REDUCE LINE
    else:
        own_loop()
    """
)


def _line(marker: str) -> int:
    return next(i for i, line in enumerate(RANKS.splitlines(), 1) if marker in line)


def test_a_real_gloo_rank_blocked_in_all_reduce_and_one_in_its_own_loop(tmp_path: Path, children) -> None:
    pytest.importorskip("torch.distributed")
    require_py_spy(write_child(tmp_path))
    script = tmp_path / "ranks.py"
    script.write_text(RANKS)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "2"}
    procs = []
    for r in (0, 1):  # both started before either is waited for: they meet in init_process_group
        procs.append(
            subprocess.Popen(
                [sys.executable, str(script)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                env={**env, "RANK": str(r)},
            )
        )
        children.append(procs[-1])
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    sampler = StackSampler(min_gap=0.0, pass_gap=0.0)
    targets = [_ident(p.pid) for p in procs]
    deadline = time.monotonic() + 60
    while True:  # "ready" comes just before the call: read until both are inside it
        got = _read(sampler, targets)
        r0, r1 = got[procs[0].pid], got[procs[1].pid]
        if r0.place == "collective" and r1.call == "own_loop":
            break
        assert time.monotonic() < deadline, (r0, r1)
        time.sleep(0.1)
    assert (r0.call, r0.at) == ("all_reduce", f"ranks.py:{_line('ALL_REDUCE LINE')}")
    assert (r1.place, r1.at) == ("elsewhere", f"ranks.py:{_line('SLEEP LINE')}")
    assert r0.create_time == targets[0][1] and r0.taken > 0 and r0.frames


def test_no_py_spy_says_so_and_starts_no_child(tmp_path: Path, children) -> None:
    child = start_waiter(write_child(tmp_path), children)
    sampler = StackSampler(py_spy=None)
    (w,) = _read(sampler, [_ident(child.pid)]).values()
    assert (w.place, w.reason) == ("unread", "no-py-spy")
    assert not py_spy_children()


def test_a_pid_now_another_process_is_not_read(tmp_path: Path, children) -> None:
    child = start_waiter(write_child(tmp_path), children)
    pid, created = _ident(child.pid)
    (w,) = _read(StackSampler(), [(pid, created - 100.0)]).values()
    assert (w.place, w.reason) == ("unread", "exited")


def _stand_in(tmp_path: Path, body: str) -> str:
    exe = tmp_path / "py-spy"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return str(exe)


def test_asking_never_waits_for_the_dumps(tmp_path: Path, children) -> None:
    """A stand-in py-spy that waits for the test: `want` has returned, the pass still runs."""
    go = tmp_path / "go"
    exe = _stand_in(tmp_path, f'while [ ! -e "{go}" ]; do sleep 0.02; done\nexit 1\n')
    child = start_waiter(write_child(tmp_path), children)
    sampler = StackSampler(py_spy=exe)
    assert sampler.want([_ident(child.pid)])
    assert sampler.busy and sampler.attach(_snap()).stacks is None
    assert not sampler.want([_ident(child.pid)])  # one pass at a time
    go.touch()
    assert sampler.join(60) and not sampler.busy
    (w,) = sampler.attach(_snap()).stacks.ranks
    assert (w.pid, w.place, w.reason) == (child.pid, "unread", "py-spy-failed")


def test_a_few_ranks_a_pass_and_each_at_most_once_per_gap(tmp_path: Path, children) -> None:
    script = write_child(tmp_path)
    kids = [_ident(start_waiter(script, children).pid) for _ in range(6)]
    sampler = StackSampler(py_spy=None, per_pass=4, min_gap=3600.0, pass_gap=0.0)
    assert len(_read(sampler, kids)) == 4
    assert set(_read(sampler, kids)) == {pid for pid, _ in kids[4:]}  # the rest, next pass
    assert not sampler.want(kids) and sampler.passes == 2  # all read within the gap


def test_one_pass_per_pass_gap_however_many_jobs_are_suspected(tmp_path: Path, children) -> None:
    """The whole sampler's cost is bounded: right after a pass, nothing more is read until
    pass_gap has passed (default 20 s), whatever is asked."""
    script = write_child(tmp_path)
    kids = [_ident(start_waiter(script, children).pid) for _ in range(2)]
    sampler = StackSampler(py_spy=None, per_pass=1)
    assert len(_read(sampler, kids)) == 1
    assert not sampler.want(kids) and sampler.passes == 1
    sampler.pass_gap = 0.0
    assert sampler.want(kids) and sampler.passes == 2


def test_closing_kills_the_running_dumps(tmp_path: Path, children) -> None:
    exe = _stand_in(tmp_path, "exec sleep 600\n")
    child = start_waiter(write_child(tmp_path), children)
    sampler = StackSampler(py_spy=exe)
    assert sampler.want([_ident(child.pid)])
    deadline = time.monotonic() + 30
    while not any("sleep" in " ".join(c.cmdline()) for c in _kids()):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    sampler.close()
    assert sampler.join(30)
    assert not any("sleep" in " ".join(c.cmdline()) for c in _kids())


def _kids():
    import psutil

    out = []
    for c in psutil.Process().children(recursive=True):
        try:
            c.cmdline()
            out.append(c)
        except psutil.Error:
            continue
    return out


def test_only_a_local_source_with_stacks_on_gets_a_sampler() -> None:
    assert isinstance(for_source(True, HealthConfig()), StackSampler)
    assert for_source(False, HealthConfig()) is None  # a replay carries its own
    assert for_source(True, HealthConfig(stacks=False)) is None


# --------------------------------------------------------------------------------------
# recordings keep the evidence: a replay judges as the live run did
# --------------------------------------------------------------------------------------


def test_a_recording_keeps_the_stacks_and_a_replay_judges_alike(tmp_path: Path) -> None:
    """The mismatch slot with its captured stacks where the live sampler would have put them,
    written and read back: the same verdicts, tick by tick."""
    s = slot("3-mismatch-slow-gpu")
    snaps = with_stacks(s)
    header = read_recording(s.path / "recording.jsonl.gz")[0]
    out = tmp_path / "r.jsonl.gz"
    with RecordingWriter(out, header.machine, header.interval) as w:
        for t in snaps:
            w.write(t)
    back = read_recording(out)[1]
    assert [t.stacks for t in back] == [t.stacks for t in snaps]
    live = [job_in(r, s.key("a")).verdict for r in judge(snaps)]
    replay = [job_in(r, s.key("a")).verdict for r in judge(back)]
    assert live == replay and live[-1] is not None and live[-1].kind == "mismatch"


def test_evidence_feeds_the_engine_and_carries_the_stacks(tmp_path: Path, children) -> None:
    """The headless writers' helper: what the sampler read goes into the next snapshot."""
    child = start_waiter(write_child(tmp_path), children)
    sampler = StackSampler(py_spy=None)
    ev = Evidence(HealthEngine(), sampler)
    first = ev.judged(_snap())
    assert first.stacks is None and ev.engine.current.timestamp == first.timestamp
    assert sampler.want([_ident(child.pid)]) and sampler.join(30)
    later = ev.judged(Snapshot(seq=1, timestamp=time.time()))
    assert later.stacks is not None and later.stacks.ranks[0].pid == child.pid
    ev.close()


def test_record_loads_the_health_settings() -> None:
    from gputui.commands import record

    assert record.USES_CONFIG


@pytest.mark.skipif(sys.platform != "linux", reason="procfs")
def test_the_sampler_is_not_imported_by_the_first_frame_until_a_job_is_suspected() -> None:
    code = (
        "import sys; import gputui.stacks.sampler as s; "
        "print('gputui.stacks.dump' in sys.modules, 'asyncio' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split()[0] == "False"


def test_the_monitor_makes_its_stack_reader_only_once_a_verdict_wants_a_stack() -> None:
    """`Hub.stacks_when_wanted`: no stack reader (nor its modules) for the monitor's start or
    a healthy job; made once, at the first tick whose verdicts want a rank's stack (the real
    mismatch on 4 H100s, judged with 30 s waits), and used from then on."""
    from matrix_support import CFG

    from gputui.telemetry.hub import Hub

    ticks = slot("3-mismatch-slow-gpu").ticks
    made: list[int] = []

    class Reader:
        def __init__(self) -> None:
            self.wants: list[tuple[tuple[int, float | None], ...]] = []

        def attach(self, snap: Snapshot) -> Snapshot:
            return snap

        def want(self, idents: tuple[tuple[int, float | None], ...]) -> None:
            self.wants.append(idents)

        def close(self) -> None:
            pass

    reader = Reader()
    hub = Hub(capacity=4, health=HealthEngine(CFG))
    hub.stacks_when_wanted(lambda: made.append(len(made)) or reader)  # type: ignore[arg-type, func-returns-value]
    first_wanted = None
    for k, snap in enumerate(ticks):
        hub.publish(snap)
        report = hub.health_report()
        assert report is not None
        if report.wanted and first_wanted is None:
            first_wanted = k
        assert len(made) == (0 if first_wanted is None else 1), k
    assert first_wanted is not None and first_wanted > 0
    assert reader.wants and all(reader.wants)
