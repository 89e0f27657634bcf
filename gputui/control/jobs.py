"""A whole distributed job as processes to signal: the launcher, its descendants (ranks and
their children: data loaders, compile workers), and, where the launcher set up its own
process group or session, every process still in it (ranks re-parented after a crash).

Each member is signalled by its own identity (PID + start time, through a pidfd, as
`gputui.control.signals` does), never by `killpg`: a PID reused between the confirmation
and the signal is refused for that PID alone.  No UI here.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import psutil

from gputui.control.signals import (
    MAX_ANCESTORS,
    START_TIME_TOLERANCE,
    ProcessIdentity,
    SignalResult,
    identity_of,
    is_running,
    own_ancestors,
    protected_reason,
)
from gputui.telemetry.host.cmdline import launcher_kind
from gputui.telemetry.host.proctree import read_stat
from gputui.telemetry.host.starttime import start_time


@dataclass(frozen=True, slots=True)
class JobMember:
    identity: ProcessIdentity
    why: str
    """How it belongs to the job: "launcher", "child of 123", "process group 123", "session 123"."""
    cmdline: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class JobMembers:
    members: tuple[JobMember, ...]
    problem: str | None = None
    """Why the job could not be listed (the launcher has gone or is another process)."""
    group: int | None = None
    """The launcher's own process group, when it leads one (its members are included)."""
    session: int | None = None
    """The launcher's own session, when it leads one (its members are included)."""
    left_out: tuple[JobMember, ...] = ()
    """Processes in the job that are never signalled with it, `why` saying why: gputui
    itself and its ancestors; PID 1; in an ordinary user's job, another user's processes;
    in the launcher's process group or session, another job's processes and what the
    launcher's parent started beside it (`another_job`)."""


def _identity(proc: psutil.Process) -> ProcessIdentity | None:
    try:
        with proc.oneshot():
            try:
                user: str | None = proc.username()
            except (psutil.Error, KeyError):
                user = None
            return ProcessIdentity(proc.pid, start_time(proc), user, proc.name(), tuple(proc.uids()))
    except psutil.Error:
        return None


def _cmdline(proc: psutil.Process) -> tuple[str, ...] | None:
    try:
        return tuple(proc.cmdline())
    except psutil.Error:
        return None


def job_members(root: ProcessIdentity, *, proc_root: str = "/proc") -> JobMembers:
    """Everything that belongs to the job led by `root`, launcher first, as identities read
    now, and what is left out of it (see `JobMembers.left_out`).  Blocking (a walk of the
    process table): call off the UI thread."""
    try:
        top = psutil.Process(root.pid)
        ident = _identity(top)
    except psutil.Error:
        ident = None
    if ident is None or abs(ident.create_time - root.create_time) > START_TIME_TOLERANCE:
        return JobMembers((), problem=f"PID {root.pid} is no longer the process you selected: nothing listed")
    members: dict[int, JobMember] = {root.pid: JobMember(ident, "launcher", _cmdline(top))}
    try:
        descendants = top.children(recursive=True)
    except psutil.Error:
        descendants = []
    for child in descendants:
        cid = _identity(child)
        if cid is None or cid.pid in members:
            continue
        try:
            parent = child.ppid()
        except psutil.Error:
            continue
        members[cid.pid] = JobMember(cid, f"child of {parent}", _cmdline(child))
    group = session = None
    try:
        pgid, sid = os.getpgid(root.pid), os.getsid(root.pid)
    except OSError:
        pgid = sid = -1
    ours = {os.getpgid(0), os.getsid(0)}
    if pgid == root.pid and pgid not in ours:
        group = pgid
    if sid == root.pid and sid not in ours:
        session = sid
    foreign: dict[int, str] = {}
    swept: list[int] = []
    if group is not None or session is not None:
        try:
            beside = top.ppid()  # who started the launcher: what else it started is not the job's
        except psutil.Error:
            beside = 0
        for pid, pg, sd in process_groups(proc_root):
            if pid in members or (pg != group and sd != session):
                continue
            extra = identity_of(pid)
            if extra is None:
                continue
            why = f"process group {group}" if pg == group else f"session {session}"
            try:
                cmd = _cmdline(psutil.Process(pid))
            except psutil.Error:
                cmd = None
            members[pid] = JobMember(extra, why, cmd)
            swept.append(pid)
            other = another_job(pid, root.pid, beside, proc_root)
            if other is not None:
                foreign[pid] = other
        if foreign:  # shared: a re-parented process there may be either job's; neither is told
            shared = f"shared with another job or its shell ({next(iter(foreign.values()))})"
            for pid in swept:
                foreign.setdefault(pid, f"{members[pid].why} is {shared}: whose it is cannot be told")
    listed: list[JobMember] = []
    left_out: list[JobMember] = []
    exclude = _left_out_reasons(top)
    for m in members.values():
        reason = foreign.get(m.identity.pid) or exclude(m.identity.pid)
        if reason is None:
            listed.append(m)
        else:
            left_out.append(replace(m, why=f"{m.why}: {reason}"))
    return JobMembers(tuple(listed), group=group, session=session, left_out=tuple(left_out))


