"""A diagnosis or stress child dies with the gputui that started it, SIGKILL included.

gputui kills its children when it ends (tests/test_children.py), but a gputui killed by
SIGKILL (the OOM killer, `kill -9`, a serve session whose server died) runs no cleanup: a
stress run would go on loading the GPUs for its whole duration.  So ChildRun names gputui's
PID in the child's environment (`rules.PARENT_VAR`) and the child, at its first protocol
event (`hello`), asks the kernel for SIGKILL when gputui dies (PR_SET_PDEATHSIG), or exits
at once if gputui is gone already; it takes the variable out of its environment so that its
own children (NCCL workers) are not tied to gputui.

Real processes: a middle process plays gputui (it starts the child with the real ChildRun),
the test kills it with SIGKILL and checks the child is gone, by PID and start time.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputui.rules.lifeline import PARENT_VAR

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
ROOT = Path(__file__).resolve().parents[1]

#: the child: the probe's own protocol module, its hello, then what the test reads
CHILD = (
    "import os, sys, time\n"
    "from gputui.diag.probe import protocol\n"
    "protocol.hello('test')\n"
    "open(sys.argv[1] + '.tmp', 'w').write('%d %s' % (os.getpid(), os.environ.get({var!r}, '-')))\n"
    "os.rename(sys.argv[1] + '.tmp', sys.argv[1])\n"
    "time.sleep(60)\n"
)

#: the middle process: gputui's part, the real ChildRun, started from its main thread
MIDDLE = (
    "import sys, time\n"
    "from gputui.diag.runner import ChildRun\n"
    "ChildRun(sys.executable, sys.argv[1], [sys.argv[2]], timeout=120).start()\n"
    "time.sleep(60)\n"
)


def alive(pid: int, ticks: str) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z" and fields[19] == ticks


def ticks_of(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[19]


def wait_file(path: Path, seconds: float = 30) -> str:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if path.exists():
            return path.read_text()
        time.sleep(0.02)
    raise AssertionError(f"{path} never written")


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    return e


def test_a_child_dies_with_gputui_killed_by_sigkill(tmp_path: Path) -> None:
    child, middle, out = tmp_path / "child.py", tmp_path / "middle.py", tmp_path / "out"
    child.write_text(CHILD.format(var=PARENT_VAR))
    middle.write_text(MIDDLE)
    gputui = subprocess.Popen([sys.executable, str(middle), str(child), str(out)], env=env())
    try:
        pid_text, seen = wait_file(out).split()
        pid = int(pid_text)
        ticks = ticks_of(pid)
        assert seen == "-"  # taken out of its environment: its own children are not tied
        assert alive(pid, ticks)
        gputui.send_signal(signal.SIGKILL)
        gputui.wait(10)
        end = time.monotonic() + 10
        while alive(pid, ticks) and time.monotonic() < end:
            time.sleep(0.05)
        assert not alive(pid, ticks), "the child outlived the gputui that started it"
    finally:
        gputui.kill()
        gputui.wait(10)
        if out.exists():
            pid = int(out.read_text().split()[0])
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def test_a_child_whose_gputui_is_gone_already_exits_at_hello(tmp_path: Path) -> None:
    """The variable names a PID that is not the child's parent (gputui died before the child
    asked): the child exits at once rather than run unwatched."""
    child, out = tmp_path / "child.py", tmp_path / "out"
    child.write_text(CHILD.format(var=PARENT_VAR))
    e = env()
    e[PARENT_VAR] = str(os.getpid() + 1_000_000)  # nobody's PID: not its parent
    r = subprocess.run(
        [sys.executable, str(child), str(out)], check=False, env=e, capture_output=True, timeout=30
    )
    assert not out.exists() and b'"hello"' not in r.stdout


def test_without_the_variable_the_child_runs_as_before(tmp_path: Path) -> None:
    """`python -m gputui.diag.probe` run by hand: no gputui to die with."""
    child, out = tmp_path / "child.py", tmp_path / "out"
    child.write_text(CHILD.format(var=PARENT_VAR).replace("time.sleep(60)", ""))
    e = env()
    e.pop(PARENT_VAR, None)
    r = subprocess.run(
        [sys.executable, str(child), str(out)], check=False, env=e, capture_output=True, timeout=30
    )
    assert r.returncode == 0 and out.exists() and b'"hello"' in r.stdout


def test_an_nccl_worker_whose_probe_is_gone_exits_at_once(tmp_path: Path) -> None:
    """The probe's NCCL workers are tied to the probe the same way: one whose probe died
    before it asked exits before importing torch, printing nothing."""
    e = env()
    e[PARENT_VAR] = str(os.getpid() + 1_000_000)
    probe = ROOT / "gputui" / "diag" / "probe"
    r = subprocess.run(
        [sys.executable, str(probe), "--nccl-worker", "0", "2", "1"],
        check=False,
        env=e,
        capture_output=True,
        timeout=30,
    )
    assert r.returncode == 0 and r.stdout == b""
