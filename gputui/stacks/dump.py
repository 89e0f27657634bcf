"""Python stacks of running processes, read with `py-spy dump --json`, several at once.

Each dump runs py-spy as a child, bounded in time: past the limit the child is killed and
reaped, never left running.  Nothing here blocks an event loop: `dump_many_async` runs on the
caller's loop (asyncio subprocesses), `dump_in_background` on a thread of its own with
callbacks, and `dump_many` is the blocking form for the command line.  A stack that cannot be
read comes back with a `Missing` saying why, one reason per cause.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from types import EllipsisType
from typing import Any, TypeAlias, TypeVar

from gputui.extras import install_hint
from gputui.stacks import procfs
from gputui.stacks.model import Frame, Missing, Reason, StackResult, ThreadStack
from gputui.stacks.pyspy_text import MAX_FRAMES, MAX_TEXT, MAX_THREADS, parse_text
from gputui.stacks.symbols import readable_symbol
from gputui.telemetry.host.rank import environ_rank
from gputui.untrusted import literal

PY_SPY_MAX_FRAMES = 4096
"""The deepest stack py-spy reads: past it, it gives up on the whole dump."""
DEFAULT_TIMEOUT = 10.0
"""Seconds one dump may take before py-spy is killed."""
PARALLEL = 8
"""py-spy children running at once."""
START_TIME_TOLERANCE = 0.005
"""Start times closer than this are the same process (as gputui.control.signals compares them)."""
MAX_OUTPUT = 32 << 20
"""Bytes of py-spy's output read at most (the bounds on what is kept of it, threads, frames and
text, are gputui.stacks.pyspy_text's, for both its forms)."""
MAX_SYMBOL = 8192
"""Characters of a native frame's full symbol kept beside its readable name (pybind11's run
to ~2,000)."""

T = TypeVar("T")
Target: TypeAlias = "int | tuple[int, float | None]"
"""A PID, or (PID, start time) as the caller saw the process: a PID now held by another
process is then refused instead of dumped."""

STATE_NAMES = {
    "R": "running",
    "S": "sleeping",
    "D": "in uninterruptible sleep",
    "T": "stopped",
    "t": "stopped by a debugger",
    "Z": "a zombie",
    "X": "dead",
    "I": "idle",
    "P": "parked",
    "W": "waking",
}


def find_py_spy(path: str | None = None, beside: str | None = None) -> str | None:
    """py-spy's path: on PATH (`path`, default $PATH), else beside this Python (`beside`,
    default sys.executable: a venv's bin/ that was never put on PATH); None when neither."""
    found = shutil.which("py-spy", path=path) if path != "" else None
    if found:
        return found
    exe = sys.executable if beside is None else beside
    if exe:
        candidate = os.path.join(os.path.dirname(exe), "py-spy")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _start_time(pid: int) -> float | None:
    import psutil

    from gputui.telemetry.host.starttime import start_time

    try:
        return start_time(psutil.Process(pid))
    except psutil.Error:
        return None


def _state_words(state: str | None, wchan: str | None) -> str:
    words = f"state {state} ({STATE_NAMES.get(state, 'unknown')})" if state else "state unknown"
    return words + (f", waiting in {literal(wchan)}" if wchan else "")


