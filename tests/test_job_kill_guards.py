"""The whole-job signal's guards (issue 24, item 7 and the dangerous bugs no test caught),
on real process trees: who is in a job, and who never is.

* a launcher that does not lead its session (or its process group) sweeps only its own
  tree: the shell's session and group around it are left alone;
* a launcher whose PID now belongs to another process lists nothing;
* gputui and every one of its ancestors (the shell under `sudo gputui`, the launcher it
  runs inside) are never members, and never signalled;
* in a job of an ordinary user, another user's processes are left out, with why;
* a member whose pin failed is not shown as a target in the confirmation.

Every process here is a child (or grandchild) of the test, killed by its process group at
the end; nothing outside the test's own tree is ever signalled."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from gpu_children import MARKER, alive, start_child, wait_started
from test_processes import HOLDER, RANK0, RANK1, answer, ask, run, tab_on_children, table

from gputui.control.jobs import job_members
from gputui.control.signals import ProcessIdentity, identity_of
from gputui.ui.processes.screens import SignalDialog

SLEEP = "import time; time.sleep(600)"


@pytest.fixture
def groups():
    """Process groups started by a test: each is SIGKILLed (and its leader reaped) at the end."""
    started: list[tuple[int, subprocess.Popen[bytes] | None]] = []
    yield started
    for pgid, popen in started:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        if popen is not None:
            popen.wait(timeout=10)


def ident(pid: int) -> ProcessIdentity:
    found = identity_of(pid)
    assert found is not None
    return found


def spawn(
    code: str, *args: str, groups, new_session: bool = True
) -> tuple[subprocess.Popen[bytes], list[int]]:
    """Run `code` (python) in its own session; it prints PIDs on its first line."""
    p = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=new_session,
    )
    groups.append((p.pid, p))
    return p, [int(x) for x in first_line(p).split()]


def first_line(p: subprocess.Popen[bytes], timeout: float = 60) -> bytes:
    """The first line the process prints (fails, rather than hangs, when none comes)."""
    assert p.stdout is not None
    ready, _, _ = select.select([p.stdout], [], [], timeout)
    assert ready, "the process tree printed nothing"
    line = p.stdout.readline()
    assert line, "the process tree did not start"
    return line


# ---- a launcher inside someone else's session ------------------------------------------------

SHELL = """
import subprocess, sys, time
launcher_code = '''
import os, subprocess, sys, time
if sys.argv[1] == "group":
    os.setpgid(0, 0)  # what a shell's job control does: the launcher leads a group, not the session
rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], stdout=subprocess.DEVNULL)
print(os.getpid(), rank.pid, flush=True)
time.sleep(600)
'''
launcher = subprocess.Popen([sys.executable, "-c", launcher_code, sys.argv[1]], stdout=subprocess.PIPE)
bystander = subprocess.Popen(["sleep", "600"], stdout=subprocess.DEVNULL)
pids = launcher.stdout.readline().split()
print(pids[0].decode(), pids[1].decode(), bystander.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("launcher_leads", ["nothing", "group"])
def test_a_launcher_that_does_not_lead_its_session_leaves_the_shells_session_alone(launcher_leads, groups):
    shell, (launcher, rank, bystander) = spawn(SHELL, launcher_leads, groups=groups)
    if launcher_leads == "group":
        groups.append((launcher, None))
    assert os.getsid(launcher) == shell.pid != launcher  # inside the shell's session
    listed = job_members(ident(launcher))
    assert listed.problem is None
    assert {m.identity.pid for m in listed.members} == {launcher, rank}
    assert listed.session is None  # not its session: never swept
    assert listed.group == (launcher if launcher_leads == "group" else None)
    assert all(alive(p) for p in (shell.pid, launcher, rank, bystander))  # listing signals nothing


# ---- the launcher's own PID reused -----------------------------------------------------------


def test_a_launcher_whose_pid_is_now_another_process_lists_nothing(groups):
    _, (launcher,) = spawn(f"import os, time; print(os.getpid(), flush=True); {SLEEP}", groups=groups)
    real = ident(launcher)
    for started in (real.create_time - 1.0, real.create_time + 0.02, real.create_time - 0.01):
        listed = job_members(ProcessIdentity(launcher, started, real.user, real.name))
        assert listed.members == () and listed.problem is not None
        assert f"PID {launcher} is no longer the process you selected" in listed.problem
    assert {m.identity.pid for m in job_members(real).members} == {launcher}


# ---- gputui and its ancestors ------------------------------------------------------------------

# launcher -> rank, and launcher -> shell -> sudo -> "gputui": the gputui process lists the
# launcher's job and pins what it would signal, and prints what it found as JSON.
INSIDE = """
import json, os, subprocess, sys, time
step = sys.argv[1]
SLEEP = "import time; time.sleep(600)"
if step == "launcher":
    rank = subprocess.Popen([sys.executable, "-c", SLEEP], stdout=subprocess.DEVNULL)
    shell = subprocess.Popen([sys.executable, "-c", sys.argv[2], "shell", sys.argv[2], str(rank.pid)])
    shell.wait()
    print(json.dumps({"error": "the gputui step ended without an answer"}), flush=True)
    time.sleep(600)
elif step in ("shell", "sudo"):
    nxt = "sudo" if step == "shell" else "gputui"
    subprocess.Popen([sys.executable, "-c", sys.argv[2], nxt, *sys.argv[2:]]).wait()
else:
    import signal
    from gputui.control.jobs import job_members
    from gputui.control.signals import identity_of, pin, send_signal
    me = os.getpid()
    chain = [me]
    while chain[-1] > 1 and len(chain) < 6:
        with open(f"/proc/{chain[-1]}/stat") as f:
            chain.append(int(f.read().rpartition(")")[2].split()[1]))
    sudo, shell, launcher = chain[1], chain[2], chain[3]
    listed = job_members(identity_of(launcher))
    pins = {p: pin(identity_of(p)).problem for p in (launcher, shell, sudo)}
    cont = send_signal(identity_of(shell), signal.SIGCONT)
    print(json.dumps({
        "launcher": launcher, "shell": shell, "sudo": sudo, "gputui": me,
        "rank": int(sys.argv[3]),
        "members": [m.identity.pid for m in listed.members],
        "left_out": {str(m.identity.pid): m.why for m in listed.left_out},
        "problem": listed.problem,
        "pins": {str(k): (v.outcome.value, v.message) if v else None for k, v in pins.items()},
        "cont": [cont.outcome.value, cont.message],
    }), flush=True)
"""


def test_gputui_and_its_ancestors_are_never_members_nor_signalled(tmp_path, groups):
    """gputui run inside the job it is asked to stop (srun --pty bash; sudo gputui): the
    launcher, the shell and sudo above gputui, and gputui are left out and refused, each
    with why; the rank is the job."""
    root = Path(__file__).resolve().parents[1]
    errors = tmp_path / "stderr"
    with errors.open("wb") as err:
        launcher = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(INSIDE), "launcher", textwrap.dedent(INSIDE)],
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "PYTHONPATH": str(root)},
        )
    groups.append((launcher.pid, launcher))
    line = first_line(launcher)
    found = json.loads(line)
    assert "error" not in found, errors.read_text()
    assert found["launcher"] == launcher.pid
    assert found["problem"] is None
    assert found["members"] == [found["rank"]]
    for who in ("launcher", "shell", "sudo", "gputui"):
        assert str(found[who]) in found["left_out"], (who, found)
    assert "gputui's own ancestor" in found["left_out"][str(found["shell"])]
    assert "gputui itself" in found["left_out"][str(found["gputui"])]
    for pid in ("launcher", "shell", "sudo"):
        outcome, message = found["pins"][str(found[pid])]
        assert outcome == "protected" and "gputui" in message, message
    assert found["cont"][0] == "protected" and "ancestor" in found["cont"][1]