def another_job(pid: int, launcher: int, beside: int, proc_root: str = "/proc") -> str | None:
    """Why a process found in the launcher's process group or session (not below it) is not
    the job's, or None where it is (a rank re-parented after a crash: its parents between it
    and the launcher gone).  A group is shared by what one shell pipeline started (`torchrun A
    | torchrun B | tee`): a process that is, or runs under, another launcher is that job's;
    one started by the launcher's own parent (`beside`, when that is not PID 1) is the
    shell's.  Read from /proc/PID/stat and cmdline, walking up from `pid`."""
    seen: set[int] = set()
    at = pid
    while at > 1 and at not in seen and len(seen) < MAX_ANCESTORS:
        seen.add(at)
        st = read_stat(at, proc_root)
        if st is None:
            return None
        if at != launcher and launcher_kind(st.cmdline, st.name):
            return f"another job's (launcher PID {at}, {launcher_kind(st.cmdline, st.name)})"
        if st.ppid == launcher:
            return None
        if beside > 1 and st.ppid == beside:
            return f"started beside the launcher by PID {beside}, not by it"
        at = st.ppid
    return None


def _left_out_reasons(launcher: psutil.Process) -> Callable[[int], str | None]:
    """Why a member is never signalled with the job (None: it may be): gputui itself and
    its ancestors (gputui may run inside the job: `srun --pty bash`, then `sudo gputui`),
    PID 1, and, in a job whose launcher is not root's, any process with a user id (real,
    effective or saved) other than the launcher's."""
    me = os.getpid()
    ancestors = set(own_ancestors())
    try:
        owner: int | None = launcher.uids().real
    except psutil.Error:
        owner = None
    owner_name = _user_name(owner)

    def reason(pid: int) -> str | None:
        if pid == me:
            return "gputui itself"
        if pid in ancestors:
            return "gputui's own ancestor (gputui runs inside this job)"
        protected = protected_reason(pid)
        if protected is not None:
            return protected
        if owner == 0:
            return None  # root's job: root started what is in it
        try:
            uids = set(psutil.Process(pid).uids())
        except psutil.Error:
            return "its owner could not be read"
        if owner is None or uids != {owner}:
            who = ", ".join(_user_name(u) for u in sorted(uids - {owner})) or "?"
            return f"belongs to {who}, not to {owner_name} whose job this is"
        return None

    return reason


def _user_name(uid: int | None) -> str:
    if uid is None:
        return "an unknown user"
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def process_groups(proc_root: str = "/proc") -> Iterable[tuple[int, int, int]]:
    """(PID, process group, session) of every process, from /proc/PID/stat."""
    try:
        names = os.listdir(proc_root)
    except OSError:
        return
    for name in names:
        if not (name.isascii() and name.isdigit()):  # str.isdigit alone takes "５" and "²"
            continue
        try:
            with open(f"{proc_root}/{name}/stat", "rb") as f:
                tail = f.read().rpartition(b")")[2].split()
            yield int(name), int(tail[2]), int(tail[3])
        except (OSError, IndexError, ValueError):
            continue


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """What became of each member after the signal."""

    exited: tuple[int, ...]
    running: tuple[int, ...]
    refused: tuple[SignalResult, ...]
    """Members that were not signalled (gone, reused, denied), with why."""

    def summary(self, signal_name: str) -> str:
        parts = []
        if self.exited:
            parts.append(f"{len(self.exited)} exited ({', '.join(map(str, self.exited))})")
        if self.running:
            parts.append(f"{len(self.running)} still running ({', '.join(map(str, self.running))})")
        if self.refused:
            parts.append(
                f"{len(self.refused)} not signalled ({', '.join(str(r.identity.pid) for r in self.refused)})"
            )
        return f"job after {signal_name}: " + ("; ".join(parts) or "nothing to signal")


def outcome(results: Iterable[SignalResult]) -> JobOutcome:
    """Which members exited and which are still running, now."""
    exited, running, refused = [], [], []
    for r in results:
        if not r.sent:
            refused.append(r)
        elif is_running(r.identity):
            running.append(r.identity.pid)
        else:
            exited.append(r.identity.pid)
    return JobOutcome(tuple(exited), tuple(running), tuple(refused))
