"""A process's distributed rank, read in one place: the process table (`GpuProcess.rank`),
the job view and `gputui stacks` all name the rank this module reads, so they never disagree.

The rule (docs/processes-and-jobs.md, "Ranks"):

- the variables, in order: `RANK` (torchrun, torch.distributed), `OMPI_COMM_WORLD_RANK`
  (Open MPI), `PMI_RANK` (MPICH, Intel MPI), `PMIX_RANK` (PMIx: Open MPI 5, Slurm's
  --mpi=pmix), `SLURM_PROCID` (srun); the first whose value is a rank wins;
- a variable set twice in the environment block counts with its first value: the one
  `getenv(3)` and Python's `os.environ` give the process itself;
- a rank is 1 to `RANK_DIGITS` ASCII digits (`３`, `+1`, ` 1`, `-1` and `""` are not ranks;
  the next variable is read instead); the same digits rule reads `--rank N` on a command
  line (`gputui.telemetry.health.rank_number`).

The environment is the process's own text: untrusted, read as bytes, bounded.
"""

from __future__ import annotations

RANK_VARIABLES = (b"RANK", b"OMPI_COMM_WORLD_RANK", b"PMI_RANK", b"PMIX_RANK", b"SLURM_PROCID")
"""Where launchers put a process's rank, in the order they are read."""
RANK_DIGITS = 6
"""The most digits a rank has (a million ranks); longer is not a rank."""
ENVIRON_LIMIT = 1 << 20
"""Bytes of /proc/PID/environ read at most (the kernel caps an environment lower)."""


def rank_value(text: str | bytes) -> int | None:
    """`text` as a rank: 1 to RANK_DIGITS ASCII digits; None otherwise."""
    raw = text.encode("utf-8", "replace") if isinstance(text, str) else text
    if 0 < len(raw) <= RANK_DIGITS and raw.isdigit():  # bytes.isdigit: ASCII digits only
        return int(raw)
    return None


def rank_from_environ(data: bytes) -> int | None:
    """The rank in an environment block (NUL-separated `NAME=value`), by the module's rule."""
    first: dict[bytes, bytes] = {}
    for item in data.split(b"\0"):
        name, eq, value = item.partition(b"=")
        if eq and name in RANK_VARIABLES and name not in first:
            first[name] = value
    for name in RANK_VARIABLES:
        rank = rank_value(first.get(name, b""))
        if rank is not None:
            return rank
    return None


def environ_rank(pid: int, proc: str = "/proc") -> int | None:
    """The rank in the process's environment; None when the environment is not readable
    (another user's process, without root; the process has gone) or names no rank."""
    try:
        with open(f"{proc}/{pid}/environ", "rb") as f:
            data = f.read(ENVIRON_LIMIT)
    except OSError:
        return None
    if len(data) == ENVIRON_LIMIT:
        data = data.rpartition(b"\0")[0]  # the last variable may be cut: never half a number
    return rank_from_environ(data)
