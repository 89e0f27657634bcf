"""Send a signal to a process *identity* (PID plus start time), safely, with a result that
says what happened in words a user can act on.  No UI here; never raises for an expected
outcome (gone, reused, denied, protected).

Safety, in order:

1. Never PID 0 or negative (process groups), PID 1 (init), gputui itself, one of its
   threads, its parent or any other ancestor (the shell, sudo, multiplexer or job step it
   runs in).
2. The process must still be the one the user saw: same PID, same start time, and the same
   user ids as when it was selected or pinned (an exec of a set-user-ID program keeps the
   PID and the start time: root's confirmation to signal a user's process never covers the
   root process it became).  Otherwise nothing is sent and the result says so.
3. The signal goes through a pidfd opened *before* that check: if the process exits after
   the check and its PID is reused, the pidfd still names the old, dead process and the
   kernel answers ESRCH instead of signalling the new one.  `pin()` opens and checks that
   pidfd when the confirmation is shown, so the signal sent seconds or minutes later goes
   to that very process, even if the PID was reused within the start time's 10 ms
   resolution.  Where pidfds are not available (kernels before 5.3) the check and `kill(2)`
   follow each other immediately: a window of microseconds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import errno
import os
import signal
import time
from dataclasses import dataclass

import psutil

from gputui.telemetry.host.starttime import start_time

#: Start times are read at clock-tick resolution (10 ms) and rounded to 0.01 s; anything
#: further apart is another process.
START_TIME_TOLERANCE = 0.005


@dataclass(frozen=True, slots=True)
class ProcessIdentity:
    """What the user saw: a PID and when that process started.  The rest is for messages."""

    pid: int
    create_time: float
    """Seconds since the epoch, as `gputui.telemetry.host.starttime.start_time` reads it."""
    user: str | None = None
    name: str | None = None
    uids: tuple[int, ...] | None = None
    """Its real, effective and saved uids when it was selected (None: not read); a process
    whose ids changed since (it ran a set-user-ID program) is not signalled (`pin` reads
    them where the selection did not)."""


class Outcome(enum.Enum):
    SENT = "sent"
    """The kernel accepted the signal (what the process does with it is another matter)."""
    GONE = "gone"
    """The process had already exited (or is a zombie waiting for its parent)."""
    REUSED = "reused"
    """The PID now belongs to a different process: nothing was sent."""
    PROTECTED = "protected"
    """PID 1, gputui itself, one of its threads, or its parent: never signalled."""
    DENIED = "denied"
    """EPERM: the process belongs to another user."""
    INVALID = "invalid"
    """Not a signal number, or not a process id."""
    FAILED = "failed"
    """Any other error, with its text."""


@dataclass(frozen=True, slots=True)
class SignalResult:
    identity: ProcessIdentity
    signal: int
    outcome: Outcome
    message: str
    """One sentence for the user: what happened and, if nothing was sent, why."""
    owner: str | None = None
    """Owner of the process, when known (for permission errors)."""

    @property
    def sent(self) -> bool:
        return self.outcome is Outcome.SENT


def signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def identity_of(pid: int) -> ProcessIdentity | None:
    """The identity of the process that has this PID now (None when there is none)."""
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            return ProcessIdentity(pid, start_time(proc), _owner(proc), proc.name(), tuple(proc.uids()))
    except psutil.Error:
        return None


def protected_reason(pid: int) -> str | None:
    """Why this PID is never signalled, or None."""
    if pid <= 0:
        return f"PID {pid} is not a process (0 and negative ids address process groups)"
    if pid == 1:
        return "PID 1 is the init process of this PID namespace"
    if pid == os.getpid():
        return f"PID {pid} is gputui itself"
    if pid == os.getppid():
        return f"PID {pid} is gputui's parent (the shell or terminal it runs in)"
    if os.path.exists(f"/proc/self/task/{pid}"):
        return f"{pid} is a thread of gputui itself"
    if pid in own_ancestors():
        return f"PID {pid} is an ancestor of gputui (gputui runs inside it, e.g. the shell under sudo gputui)"
    return None


MAX_ANCESTORS = 256
"""Ancestors walked at most (a guard against a corrupt /proc)."""


def own_ancestors(proc: str = "/proc") -> tuple[int, ...]:
    """gputui's ancestors, its parent first, up to (not including) PID 1, read now from
    /proc/PID/stat: the shell, sudo, a multiplexer, a job step it runs inside.  Killing
    any of them would end gputui's own terminal or session."""
    out: list[int] = []
    pid = os.getppid()
    while pid > 1 and pid not in out and len(out) < MAX_ANCESTORS:
        out.append(pid)
        try:
            with open(f"{proc}/{pid}/stat", "rb") as f:
                fields = f.read().rpartition(b")")[2].split()
        except OSError:
            break
        if len(fields) < 2 or not fields[1].isdigit():  # bytes.isdigit: ASCII digits only
            break
        pid = int(fields[1])
    return tuple(out)


