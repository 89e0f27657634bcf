"""Root never runs another user's code with more privilege than they have (issue 31, red team
round 3, critical): a diagnosis (`gputui diag --pid`, `--python`, the default, `g`) of another
user's process or interpreter runs as that user (uid, gid, groups, their HOME) or is refused.

Real users (a throwaway pair made with `useradd` for the session, removed after; root only:
skipped otherwise), real processes of theirs, and each way the red team ran their code as
uid 0: an `LD_PRELOAD` library, a `sitecustomize` on `PYTHONPATH`, a `.pth` in `~/.local`
(`HOME` alone), under `PYTHONUSERBASE`, in their venv, beside a copy of the interpreter they
own.  Each plants code that appends the uid and euid it ran with to a marker file: a line
`0 0` is the exploit.  The code is planted after the user's process started, so every line is
the diagnosis's.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
from conftest import gputui

from gputui.diag.privilege import RunAs, controllers, for_process, for_python, is_own, privileges_text
from gputui.diag.session import DiagnosisSession
from gputui.diag.target import TargetError, busiest_own, default_target, process_target, python_target
from gputui.diag.verdicts import load_schema

SLEEP = "import time; time.sleep(600)"
READY = "import time; print('ready', flush=True); time.sleep(600)"
"""A sleeper that says when it is past its start (site, .pth files, sitecustomize)."""


# ---- users and their processes ------------------------------------------------------


def _system_python() -> str | None:
    """An interpreter every user can run (gputui's own may live under /root)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"):
        if os.path.exists(candidate):
            real = os.path.realpath(candidate)
            st = os.stat(real)
            if st.st_uid == 0 and st.st_mode & 0o001:
                return real
    return None


@pytest.fixture(scope="session")
def users() -> Iterator[tuple[pwd.struct_passwd, pwd.struct_passwd]]:
    """Two throwaway users (removed with their homes at the end of the session)."""
    if os.geteuid() != 0:
        pytest.skip("switching users needs root (the suite runs as root too)")
    if shutil.which("useradd") is None:
        pytest.skip("no useradd here: no user to switch to")
    tag = uuid.uuid4().hex[:6]
    names = [f"gtu{tag}a", f"gtu{tag}b"]
    made = []
    try:
        for name in names:
            r = subprocess.run(
                ["useradd", "-m", "-U", "-s", "/bin/sh", name], capture_output=True, text=True, check=False
            )
            if r.returncode != 0:
                pytest.skip(f"useradd {name} failed: {r.stderr.strip()}")
            made.append(name)
        yield pwd.getpwnam(names[0]), pwd.getpwnam(names[1])
    finally:
        for name in made:
            subprocess.run(["userdel", "-r", "-f", name], capture_output=True, check=False)


@pytest.fixture(scope="session")
def python(users) -> str:
    found = _system_python()
    if found is None:
        pytest.skip("no system python3 another user can run")
    user = users[0]
    ok = subprocess.run(
        [found, "-c", "pass"], user=user.pw_uid, group=user.pw_gid, extra_groups=[], check=False
    )
    if ok.returncode != 0:
        pytest.skip(f"{found} does not run as {user.pw_name}")
    return found


def own(user: pwd.struct_passwd, path: Path) -> Path:
    """Make `path` (and its parents up to the home) the user's."""
    home = Path(user.pw_dir)
    for p in [path, *path.parents]:
        if p == home or home not in p.parents:
            break
        os.lchown(p, user.pw_uid, user.pw_gid)
    return path


def plant(user: pwd.struct_passwd, path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return own(user, path)


def marker(user: pwd.struct_passwd, name: str) -> Path:
    path = Path(user.pw_dir) / "markers" / f"{name}-{uuid.uuid4().hex[:6]}"
    path.parent.mkdir(exist_ok=True)
    os.chown(path.parent, user.pw_uid, user.pw_gid)
    return path


def marking(path: Path) -> str:
    """Python that appends the uid and euid it runs with to `path`."""
    return f"import os; open({str(path)!r}, 'a').write('%d %d\\n' % (os.getuid(), os.geteuid()))\n"


def as_user(children: list, user: pwd.struct_passwd, python: str, env: dict[str, str]) -> int:
    """`python` sleeping as `user` (as `sudo -u` would), returned once past its start: what
    is planted afterwards runs only in the diagnosis."""
    p = subprocess.Popen(
        [python, "-c", READY],
        user=user.pw_uid,
        group=user.pw_gid,
        extra_groups=os.getgrouplist(user.pw_name, user.pw_gid),  # as sudo -u would
        env=env,
        cwd=user.pw_dir,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    children.append(p)
    assert p.stdout is not None and p.stdout.readline() == b"ready\n"
    return p.pid


def _wait_exec(pid: int, argv: list[str]) -> None:
    want = ("\0".join(argv) + "\0").encode()
    deadline = time.monotonic() + 30
    while True:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read() == want:
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, "the process did not start"
        time.sleep(0.01)


def user_env(user: pwd.struct_passwd, **extra: str) -> dict[str, str]:
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": user.pw_dir, **extra}


def _py_version(python: str) -> str:
    code = "import sys; print('%d.%d' % sys.version_info[:2])"
    return subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def assert_ran_as(path: Path, user: pwd.struct_passwd) -> None:
    """The planted code ran (the diagnosis really ran the user's environment), and only with
    the user's uid: never root's."""
    lines = lines_of(path)
    assert lines, f"the planted code never ran ({path})"
    assert set(lines) == {f"{user.pw_uid} {user.pw_uid}"}, lines


def diag_json(*args: str) -> dict:
    r = gputui("diag", *args, "--json", "--no-nccl", timeout=240)
    assert r.returncode in (0, 1, 2) and r.stdout, r.stderr
    report = json.loads(r.stdout)
    jsonschema.validate(report, load_schema())
    return report


def assert_report_says(report: dict, user: pwd.struct_passwd) -> None:
    for where in (report["target"]["privileges"], report["child"]["privileges"]):
        assert where["switched"] is True
        assert (where["user"], where["uid"], where["gid"]) == (user.pw_name, user.pw_uid, user.pw_gid)


# ---- each way the red team ran a user's code as root ---------------------------------


def _exploit(kind: str, user: pwd.struct_passwd, python: str, children: list) -> tuple[int, Path]:
    """Start the user's process set up for `kind`, plant the marking code; (PID, marker)."""
    home = Path(user.pw_dir)
    mark = marker(user, kind)
    version = _py_version(python)
    site = f"lib/python{version}/site-packages"
    if kind == "sitecustomize":
        pid = as_user(children, user, python, user_env(user, PYTHONPATH=str(home / "pp")))
        plant(user, home / "pp" / "sitecustomize.py", marking(mark))
    elif kind == "home-local-pth":  # HOME alone is enough
        pid = as_user(children, user, python, {"HOME": user.pw_dir})
        plant(user, home / ".local" / site / "mark.pth", marking(mark))
    elif kind == "pythonuserbase":
        pid = as_user(children, user, python, user_env(user, PYTHONUSERBASE=str(home / "ub")))
        plant(user, home / "ub" / site / "mark.pth", marking(mark))
    elif kind == "venv-pth":
        venv = home / f"venv-{mark.name}"
        subprocess.run(
            [python, "-m", "venv", "--without-pip", str(venv)],
            user=user.pw_uid, group=user.pw_gid, extra_groups=[], cwd=home, check=True,
        )  # fmt: skip
        pid = as_user(children, user, str(venv / "bin" / "python"), user_env(user))
        plant(user, venv / site / "mark.pth", marking(mark))
    elif kind == "interpreter-copy":
        prefix = home / f"py-{mark.name}"
        copy = prefix / "bin" / os.path.basename(python)
        copy.parent.mkdir(parents=True)
        shutil.copy2(python, copy)
        plant(user, prefix / "pyvenv.cfg", f"home = {os.path.dirname(python)}\n")
        own(user, copy)
        pid = as_user(children, user, str(copy), user_env(user))
        plant(user, prefix / site / "mark.pth", marking(mark))
    elif kind == "ld-preload":
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            pytest.skip("no C compiler to build the LD_PRELOAD library")
        lib = home / f"mark-{mark.name}.so"
        pid = as_user(children, user, python, user_env(user, LD_PRELOAD=str(lib)))
        src = home / "mark.c"
        src.write_text(
            "#include <stdio.h>\n#include <unistd.h>\n"
            "__attribute__((constructor)) static void mark(void) {\n"
            f'  FILE *f = fopen("{mark}", "a");\n'
            '  if (f) { fprintf(f, "%d %d\\n", (int)getuid(), (int)geteuid()); fclose(f); }\n}\n'
        )
        subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
        own(user, lib)
    else:
        raise AssertionError(kind)
    return pid, mark


EXPLOITS = ["sitecustomize", "home-local-pth", "pythonuserbase", "venv-pth", "interpreter-copy", "ld-preload"]


@pytest.mark.parametrize("kind", EXPLOITS)
def test_diag_pid_of_another_users_process_runs_their_code_as_them(kind, users, python, children) -> None:
    user = users[0]
    pid, mark = _exploit(kind, user, python, children)
    report = diag_json("--pid", str(pid))
    assert_ran_as(mark, user)
    assert_report_says(report, user)
    assert report["target"]["privileges"]["why"] == f"PID {pid}'s owner"


def test_the_text_and_markdown_reports_say_whose_privileges(users, python, children) -> None:
    user = users[0]
    pid, mark = _exploit("sitecustomize", user, python, children)
    r = gputui("diag", "--pid", str(pid), "--no-nccl", timeout=240)
    want = (
        f"  privileges: {user.pw_name} (uid {user.pw_uid}, gid {user.pw_gid}, groups {user.pw_gid}): "
        f"PID {pid}'s owner; gputui runs as root"
    )
    assert want in r.stdout.splitlines()[:6], r.stdout
    md = gputui("diag", "--pid", str(pid), "--no-nccl", "--markdown", timeout=240).stdout
    assert f"- privileges: {user.pw_name} (uid {user.pw_uid}" in md
    assert_ran_as(mark, user)


def test_the_child_runs_a_copy_of_the_code_the_user_can_read_and_not_change(users, python, children) -> None:
    """gputui may be installed where the user cannot read (/root, mode 700): the child runs a
    root-owned, read-only copy, removed when it ends; its hello says the ids it ran with."""
    user = users[0]
    pid, _ = _exploit("sitecustomize", user, python, children)
    target = process_target(pid)
    seen: dict[str, object] = {}
    session = DiagnosisSession(
        target.python, base_env=target.env, run_as=target.privileges, probe_args=["--no-nccl"]
    )
    session.start()
    staged = Path(session.child.argv[1])
    top = staged.parents[2]  # DIR/gputui/diag/probe
    assert top.name.startswith("gputui-child-")
    st = top.stat()
    seen["mode"], seen["owner"] = st.st_mode & 0o777, st.st_uid
    writable = subprocess.run(
        [python, "-c", f"open({str(staged / '__init__.py')!r}, 'a')"],
        user=user.pw_uid, group=user.pw_gid, extra_groups=[], capture_output=True, check=False,
    )  # fmt: skip
    d = session.wait(240)
    assert seen == {"mode": 0o755, "owner": 0}
    assert writable.returncode != 0 and b"PermissionError" in writable.stderr
    assert not top.exists()  # removed when the child ended
    assert d.hello is not None
    assert (d.hello["uid"], d.hello["euid"], d.hello["gid"]) == (user.pw_uid, user.pw_uid, user.pw_gid)
    assert d.hello["groups"] == [user.pw_gid]


def test_the_child_gets_the_users_home_and_names_and_none_of_roots_other_variables(
    users, python, children
) -> None:
    """Starting from root's environment (--python as root), the user's child gets the user's
    HOME, USER and LOGNAME and only the variables that pass: root's others stay root's."""
    user = users[0]
    pid = as_user(children, user, python, user_env(user, HOME="/root", USER="root"))
    t = process_target(pid)
    assert t.privileges is not None
    from gputui.diag.childenv import child_env

    base = {"HOME": "/root", "AWS_SECRET_ACCESS_KEY": "x", "SSH_CONNECTION": "10.0.0.1 22", "PATH": "/bin"}
    env, _ = child_env(t.python, base=base, run_as=t.privileges)
    assert (env["HOME"], env["USER"], env["LOGNAME"]) == (user.pw_dir, user.pw_name, user.pw_name)
    assert env["PATH"] == "/bin"
    assert "AWS_SECRET_ACCESS_KEY" not in env and "SSH_CONNECTION" not in env


# ---- processes whose user ids differ -------------------------------------------------


def _mixed(children: list, python: str, ruid: int, euid: int, suid: int, gid: int, pp: Path) -> int:
    """Root's process that sets these ids, keeping root's group 0 among its supplementary
    groups beside `gid`."""
    code = (
        f"import os, time; os.setgroups([0, {gid}]); os.setresgid({gid}, {gid}, {gid}); "
        f"os.setresuid({ruid}, {euid}, {suid}); time.sleep(600)"
    )
    argv = [python, "-c", code]
    p = subprocess.Popen(argv, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(pp)}, stdin=subprocess.DEVNULL)
    children.append(p)
    deadline = time.monotonic() + 30
    while True:  # until the ids are set
        with open(f"/proc/{p.pid}/status") as f:
            uids = next(line.split()[1:] for line in f if line.startswith("Uid:"))
        if uids[:3] == [str(ruid), str(euid), str(suid)]:
            return p.pid
        assert time.monotonic() < deadline
        time.sleep(0.01)


@pytest.mark.parametrize("shape", ["setuid-root", "dropped-effective"])
def test_mixed_user_ids_run_as_the_least_privileged_one(shape, users, python, children) -> None:
    """A set-user-ID-root program a user started (real: the user; effective, saved: root),
    and root's process that dropped its effective uid to the user: its code runs as the
    user, never as root."""
    user = users[0]
    pp = Path(user.pw_dir) / f"pp-{shape}"
    pp.mkdir()
    own(user, pp)
    ids = (user.pw_uid, 0, 0) if shape == "setuid-root" else (0, user.pw_uid, 0)
    pid = _mixed(children, python, *ids, user.pw_gid, pp)
    mark = marker(user, shape)
    plant(user, pp / "sitecustomize.py", marking(mark))
    t = process_target(pid)
    assert t.privileges is not None and t.privileges.uid == user.pw_uid and t.privileges.gid == user.pw_gid
    assert t.privileges.groups == (user.pw_gid,)  # not root's group 0, which the process kept
    report = diag_json("--pid", str(pid))
    assert_report_says(report, user)
    assert_ran_as(mark, user)


def test_two_users_in_one_process_are_refused_in_one_line(users, python, children) -> None:
    a, b = users
    pp = Path(a.pw_dir) / "pp-two"
    pp.mkdir(exist_ok=True)
    pid = _mixed(children, python, a.pw_uid, b.pw_uid, b.pw_uid, a.pw_gid, pp)
    with pytest.raises(TargetError, match="two users"):
        process_target(pid)
    r = gputui("diag", "--pid", str(pid))
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1
    assert r.stderr.startswith(f"gputui diag: --pid {pid}: its user ids name two users (real uid {a.pw_uid}")


# ---- interpreters another user controls (--python, e, python3 on PATH) --------------


def test_diag_python_another_user_owns_runs_as_that_user(users, python, children) -> None:
    user = users[0]
    _, mark = _exploit("venv-pth", user, python, children)
    venv = next(Path(user.pw_dir).glob(f"venv-{mark.name}"))
    report = diag_json("--python", str(venv / "bin" / "python"))
    assert_report_says(report, user)
    assert report["target"]["privileges"]["why"].startswith(f"{user.pw_dir} is {user.pw_name}'s")
    assert_ran_as(mark, user)


def test_an_interpreter_under_a_directory_another_user_owns_runs_as_that_user(
    users, python, tmp_path
) -> None:
    """A root-owned interpreter, but one directory above it is the user's: they can swap it."""
    user = users[0]
    d = Path(user.pw_dir) / "opt"
    d.mkdir(exist_ok=True)
    own(user, d)
    inner = d / "root-owned"
    inner.mkdir(exist_ok=True)
    link = inner / "python3"
    if not link.exists():
        link.symlink_to(python)
    run_as = for_python(str(link))
    assert isinstance(run_as, RunAs) and run_as.uid == user.pw_uid
    # a link's target is walked too: root's link, in root's directory, into the user's
    link = Path("/opt") / f"gputui-test-link-{uuid.uuid4().hex[:6]}"
    link.symlink_to(inner / "python3")
    try:
        owners, loose = controllers(str(link))
        assert owners == {user.pw_uid: user.pw_dir} and not loose
        run_as = for_python(str(link))
        assert run_as is not None and run_as.uid == user.pw_uid
    finally:
        link.unlink()


@pytest.mark.parametrize("mode", [0o775, 0o777])
def test_an_interpreter_others_can_change_is_refused(mode, users, python, tmp_path) -> None:
    user = users[0]
    shared = Path("/opt") / f"gputui-test-shared-{uuid.uuid4().hex[:6]}"
    shared.mkdir()
    try:
        os.chown(shared, 0, user.pw_gid)
        os.chmod(shared, mode)
        link = shared / "python3"
        link.symlink_to(python)
        with pytest.raises(TargetError) as err:
            python_target(str(link), "--python")
        text = str(err.value)
        assert "other users could change what it runs; not run as root" in text
        assert ("writable by every user" if mode == 0o777 else f"writable by group {user.pw_name}") in text
        r = gputui("diag", "--python", str(link))
        assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1
    finally:
        shutil.rmtree(shared)


def test_an_interpreter_two_users_control_is_refused(users, python) -> None:
    a, b = users
    outer = Path(a.pw_dir) / "shared-with-b"
    inner = outer / "b-owned"
    inner.mkdir(parents=True, exist_ok=True)
    own(a, outer)
    os.chown(inner, b.pw_uid, b.pw_gid)
    link = inner / "python3"
    if not link.exists():
        link.symlink_to(python)
    with pytest.raises(TargetError, match="two users control what it runs"):
        python_target(str(link), "--python")


def test_roots_own_interpreter_runs_as_root(python) -> None:
    assert for_python(python) is None
    assert python_target(python, "--python").privileges is None


# ---- the defaults consider only your own processes ----------------------------------


def test_the_default_never_picks_another_users_process(users, python, children) -> None:
    user = users[0]
    theirs = as_user(children, user, python, user_env(user))
    mine = subprocess.Popen([sys.executable, "-c", SLEEP])
    children.append(mine)
    _wait_exec(mine.pid, [sys.executable, "-c", SLEEP])
    assert not is_own(theirs) and is_own(mine.pid)
    assert busiest_own([(theirs, 80 << 30), (mine.pid, 1 << 30)]) == mine.pid
    assert busiest_own([(theirs, 80 << 30)]) is None
    t = default_target(busiest_own([(theirs, 80 << 30)]))
    assert t.pid is None and t.notes == ["no GPU process of yours to diagnose (or NVML unavailable)"]


# ---- the TUI: g on another user's row, g with nothing selected -----------------------


def test_g_on_another_users_row_runs_as_them_and_g_with_nothing_selected_never_picks_them(
    users, python, children, tmp_path
) -> None:
    import asyncio

    from conftest import FIXTURES, FROZEN, run_to_tick, screen_lines, wait_for
    from gpu_children import ReplayOntoChildren

    from gputui.ui.app import GpuTuiApp

    user = users[0]
    pid, mark = _exploit("sitecustomize", user, python, children)
    spin_pid = 705  # the spinning process of the recording (the only, so the busiest), from tick 12

    async def go():
        source = ReplayOntoChildren(FIXTURES / "h100-health" / "spin.jsonl.gz", {spin_pid: pid})
        app = GpuTuiApp(source=source, interval=FROZEN, watch_terminal=False)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 12)
            await pilot.press("g")  # nothing selected: the busiest is the user's, not considered
            pane = app.query_one("#diagnostics")
            await wait_for(pilot, lambda: getattr(pane, "target", None) is not None)
            assert pane.target.pid is None and pane.target.privileges is None
            await wait_for(pilot, lambda: not pane.running, timeout=120)
            assert lines_of(mark) == []
            await pilot.press("1")
            await pilot.press("tab")  # into the Overview's process list
            table = app.query_one("#overview").processes.table
            while table.current is None or table.current.proc.pid != pid:
                before = table.cursor
                await pilot.press("down")
                assert table.cursor != before, "the user's process is not in the list"
            await pilot.press("g")
            await wait_for(pilot, lambda: pane.target.pid == pid)
            assert pane.target.privileges is not None and pane.target.privileges.uid == user.pw_uid
            want = f"privileges: {user.pw_name} (uid {user.pw_uid}"
            await wait_for(pilot, lambda: want in "\n".join(screen_lines(app)))
            await wait_for(pilot, lambda: not pane.running and pane.diagnosis.child, timeout=120)
            assert pane.diagnosis.child["privileges"]["uid"] == user.pw_uid
            pane.report_dir = tmp_path
            await pilot.press("w")
            await wait_for(pilot, lambda: pane.saved is not None)
            (js,) = tmp_path.glob("gputui-diag-*.json")
            assert json.loads(js.read_text())["target"]["privileges"]["user"] == user.pw_name

    asyncio.run(go())
    assert_ran_as(mark, user)


# ---- the rule as text ---------------------------------------------------------------


def test_privileges_text_for_gputuis_own() -> None:
    from gputui.diag.privilege import own_privileges

    me = pwd.getpwuid(os.geteuid()).pw_name
    text = privileges_text(own_privileges())
    assert text.startswith(f"{me} (uid {os.geteuid()}, gid {os.getegid()}, groups ")
    assert text.endswith(": gputui's own")


def test_your_own_process_runs_as_you(children) -> None:
    p = subprocess.Popen([sys.executable, "-c", SLEEP])
    children.append(p)
    _wait_exec(p.pid, [sys.executable, "-c", SLEEP])
    assert for_process(p.pid) is None


def test_a_serve_sessions_python_another_user_controls_runs_as_them(users, python) -> None:
    """`gputui serve --python PATH` as root: the page cannot choose the interpreter, and the
    one serve was given still runs with its controller's privileges, not root's."""
    from gputui.ui.context import PaneContext
    from gputui.ui.diagnostics.choose import choose

    user = users[0]
    d = Path(user.pw_dir) / "serve-env"
    d.mkdir(exist_ok=True)
    own(user, d)
    link = d / "python3"
    if not link.exists():
        link.symlink_to(python)
    ctx = PaneContext(serve_session=True, diag_python=str(link))
    target, note = choose(ctx, None, None, shown=str(link))
    assert note is None and target is not None and target.python == str(link)
    assert target.privileges is not None and target.privileges.uid == user.pw_uid
