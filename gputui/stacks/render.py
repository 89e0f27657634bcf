"""Stacks as text (folded, for a terminal or a file) and as JSON.  Every name, file and
thread name is outside text: it passes through gputui.untrusted."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from gputui.stacks.fold import ThreadFold, fold_threads
from gputui.stacks.model import StackResult
from gputui.untrusted import json_text, literal

INDENT = "    "


def _who(res: StackResult, active: bool | None = None) -> str:
    who = res.label()
    if res.name:
        who += f" {literal(res.name)}"
    if active is not None:
        who += " active" if active else " idle"
    return who


def thread_text(tf: ThreadFold) -> list[str]:
    """One thread across processes: the shared frames once, then each tail with who has it."""
    name = literal(tf.name)
    procs, threads, folded = tf.processes, tf.threads, tf.folded
    if len(procs) == 1:
        lines = [f'Thread "{name}" of {_who(procs[0], threads[0].active)}:']
        lines += [INDENT + literal(f.where()) for f in threads[0].frames] or [INDENT + "(no frames)"]
        return lines
    if len(folded.tails) == 1:  # all the same: one stack, every process named
        who = ", ".join(_who(procs[i], threads[i].active) for i in folded.tails[0].members)
        lines = [f'Thread "{name}", the same in all {len(procs)}: {who}:']
        lines += [INDENT + literal(f.where()) for f in (*folded.shared, *folded.tails[0].frames)]
        return lines
    lines = [f'Thread "{name}" of {len(procs)} processes:']
    if folded.shared:
        lines.append(f"  shared by all {len(procs)}:")
        lines += [INDENT + literal(f.where()) for f in folded.shared]
    for tail in folded.tails:
        who = ", ".join(_who(procs[i], threads[i].active) for i in tail.members)
        if not tail.frames:
            lines.append(f"  {who}: nothing more" if folded.shared else f"  {who}: (no frames)")
            continue
        lines.append(f"  then {who}:" if folded.shared else f"  {who}:")
        lines += [INDENT + literal(f.where()) for f in tail.frames]
    return lines


def missing_text(res: StackResult) -> list[str]:
    m = res.missing
    if m is None:
        return []
    lines = [(f"rank {res.rank}: " if res.rank is not None else "") + m.message]
    if m.hint:
        lines.append(f"  {m.hint}")
    if m.detail and m.message.find(literal(m.detail)) < 0:
        lines.append(f"  py-spy said: {literal(m.detail)}")
    return lines


def text(results: Sequence[StackResult], *, seconds: float | None = None) -> str:
    """The whole report: a header, each thread folded across the processes, then every
    process without a stack and why."""
    got = [r for r in results if r.ok]
    head = f"{len(got)} of {len(results)} stacks read"
    if seconds is not None:
        head += f" in {seconds:.2f} s"
    lines = [head + "; frames in call order, the running frame last"]
    for tf in fold_threads(got):
        lines.append("")
        lines += thread_text(tf)
    gone = [r for r in results if not r.ok]
    if gone:
        lines.append("")
        for r in gone:
            lines += missing_text(r)
    return "\n".join(lines) + "\n"


def to_json(results: Sequence[StackResult], *, native: bool, py_spy: str | None, seconds: float) -> str:
    """`gputui stacks --json`: every process with its threads (or why not), and the folds."""
    folds: list[dict[str, Any]] = []
    for tf in fold_threads([r for r in results if r.ok]):
        folds.append(
            {
                "thread": tf.name,
                "pids": [p.pid for p in tf.processes],
                "shared": [f.to_json() for f in tf.folded.shared],
                "tails": [
                    {
                        "pids": [tf.processes[i].pid for i in t.members],
                        "frames": [f.to_json() for f in t.frames],
                    }
                    for t in tf.folded.tails
                ],
            }
        )
    doc = {
        "py_spy": py_spy,
        "native": native,
        "seconds": round(seconds, 3),
        "frame_order": "call order: outermost first, the running frame last",
        "processes": [r.to_json() for r in results],
        "folded": folds,
    }
    return json_text(json.dumps(doc, indent=2, ensure_ascii=False)) + "\n"