async def dump_async(
    target: Target,
    *,
    native: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    py_spy: str | EllipsisType | None = ...,
    text: bool = False,
) -> StackResult:
    """The stacks of one process, or why there are none.  `py_spy`: its path; None when it
    is not installed; left out, found with `find_py_spy`.  `text`: read py-spy's printed dump
    (`parse_text`, as a person or a script captures it) instead of its JSON."""
    t0 = time.monotonic()
    pid, expected = (target, None) if isinstance(target, int) else target
    exe = find_py_spy() if py_spy is ... else py_spy

    def result(**kw: Any) -> StackResult:
        return StackResult(pid, seconds=time.monotonic() - t0, **kw)

    def missing(reason: Reason, message: str, **kw: Any) -> Missing:
        return Missing(reason, message, **kw)

    st = procfs.read_state(pid)
    created = _start_time(pid) if st is not None else None
    if st is None or created is None:
        return result(create_time=expected, missing=missing(Reason.EXITED, f"PID {pid}: no such process"))
    if expected is not None and abs(created - expected) > START_TIME_TOLERANCE:
        return result(
            create_time=expected,
            missing=missing(Reason.EXITED, f"PID {pid} has exited: the PID now belongs to another process"),
        )
    name = literal(st.name)
    base: dict[str, Any] = {"create_time": created, "name": st.name}
    if st.state in ("Z", "X"):
        return result(
            **base,
            missing=missing(
                Reason.EXITED,
                f"PID {pid} ({name}) has exited (a zombie its parent has not reaped)",
                state="Z",
            ),
        )
    if st.kernel_thread:
        return result(
            **base,
            missing=missing(
                Reason.NOT_PYTHON, f"PID {pid} ({name}) is a kernel thread, not a Python process"
            ),
        )
    if st.state in ("T", "t"):
        return result(**base, rank=environ_rank(pid), missing=_stopped(pid, name, st.state))
    base["rank"] = environ_rank(pid)
    if exe is None:
        return result(
            **base,
            missing=missing(
                Reason.NO_PY_SPY,
                "py-spy is not installed (neither on PATH nor beside this Python)",
                hint=install_hint("stacks", "py-spy"),
            ),
        )
    facts = procfs.ptrace_facts(pid, st.uids)
    refused = procfs.certain_refusal(facts)
    if refused is not None:
        return result(**base, missing=missing(Reason.PTRACE_REFUSED, refused[0], hint=refused[1]))

    argv = [exe, "dump", "--pid", str(pid), *([] if text else ["--json"]), *(["--native"] if native else [])]
    rc, out, err, timed_out = await _run(argv, timeout)

    after = _start_time(pid)
    now = procfs.read_state(pid)
    if after is None or abs(after - created) > START_TIME_TOLERANCE or now is None or now.state in ("Z", "X"):
        return result(
            **base, missing=missing(Reason.EXITED, f"PID {pid} ({name}) exited while py-spy read it")
        )
    if timed_out:
        return result(
            **base,
            missing=missing(
                Reason.TIMEOUT,
                f"py-spy did not answer within {timeout:g} s and was killed",
                hint="try again, or allow longer with --timeout",
                state=now.state,
                wchan=procfs.read_wchan(pid),
            ),
        )
    detail = _error_line(err)
    if rc == 0 and out is not None:
        try:
            threads = parse_text(out, pid) if text else parse_dump(out, pid)
        except ValueError as exc:
            return result(
                **base,
                missing=missing(Reason.FAILED, f"py-spy's output could not be read: {exc}", detail=detail),
            )
        return result(**base, threads=threads)
    low = (err or b"").decode("utf-8", "replace").lower()
    if now.state in ("T", "t") or "failed to suspend" in low:
        return result(**base, missing=_stopped(pid, name, now.state, detail))
    if any(
        w in low for w in ("permission denied", "operation not permitted", "(os error 1)", "(os error 13)")
    ):
        why, hint = procfs.refusal(facts)
        return result(**base, missing=missing(Reason.PTRACE_REFUSED, why, hint=hint, detail=detail))
    too_deep = _too_deep(pid, name, low, now.state, detail)
    if too_deep is not None:
        return result(**base, missing=too_deep)
    if any(w in low for w in ("python version", "python interpreter", "failed to find python")):
        wchan = procfs.read_wchan(pid)
        return result(
            **base,
            missing=missing(
                Reason.NOT_PYTHON,
                f"PID {pid} ({name}) is not a Python process: {_state_words(now.state, wchan)}",
                state=now.state,
                wchan=wchan,
                detail=detail,
            ),
        )
    if out is None:
        return result(**base, missing=missing(Reason.FAILED, "py-spy's output was too large", detail=detail))
    return result(
        **base,
        missing=missing(
            Reason.FAILED,
            f"py-spy failed (exit status {rc}): {literal(detail or 'no message')}",
            state=now.state,
            detail=detail,
        ),
    )


def _too_deep(pid: int, name: str, low: str, state: str, detail: str | None) -> Missing | None:
    """py-spy gave up on a thread deeper than it reads: it says so ("max frame recursion depth"),
    or, when that happens while it validates the interpreter, that it found none in a
    process that does run Python (its executable or libpython is mapped).  None otherwise."""
    hint = (
        f"py-spy reads at most {PY_SPY_MAX_FRAMES} frames of a thread; inside the process, "
        "faulthandler.dump_traceback() prints a stack of any depth"
    )
    if "max frame recursion depth" in low:
        why = (
            f"PID {pid} ({name}): stack too deep: a thread has more than {PY_SPY_MAX_FRAMES} frames "
            "(deep recursion?), more than py-spy reads"
        )
    elif "failed to find a python interpreter" in low and procfs.runs_python(pid):
        why = (
            f"PID {pid} ({name}) runs Python, but py-spy found no interpreter it could read: most likely "
            f"a stack too deep (a thread past the {PY_SPY_MAX_FRAMES} frames py-spy reads: deep "
            "recursion); a process that has only just started reads so for a moment too"
        )
    else:
        return None
    return Missing(Reason.STACK_TOO_DEEP, why, hint=hint, state=state, detail=detail)


