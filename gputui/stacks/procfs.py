"""What /proc says about a process whose stack is wanted, and whether the kernel will let
py-spy read it: the state, the wait channel, the owner, Yama's ptrace_scope, our capabilities.

Everything read here is the target's or the kernel's text: untrusted, parsed defensively.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

CAP_SYS_PTRACE = 19
"""The capability bit that lets a process trace any other (CapEff in /proc/self/status)."""
PF_KTHREAD = 0x00200000
"""The flag (field 9 of /proc/PID/stat) of a kernel thread."""


@dataclass(frozen=True, slots=True)
class ProcState:
    """/proc/PID/stat and status, as far as stacks need them."""

    state: str
    """One letter: R running, S sleeping, D disk sleep, T stopped, t tracing stop, Z zombie ..."""
    name: str
    """comm, untrusted."""
    kernel_thread: bool
    uids: tuple[int, ...]
    """Real, effective, saved and filesystem UIDs; () where status could not be read."""


def read_state(pid: int, proc: str = "/proc") -> ProcState | None:
    """None when there is no such process (or /proc cannot be read)."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as f:
            raw = f.read(4096)
    except OSError:
        return None
    head, sep, tail = raw.rpartition(b")")
    fields = tail.split()
    if not sep or len(fields) < 7:
        return None
    name = head.partition(b"(")[2].decode("utf-8", "replace")
    state = fields[0].decode("ascii", "replace")[:1]
    try:
        flags = int(fields[6])
    except ValueError:
        flags = 0
    uids: tuple[int, ...] = ()
    try:
        with open(f"{proc}/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"Uid:"):
                    uids = tuple(int(x) for x in line.split()[1:5])
                    break
    except (OSError, ValueError):
        uids = ()
    return ProcState(state, name, bool(flags & PF_KTHREAD), uids)


def read_wchan(pid: int, proc: str = "/proc") -> str | None:
    """The kernel function the process waits in (`futex_do_wait`, `do_nanosleep`); None where
    it is not readable or the kernel hides it ("0": running, or not ours to see)."""
    try:
        with open(f"{proc}/{pid}/wchan", "rb") as f:
            text = f.read(256).decode("utf-8", "replace").strip()
    except OSError:
        return None
    return text if text and text != "0" else None


MAPS_LIMIT = 4 << 20
"""Bytes of /proc/PID/maps read at most (the interpreter is among the first mappings)."""
_PYTHON_FILE = re.compile(rb"/(?:lib)?python[23](?:\.\d+)?[^/\s]*$")
"""A Python interpreter's executable or library: /usr/bin/python3.12, libpython3.11.so.1.0."""


def runs_python(pid: int, proc: str = "/proc") -> bool | None:
    """Whether the process has a Python interpreter mapped (its executable or libpython);
    None where its maps are not readable (the same permission py-spy needs)."""
    try:
        with open(f"{proc}/{pid}/maps", "rb") as f:
            data = f.read(MAPS_LIMIT)
    except OSError:
        return None
    return any(_PYTHON_FILE.search(line) for line in data.splitlines())


@dataclass(frozen=True, slots=True)
class PtraceFacts:
    """What decides whether the kernel lets py-spy (our child, with our credentials) trace a
    process."""

    uid: int
    """Our real UID."""
    cap_sys_ptrace: bool
    """CAP_SYS_PTRACE is in our effective set (root outside a container, or one started with
    SYS_PTRACE)."""
    yama_scope: int | None
    """kernel.yama.ptrace_scope (0 classic, 1 descendants only, 2 admin only, 3 none); None
    without Yama."""
    target_uids: tuple[int, ...]
    """The target's real, effective, saved (and fs) UIDs; () where unknown."""
    user_name: str | None = None
    """The target's owner, for messages."""


def ptrace_facts(pid: int, target_uids: tuple[int, ...], proc: str = "/proc") -> PtraceFacts:
    return PtraceFacts(
        uid=os.getuid(),
        cap_sys_ptrace=has_capability(CAP_SYS_PTRACE, proc),
        yama_scope=yama_scope(proc),
        target_uids=target_uids,
        user_name=_user_name(target_uids[0]) if target_uids else None,
    )


def has_capability(bit: int, proc: str = "/proc") -> bool:
    """Whether CapEff in our own /proc/self/status has `bit` (False where unreadable)."""
    try:
        with open(f"{proc}/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"CapEff:"):
                    return bool(int(line.split()[1], 16) >> bit & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def yama_scope(proc: str = "/proc") -> int | None:
    try:
        with open(f"{proc}/sys/kernel/yama/ptrace_scope", "rb") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def _user_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


_SUDO = "run it as root (`sudo gputui stacks ...`)"
_CONTAINER = (
    "inside a container, start it with the SYS_PTRACE capability "
    "(`docker run --cap-add SYS_PTRACE`; Kubernetes: securityContext.capabilities.add: [SYS_PTRACE])"
)


def certain_refusal(f: PtraceFacts) -> tuple[str, str] | None:
    """(why, what to do) when the kernel is certain to refuse, so py-spy need not run; None
    when it may allow it (py-spy then tries, and `refusal` explains a failure)."""
    if f.cap_sys_ptrace:
        return None if f.yama_scope != 3 else _yama(3)
    if f.yama_scope in (2, 3):
        return _yama(f.yama_scope)
    if f.target_uids and any(u != f.uid for u in f.target_uids[:3]):
        return _other_user(f)
    return None


def refusal(f: PtraceFacts) -> tuple[str, str]:
    """(why, what to do) after py-spy was refused: the most likely cause from the facts."""
    certain = certain_refusal(f)
    if certain is not None:
        return certain
    if f.yama_scope == 1 and not f.cap_sys_ptrace:
        return _yama(1)
    if f.uid == 0 and not f.cap_sys_ptrace:
        return ("ptrace refused: root here lacks CAP_SYS_PTRACE (a container started without it)", _CONTAINER)
    return (
        "ptrace refused by the kernel (a security module, or the process holds privileges we lack)",
        _SUDO,
    )


def _other_user(f: PtraceFacts) -> tuple[str, str]:
    owner = f.user_name or "another user"
    if f.uid == 0:
        return (
            f"ptrace refused: the process belongs to {owner} and root here lacks CAP_SYS_PTRACE "
            "(a container started without it)",
            _CONTAINER,
        )
    return (f"ptrace refused: the process belongs to {owner}, not to you", _SUDO)


def _yama(scope: int) -> tuple[str, str]:
    if scope == 3:
        return (
            "ptrace refused: kernel.yama.ptrace_scope is 3 (no process may trace another until reboot)",
            "nothing can be done before a reboot with a lower ptrace_scope",
        )
    if scope == 2:
        return (
            "ptrace refused: kernel.yama.ptrace_scope is 2 (only root with CAP_SYS_PTRACE may trace)",
            _SUDO,
        )
    return (
        "ptrace refused: kernel.yama.ptrace_scope is 1 (a process may trace only its own descendants)",
        f"{_SUDO}, or allow it until reboot: `sudo sysctl kernel.yama.ptrace_scope=0`",
    )
