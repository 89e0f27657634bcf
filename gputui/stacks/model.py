"""What a stack dump found: frames, threads, and, where no stack could be read, why."""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Any

from gputui.stacks.symbols import UNRESOLVED, is_address


class Reason(str, enum.Enum):
    """Why a process's stack is missing: each its own case, each with its own remedy."""

    NO_PY_SPY = "no-py-spy"
    """py-spy is not installed (neither on PATH nor beside this Python)."""
    PTRACE_REFUSED = "ptrace-refused"
    """The kernel refuses to let py-spy read the process (Yama, another user, no SYS_PTRACE)."""
    STOPPED = "stopped"
    """The process is stopped (state T or t): py-spy cannot suspend it, so it is not run."""
    NOT_PYTHON = "not-python"
    """The process runs no Python interpreter that py-spy recognises."""
    STACK_TOO_DEEP = "stack-too-deep"
    """A Python process with a thread deeper than py-spy reads (`PY_SPY_MAX_FRAMES`: deep
    recursion): py-spy gives up on it, often saying it found no interpreter."""
    EXITED = "exited"
    """The process has exited, or its PID now belongs to another process."""
    TIMEOUT = "timeout"
    """py-spy took longer than the time allowed and was killed."""
    FAILED = "py-spy-failed"
    """py-spy failed for another reason (its own message is kept)."""


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame of a stack."""

    function: str
    """The function (`Event.wait`, `<module>`; a native frame's symbol or address)."""
    file: str
    """The file, shortened as py-spy shortens it (`threading.py`, `torch/distributed/...`)."""
    line: int | None
    """The line running in that frame; None for a native frame (py-spy reports 0)."""
    path: str
    """The file's full path as the process sees it."""
    native: bool = False
    """A C/C++ frame (with `--native`): `file` is the shared library."""
    symbol: str | None = None
    """A native frame's symbol in full where `function` shortens it (C++ template arguments:
    `gputui.stacks.symbols.readable_symbol`); None where they are the same.  Frames compare
    (and fold) on it, so two instantiations that read alike stay two frames."""

    def folding(self) -> Frame:
        """The frame as it is folded across processes and printed folded: an address py-spy
        could not name (it differs in every process) as `?`, its library kept."""
        if self.line is None and is_address(self.function):
            return replace(self, function=UNRESOLVED)
        return self

    def where(self) -> str:
        """`function (file:line)`, as py-spy prints a frame."""
        return f"{self.function} ({self.file}:{self.line})" if self.line else f"{self.function} ({self.file})"

    def to_json(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "file": self.file,
            "line": self.line,
            "path": self.path,
            "native": self.native,
            "symbol": self.symbol,
        }


@dataclass(frozen=True, slots=True)
class ThreadStack:
    """One thread's stack, frames in call order: the outermost first, the frame running now last
    (as a Python traceback, "most recent call last")."""

    thread_id: int
    """Python's thread id (`threading.get_ident()`)."""
    os_thread_id: int | None
    """The kernel's thread id (TID); equal to the PID for the main thread."""
    name: str | None
    """The thread's name as Python knows it ("MainThread"); None where py-spy gives none."""
    active: bool
    """Running (on a CPU or wanting one) rather than idle (waiting: a lock, I/O, a sleep)."""
    owns_gil: bool
    frames: tuple[Frame, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "os_thread_id": self.os_thread_id,
            "name": self.name,
            "active": self.active,
            "owns_gil": self.owns_gil,
            "frames": [f.to_json() for f in self.frames],
        }


@dataclass(frozen=True, slots=True)
class Missing:
    """Why a stack could not be read, said plainly."""

    reason: Reason
    message: str
    """One line for a person: what happened and what it means.  Built by gputui; pieces of
    outside text in it (a wchan) are already escaped."""
    hint: str | None = None
    """What to do about it, often one command (gputui.extras `install_hint`)."""
    state: str | None = None
    """The process state from /proc/PID/stat (R, S, D, T, t, Z ...), where read."""
    wchan: str | None = None
    """The kernel function the process sleeps in (/proc/PID/wchan), where readable and not 0.
    Untrusted text: escape it before it reaches a terminal."""
    detail: str | None = None
    """py-spy's own error line, where it ran and failed.  Untrusted text."""

    def to_json(self) -> dict[str, Any]:
        return {
            "reason": self.reason.value,
            "message": self.message,
            "hint": self.hint,
            "state": self.state,
            "wchan": self.wchan,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class StackResult:
    """The stacks of one process, or why there are none."""

    pid: int
    create_time: float | None
    """When the process started (`gputui.telemetry.host.starttime`); None when it was never seen."""
    threads: tuple[ThreadStack, ...] = ()
    """The main thread first, then the others in py-spy's order."""
    missing: Missing | None = None
    name: str | None = None
    """The process name (comm), untrusted."""
    rank: int | None = None
    """The distributed rank from the process environment (RANK and the like), where readable."""
    seconds: float = 0.0
    """How long reading it took."""

    @property
    def ok(self) -> bool:
        return self.missing is None

    def main_thread(self) -> ThreadStack | None:
        return self.threads[0] if self.threads else None

    def label(self) -> str:
        """`PID 588 (rank 0)`: how gputui names the process in text."""
        return f"PID {self.pid}" + (f" (rank {self.rank})" if self.rank is not None else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "create_time": self.create_time,
            "name": self.name,
            "rank": self.rank,
            "seconds": round(self.seconds, 3),
            "threads": [t.to_json() for t in self.threads],
            "missing": self.missing.to_json() if self.missing is not None else None,
        }