def _stopped(pid: int, name: str, state: str, detail: str | None = None) -> Missing:
    if state == "t":
        return Missing(
            Reason.STOPPED,
            f"PID {pid} ({name}) is stopped under a debugger (state t): py-spy cannot read it",
            hint="detach the debugger (or read the stack in it)",
            state=state,
            detail=detail,
        )
    return Missing(
        Reason.STOPPED,
        f"PID {pid} ({name}) is stopped (state T: SIGSTOP, Ctrl-Z or a debugger): "
        "py-spy cannot read a stopped process, so it was not run",
        hint=f"kill -CONT {pid}   resumes it",
        state=state or "T",
        detail=detail,
    )


def _error_line(err: bytes | None) -> str | None:
    """py-spy's error as one line: "Error:", its causes, without the backtrace."""
    if not err:
        return None
    parts = []
    for raw in err.decode("utf-8", "replace").splitlines():
        line = raw.strip()
        if line.startswith("Stack backtrace"):
            break
        if not line or line == "Caused by:":
            continue
        head, sep, rest = line.partition(": ")
        if head == "Error" or (sep and head.isdigit()):
            line = rest
        parts.append(line)
    text = ": ".join(parts)
    return text[:500] if text else None


async def _read_limited(stream: asyncio.StreamReader | None, limit: int) -> bytes | None:
    """Everything on `stream` up to `limit` bytes; None past it (the rest is read and
    dropped, so the child never blocks on a full pipe)."""
    if stream is None:
        return b""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = await stream.read(1 << 16)
        if not chunk:
            return b"".join(chunks) if size <= limit else None
        size += len(chunk)
        if size <= limit:
            chunks.append(chunk)
        else:
            chunks.clear()


async def _run(argv: Sequence[str], timeout: float) -> tuple[int | None, bytes | None, bytes | None, bool]:
    """(exit status, stdout, stderr, timed out) of one py-spy child, killed (status -9) and
    reaped past `timeout` seconds or when the caller is cancelled: also when the cancellation
    comes while the child is being started, and however often it comes while it is reaped."""
    spawn = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "RUST_BACKTRACE": "0"},
        )
    )
    proc, cancelled = await _settle(spawn)
    if cancelled:
        await _reap(proc)
        raise asyncio.CancelledError
    out = err = None
    timed_out = False
    try:
        out, err = await asyncio.wait_for(
            asyncio.gather(_read_limited(proc.stdout, MAX_OUTPUT), _read_limited(proc.stderr, 1 << 16)),
            timeout,
        )
        await asyncio.wait_for(proc.wait(), timeout)
    except asyncio.TimeoutError:
        timed_out = True
    finally:
        await _reap(proc)
    return proc.returncode, out, err, timed_out


async def _settle(task: asyncio.Future[T]) -> tuple[T, bool]:
    """`task`'s result, awaited to its end even if the caller is cancelled meanwhile; and
    whether it was (the caller then finishes its own clean-up and re-raises)."""
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    return task.result(), cancelled


async def _reap(proc: asyncio.subprocess.Process) -> None:
    """Kill `proc` if it is still running and wait for its end (no zombie, no orphan), however
    often the caller is cancelled meanwhile (then re-raised once it is done)."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    # to the end of its pipes too (a few kB at most once it is dead): the transport then
    # closes with the loop still open
    _, cancelled = await _settle(asyncio.ensure_future(proc.communicate()))
    if cancelled:
        raise asyncio.CancelledError


def _text(value: object) -> str:
    return value[:MAX_TEXT] if isinstance(value, str) else "?"


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _frame(raw: dict[str, Any]) -> Frame:
    path = _text(raw.get("filename"))
    short = raw.get("short_filename")
    line = _int(raw.get("line"))
    native = raw.get("module") is not None
    name = raw.get("name")
    function = _text(name)
    symbol = None
    if native and isinstance(name, str):  # a C++ symbol: its template noise elided
        function = readable_symbol(name)
        symbol = name[:MAX_SYMBOL] if function != name else None
    return Frame(
        function=function,
        file=_text(short) if isinstance(short, str) and short else os.path.basename(path),
        line=line if line and line > 0 else None,
        path=path,
        native=native,
        symbol=symbol,
    )


def parse_dump(data: bytes, pid: int) -> tuple[ThreadStack, ...]:
    """py-spy's JSON (a list of threads, frames innermost first) as threads with frames in
    call order, the main thread first.  ValueError when it is not py-spy's JSON."""
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError("not JSON") from exc
    if not isinstance(raw, list):
        raise ValueError("not a list of threads")
    threads = []
    for item in raw[:MAX_THREADS]:
        if not isinstance(item, dict):
            raise ValueError("a thread is not an object")
        frames = item.get("frames")
        if not isinstance(frames, list):
            raise ValueError("a thread has no frames list")
        name = item.get("thread_name")
        threads.append(
            ThreadStack(
                thread_id=_int(item.get("thread_id")) or 0,
                os_thread_id=_int(item.get("os_thread_id")),
                name=name[:MAX_TEXT] if isinstance(name, str) else None,
                active=item.get("active") is True,
                owns_gil=item.get("owns_gil") is True,
                frames=tuple(_frame(f) for f in reversed(frames[:MAX_FRAMES]) if isinstance(f, dict)),
            )
        )
    main = [t for t in threads if t.os_thread_id == pid] or [t for t in threads if t.name == "MainThread"][:1]
    return tuple(main + [t for t in threads if t not in main])


