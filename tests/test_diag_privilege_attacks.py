"""Root never runs another user's code (review of issue 31's fixes, attacker's round): what the
first fix did not look at.

- a process that becomes root between the reads of its environment and of its user ids (it
  runs a set-user-ID program: the same process, the same start time);
- what a root-owned interpreter reads as it starts besides the path to it: its site
  directories and what is in them (a `.pth`, a package), the directories a `.pth` names, a
  `._pth` beside it in a directory every user can add files to (/tmp).

Real users (test_diag_privilege's throwaway pair) and real interpreters; each plant appends
the uid and euid it ran with to a marker file: a line `0 0` is the exploit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import test_diag_privilege as shared
from test_diag_privilege import _py_version, assert_ran_as, diag_json, marker, marking, own, user_env

from gputui.diag import target as target_module
from gputui.diag.privilege import RunAs, controllers, for_python, process_ids
from gputui.diag.target import TargetError, process_target, python_target

users = shared.users
python = shared.python
"""(test_diag_privilege's fixtures: a throwaway pair of users; a system python they can run)"""


# ---- a process that becomes root while it is read -----------------------------------


@pytest.fixture
def setuid_root(tmp_path_factory) -> Iterator[str]:
    """A set-user-ID root program that makes every user id root's and waits (as `sudo` does
    while it asks for a password): in a root-owned directory every user can enter."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the set-user-ID program")
    d = Path("/opt") / f"gputui-test-suid-{uuid.uuid4().hex[:6]}"
    d.mkdir(mode=0o755)
    try:
        src = d / "rootly.c"
        src.write_text(
            "#define _GNU_SOURCE\n#include <unistd.h>\n"
            "int main(void) { if (setresuid(0, 0, 0)) return 1; pause(); return 0; }\n"
        )
        program = d / "rootly"
        subprocess.run([cc, "-o", str(program), str(src)], check=True)
        os.chmod(program, 0o4755)
        os.chmod(d, 0o755)
        yield str(program)
    finally:
        shutil.rmtree(d)


def test_a_process_that_becomes_root_while_it_is_read_is_refused(
    users, python, setuid_root, children, monkeypatch
) -> None:
    """The user's Python, its environment naming their code; it execs a set-user-ID program
    once gputui has read that environment, before gputui reads whose it is: read as root's
    process with the user's PYTHONPATH, it would run their code as root."""
    user = users[0]
    home = Path(user.pw_dir)
    code = (
        "import os, sys; print('ready', flush=True); sys.stdin.readline(); "
        f"os.execv({setuid_root!r}, [{setuid_root!r}])"
    )
    p = subprocess.Popen(
        [python, "-c", code],
        user=user.pw_uid,
        group=user.pw_gid,
        extra_groups=[],
        env=user_env(user, PYTHONPATH=str(home / "pp")),
        cwd=home,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    children.append(p)
    assert p.stdout is not None and p.stdout.readline() == b"ready\n"
    read = target_module._read_environ

    def read_then_become_root(pid: int) -> bytes:
        environ = read(pid)
        assert p.stdin is not None
        p.stdin.write(b"go\n")
        p.stdin.flush()
        while process_ids(pid).uids != (0, 0, 0, 0):  # (the exec, then its setresuid)
            assert p.poll() is None, "the set-user-ID program did not run"
        return environ

    monkeypatch.setattr(target_module, "_read_environ", read_then_become_root)
    with pytest.raises(TargetError) as err:
        process_target(p.pid)
    assert str(err.value).startswith(f"--pid {p.pid}: it changed while it was being read")
    assert "\n" not in str(err.value)


# ---- what a root-owned interpreter reads as it starts ------------------------------


@pytest.fixture
def roots_venv(python) -> Iterator[Path]:
    """A virtual environment root made under /opt (root-owned all the way), of the system
    python every user can run."""
    venv = Path("/opt") / f"gputui-test-venv-{uuid.uuid4().hex[:6]}"
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True)
    try:
        yield venv
    finally:
        shutil.rmtree(venv)


def site_of(venv: Path, python: str) -> Path:
    return venv / "lib" / f"python{_py_version(python)}" / "site-packages"


def test_a_site_directory_another_user_owns_runs_as_that_user(users, python, roots_venv) -> None:
    """Root's venv whose site-packages an admin gave a user (to install packages): the user's
    `.pth` runs at every start.  The diagnosis runs as that user."""
    user = users[0]
    site = site_of(roots_venv, python)
    os.chown(site, user.pw_uid, user.pw_gid)
    mark = marker(user, "site-dir")
    pth = site / "mark.pth"
    pth.write_text(marking(mark))
    os.chown(pth, user.pw_uid, user.pw_gid)
    run_as = for_python(str(roots_venv / "bin" / "python"))
    assert isinstance(run_as, RunAs) and run_as.uid == user.pw_uid
    assert run_as.why.startswith(f"{site} is {user.pw_name}'s")
    report = diag_json("--python", str(roots_venv / "bin" / "python"))
    assert report["target"]["privileges"]["uid"] == user.pw_uid
    assert_ran_as(mark, user)


@pytest.mark.parametrize("kind", ["pth", "package", "module-link"])
def test_an_entry_of_roots_site_directory_another_user_owns_runs_as_that_user(
    kind, users, python, roots_venv
) -> None:
    """Root's site-packages, root's to write, but one thing in it is the user's: a `.pth`
    (runs at every start), a package (runs when imported: torch), a link to their module."""
    user = users[0]
    site = site_of(roots_venv, python)
    if kind == "pth":
        entry = site / "theirs.pth"
        entry.write_text("import os\n")
        os.chown(entry, user.pw_uid, user.pw_gid)
    elif kind == "package":
        entry = site / "torch"
        entry.mkdir()
        (entry / "__init__.py").write_text("")
        os.chown(entry, user.pw_uid, user.pw_gid)
    else:
        theirs = Path(user.pw_dir) / f"mods-{uuid.uuid4().hex[:6]}" / "numpy.py"
        theirs.parent.mkdir()
        theirs.write_text("")
        own(user, theirs)
        (site / "numpy.py").symlink_to(theirs)
    owners, loose = controllers(str(roots_venv / "bin" / "python"))
    assert list(owners) == [user.pw_uid] and not loose
    run_as = for_python(str(roots_venv / "bin" / "python"))
    assert run_as is not None and run_as.uid == user.pw_uid


def test_a_directory_a_pth_file_of_roots_names_is_checked_too(users, python, roots_venv) -> None:
    """`pip install -e` of a user's checkout, done by root: a `.pth` in root's site-packages
    names the user's directory, which Python puts on sys.path; a module the diagnosis imports
    (torch, here absent from the venv) is then the user's.  The diagnosis runs as the user."""
    user = users[0]
    checkout = Path(user.pw_dir) / f"proj-{uuid.uuid4().hex[:6]}"
    checkout.mkdir()
    own(user, checkout)
    (site_of(roots_venv, python) / "__editable__.proj.pth").write_text(f"# an editable install\n{checkout}\n")
    mark = marker(user, "pth-dir")
    torch = checkout / "torch"
    torch.mkdir()
    (torch / "__init__.py").write_text(marking(mark) + "raise ImportError('not torch')\n")
    own(user, torch / "__init__.py")
    run_as = for_python(str(roots_venv / "bin" / "python"))
    assert run_as is not None and run_as.uid == user.pw_uid
    diag_json("--python", str(roots_venv / "bin" / "python"))
    assert_ran_as(mark, user)


@pytest.mark.parametrize("mode", [0o775, 0o777])
def test_a_site_directory_others_can_write_is_refused(mode, users, python, roots_venv) -> None:
    user = users[0]
    site = site_of(roots_venv, python)
    os.chown(site, 0, user.pw_gid)
    os.chmod(site, mode)
    with pytest.raises(TargetError) as err:
        python_target(str(roots_venv / "bin" / "python"), "--python")
    assert f"{site} is writable by" in str(err.value)
    assert "not run as root" in str(err.value)


def test_an_interpreter_in_a_directory_every_user_can_add_files_to_is_refused(users, python) -> None:
    """Root's own link in /tmp to the system python: the sticky bit keeps others from
    replacing the link, not from adding `<link>._pth` beside it, which replaces sys.path
    (any user's directory first: their json.py ran as root)."""
    link = Path("/tmp") / f"gputui-test-python-{uuid.uuid4().hex[:6]}"
    link.symlink_to(python)
    try:
        with pytest.raises(TargetError) as err:
            python_target(str(link), "--python")
        text = str(err.value)
        assert "/tmp: every user can add files there (a ._pth or pyvenv.cfg beside it changes what" in text
        assert "not run as root" in text
    finally:
        link.unlink()


def test_roots_own_environments_still_run_as_root(python, roots_venv) -> None:
    """None of the above refuses what root owns: the system python, root's venv of it, the
    venv gputui itself runs in (an editable install: a .pth naming root's checkout)."""
    import sys

    for interpreter in (python, str(roots_venv / "bin" / "python"), sys.executable):
        owners, loose = controllers(interpreter)
        assert (owners, loose) == ({}, []), interpreter
        assert for_python(interpreter) is None


def test_a_script_whose_interpreter_another_user_controls_runs_as_that_user(users, python) -> None:
    """Root's wrapper script (`--python /opt/x/train-env`), its `#!` the user's venv: the
    kernel runs the user's interpreter, so the diagnosis runs as the user."""
    user = users[0]
    venv = Path(user.pw_dir) / f"venv-{uuid.uuid4().hex[:6]}"
    subprocess.run(
        [python, "-m", "venv", "--without-pip", str(venv)],
        user=user.pw_uid, group=user.pw_gid, extra_groups=[], cwd=user.pw_dir, check=True,
    )  # fmt: skip
    d = Path("/opt") / f"gputui-test-wrapper-{uuid.uuid4().hex[:6]}"
    d.mkdir(mode=0o755)
    try:
        for first in (f"#!{venv}/bin/python", f"#!/usr/bin/env -S {venv}/bin/python -u"):
            wrapper = d / "train-env"
            wrapper.write_text(f"{first}\nimport sys\n")
            wrapper.chmod(0o755)
            run_as = python_target(str(wrapper), "--python").privileges
            assert run_as is not None and run_as.uid == user.pw_uid, first
    finally:
        shutil.rmtree(d)


def test_a_script_in_a_directory_every_user_can_add_files_to_is_refused(python) -> None:
    """Python puts a script's directory first on sys.path: in /tmp, anyone's json.py."""
    wrapper = Path("/tmp") / f"gputui-test-wrapper-{uuid.uuid4().hex[:6]}"
    wrapper.write_text(f"#!{python}\nimport sys\n")
    wrapper.chmod(0o755)
    try:
        with pytest.raises(TargetError, match="/tmp: every user can add files there"):
            python_target(str(wrapper), "--python")
    finally:
        wrapper.unlink()