# ---- another user's processes in an ordinary user's job -----------------------------------------

MIXED_OWNERS = """
import os, subprocess, sys, time
SLEEP = ["sleep", "600"]  # /bin/sleep: another user may not be able to run this interpreter
quiet = {"stdout": subprocess.DEVNULL, "stdin": subprocess.DEVNULL}
roots = subprocess.Popen(SLEEP, **quiet)  # started before the launcher gives up root
other = subprocess.Popen(SLEEP, user=65533, group=65533, extra_groups=[], **quiet)
if sys.argv[1] == "drop":
    os.setgroups([])
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)  # the launcher is now an ordinary user's (nobody's)
own = subprocess.Popen(SLEEP, **quiet)
print(os.getpid(), own.pid, roots.pid, other.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="starting processes as other users needs root")
def test_another_users_processes_in_an_ordinary_users_job_are_left_out(groups):
    _, (launcher, own, roots, other) = spawn(MIXED_OWNERS, "drop", groups=groups)
    assert psutil.Process(launcher).uids().real == 65534 and psutil.Process(roots).uids().real == 0
    listed = job_members(ident(launcher))
    assert {m.identity.pid for m in listed.members} == {launcher, own}
    why = {m.identity.pid: m.why for m in listed.left_out}
    assert set(why) == {roots, other}
    assert "belongs to root" in why[roots] and "not to nobody" in why[roots], why
    assert "65533" in why[other] or "belongs to" in why[other]
    # root's own job may hold other users' processes (a root launcher runs them as it pleases)
    _, (root_launcher, *_rest) = spawn(MIXED_OWNERS, "keep", groups=groups)
    assert len(job_members(ident(root_launcher)).members) == 4
    assert job_members(ident(root_launcher)).left_out == ()


# ---- a member whose pin failed is not a target ----------------------------------------------------

LAUNCHER = """
import pathlib, subprocess, sys, time
marker = sys.argv[sys.argv.index("--marker") + 1]
train = sys.argv[sys.argv.index("--train") + 1]
quiet = {"stdout": subprocess.DEVNULL}
ranks = [subprocess.Popen([sys.executable, train, f"{marker}-rank{i}"], **quiet) for i in range(2)]
print(" ".join(str(r.pid) for r in ranks), flush=True)
time.sleep(600)
"""
# each rank leaves a zombie child (exited, never reaped): listed as a member, its pin fails
TRAIN = """
import os, sys, time
pid = os.fork()
if pid == 0:
    os._exit(0)
