"""The child protocol: one JSON object per line on the real stdout (see the package doc)."""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time

PROTOCOL = 1

_OUT = None  # the protocol stream (the real stdout)
_OUT_LOCK = threading.Lock()


def take_stdout():
    """Keep the real stdout for the protocol; route fd 1 (C libraries, NCCL_DEBUG) to stderr."""
    global _OUT
    if _OUT is not None:
        return
    sys.stdout.flush()
    fd = os.dup(1)
    os.dup2(2, 1)
    _OUT = os.fdopen(fd, "w", buffering=1, encoding="utf-8", errors="replace")
    sys.stdout = sys.stderr


def _plain(value):
    """JSON-safe copy: NaN/Inf become strings, tuples lists, unknown objects their str()."""
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    return str(value)


def emit(event, **fields):
    obj = {"v": PROTOCOL, "event": event}
    obj.update(fields)
    write_json(obj)


def hello(tool, **extra):
    """The first event of a child: which tool, in which interpreter, as which process.  A
    child of gputui is tied to it here first: it dies with gputui, SIGKILL included, and
    exits at once if gputui is gone already (`rules.tie_to_parent`)."""
    from . import rules  # (the package loads gputui/rules.py by its path)

    if not rules.tie_to_parent():
        os._exit(0)
    emit(
        "hello",
        tool=tool,
        python=sys.version.split()[0],
        executable=sys.executable,
        prefix=sys.prefix,
        pid=os.getpid(),
        uid=os.getuid(),
        euid=os.geteuid(),
        gid=os.getgid(),
        groups=sorted(os.getgroups()),
        time=time.time(),
        **extra,
    )


class Phase:
    """Brackets a slow step with phase events (what was running if we are killed)."""

    def __init__(self, name, title):
        self.name = name
        self.title = title

    def __enter__(self):
        emit("phase", name=self.name, state="start", title=self.title)
        return self

    def __exit__(self, *exc):
        emit("phase", name=self.name, state="end", title=self.title)
        return False


def check(cid, group, title, status, summary, evidence=None, cause=None, fix=None, note=None, t0=None):
    emit(
        "check",
        id=cid,
        group=group,
        title=title,
        status=status,
        summary=summary,
        evidence=evidence or {},
        cause=cause,
        fix=list(fix or []),
        note=note,
        seconds=round(time.monotonic() - t0, 4) if t0 is not None else None,
    )


def tail(text, lines=15):
    parts = text.strip().splitlines()
    return "\n".join(parts[-lines:])


def read_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def first_line(text):
    text = (text or "").strip()
    return text.splitlines()[0] if text else ""


def safe(fn):
    """fn(), or None when it raises: for optional facts."""
    try:
        return fn()
    except Exception:
        return None


def mapped(fragment):
    """The path of a loaded shared library whose file name contains `fragment`."""
    for line in (read_text("/proc/self/maps") or "").splitlines():
        parts = line.split()
        if len(parts) >= 6 and fragment in os.path.basename(parts[-1]):
            return parts[-1]
    return None


def write_json(obj):
    """One JSON line on the protocol stream, outside the event format (NCCL ranks' results)."""
    line = json.dumps(_plain(obj), ensure_ascii=False, allow_nan=False)
    with _OUT_LOCK:
        out = _OUT if _OUT is not None else sys.stdout
        out.write(line + "\n")
        out.flush()
