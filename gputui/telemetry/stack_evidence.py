"""Where a rank is, read from its Python stack: evidence for the job verdicts, carried in the
snapshot (`Snapshot.stacks`) so that a recording keeps it and a replay judges as the live run
did.  Pure data; `gputui.stacks.where` builds it from py-spy's dump, `gputui.stacks.sampler`
reads the stacks (off the UI thread, only for the ranks of a job already suspected).

Every text field here comes from another process (function and file names) or from a
recording: untrusted, unbounded until the engine clips it, and shown only through
`gputui.untrusted`."""

from __future__ import annotations

from dataclasses import dataclass

PLACES = ("collective", "gpu_sync", "loader", "io", "elsewhere", "unread")
"""Where a rank's main thread is:
  collective  inside a torch.distributed (or DeepSpeed comm) call: it waits for its peers
  gpu_sync    in torch.cuda's synchronize (or a stream's or event's): it waits for its GPU
  loader      in its DataLoader (`_next_data`, `_get_data`) or a queue's `get`: it waits for data
  io          writing a checkpoint (torch.save, torch.distributed.checkpoint, safetensors)
  elsewhere   anywhere else: computing on its host, sleeping, or waiting on something else
  unread      the stack could not be read (`reason` says why)"""


@dataclass(frozen=True, slots=True)
class RankWhere:
    """One process's stack, as the verdicts read it."""

    pid: int
    taken: float
    """When the stack was read (seconds since the epoch, as the snapshots' time)."""
    create_time: float | None = None
    """The process's start time: (pid, create_time) is the process (a reused PID is another)."""
    place: str = "unread"
    """One of PLACES."""
    call: str | None = None
    """The function it is in: the torch.distributed call it made ("recv", "all_reduce"),
    "synchronize", the DataLoader's, "save"; elsewhere the innermost frame's.  Untrusted."""
    at: str | None = None
    """The call site in the program, "train.py:42": the frame that made `call` (elsewhere:
    the innermost frame).  Untrusted."""
    frames: tuple[str, ...] = ()
    """The main thread's innermost frames, innermost first, "function (file:line)" as py-spy
    prints them (a few at most).  Untrusted."""
    reason: str | None = None
    """Why it is unread: a `gputui.stacks.model.Reason` value ("no-py-spy", "ptrace-refused",
    "stopped", "not-python", "exited", "timeout", "py-spy-failed")."""
    message: str | None = None
    """Why it is unread, in one line for a person."""


@dataclass(frozen=True, slots=True)
class StackEvidence:
    """The stacks read since the previous tick (each appears in one snapshot: the verdict
    engine keeps them while they apply)."""

    ranks: tuple[RankWhere, ...] = ()
