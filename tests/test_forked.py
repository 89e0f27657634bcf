"""The NVML read-ahead in a forked child (`gputui.telemetry.forked`, `NvmlSource.prefetch`).

Each case runs in a fresh interpreter: `ForkedCall` forks only a single-threaded process,
and pytest's own process has other tests' threads.  The child must give its result back,
never make the parent wait, never write to the shared terminal, and never outlive the parent."""

from __future__ import annotations

import json
import os
import textwrap
import time

import pytest
from conftest import fresh_python

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")


def run(code: str, timeout: float = 60) -> tuple[dict, str, str]:
    """Run `code` in a fresh interpreter (tests/ importable); it prints one JSON line last."""
    proc = fresh_python(textwrap.dedent(code), tests_importable=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    return json.loads(lines[-1]), proc.stdout, proc.stderr


def test_the_result_comes_back_and_poll_never_waits():
    out, _, _ = run("""
        import json, time
        from gputui.telemetry.forked import PENDING, ForkedCall
        def work():
            time.sleep(0.5)
            return {"gpus": [1, 2], "text": "x" * 200000}  # more than a pipe holds
        t0 = time.monotonic()
        call = ForkedCall.start(work)
        first = call.poll()
        first_s = time.monotonic() - t0
        while (result := call.poll()) is PENDING:
            time.sleep(0.01)
        print(json.dumps({"pending": first is PENDING, "first_s": first_s,
                          "gpus": result["gpus"], "n": len(result["text"]),
                          "again": call.poll()}))
    """)
    assert out["pending"] and out["first_s"] < 0.3  # the child works; the parent goes on
    assert out["gpus"] == [1, 2] and out["n"] == 200000
    assert out["again"] is None  # handed over once


def test_a_failing_child_gives_none_and_writes_nothing_to_the_terminal():
    out, stdout, stderr = run("""
        import json, time
        from gputui.telemetry.forked import PENDING, ForkedCall
        def work():
            print("from the child")
            raise RuntimeError("boom")
        call = ForkedCall.start(work)
        while (result := call.poll()) is PENDING:
            time.sleep(0.01)
        print(json.dumps({"result": result}))
    """)
    assert out["result"] is None
    assert "boom" not in stderr and "Traceback" not in stderr
    assert stdout.count("from the child") == 0  # (the child exits without flushing)


def test_cancel_kills_and_reaps_the_child():
    out, _, _ = run("""
        import json, os, time
        from gputui.telemetry.forked import ForkedCall
        call = ForkedCall.start(lambda: time.sleep(60))
        time.sleep(0.2)
        t0 = time.monotonic()
        call.cancel()
        took = time.monotonic() - t0
        try:
            os.waitpid(call.pid, os.WNOHANG)
            reaped = False
        except ChildProcessError:
            reaped = True
        call.cancel()  # again: nothing
        print(json.dumps({"took": took, "reaped": reaped}))
    """)
    assert out["reaped"] and out["took"] < 2


def test_no_fork_while_other_threads_run():
    out, _, _ = run("""
        import json, threading
        from gputui.telemetry.forked import ForkedCall
        stop = threading.Event()
        t = threading.Thread(target=stop.wait); t.start()
        call = ForkedCall.start(lambda: 1)
        stop.set(); t.join()
        print(json.dumps({"call": call is None}))
    """)
    assert out["call"]


ORPHANING_PARENT = """
import os, time
from gputui.telemetry.forked import ForkedCall
call = ForkedCall.start(lambda: time.sleep(60))
print(call.pid, flush=True)
time.sleep(0.3)
os._exit(0)  # the parent goes, without cancelling
"""


def test_the_child_dies_with_its_parent():
    proc = fresh_python(ORPHANING_PARENT, timeout=30)
    assert proc.returncode == 0, proc.stderr
    out = {"pid": int(proc.stdout.split()[0])}
    pid = out["pid"]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        pytest.fail("the read-ahead child outlived its parent")


def test_nvml_read_ahead_in_a_child_then_this_process_opens_nvml_itself():
    """NVML answered by the real 2x H200 recording (tests/test_nvml.py's scripted library,
    copied into the child by the fork)."""
    out, _, _ = run("""
        import json, os, time
        from conftest import X2_RECORDING
        from gputui.telemetry.recording import read_recording
        from gputui.telemetry.nvml import Nvml, NvmlSource
        from test_nvml import RecordedNvml
        header, ticks = read_recording(X2_RECORDING)
        scripted = RecordedNvml(header, ticks[55:60], lost_gpu=-1, lost_from=99)
        source = NvmlSource(slow=False, nvml=Nvml(lib=scripted.lib))
        source.prefetch(fork=True)
        child = source._forked.pid
        t0 = time.monotonic()
        while (ready := source.take_ready()) is None and time.monotonic() - t0 < 20:
            time.sleep(0.01)
        info, first = ready
        opened_here_before = scripted.lib.calls[("nvmlInit", None)]
        mine = source.open()
        opened_here_after = scripted.lib.calls[("nvmlInit", None)]
        second = source.sample()
        source.close()
        try:
            os.waitpid(child, os.WNOHANG); reaped = False
        except ChildProcessError:
            reaped = True
        print(json.dumps({
            "devices": len(info.devices), "first_seq": first.seq,
            "first_util": [g.gpu_util for g in first.gpus],
            "want_util": [g.gpu_util for g in ticks[55].gpus],
            "init_here_before_open": opened_here_before,
            "init_here_after_open": opened_here_after,
            "same_facts": mine.devices == info.devices,
            "second_seq": second.seq, "reaped": reaped,
        }))
    """)
    assert out["devices"] == 2 and out["first_seq"] == 1
    assert out["first_util"] == out["want_util"]
    assert out["init_here_before_open"] == 0  # NVML was opened in the child, not here
    assert out["init_here_after_open"] == 1  # and then here, by the poller's open
    assert out["same_facts"]  # this process's own open finds the same GPUs
    assert out["second_seq"] == 2
    assert out["reaped"]


def test_a_read_ahead_not_done_in_time_is_killed_and_this_process_opens_nvml():
    """The UI did not get the facts at mount (a slow nvmlInit in the child): the poller's
    `open` kills the child, reaps it and opens NVML here."""
    out, _, _ = run("""
        import json, os, time
        from conftest import X2_RECORDING
        from gputui.telemetry.recording import read_recording
        from gputui.telemetry.nvml import Nvml, NvmlSource
        from test_nvml import RecordedNvml
        header, ticks = read_recording(X2_RECORDING)
        scripted = RecordedNvml(header, ticks[55:60], lost_gpu=-1, lost_from=99)
        parent = os.getpid()
        real_init = scripted.lib.nvmlInit
        def init():  # hangs in the child only
            if os.getpid() != parent:
                time.sleep(60)
            return real_init() if callable(real_init) else None
        scripted.lib.nvmlInit = init
        source = NvmlSource(slow=False, nvml=Nvml(lib=scripted.lib))
        source.prefetch(fork=True)
        child = source._forked.pid
        time.sleep(0.2)
        none_yet = source.take_ready() is None
        t0 = time.monotonic()
        info = source.open()
        took = time.monotonic() - t0
        try:
            os.waitpid(child, os.WNOHANG); reaped = False
        except ChildProcessError:
            reaped = True
        devices = len(info.devices)
        source.close()
        print(json.dumps({"none_yet": none_yet, "took": took, "reaped": reaped, "devices": devices}))
    """)
    assert out["none_yet"]
    assert out["took"] < 5 and out["reaped"]
    assert out["devices"] == 2


def test_the_topology_read_waits_for_this_process_to_open_nvml():
    """The Topology tab, shown before the poller has opened NVML here (a key typed ahead
    while gputui starts), waits for that open instead of reading "no topology" for good."""
    out, _, _ = run("""
        import json, threading, time
        from conftest import X2_RECORDING
        from gputui.telemetry.recording import read_recording
        import gputui.telemetry.nvml as nvml_mod
        from gputui.telemetry.nvml import Nvml, NvmlSource
        from test_nvml import RecordedNvml
        header, ticks = read_recording(X2_RECORDING)
        scripted = RecordedNvml(header, ticks[55:60], lost_gpu=-1, lost_from=99)
        nvml_mod.read_topology = lambda nvml, handles, lost: ("topology of", len(handles))
        source = NvmlSource(slow=False, nvml=Nvml(lib=scripted.lib))
        source.prefetch(fork=True)
        while source.take_ready() is None:
            time.sleep(0.01)
        got = []
        reader = threading.Thread(target=lambda: got.append(source.read_topology()))
        reader.start()
        time.sleep(0.3)
        waited = not got
        source.open()  # the poller's open, after the first frame
        reader.join(10)
        source.close()
        print(json.dumps({"waited": waited, "got": got}))
    """)
    assert out["waited"]
    assert out["got"] == [["topology of", 2]]
