"""Where a rank is, from its Python stack: inside a torch.distributed call (it waits for its
peers), in torch.cuda's synchronize (it waits for its GPU), in its DataLoader (it waits for
data), writing a checkpoint, or elsewhere; and the call site in the program.  Pure: a
`StackResult` in, a `RankWhere` (gputui.telemetry.stack_evidence) out.

The main thread decides (a training loop runs there).  Its frames are read from the outside
in: the first frame that belongs to one of the groups below names the place, the frame that
called it is the call site ("train.py:42"), so a DataLoader that waits on a queue is the
DataLoader, and torch.save under a torch.distributed.checkpoint call is a checkpoint.  Files
are matched as py-spy shortens them ("torch/distributed/distributed_c10d.py"), or by their
path after site-packages/ where only the full path is known.
"""

from __future__ import annotations

from collections.abc import Sequence

from gputui.stacks.model import Frame, StackResult, ThreadStack
from gputui.telemetry.stack_evidence import RankWhere

MAX_FRAMES = 6
"""Frames kept for the verdict's evidence (the innermost ones)."""
MAX_WORDS = 200
"""Characters kept of a function or file name (outside text: a name may be a megabyte)."""

_IO_FILES = ("torch/serialization.py", "torch/distributed/checkpoint/", "safetensors/")
_IO_MODULES = {
    "torch/serialization.py": "torch.",
    "torch/distributed/checkpoint/": "torch.distributed.checkpoint.",
    "safetensors/": "safetensors.",
}
"""How a checkpoint call is named: torch.save, torch.distributed.checkpoint.save, ..."""
_COLLECTIVE_FILES = ("torch/distributed/", "deepspeed/comm/")
_WRAPPER_FILES = ("torch/distributed/c10d_logger.py",)
"""torch.distributed's logging wrapper around every collective: not the call itself."""
_SYNC = {
    ("torch/cuda/__init__.py", "synchronize"),
    ("torch/cuda/streams.py", "Stream.synchronize"),
    ("torch/cuda/streams.py", "Event.synchronize"),
}
_LOADER_FILES = ("torch/utils/data/",)
_QUEUE_GETS = {("queue.py", "Queue.get"), ("multiprocessing/queues.py", "Queue.get")}


def _module_file(f: Frame) -> str:
    """The frame's file as py-spy shortens it; from a full path, what follows site-packages/."""
    name = f.file
    if name.startswith("/"):
        for marker in ("site-packages/", "dist-packages/"):
            _, sep, rest = f.path.rpartition(marker)
            if sep:
                return rest
    return name


def _place(f: Frame) -> str | None:
    path = _module_file(f)
    if path.startswith(_IO_FILES):
        return "io"
    if path.startswith(_COLLECTIVE_FILES):
        return "collective"
    if (path, f.function) in _SYNC:
        return "gpu_sync"
    if path.startswith(_LOADER_FILES) or (path, f.function) in _QUEUE_GETS:
        return "loader"
    return None


def _clip(text: str) -> str:
    return text if len(text) <= MAX_WORDS else text[: MAX_WORDS - 1] + "…"


def _site(f: Frame) -> str:
    file = _clip(f.file)
    return f"{file}:{f.line}" if f.line else file


def _shown(f: Frame) -> str:
    return f"{_clip(f.function)} ({_site(f)})"


def locate(threads: Sequence[ThreadStack]) -> tuple[str, str | None, str | None, tuple[str, ...]]:
    """(place, call, call site, frames) of a process's stacks (main thread first, frames in
    call order, as `gputui.stacks.dump` gives them)."""
    if not threads:
        return "elsewhere", None, None, ()
    frames = threads[0].frames
    shown = tuple(_shown(f) for f in reversed(frames[-MAX_FRAMES:]))
    for k, f in enumerate(frames):
        place = _place(f)
        if place is None:
            continue
        call = f
        if place == "collective":  # skip the logging wrapper: the call is the one it wraps
            inner = [g for g in frames[k:] if not _module_file(g).startswith(_WRAPPER_FILES)]
            call = inner[0] if inner else f
        site = _site(frames[k - 1]) if k > 0 else None
        name = call.function
        if place == "io":
            path = _module_file(call)
            name = next((m for f, m in _IO_MODULES.items() if path.startswith(f)), "") + name
        return place, _clip(name), site, shown
    if not frames:
        return "elsewhere", None, None, ()
    last = frames[-1]
    return "elsewhere", _clip(last.function), _site(last), shown


def rank_where(res: StackResult, taken: float) -> RankWhere:
    """What the verdicts keep of one process's stack read at `taken`."""
    if res.missing is not None:
        return RankWhere(
            pid=res.pid,
            taken=taken,
            create_time=res.create_time,
            place="unread",
            reason=res.missing.reason.value,
            message=res.missing.message,
        )
    place, call, site, frames = locate(res.threads)
    return RankWhere(
        pid=res.pid, taken=taken, create_time=res.create_time, place=place, call=call, at=site, frames=frames
    )
