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
from test_diag_privilege import user_env

from gputui.diag import target as target_module
from gputui.diag.privilege import process_ids
from gputui.diag.target import TargetError, process_target

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
