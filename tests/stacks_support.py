"""Real Python children blocked in a known function, for the stacks tests."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from gputui.stacks.dump import dump_many, find_py_spy
from gputui.stacks.model import Reason

CHILD = textwrap.dedent(
    """
    import os, subprocess, sys, threading

    def wait_here():
        os.write(1, b"ready\\n")  # one write: two threads never interleave
        threading.Event().wait()  # WAIT LINE

    def branch_a():
        wait_here()

    def branch_b():
        wait_here()

    def thread_main():
        wait_here()

    def rename(f, name):  # a function name is outside text too (and may hold any character)
        code = f.__code__.replace(co_name=name)
        f.__code__ = code.replace(co_qualname=name) if hasattr(code, "co_qualname") else code

    def main():
        if "--worker" in sys.argv:  # a rank's own child (a data loader): not a rank
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        if "--thread" in sys.argv:
            threading.Thread(target=thread_main, name="w\\u00f6rker\\x1b[31m", daemon=True).start()
        (branch_b if "b" in sys.argv[1:] else branch_a)()

    if "--hostile" in sys.argv:
        rename(main, "main\x1b]0;owned\x07")
        rename(branch_a, "branch_a\u202e")
        rename(thread_main, "thread\x1b[2Jmain")
    main()
    """
)
WAIT_LINE = next(i for i, line in enumerate(CHILD.splitlines(), 1) if "# WAIT LINE" in line)


def write_child(directory: Path) -> Path:
    script = directory / "stackchild.py"
    script.write_text(CHILD)
    return script


def start_waiter(script: Path, children: list, *args: str, **kw) -> subprocess.Popen[bytes]:
    """`python stackchild.py ARGS`, returned once it is about to wait in `wait_here`."""
    child = subprocess.Popen(
        [sys.executable, str(script), *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        **kw,
    )
    children.append(child)
    assert child.stdout is not None
    assert child.stdout.readline() == b"ready\n"
    return child


def comm(pid: int) -> str:
    """The process's name as the kernel gives it (and gputui prints it): `python`, `python3`,
    `python3.11`, whatever the interpreter's file is called here."""
    with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
        return f.read().rstrip("\n")


def settled(pids: list[int], timeout: float = 30.0):
    """Dump until every process's main thread is inside `wait_here` (a child prints "ready"
    just before it gets there)."""
    deadline = time.monotonic() + timeout
    while True:
        results = dump_many(pids)
        if all(r.ok and any(f.function == "wait_here" for f in r.threads[0].frames) for r in results):
            return results
        assert time.monotonic() < deadline, [r.missing for r in results]
        time.sleep(0.05)


def py_spy_children() -> list[psutil.Process]:
    """py-spy processes that are children of this test process."""
    out = []
    for c in psutil.Process().children(recursive=True):
        try:
            if "py-spy" in c.name() or any("py-spy" in a for a in c.cmdline()[:1]):
                out.append(c)
        except psutil.Error:
            continue
    return out


def wait_state(pid: int, state: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with open(f"/proc/{pid}/stat", "rb") as f:
            if f.read().rpartition(b")")[2].split()[0].decode() == state:
                return
        assert time.monotonic() < deadline, f"PID {pid} never reached state {state}"
        time.sleep(0.01)


def require_py_spy(script: Path) -> None:
    """Skip (saying why) where py-spy is missing or the kernel refuses it ptrace: found by
    dumping a real child, not guessed."""
    if find_py_spy() is None:
        pytest.skip("py-spy is not installed here (pip install py-spy)")
    started: list = []
    try:
        child = start_waiter(script, started)
        res = dump_many([child.pid])[0]
    finally:
        for c in started:
            c.kill()
            c.wait(timeout=10)
    if res.missing is not None and res.missing.reason is Reason.PTRACE_REFUSED:
        pytest.skip(f"ptrace is not permitted in this environment: {res.missing.message}")
    assert res.missing is None or res.missing.reason is Reason.NOT_PYTHON, res.missing


# ---- py-spy's text dumps, as recorded on real GPUs -----------------------------------------

MATRIX = Path(__file__).resolve().parent / "fixtures" / "h100-x4-matrix"
"""Issue 32's matrix recorded live on 4 H100s: `stacks-35.txt` holds each NCCL rank's `py-spy
dump` and `py-spy dump --native` as py-spy 0.4.3 printed them (tests/fixtures/h100-x4-matrix)."""


def py_spy_text_as_json(text: str) -> bytes:
    """One `py-spy dump` as text (threads, then frames innermost first, `name (file:line)` or
    `name (library)` for a native frame) back into the JSON `py-spy dump --json` gives for the
    same dump, so that gputui's own parser reads the recorded frames."""
    import json
    import re

    threads: list[dict] = []
    for line in text.splitlines():
        head = re.match(r'Thread (0x[0-9A-Fa-f]+|\d+) \((\w[\w+]*)\)(?:: "(.*)")?$', line)
        if head:
            tid = int(head.group(1), 0)
            threads.append(
                {
                    "pid": 0,
                    "thread_id": tid,
                    "os_thread_id": tid,
                    "thread_name": head.group(3),
                    "active": head.group(2).startswith("active"),
                    "owns_gil": "gil" in head.group(2),
                    "frames": [],
                }
            )
            continue
        frame = re.match(r"    (.*) \(([^()]*)\)$", line)
        if frame and threads:
            name, where = frame.groups()
            file, colon, lineno = where.rpartition(":")
            if colon and lineno.isdigit() and file.endswith(".py"):
                raw = {
                    "name": name,
                    "filename": file,
                    "short_filename": file,
                    "line": int(lineno),
                    "module": None,
                }
            elif colon and lineno.isdigit():  # a native frame with its source line (NCCL's group.cc:107)
                raw = {
                    "name": name,
                    "filename": file,
                    "short_filename": file,
                    "line": int(lineno),
                    "module": file,
                }
            else:  # a native frame: its library
                raw = {"name": name, "filename": where, "short_filename": where, "line": 0, "module": where}
            threads[-1]["frames"].append(raw)
    return json.dumps(threads).encode()


def recorded_dumps(folder: str, *, native: bool, at: int = 35) -> dict[int, bytes]:
    """PID -> that rank's recorded dump as py-spy's JSON (only the dumps that read a stack)."""
    text = (MATRIX / folder / f"stacks-{at}.txt").read_text()
    out = {}
    marker = "## py-spy dump --native --pid " if native else "## py-spy dump --pid "
    for tail in text.split("## py-spy dump ")[1:]:
        part = "## py-spy dump " + tail
        if not part.startswith(marker):
            continue
        pid = int(part[len(marker) :].split(None, 1)[0])
        body = part.split("\n#", 1)[0]
        if "\nThread " in body:
            out[pid] = py_spy_text_as_json(body)
    return out