def is_running(identity: ProcessIdentity) -> bool:
    """True while the process with this identity exists and has not exited (a zombie has)."""
    try:
        proc = psutil.Process(identity.pid)
        with proc.oneshot():
            if abs(start_time(proc) - identity.create_time) > START_TIME_TOLERANCE:
                return False
            return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class PinnedProcess:
    """A process held for signalling: a pidfd opened, and checked against the identity,
    when the user is shown what will be signalled.  Close it (or use `with`) when done."""

    def __init__(self, identity: ProcessIdentity, pidfd: int, problem: SignalResult | None) -> None:
        self.identity = identity
        self.pidfd = pidfd
        """-1 when pidfds are not available (then the PID is checked again at sending)."""
        self.problem = problem
        """Why it cannot be signalled (gone, reused, protected) as of pinning; else None."""

    def close(self) -> None:
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1

    def __enter__(self) -> PinnedProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def pin(identity: ProcessIdentity) -> PinnedProcess:
    """Open a pidfd for the process and check that it is `identity` (signal 0 does the
    same checks as a real signal, so nothing reaches the process)."""
    pidfd = _open_pidfd(identity.pid) if protected_reason(identity.pid) is None else -1
    if pidfd == -errno.ESRCH:
        pidfd = -1
    if identity.uids is None:  # (read after the pidfd: the ids of the process it names)
        with contextlib.suppress(psutil.Error):
            identity = dataclasses.replace(identity, uids=tuple(psutil.Process(identity.pid).uids()))
    handle = PinnedProcess(identity, pidfd, None)
    problem = _send(identity, 0, pidfd, dry=True)
    if problem is not None:
        handle.close()
        handle.problem = problem
    return handle


def send_signal(target: ProcessIdentity | PinnedProcess, sig: int) -> SignalResult:
    """Send `sig` to the process only if it is still the one identified (or pinned); never
    raises for the expected outcomes (see `Outcome`)."""
    if isinstance(target, PinnedProcess):
        if target.problem is not None:
            return dataclasses.replace(target.problem, signal=sig)
        result = _send(target.identity, sig, target.pidfd, dry=False)
        assert result is not None
        return result
    pidfd = _open_pidfd(target.pid) if isinstance(target.pid, int) and target.pid > 1 else -1
    try:
        if pidfd == -errno.ESRCH:
            return SignalResult(
                target, sig, Outcome.GONE, f"PID {target.pid} has already exited: nothing sent"
            )
        result = _send(target, sig, pidfd, dry=False)
        assert result is not None
        return result
    finally:
        if pidfd >= 0:
            os.close(pidfd)