with open(sys.argv[-1] + ".zombie", "w") as f:
    f.write(str(pid))
time.sleep(600)
"""


def test_a_member_whose_pin_failed_is_not_shown_as_a_target(tmp_path, groups, children):
    (tmp_path / "torchrun").write_text(textwrap.dedent(LAUNCHER))
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    marker = str(tmp_path / MARKER)
    launcher = subprocess.Popen(
        [sys.executable, str(tmp_path / "torchrun"), "--nproc-per-node", "2", "--marker", marker,
         "--train", str(tmp_path / "train.py")],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    groups.append((launcher.pid, launcher))
    ranks = [int(x) for x in first_line(launcher).split()]
    zombies = []
    for i, pid in enumerate(ranks):
        wait_started(pid, f"{marker}-rank{i}")
        path = tmp_path / f"{MARKER}-rank{i}.zombie"
        deadline = time.monotonic() + 30
        while not path.exists() or not path.read_text():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        zombie = int(path.read_text())
        while psutil.Process(zombie).status() != psutil.STATUS_ZOMBIE:
            time.sleep(0.01)
        zombies.append(zombie)
    bystander = start_child("holder")
    children.append(bystander)
    assert set(zombies) <= {m.identity.pid for m in job_members(ident(launcher.pid)).members}

    async def go():
        async with tab_on_children(
            {HOLDER: bystander.pid, RANK0: ranks[0], RANK1: ranks[1]}, size=(160, 40)
        ) as (
            app,
            pilot,
        ):
            await pilot.press("v")
            await pilot.pause()
            top = next(r for r in table(app).rows if r.launcher is not None)
            await pilot.press("home")
            assert table(app).current is top
            await ask(pilot, "T")
            dialog = app.screen
            assert isinstance(dialog, SignalDialog) and dialog.job is not None
            targets = {t.identity.pid for t in dialog.targets}
            assert targets == {launcher.pid, *ranks}, (targets, zombies)
            assert all(t.pinned is not None and t.pinned.problem is None for t in dialog.targets)
            await answer(pilot, "n")
            assert all(alive(p) for p in (launcher.pid, *ranks, bystander.pid))

    run(go())
