"""Which path a process runs its Python interpreter by: the one to diagnose.

/proc/PID/exe names the binary after the kernel resolved every symlink: for a process in a
virtual environment (/opt/torch/.venv/bin/python3 -> /usr/bin/python3.12) that is the system
interpreter, without the venv's site-packages (Python finds its venv from the path it was
started by, through pyvenv.cfg next to it, not from the resolved binary).  So the path to run
is, in this order:

1. the process's argv[0] (/proc/PID/cmdline), as Python itself reads it: absolute; relative
   to the process's cwd (/proc/PID/cwd) when it holds a `/`; else the first executable of
   that name on the PATH of its environment (/proc/PID/environ);
2. a bin/python* of its environment's VIRTUAL_ENV, then CONDA_PREFIX (a launcher that set
   argv[0] to a name of its own);
3. /proc/PID/exe's path, as before.

A candidate is used only when it is the same file as /proc/PID/exe (st_dev and st_ino, after
symlinks): a process may put anything in argv[0] or its environment, and a path to another
program must never be run.  A process in another mount namespace or root (a container) has
paths that are its root's, not ours: nothing is resolved, the exe's path is kept, and a note
says so.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field

ENV_PREFIXES = ("VIRTUAL_ENV", "CONDA_PREFIX")
PYTHON_NAME = re.compile(r"^(python|pypy)[0-9.]*[a-z]?(-dbg)?$")


@dataclass(frozen=True, slots=True)
class Chosen:
    path: str
    """The interpreter to run."""
    how: str | None = None
    """How it was found ("its argv[0]", "in its VIRTUAL_ENV"); None: /proc/PID/exe's path."""
    environment: str | None = None
    """"virtual environment /opt/torch/.venv", "conda environment /opt/conda"; None: neither."""
    notes: list[str] = field(default_factory=list)


def _same(path: str, want: os.stat_result) -> bool:
    try:
        st = os.stat(path)
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return False
    return stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) == (want.st_dev, want.st_ino)


def same_root(pid: int) -> bool:
    """The process sees the files we see: the same mount namespace and the same root."""
    try:
        if os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt"):
            return False
        theirs, ours = os.stat(f"/proc/{pid}/root"), os.stat("/proc/self/root")
    except OSError:
        return False
    return (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino)


def _argv0(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read(1 << 16)
    except OSError:
        return ""
    return os.fsdecode(raw.split(b"\0", 1)[0])


def _cwd(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None


def _on_path(name: str, path: str, cwd: str | None) -> str | None:
    """The first executable `name` on `path` (an empty entry or a relative one: from `cwd`),
    as the shell's and Python's own search finds it."""
    for entry in path.split(os.pathsep):
        if not os.path.isabs(entry) and cwd is None:
            continue
        candidate = os.path.join(cwd or "/", entry, name)  # (an absolute entry: cwd ignored)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.normpath(candidate)
    return None


def from_argv0(argv0: str, cwd: str | None, env: Mapping[str, str] | None) -> str | None:
    """The file argv[0] names, read as Python reads it at start-up (None: not found)."""
    if not argv0:
        return None
    if "/" in argv0:
        if os.path.isabs(argv0):
            return os.path.normpath(argv0)
        return None if cwd is None else os.path.normpath(os.path.join(cwd, argv0))
    if env is None or "PATH" not in env:
        return None
    return _on_path(argv0, env["PATH"], cwd)


def _env_pythons(prefix: str) -> list[str]:
    """bin/python, bin/python3, then the other bin/python* of an environment."""
    bindir = os.path.join(prefix, "bin")
    try:
        names = [n for n in os.listdir(bindir) if PYTHON_NAME.match(n)]
    except OSError:
        return []
    order = {"python": 0, "python3": 1}
    return [os.path.join(bindir, n) for n in sorted(names, key=lambda n: (order.get(n, 2), n))]


def environment_of(python: str) -> str | None:
    """Which environment `python` starts in, as Python finds it: pyvenv.cfg beside it or one
    directory up (a venv), else conda-meta in its prefix."""
    bindir = os.path.dirname(python)
    for d in (bindir, os.path.dirname(bindir)):
        if os.path.isfile(os.path.join(d, "pyvenv.cfg")):
            return f"virtual environment {d}"
    prefix = os.path.dirname(bindir)
    if os.path.isdir(os.path.join(prefix, "conda-meta")):
        return f"conda environment {prefix}"
    return None


def choose(pid: int, exe: str, env: Mapping[str, str] | None) -> Chosen:
    """The interpreter path to run for `pid`, whose /proc/PID/exe reads `exe`; `env`: its
    environment (None: not readable)."""
    try:
        want = os.stat(f"/proc/{pid}/exe")
    except OSError:
        return Chosen(exe)
    if not same_root(pid):
        note = (
            f"PID {pid} is in another mount namespace or root (a container): its argv[0] is not "
            f"resolved from here; /proc/{pid}/exe's path used"
        )
        return Chosen(exe, notes=[note])
    notes = []
    argv0 = _argv0(pid)
    found = from_argv0(argv0, _cwd(pid), env)
    if found is not None and _same(found, want):
        return Chosen(found, "its argv[0]", environment_of(found))
    if found is not None:
        notes.append(f"its argv[0] {argv0} is not the same file as /proc/{pid}/exe: not used")
    elif argv0 and argv0 != exe:
        notes.append(f"its argv[0] {argv0} is not found from its cwd or PATH: not used")
    for name in ENV_PREFIXES:
        prefix = (env or {}).get(name, "")
        if not os.path.isabs(prefix):
            continue
        for python in _env_pythons(prefix):
            if _same(python, want):
                return Chosen(python, f"in its {name}", environment_of(python), notes)
    return Chosen(exe, notes=notes)
