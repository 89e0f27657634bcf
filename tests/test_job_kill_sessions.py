"""The whole-job signal and process groups vs sessions (issue 31: a planted-bug area the tests
missed), on real process trees: a job kill signals exactly the job's processes.

* a launcher that leads its session: its ranks re-parented after a crash are in the job,
  whether still in its process group or in a group of their own inside its session;
* a launcher that leads only its process group (a shell's job control) shares it with the
  other side of a pipe (`torchrun A | torchrun B`, `torchrun A | tee`): another job's
  launcher and ranks, and what the shell started beside it, are never the job's;
* gputui in the launcher's own process group (`torchrun ... | gputui`): that group is never
  swept, gputui never a member;
* and what is listed is what is signalled: the bystanders outlive a SIGKILL of the job.

Every process is the test's own, each tree in a session of its own SIGKILLed at the end."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from gputui.control.jobs import job_members
from gputui.control.signals import identity_of, pin, send_signal

ROOT = Path(__file__).resolve().parents[1]

# One orchestrator for every topology: it prints the PIDs by role as JSON, then sleeps.
# Files named `torchrun` make launchers (gputui.telemetry.host.cmdline names them by it).
TOPOLOGY = r'''
import json, os, subprocess, sys, time
mode, here = sys.argv[1], sys.argv[2]
py = sys.executable
quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL}
SLEEP = [py, "-c", "import time; time.sleep(600)"]
# a wrapper that starts its command, says its PID and exits: the command is re-parented
ORPHAN = ("import os, subprocess, sys; p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, "
          "stdout=subprocess.DEVNULL); print(p.pid, flush=True); os._exit(0)")
OWN_GROUP = [py, "-c", "import os, time; os.setpgid(0, 0); time.sleep(600)"]

def orphan(cmd):
    w = subprocess.Popen([py, "-c", ORPHAN, *cmd], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    pid = int(w.stdout.readline())
    w.wait()
    return pid

def launcher(role, **kw):
    """`torchrun ROLE`: starts a rank and an orphaned rank, prints their PIDs, sleeps."""
    return subprocess.Popen([py, os.path.join(here, "torchrun"), role], stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, **kw)

def read(p):
    return json.loads(p.stdout.readline())

if mode == "torchrun":  # a launcher (this file run as `torchrun`)
    role = sys.argv[3]
    rank = subprocess.Popen(SLEEP, **quiet)
    out = {"rank": rank.pid, "orphan": orphan(SLEEP)}
    if role == "session":  # a rank that made a group of its own, then lost its parent
        out["own_group"] = orphan(OWN_GROUP)
    print(json.dumps({**out, "pid": os.getpid()}), flush=True)
    time.sleep(600)
elif mode == "session":  # the launcher leads its session (this process is it)
    os.execv(py, [py, os.path.join(here, "torchrun"), "session"])
elif mode in ("pipe", "gputui"):  # a shell with job control: the launcher leads a group
    a = launcher("a", process_group=0)
    roles = {"shell": os.getpid(), "a": read(a)}
    if mode == "pipe":  # torchrun A | torchrun B | tee: one group, led by A
        b = launcher("b", process_group=a.pid)
        roles["b"] = read(b)
        roles["tee"] = subprocess.Popen(SLEEP, process_group=a.pid, **quiet).pid
    else:  # torchrun A | gputui: gputui in A's group lists A's job
        code = ("import json, sys; from gputui.control.jobs import job_members; "
                "from gputui.control.signals import identity_of; "
                "j = job_members(identity_of(int(sys.argv[1]))); "
                "print(json.dumps({'members': [m.identity.pid for m in j.members], 'group': j.group, "
                "'session': j.session, 'left_out': [m.identity.pid for m in j.left_out]}), flush=True)")
        g = subprocess.Popen([py, "-c", code, str(a.pid)], process_group=a.pid, stdout=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
        roles["gputui"] = {"pid": g.pid, **read(g)}
    roles["beside"] = subprocess.Popen(SLEEP, **quiet).pid  # the shell's other job
    print(json.dumps(roles), flush=True)
    time.sleep(600)
'''


@pytest.fixture
def sessions():
    """Sessions started by a test: every process in each is SIGKILLed at the end (orphans
    included: they keep their session)."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        for proc in psutil.process_iter():
            with contextlib.suppress(psutil.Error, OSError):
                if os.getsid(proc.pid) == p.pid:
                    proc.kill()
        p.wait(timeout=10)