async def dump_many_async(
    targets: Iterable[Target],
    *,
    native: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    py_spy: str | EllipsisType | None = ...,
    parallel: int = PARALLEL,
    on_result: Callable[[StackResult], None] | None = None,
    text: bool = False,
) -> tuple[StackResult, ...]:
    """The stacks of several processes, at most `parallel` dumps at once, in the order given;
    `on_result` is called with each as it arrives (on the loop's thread).  Cancelling kills
    the py-spy children still running, and returns once every one is reaped."""
    exe = find_py_spy() if py_spy is ... else py_spy
    gate = asyncio.Semaphore(max(1, parallel))

    async def one(target: Target) -> StackResult:
        async with gate:
            res = await dump_async(target, native=native, timeout=timeout, py_spy=exe, text=text)
        if on_result is not None:
            on_result(res)
        return res

    tasks = [asyncio.ensure_future(one(t)) for t in targets]
    try:
        return tuple(await asyncio.gather(*tasks))
    except BaseException:
        # gather gives up at the first cancelled or failed dump while the others may still be
        # killing their py-spy: every one ends (killed and reaped) before this returns
        for task in tasks:
            task.cancel()
        await _settle(asyncio.ensure_future(asyncio.gather(*tasks, return_exceptions=True)))
        raise


def dump_many(
    targets: Iterable[Target],
    *,
    native: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    py_spy: str | EllipsisType | None = ...,
    parallel: int = PARALLEL,
    on_result: Callable[[StackResult], None] | None = None,
    text: bool = False,
) -> tuple[StackResult, ...]:
    """`dump_many_async`, blocking (for the command line, or a thread with no event loop)."""
    return asyncio.run(
        dump_many_async(
            targets,
            native=native,
            timeout=timeout,
            py_spy=py_spy,
            parallel=parallel,
            on_result=on_result,
            text=text,
        )
    )


class Background:
    """Dumps running on a thread of their own, so a UI thread never waits: `on_result` is
    called (on that thread) with each process's stacks as they arrive, then `on_done` with
    all of them.  `cancel()` kills the py-spy children still running; `on_done` then gets
    the results that had arrived."""

    def __init__(
        self,
        targets: Iterable[Target],
        *,
        on_result: Callable[[StackResult], None] | None = None,
        on_done: Callable[[tuple[StackResult, ...]], None] | None = None,
        native: bool = False,
        timeout: float = DEFAULT_TIMEOUT,
        py_spy: str | EllipsisType | None = ...,
        text: bool = False,
    ) -> None:
        self._targets = tuple(targets)
        self._on_result = on_result
        self._on_done = on_done
        self._kw: dict[str, Any] = {"native": native, "timeout": timeout, "py_spy": py_spy, "text": text}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[tuple[StackResult, ...]] | None = None
        self._started = threading.Event()
        self._cancelled = False
        self.results: list[StackResult] = []
        """What has arrived so far."""
        self.thread = threading.Thread(target=self._run, name="gputui-stacks", daemon=True)
        self.thread.start()

    def _arrived(self, res: StackResult) -> None:
        self.results.append(res)
        if self._on_result is not None:
            self._on_result(res)

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._task = asyncio.ensure_future(
                dump_many_async(self._targets, on_result=self._arrived, **self._kw)
            )
            self._started.set()
            if self._cancelled:
                self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

        try:
            asyncio.run(main())
        finally:
            self._started.set()
            if self._on_done is not None:
                self._on_done(tuple(self.results))

    def cancel(self) -> None:
        """Stop: running py-spy children are killed (returns at once; `join` to wait)."""
        self._cancelled = True
        self._started.wait(5)
        loop, task = self._loop, self._task
        if loop is not None and task is not None:
            with contextlib.suppress(RuntimeError):  # the loop has already finished
                loop.call_soon_threadsafe(task.cancel)

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the end; True when it has ended."""
        self.thread.join(timeout)
        return not self.thread.is_alive()


def dump_in_background(targets: Iterable[Target], **kw: Any) -> Background:
    """Start `Background` dumps (see there) and return at once."""
    return Background(targets, **kw)
