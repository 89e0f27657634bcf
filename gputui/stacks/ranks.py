"""The ranks of a distributed job, for `gputui stacks --job PID`: the launcher above PID (or
PID itself), its job's members (gputui.control.jobs), and among them the ranks: the members
that are not launchers themselves and whose parent is a launcher of the job (or gone).
A rank's own children (data loaders, compile workers) and multiprocessing's helpers are not
ranks.  Blocking (reads /proc): call it off a UI thread."""

from __future__ import annotations

from dataclasses import dataclass

from gputui.control.jobs import job_members
from gputui.control.signals import identity_of
from gputui.telemetry.host.cmdline import launcher_kind
from gputui.telemetry.host.proctree import MAX_DEPTH, read_stat
from gputui.telemetry.host.rank import environ_rank

HELPERS = (
    "multiprocessing.resource_tracker",
    "multiprocessing.forkserver",
    "multiprocessing.semaphore_tracker",
)
"""Children a launcher starts that are not ranks (torchrun's multiprocessing start method)."""


@dataclass(frozen=True, slots=True)
class JobRanks:
    launcher: int | None
    """The launcher's PID; None when none was found (see `problem`)."""
    kind: str | None
    """"torchrun", "mpirun" ... as gputui.telemetry.host.cmdline names launchers."""
    ranks: tuple[tuple[int, float], ...] = ()
    """(PID, start time) of each rank, by rank number where known, else by PID."""
    problem: str | None = None


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


def job_ranks(pid: int) -> JobRanks:
    if read_stat(pid, cmdline=False) is None:
        return JobRanks(None, None, problem=f"PID {pid}: no such process")
    launcher = find_launcher(pid)
    if launcher is None:
        return JobRanks(
            None,
            None,
            problem=f"PID {pid} is neither a launcher (torchrun, mpirun, srun, deepspeed, accelerate launch) "
            "nor under one: name the processes instead (gputui stacks PID PID ...)",
        )
    kind = _is_launcher(launcher)
    ident = identity_of(launcher)
    if ident is None:
        return JobRanks(launcher, kind, problem=f"the launcher (PID {launcher}) has exited")
    members = job_members(ident)
    if members.problem:
        return JobRanks(launcher, kind, problem=members.problem)
    pids = {m.identity.pid for m in members.members}
    launchers = {m.identity.pid for m in members.members if launcher_kind(m.cmdline, m.identity.name)}
    found = []
    for m in members.members:
        p = m.identity.pid
        if p in launchers:
            continue
        st = read_stat(p, cmdline=False)
        if st is None or (st.ppid in pids and st.ppid not in launchers):
            continue  # gone, or a rank's own child
        if m.cmdline and any(h in arg for arg in m.cmdline for h in HELPERS):
            continue
        found.append((environ_rank(p), p, m.identity.create_time))
    found.sort(key=lambda r: (r[0] is None, r[0] if r[0] is not None else 0, r[1]))
    if not found:
        return JobRanks(launcher, kind, problem=f"the job under PID {launcher} ({kind}) has no ranks running")
    return JobRanks(launcher, kind, tuple((p, t) for _r, p, t in found))
