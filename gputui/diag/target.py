"""Which interpreter and which environment a diagnosis uses (`gputui diag --pid PID`, and
`gputui diag` with neither --pid nor --python).

`--pid PID`: the process's own interpreter, by the path it was started by (its argv[0], or
its VIRTUAL_ENV / CONDA_PREFIX python, only when the same file as /proc/PID/exe: a venv's
python is a symlink the kernel resolves away; gputui.diag.argv0), with the variables of its
environment (/proc/PID/environ) that decide how CUDA, torch and NCCL start and where
libraries come from (gputui.diag.childenv `passes`: never a credential); nothing else of it
is taken.

Its environment is readable for your own processes (root: all); where it is not, gputui's
own environment is used and the report says so and why.

`--python PATH`: that interpreter with gputui's environment, once it is found to be one.

With neither: the interpreter of the busiest GPU process of yours (the one holding the most
GPU memory; other users' processes are not considered) when it is Python and readable, else
the `python3` on PATH, else gputui's own; the report says which and why.  Never gputui's own
venv silently.

Every target carries whose privileges its child runs with (gputui.diag.privilege): as root,
another user's process or interpreter runs as that user, or is refused (TargetError).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gputui.diag.argv0 import PYTHON_NAME, choose
from gputui.diag.childenv import passes
from gputui.diag.privilege import (
    PrivilegeError,
    RunAs,
    for_process,
    for_python,
    is_own,
    own_privileges,
    privileges_text,
    process_ids,
)
from gputui.diag.reaper import PF_KTHREAD, start_ticks, state_and_flags
from gputui.untrusted import escaped


class TargetError(ValueError):
    """Why a PID cannot be diagnosed (one line)."""


@dataclass(frozen=True)
class Target:
    python: str
    why: str
    """Which interpreter and why: "PID 589's, its virtual environment /opt/torch/.venv (its
    argv[0], the same file as /proc/589/exe: /usr/bin/python3.12)", "PID 589's
    (/proc/589/exe)", "python3 on PATH (...)"."""
    pid: int | None = None
    env: dict[str, str] | None = None
    """The variables taken from the process; None: gputui's own environment is used."""
    env_note: str | None = None
    """Why the process's environment is not used, where it is not."""
    notes: list[str] = field(default_factory=list)
    privileges: RunAs | None = None
    """Whose privileges the child runs with (gputui.diag.privilege); None: gputui's own."""

    @property
    def environment(self) -> str:
        if self.pid is not None and self.env is not None:
            return f"PID {self.pid}'s (/proc/{self.pid}/environ)"
        if self.privileges is not None:
            return "gputui's own, only the variables that pass (it runs as another user)"
        return "gputui's own"

    def header(self) -> list[str]:
        return [f"  {name}: {text}" for name, text in header_items(self.to_json())]

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "interpreter": self.python,
            "why": self.why,
            "environment": self.environment,
            "variables": sorted(self.env) if self.env is not None else None,
            "environment_note": self.env_note,
            "notes": self.notes,
            "privileges": self.privileges.to_json() if self.privileges is not None else own_privileges(),
        }


