"""Signals and processes of mixed real, effective and saved user ids (issue 31: a planted-bug
area the tests missed), on real processes that changed their ids (setresuid, as a setuid
program or a daemon dropping privileges does).

The kernel lets a sender signal a process when the sender's real or effective uid is the
target's real or saved uid (kill(2)); the effective uid does not count.  So:

* in an ordinary user's job, a process whose real, effective or saved id is another user's
  is left out of the whole-job signal, whichever of the three it is;
* as an ordinary user, gputui refuses (at pin time, by the kernel's own check) exactly what
  EPERM will refuse, and the message names the users who could signal it: the target's real
  and saved owners (and root), never its effective one.

Needs root to make such processes (skipped otherwise, saying so); the signalling side runs
as `nobody` in a child that imported gputui while still root."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap

import psutil
import pytest

from gputui.control.jobs import job_members
from gputui.control.signals import identity_of

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="making processes of other user ids needs root")

NOBODY = 65534
# a process that sets its own real, effective and saved uid (argv) and sleeps
AS_IDS = "import os, sys, time; os.setresuid(*map(int, sys.argv[1:4])); print(1, flush=True); time.sleep(600)"


@pytest.fixture
def started():
    """Processes started by a test, SIGKILLed at the end (and their children)."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(p.pid).children(recursive=True):
                child.kill()
        p.kill()
        p.wait(timeout=10)


def with_ids(real: int, effective: int, saved: int, started: list) -> int:
    p = subprocess.Popen(
        [sys.executable, "-c", AS_IDS, str(real), str(effective), str(saved)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    started.append(p)
    assert p.stdout is not None and p.stdout.readline() == b"1\n"
    assert tuple(psutil.Process(p.pid).uids()) == (real, effective, saved)
    return p.pid


# The launcher starts its members as root, each setting its own ids, then drops to nobody.
LAUNCHER = textwrap.dedent(
    """
    import json, os, subprocess, sys, time
    code = sys.argv[1]
    kinds = {"own": (65534, 65534, 65534), "saved_root": (65534, 65534, 0),
             "effective_root": (65534, 0, 65534), "real_root": (0, 65534, 65534)}
    pids = {}
    for kind, ids in kinds.items():
        p = subprocess.Popen([sys.executable, "-c", code, *map(str, ids)], stdout=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
        p.stdout.readline()
        pids[kind] = p.pid
    os.setgroups([])
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)
    print(json.dumps({"launcher": os.getpid(), **pids}), flush=True)
    time.sleep(600)
    """
)


def test_in_an_ordinary_users_job_any_other_id_leaves_a_process_out(started) -> None:
    p = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, AS_IDS], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    started.append(p)
    assert p.stdout is not None
    pids = json.loads(p.stdout.readline())
    ident = identity_of(pids["launcher"])
    assert ident is not None
    job = job_members(ident)
    members = {m.identity.pid for m in job.members}
    why = {m.identity.pid: m.why for m in job.left_out}
    assert members == {pids["launcher"], pids["own"]}, (members, why)
    for kind in ("saved_root", "effective_root", "real_root"):
        assert "belongs to root, not to nobody" in why[pids[kind]], (kind, why)


# As nobody: pin each target (the kernel's own check, signal 0) and say what came of it.
AS_NOBODY = textwrap.dedent(
    """
    import json, os, sys
    from gputui.control.signals import identity_of, pin
    targets = {name: identity_of(int(pid)) for name, pid in json.loads(sys.argv[1]).items()}
    os.setgroups([])
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)
    out = {}
    for name, ident in targets.items():
        p = pin(ident)
        out[name] = None if p.problem is None else [p.problem.outcome.value, p.problem.message]
        p.close()
    print(json.dumps(out))
    """
)


def test_as_an_ordinary_user_what_eperm_refuses_is_refused_and_says_who_could(started) -> None:
    targets = {
        "saved_is_mine": with_ids(65533, 65533, NOBODY, started),  # kill(2): saved uid matches
        "real_is_mine": with_ids(NOBODY, 0, 0, started),  # a setuid-root program nobody ran
        "effective_is_mine": with_ids(65533, NOBODY, 65533, started),  # effective does not count
        "root": with_ids(0, NOBODY, 0, started),  # a root daemon acting as nobody for a while
        "two_others": with_ids(65532, 65532, 65533, started),
    }
    out = subprocess.run(
        [sys.executable, "-c", AS_NOBODY, json.dumps(targets)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["saved_is_mine"] is None and got["real_is_mine"] is None  # allowed: never refused
    outcome, message = got["effective_is_mine"]
    assert outcome == "denied"
    assert "belongs to 65533" in message and "nobody" not in message, message
    assert "only 65533 or root" in message, message
    outcome, message = got["root"]
    assert outcome == "denied" and "belongs to root" in message and "only root" in message, message
    outcome, message = got["two_others"]
    assert outcome == "denied" and "only 65532, 65533 or root" in message, message


# ---- a process that changes its user ids between the confirmation and the signal ------

import test_diag_privilege_attacks as attacks  # noqa: E402  (its set-user-ID fixture)

setuid_root = attacks.setuid_root
"""(a set-user-ID-root program that makes every user id root's and waits, as sudo does)"""


def test_a_process_that_became_root_after_the_confirmation_is_not_signalled(setuid_root, started) -> None:
    """The user confirmed SIGKILL to nobody's process; before the signal went, the process
    ran a set-user-ID-root program (the same process, the same start time, the same pidfd):
    root's gputui must not send it a signal the confirmation never covered (review of issue
    31: it did).  The job's members are pinned the same way."""
    from gputui.control.signals import Outcome, pin, send_signal

    code = (
        "import os, sys; os.setgroups([]); os.setresgid(65534, 65534, 65534); "
        "os.setresuid(65534, 65534, 65534); print(1, flush=True); sys.stdin.readline(); "
        f"os.execv({setuid_root!r}, [{setuid_root!r}])"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    started.append(p)
    assert p.stdout is not None and p.stdout.readline() == b"1\n"
    identity = identity_of(p.pid)
    assert identity is not None
    with pin(identity) as pinned:  # the confirmation is shown: nobody's process
        assert pinned.problem is None
        assert p.stdin is not None
        p.stdin.write(b"go\n")
        p.stdin.flush()
        while tuple(psutil.Process(p.pid).uids()) != (0, 0, 0):  # the exec, then its setresuid
            assert p.poll() is None
        result = send_signal(pinned, 9)
    assert not result.sent and result.outcome is Outcome.REUSED, result
    assert result.message.startswith(f"PID {p.pid} now runs as root, not as nobody as when you confirmed")
    assert p.poll() is None  # still there: nothing was sent