def _send(identity: ProcessIdentity, sig: int, pidfd: int, *, dry: bool) -> SignalResult | None:
    """Check, then send through `pidfd` (or kill(2) when it is -1).  With `dry`, only check:
    None when all is well."""
    pid = identity.pid
    name = signal_name(sig)

    def result(outcome: Outcome, message: str, owner: str | None = None) -> SignalResult:
        return SignalResult(identity, sig, outcome, message, owner)

    if not isinstance(pid, int) or isinstance(pid, bool):
        return result(Outcome.INVALID, f"{pid!r} is not a process id: nothing sent")
    try:
        if sig != 0:  # 0: the checks alone (pin)
            signal.Signals(sig)
    except ValueError:
        return result(Outcome.INVALID, f"{sig!r} is not a signal: nothing sent to PID {pid}")
    reason = protected_reason(pid)
    if reason is not None:
        return result(Outcome.PROTECTED, f"{reason}: gputui never signals it")
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            started = start_time(proc)
            status = proc.status()
            owner = _owner(proc)
            may = _who_may_signal(proc)
            uids = tuple(proc.uids())
    except psutil.NoSuchProcess:
        return result(Outcome.GONE, f"PID {pid} has already exited: nothing sent")
    except psutil.Error as exc:
        return result(Outcome.FAILED, f"cannot read PID {pid} to check it: {exc}: nothing sent")
    if abs(started - identity.create_time) > START_TIME_TOLERANCE:
        return result(
            Outcome.REUSED,
            f"PID {pid} is now a different process (started {_clock(started)}, not "
            f"{_clock(identity.create_time)}): the one you selected has exited; nothing sent",
            owner,
        )
    if identity.uids is not None and uids != identity.uids:
        return result(
            Outcome.REUSED,
            f"PID {pid} now runs as {_ids_names(uids)}, not as {_ids_names(identity.uids)} as when you "
            "confirmed (it ran another program, a set-user-ID one maybe): nothing sent",
            owner,
        )
    if status == psutil.STATUS_ZOMBIE:
        return result(
            Outcome.GONE, f"PID {pid} has already exited (a zombie awaiting its parent): nothing sent"
        )
    try:
        if pidfd >= 0:
            signal.pidfd_send_signal(pidfd, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        return result(Outcome.GONE, f"PID {pid} exited just before the signal was sent")
    except PermissionError:
        who = owner or "another user"
        others = [u for u in may if u != "root"]
        needed = f"{', '.join(others)} or root" if others else "root (e.g. sudo gputui)"
        return result(
            Outcome.DENIED,
            f"permission denied: PID {pid} belongs to {who}; only {needed} can signal it",
            owner,
        )
    except OSError as exc:
        return result(Outcome.FAILED, f"{name} to PID {pid} failed: {exc}", owner)
    if dry:
        return None
    return result(Outcome.SENT, f"{name} sent to PID {pid}", owner)


def _open_pidfd(pid: int) -> int:
    """A pidfd for `pid`; -ESRCH when there is no such process; -1 when pidfds are not
    available here (old kernel, not Linux, or not allowed)."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None or not hasattr(signal, "pidfd_send_signal"):
        return -1
    try:
        return int(opener(pid))
    except ProcessLookupError:
        return -errno.ESRCH
    except OSError:
        return -1


def _owner(proc: psutil.Process) -> str | None:
    try:
        return proc.username()
    except (psutil.Error, KeyError):
        with contextlib.suppress(psutil.Error):
            return str(proc.uids().real)
        return None


def _who_may_signal(proc: psutil.Process) -> list[str]:
    """The users besides root whose processes may signal `proc`: its real and saved owners
    (kill(2): the sender's real or effective uid must be the target's real or saved uid; the
    target's effective uid does not count), by name where known; [] when unreadable."""
    try:
        ids = proc.uids()
    except psutil.Error:
        return []
    return list(dict.fromkeys(_uid_name(u) for u in (ids.real, ids.saved)))


def _ids_names(uids: tuple[int, ...]) -> str:
    """`root`, or `bob (effective root)` where its ids differ: real first."""
    names = [_uid_name(u) for u in uids]
    others = [
        f"{what} {n}" for what, n in zip(("effective", "saved"), names[1:], strict=False) if n != names[0]
    ]
    return names[0] + (f" ({', '.join(others)})" if others else "")


def _uid_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _clock(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
