"""Fold the stacks of a job's ranks: the outer frames they share once, then each different
tail once, with the ranks that have it.  Pure functions, no I/O."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gputui.stacks.model import Frame, StackResult, ThreadStack


@dataclass(frozen=True, slots=True)
class Tail:
    """The frames after the shared ones, and which stacks (indices into the input) end so."""

    members: tuple[int, ...]
    frames: tuple[Frame, ...]


@dataclass(frozen=True, slots=True)
class Folded:
    """N stacks in call order as the frames all of them share (outermost first), then their
    tails, identical tails once, in the order of the first stack that has each."""

    shared: tuple[Frame, ...]
    tails: tuple[Tail, ...]


def fold(stacks: Sequence[Sequence[Frame]]) -> Folded:
    """The longest run of outer frames every stack shares (frames equal in function, file,
    line and path), and the distinct tails after it.  With fewer than two stacks nothing is
    shared: one stack is all tail."""
    if not stacks:
        return Folded((), ())
    n = 0
    if len(stacks) > 1:
        shortest = min(len(s) for s in stacks)
        first = stacks[0]
        while n < shortest and all(s[n] == first[n] for s in stacks[1:]):
            n += 1
    groups: dict[tuple[Frame, ...], list[int]] = {}
    for i, s in enumerate(stacks):
        groups.setdefault(tuple(s[n:]), []).append(i)
    return Folded(tuple(stacks[0][:n]), tuple(Tail(tuple(m), f) for f, m in groups.items()))


@dataclass(frozen=True, slots=True)
class ThreadFold:
    """One thread (by name) across processes: which processes have it, and its stacks folded."""

    name: str
    processes: tuple[StackResult, ...]
    """The processes, in the order given; `Tail.members` index into this."""
    threads: tuple[ThreadStack, ...]
    """The thread of each of those processes (same order)."""
    folded: Folded


def fold_threads(results: Sequence[StackResult]) -> tuple[ThreadFold, ...]:
    """The threads of several processes matched by name (the k-th thread of a name in one
    process with the k-th of that name in another; a thread without a name by its own TID,
    so it folds with nothing), each folded across the processes that have it, their frames as
    `Frame.folding` gives them (an unnamed native address, different in each process, as
    `?` in its library).  Main threads first, then in the order first seen."""
    keyed: dict[tuple[str, int], list[tuple[StackResult, ThreadStack]]] = {}
    for res in results:
        seen: dict[str, int] = {}
        for i, thread in enumerate(res.threads):
            if i == 0 and thread.os_thread_id == res.pid:
                name = thread.name or "MainThread"
            else:
                name = thread.name if thread.name is not None else f"TID {thread.os_thread_id}"
            k = seen[name] = seen.get(name, -1) + 1
            keyed.setdefault((name, k), []).append((res, thread))
    out = []
    for (name, _k), members in keyed.items():
        procs = tuple(m[0] for m in members)
        threads = tuple(m[1] for m in members)
        out.append(ThreadFold(name, procs, threads, fold([[f.folding() for f in t.frames] for t in threads])))
    main = [f for f in out if any(t is r.main_thread() for t, r in zip(f.threads, f.processes, strict=True))]
    return tuple(main + [f for f in out if not any(f is m for m in main)])
