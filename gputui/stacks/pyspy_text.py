"""py-spy's printed dump (`py-spy dump --pid N`, no --json) read as `gputui.stacks.dump`
reads its JSON: the form the job verdicts' sampler reads, and the form a person or a script
captures (tests/fixtures/h100-x4-matrix/*/stacks-*.txt), so both go through one parser."""

from __future__ import annotations

import re

from gputui.stacks.model import Frame, ThreadStack

MAX_THREADS = 4096
MAX_FRAMES = 4096
MAX_TEXT = 1000
"""Bounds on what is kept of py-spy's output (its JSON too: gputui.stacks.dump): it describes
another process, which may be huge or hostile (a function or thread name of a megabyte)."""

_SGR = re.compile(r"\x1b\[[0-9;]*m")
"""A colour or style escape (Select Graphic Rendition)."""
_THREAD_LINE = re.compile(r'Thread (0x[0-9A-Fa-f]+|\d+) \((idle|active|active\+gil)\)(?:: "(.*)")?$')


def parse_text(data: bytes, pid: int) -> tuple[ThreadStack, ...]:
    """py-spy's printed dump (`py-spy dump --pid N`, no --json: "Thread 588 (idle):
    "MainThread"", then a frame a line, innermost first, "    function (file:line)") as
    `parse_dump` gives it: frames in call order, the main thread first.  Locals (deeper lines)
    are skipped, and so are colours (py-spy colours its dump where the environment forces it:
    CLICOLOR_FORCE).  ValueError when it is not py-spy's dump."""
    lines = _SGR.sub("", data.decode("utf-8", "replace")).splitlines()
    if not lines or not lines[0].startswith("Process "):
        raise ValueError("not py-spy's dump (no 'Process' line)")
    threads: list[ThreadStack] = []
    frames: list[Frame] = []
    head: re.Match[str] | None = None

    def close() -> None:
        if head is not None and len(threads) < MAX_THREADS:
            tid = head.group(1)
            os_tid = int(tid) if tid.isdigit() and len(tid) < 12 else None
            name = head.group(3)
            threads.append(
                ThreadStack(
                    thread_id=int(tid, 16) if tid.startswith("0x") and len(tid) < 20 else os_tid or 0,
                    os_thread_id=os_tid,
                    name=name[:MAX_TEXT] if name is not None else None,
                    active=head.group(2) != "idle",
                    owns_gil=head.group(2) == "active+gil",
                    frames=tuple(reversed(frames[:MAX_FRAMES])),
                )
            )

    for line in lines[1:]:
        m = _THREAD_LINE.match(line)
        if m is not None:
            close()
            head, frames = m, []
        elif head is not None and line.startswith("    ") and not line.startswith("     "):
            frames.append(_text_frame(line[4:]))
    close()
    main = [t for t in threads if t.os_thread_id == pid] or [t for t in threads if t.name == "MainThread"][:1]
    return tuple(main + [t for t in threads if t not in main])


def _text_frame(line: str) -> Frame:
    """ "function (file:line)" or "function (file)" (a native frame, or no line)."""
    func, sep, loc = line.rpartition(" (")
    if not sep or not loc.endswith(")"):
        return Frame(function=line[:MAX_TEXT], file="?", line=None, path="?")
    loc = loc[:-1]
    file, colon, num = loc.rpartition(":")
    if not (colon and num.isdigit() and len(num) < 10):
        file, num = loc, ""
    return Frame(
        function=func[:MAX_TEXT],
        file=file[:MAX_TEXT],
        line=int(num) if num and int(num) > 0 else None,
        path=file[:MAX_TEXT],
    )