def topology(mode: str, tmp_path: Path, sessions: list) -> dict:
    script = tmp_path / "topology.py"
    script.write_text(textwrap.dedent(TOPOLOGY))
    (tmp_path / "torchrun").write_text(f"import runpy, sys\nsys.argv[1:1] = ['torchrun', {str(tmp_path)!r}]\n"
                                       f"runpy.run_path({str(script)!r}, run_name='__main__')\n")  # fmt: skip
    p = subprocess.Popen(
        [sys.executable, str(script), mode, str(tmp_path)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    sessions.append(p)
    assert p.stdout is not None
    line = p.stdout.readline()
    assert line, "the topology did not start"
    return json.loads(line)


def listed(pid: int):
    ident = identity_of(pid)
    assert ident is not None
    job = job_members(ident)
    assert job.problem is None
    return job, {m.identity.pid: m.why for m in job.members}, {m.identity.pid: m.why for m in job.left_out}


def parent(pid: int) -> int:
    return psutil.Process(pid).ppid()


def running(pid: int) -> bool:
    """Exists and has not exited (a zombie its parent has not reaped has)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def until(condition, what: str) -> None:
    """Wait for `condition()` (a process's own setpgid, an exit seen by the kernel)."""
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def test_a_session_leaders_ranks_re_parented_after_a_crash_are_in_its_job(tmp_path, sessions) -> None:
    a = topology("session", tmp_path, sessions)
    launcher = a["pid"]
    assert os.getsid(launcher) == os.getpgid(launcher) == launcher
    assert parent(a["orphan"]) != launcher and parent(a["own_group"]) != launcher  # re-parented
    until(lambda: os.getpgid(a["own_group"]) == a["own_group"], "the rank never made its own group")
    assert os.getsid(a["own_group"]) == launcher
    job, members, left_out = listed(launcher)
    assert (job.group, job.session) == (launcher, launcher)
    assert set(members) == {launcher, a["rank"], a["orphan"], a["own_group"]}, (members, left_out)
    assert members[a["orphan"]] == f"process group {launcher}"
    assert members[a["own_group"]] == f"session {launcher}"


def test_a_process_group_shared_with_another_job_is_not_swept_whole(tmp_path, sessions) -> None:
    """`torchrun A | torchrun B | tee` in a shell with job control: one process group, led
    by A.  A's job is A and its rank; B, B's ranks and tee are not; and the ranks re-parented
    into that group (A's and B's alike) cannot be told apart, so neither job takes them."""
    t = topology("pipe", tmp_path, sessions)
    a, b = t["a"], t["b"]
    assert os.getpgid(b["pid"]) == os.getpgid(t["tee"]) == os.getpgid(b["orphan"]) == a["pid"]
    job, members, left_out = listed(a["pid"])
    assert job.group == a["pid"] and job.session is None
    assert set(members) == {a["pid"], a["rank"]}, (members, left_out)
    assert f"launcher PID {b['pid']}" in left_out[b["pid"]], left_out
    assert t["tee"] in left_out and f"by PID {t['shell']}" in left_out[t["tee"]], left_out
    for orphan in (a["orphan"], b["orphan"]):
        assert "whose it is cannot be told" in left_out[orphan], left_out
    assert b["rank"] not in members  # below B, not in A's group sweep at all...
    assert t["beside"] not in members and t["beside"] not in left_out  # another group
    # B's own job is B's: A's side is not in it
    _, b_members, _ = listed(b["pid"])
    assert set(b_members) == {b["pid"], b["rank"]}  # B leads no group: its tree alone
    # what is listed is what is signalled: SIGKILL to A's job leaves B's, tee and the shell
    pinned = [pin(identity_of(p)) for p in members]
    assert all(p.problem is None for p in pinned)
    for p in pinned:
        with p:
            assert send_signal(p, signal.SIGKILL).sent
    for gone in members:
        until(lambda gone=gone: not running(gone), f"PID {gone} outlived SIGKILL")
    alive = [b["pid"], b["rank"], b["orphan"], a["orphan"], t["tee"], t["shell"], t["beside"]]
    assert all(running(p) for p in alive)


def test_gputui_in_the_launchers_process_group_never_sweeps_it(tmp_path, sessions) -> None:
    """`torchrun A | gputui`: gputui's own process group is A's; it is not swept (gputui and
    whatever else shares it stay), A's tree is the job."""
    t = topology("gputui", tmp_path, sessions)
    a, g = t["a"], t["gputui"]
    assert os.getpgid(g["pid"]) == a["pid"]
    assert g["group"] is None and g["session"] is None
    assert set(g["members"]) == {a["pid"], a["rank"]}  # the orphaned rank: only a group sweep finds it
    assert g["pid"] not in g["members"] and g["pid"] not in g["left_out"]
