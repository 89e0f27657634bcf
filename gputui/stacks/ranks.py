"""The ranks of a distributed job, for `gputui stacks --job PID`: the launcher above PID (or
PID itself, or the launcher that leads PID's process group or session: a rank whose parent
died is no longer under it), its job's members (gputui.control.jobs), and among them the
ranks: the members that are not launchers themselves and whose parent is not another member
(a launcher of the job excepted).  A rank's own children (data loaders, compile workers) and
multiprocessing's helpers are not ranks.

Where the launcher has died, its ranks are re-parented (to PID 1 or a subreaper) but stay in
the process group (or session) it led: the processes left in a group whose leader is gone
are its ranks.  A launcher that led no group of its own leaves nothing that tells its ranks
from other processes, and `problem` says so.  Blocking (reads /proc): call it off a UI
thread."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gputui.control.jobs import job_members, process_groups
from gputui.control.signals import identity_of
from gputui.stacks.procfs import read_state
from gputui.telemetry.host.cmdline import launcher_kind
from gputui.telemetry.host.proctree import MAX_DEPTH, ProcStat, read_stat
from gputui.telemetry.host.rank import environ_rank
from gputui.telemetry.host.starttime import start_time

HELPERS = (
    "multiprocessing.resource_tracker",
    "multiprocessing.forkserver",
    "multiprocessing.semaphore_tracker",
)
"""Children a launcher starts that are not ranks (torchrun's multiprocessing start method)."""
LAUNCHERS = "torchrun, mpirun, srun, deepspeed, accelerate launch"


@dataclass(frozen=True, slots=True)
class JobRanks:
    launcher: int | None
    """The launcher's PID; None when none was found (see `gone` and `problem`)."""
    kind: str | None
    """"torchrun", "mpirun" ... as gputui.telemetry.host.cmdline names launchers."""
    ranks: tuple[tuple[int, float], ...] = ()
    """(PID, start time) of each rank, by rank number where known, else by PID."""
    problem: str | None = None
    gone: int | None = None
    """The launcher has exited: the process group (or session) it led, whose processes are
    the ranks; None otherwise."""
    gone_what: str = "process group"
    """"process group" or "session": what `gone` leads."""

    def header(self) -> str:
        """What the job is, in words built from numbers: `torchrun PID 585, 3 ranks`."""
        n = f"{len(self.ranks)} rank{'s' if len(self.ranks) != 1 else ''}"
        if self.launcher is None and self.gone is not None:
            return f"its launcher (PID {self.gone}) has exited; {n} left in its {self.gone_what} {self.gone}"
        return f"{self.kind} PID {self.launcher}, {n}"


def _is_launcher(pid: int) -> str | None:
    st = read_stat(pid)
    return launcher_kind(st.cmdline, st.name) if st is not None else None


def find_launcher(pid: int) -> int | None:
    """`pid` when it is a launcher, else its outermost launcher ancestor; None when neither."""
    found = pid if _is_launcher(pid) else None
    st = read_stat(pid, cmdline=False)
    depth = 0
    while st is not None and st.ppid > 1 and depth < MAX_DEPTH:
        depth += 1
        if _is_launcher(st.ppid):
            found = st.ppid
        st = read_stat(st.ppid, cmdline=False)
    return found


def _leader(lead: int, of_group: bool) -> ProcStat | None:
    """The process that leads group (or session) `lead`, while it does; None once it has gone
    (its PID free, or now another process's outside that group)."""
    st = read_stat(lead)
    if st is None or (st.pgid if of_group else st.sid) != lead:
        return None
    return st


def _leading_launcher(st: ProcStat) -> int | None:
    """The launcher that leads `st`'s process group or session (a rank whose parent between it
    and the launcher died is no longer below it, but still in its group)."""
    for lead, of_group in ((st.pgid, True), (st.sid, False)):
        leader = _leader(lead, of_group) if lead != st.pid else None
        if leader is not None and launcher_kind(leader.cmdline, leader.name):
            return lead
    return None


def _ranks_among(
    members: Iterable[tuple[int, float, tuple[str, ...] | None, str | None]],
) -> list[tuple[int, float]]:
    """The ranks among a job's members ((PID, start time, command line, name)), by rank number
    where known, else by PID."""
    listed = list(members)
    pids = {m[0] for m in listed}
    launchers = {pid for pid, _, cmd, name in listed if launcher_kind(cmd, name)}
    found = []
    for pid, started, cmd, _name in listed:
        if pid in launchers:
            continue
        st, state = read_stat(pid, cmdline=False), read_state(pid)
        if st is None or state is None or state.state in ("Z", "X"):
            continue  # gone, or exited (a zombie its parent has not reaped: a killed wrapper)
        if st.ppid in pids and st.ppid not in launchers:
            continue  # a rank's own child
        if cmd and any(h in arg for arg in cmd for h in HELPERS):
            continue
        found.append((environ_rank(pid), pid, started))
    found.sort(key=lambda r: (r[0] is None, r[0] if r[0] is not None else 0, r[1]))
    return [(p, t) for _r, p, t in found]


def _orphans(st: ProcStat) -> JobRanks:
    """No launcher above or leading `st`: the ranks left in the group (or session) a launcher
    led before it died, or why there are none to find."""
    import psutil

    for lead, of_group, what in ((st.pgid, True, "process group"), (st.sid, False, "session")):
        if lead <= 0 or lead == st.pid or _leader(lead, of_group) is not None:
            continue  # (0: no group anyone led: the kernel's threads, what ran before a setsid)
        members = []
        for pid, pgid, sid in process_groups():
            if (pgid if of_group else sid) != lead:
                continue
            m = read_stat(pid)
            try:
                started = start_time(psutil.Process(pid))
            except psutil.Error:
                continue
            if m is not None:
                members.append((pid, started, m.cmdline, m.name))
        ranks = _ranks_among(members)
        if ranks:
            return JobRanks(None, None, tuple(ranks), gone=lead, gone_what=what)
    parent = read_stat(st.ppid, cmdline=False) if st.ppid > 0 else None
    leader = _leader(st.pgid, True)
    said = [f"its parent is PID {st.ppid}" + (f" ({parent.name})" if parent is not None else "")]
    if leader is not None and leader.pid != st.pid:
        said.append(f"its process group is led by PID {leader.pid} ({leader.name}), not a launcher")
    elif leader is not None:
        said.append("it leads its own process group")
    return JobRanks(
        None,
        None,
        problem=f"PID {st.pid} is neither a launcher ({LAUNCHERS}) nor under one ({'; '.join(said)}): "
        "if its launcher has exited, it led no process group or session of its own that would tell "
        "its ranks from other processes; name the processes instead (gputui stacks PID PID ...)",
    )


def job_ranks(pid: int) -> JobRanks:
    st = read_stat(pid, cmdline=False)
    if st is None:
        return JobRanks(None, None, problem=f"PID {pid}: no such process")
    launcher = find_launcher(pid) or _leading_launcher(st)
    if launcher is None:
        return _orphans(st)
    kind = _is_launcher(launcher)
    ident = identity_of(launcher)
    if ident is None:
        return JobRanks(launcher, kind, problem=f"the launcher (PID {launcher}) has exited")
    members = job_members(ident)
    if members.problem:
        return JobRanks(launcher, kind, problem=members.problem)
    ranks = _ranks_among(
        (m.identity.pid, m.identity.create_time, m.cmdline, m.identity.name) for m in members.members
    )
    if not ranks:
        return JobRanks(launcher, kind, problem=f"the job under PID {launcher} ({kind}) has no ranks running")
    return JobRanks(launcher, kind, tuple(ranks))