def header_items(target: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The report's first lines, from a report's `target` (the text header, Markdown, the tab)."""
    env = str(target.get("environment"))
    variables = target.get("variables")
    if isinstance(variables, list):
        env += f": {len(variables)} variables ({', '.join(sorted(map(str, variables))) or 'none'})"
    elif target.get("environment_note"):
        env = f"{env}: {target['environment_note']}"
    notes = target.get("notes")
    privileges = [("privileges", privileges_text(target["privileges"]))] if "privileges" in target else []
    return [
        ("interpreter", str(target.get("why"))),
        ("environment", env),
        *privileges,
        *(("note", str(n)) for n in (notes if isinstance(notes, list) else [])),
    ]


def _read_environ(pid: int) -> bytes:
    with open(f"/proc/{pid}/environ", "rb") as f:
        return f.read(1 << 22)


def taken(environ: bytes) -> dict[str, str]:
    """The variables of /proc/PID/environ's contents that pass (gputui.diag.childenv), read as
    the process reads them: the first of a name given twice (getenv's and Python's rule);
    the last entry only when its NUL ends it (one cut at the read limit is not taken); a
    name or value that is not UTF-8 is left out."""
    out: dict[str, str] = {}
    for item in environ.split(b"\0")[:-1]:
        name, eq, value = item.partition(b"=")
        if not eq or not name:
            continue
        try:
            k, v = name.decode(), value.decode()
        except UnicodeDecodeError:
            continue
        if passes(k) and k not in out:
            out[k] = v
    return out


def _exe(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/exe")


def _exe_or_none(pid: int) -> str | None:
    try:
        return _exe(pid)
    except OSError:
        return None


def _ids(pid: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None:
    """The process's user, group and supplementary group ids; None where unreadable."""
    try:
        found = process_ids(pid)
    except OSError:
        return None
    return found.uids, found.gids, found.groups


def _name(pid: int) -> str:
    """The process's name (/proc/PID/comm: untrusted, escaped), "" where unreadable."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return escaped(f.read(64).strip())
    except OSError:
        return ""


def _why_no_exe(pid: int) -> str:
    """Why /proc/PID/exe names nothing: the process is gone, a kernel thread, or a zombie."""
    found = state_and_flags(pid)
    if found is None:
        return "no such process"
    state, flags = found
    if flags & PF_KTHREAD:
        return f"a kernel thread ({_name(pid)}), not a Python process"
    if state == "Z":
        return "it has exited (a zombie its parent has not reaped): nothing runs to diagnose"
    return "no such process (it has exited)"


def _why_refused(pid: int) -> str:
    """Why /proc/PID/exe may not be read: another user's process, or (as root, or for your
    own) a process the kernel keeps from being traced; its name says when it is no Python."""
    found = state_and_flags(pid)
    if found is not None and found[1] & PF_KTHREAD:  # (refused to all but root)
        return f"a kernel thread ({_name(pid)}), not a Python process"
    me = os.geteuid()
    try:
        uids: set[int] | None = set(process_ids(pid).uids)
    except OSError:
        uids = None
    if me != 0 and uids != {me}:
        return (
            f"not permitted to read /proc/{pid}/exe (another user's process: run gputui diag as that "
            "user or as root, or use --python PATH)"
        )
    even = "even as root" if me == 0 else "though it is yours"
    name = _name(pid)
    unread = f"/proc/{pid}/exe cannot be read {even}"
    if name and not PYTHON_NAME.match(name):
        return f"not a Python process (its name is {name}); {unread}"
    return (
        f"{unread} (the kernel refuses: the process is not dumpable, or in a user namespace "
        "gputui has no rights over); use --python PATH"
    )


def interpreter_problem(python: str) -> str | None:
    """Why `python` is not an interpreter to run (None: it is one, by its name or its
    real file's name, or a script whose #! line starts Python)."""
    try:
        st = os.stat(python)
    except FileNotFoundError:
        return "no such file"
    except (OSError, ValueError) as exc:
        return getattr(exc, "strerror", None) or str(exc)
    if not stat.S_ISREG(st.st_mode):
        return "not a file"
    if not os.access(python, os.X_OK):
        return "not executable"
    real = os.path.realpath(python)
    if PYTHON_NAME.match(os.path.basename(python)) or PYTHON_NAME.match(os.path.basename(real)):
        return None
    try:  # (never blocks: a FIFO swapped in opens at once, and reads nothing)
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        try:
            first = os.read(fd, 256).split(b"\n", 1)[0]
        finally:
            os.close(fd)
    except OSError:
        first = b""
    if first.startswith(b"#!") and b"python" in first:
        return None
    return f"not a Python interpreter ({escaped(real)})"


def process_target(pid: int) -> Target:
    """The diagnosis of `pid`; TargetError with a one-line reason when it cannot be."""
    if pid <= 0:
        raise TargetError(f"--pid {pid}: not a process id")
    ticks = start_ticks(pid)
    ids = _ids(pid)
    try:
        exe = _exe(pid)
    except FileNotFoundError:  # no such process, or one without an executable
        raise TargetError(f"--pid {pid}: {_why_no_exe(pid)}") from None
    except PermissionError:
        raise TargetError(f"--pid {pid}: {_why_refused(pid)}") from None
    except OSError as exc:
        raise TargetError(f"--pid {pid}: no executable ({exc.strerror})") from None
    if exe.endswith(" (deleted)") or not os.path.exists(exe):
        raise TargetError(f"--pid {pid}: its interpreter {escaped(exe)} is gone (deleted or replaced)")
    if not PYTHON_NAME.match(os.path.basename(exe)):
        raise TargetError(f"--pid {pid}: it runs {escaped(exe)}, not a Python interpreter")
    try:
        env: dict[str, str] | None = taken(_read_environ(pid))
        note = None
    except OSError as exc:
        env = None
        note = f"/proc/{pid}/environ not readable ({exc.strerror}): gputui's own environment used"
    chosen = choose(pid, exe, env)
    if chosen.how is None:
        why = f"PID {pid}'s (/proc/{pid}/exe)"
    else:
        where = f", its {chosen.environment}" if chosen.environment else ""
        why = f"PID {pid}'s{where} ({chosen.how}, the same file as /proc/{pid}/exe: {exe})"
    try:
        # the process's owner; a process of gputui's own user: whoever controls its interpreter
        privileges = for_process(pid) or for_python(chosen.path)
    except PrivilegeError as exc:
        raise TargetError(f"--pid {pid}: {exc}") from None
    if ticks is None or start_ticks(pid) != ticks:  # all of the above read one process
        raise TargetError(f"--pid {pid}: the process exited while it was being read")
    if _ids(pid) != ids or _exe_or_none(pid) != exe:
        # the same process (an exec keeps its start time) ran another program, a set-user-ID
        # one maybe: its environment may be another user's than its ids now say
        raise TargetError(
            f"--pid {pid}: it changed while it was being read (its user ids or its program: it ran "
            "another program, a set-user-ID one maybe); not diagnosed, try again"
        )
    return Target(chosen.path, why, pid, env, note, chosen.notes, privileges)


def python_target(python: str, why: str, notes: list[str] | None = None, label: str = "--python") -> Target:
    """The diagnosis of the interpreter at `python` (`--python`, the `e` chooser, python3 on
    PATH); TargetError with a one-line reason (led by `label`) when it cannot be."""
    problem = interpreter_problem(python)
    if problem is not None:
        raise TargetError(f"{label} {escaped(python)}: {problem}")
    try:
        privileges = for_python(python)
    except PrivilegeError as exc:
        raise TargetError(f"{label} {exc}") from None
    return Target(python, why, notes=list(notes or []), privileges=privileges)


def busiest_own(processes: Iterable[tuple[int, int | None]]) -> int | None:
    """Of (PID, GPU memory in bytes or None) pairs, the caller's own process holding the most
    GPU memory (the default target); another user's process is never a default."""
    best: tuple[int, int] | None = None
    for pid, used in processes:
        if not is_own(pid):
            continue
        if best is None or (used or 0) > best[0]:
            best = (used or 0, pid)
    return None if best is None else best[1]


def busiest_gpu_pid() -> int | None:
    """Your GPU process holding the most GPU memory (NVML); None where NVML or none."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        found: list[tuple[int, int | None]] = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            found += [(p.pid, p.usedGpuMemory) for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)]
        return busiest_own(found)
    except Exception:
        return None
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def default_target(busiest: int | None = None, path: str | None = None) -> Target:
    """`gputui diag` with neither --pid nor --python (the order in the module docstring).
    `busiest`: your busiest GPU process (`busiest_own`)."""
    notes = []
    if busiest is not None:
        try:
            t = process_target(busiest)
        except TargetError as exc:
            notes.append(f"the busiest GPU process not used: {exc}")
        else:
            why = f"the busiest GPU process, {t.why}"
            return Target(t.python, why, t.pid, t.env, t.env_note, notes + t.notes, t.privileges)
    else:
        notes.append("no GPU process of yours to diagnose (or NVML unavailable)")
    python, why = fallback_python(path)
    return python_target(python, why, notes, f"{why.split(' (')[0]}:")


def fallback_python(path: str | None = None) -> tuple[str, str]:
    """The default's interpreter when no GPU process of yours is diagnosed, and why: the
    python3 on PATH (`path`, default $PATH), else gputui's own.  What the Diagnostics tab
    names before a run."""
    found = shutil.which("python3", path=os.environ.get("PATH") if path is None else path)
    if found:
        return os.path.abspath(found), "python3 on PATH (the one your shell would run)"
    return sys.executable, "gputui's own (no python3 on PATH)"
