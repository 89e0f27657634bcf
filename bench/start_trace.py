"""One start of the monitor, traced: when each part of it happened (issue 33).

    python3 -P bench/start_trace.py OUT.jsonl [gputui options]      (in a terminal)
    python bench/pty_timeline.py --start --json -- python3 -P bench/start_trace.py OUT.jsonl
    python bench/start_trace.py --report OUT.jsonl TIMELINE.json    (the marks against the pty's)

Each mark is one JSON line in OUT.jsonl, written as it happens: time.monotonic() (the
system-wide clock pty_timeline also uses: its `t0` is when it forked the program), the main
thread's CPU time, and the thread that made it.  Marked: the script's first line (Python and
`site` done), Textual's and gputui's imports, NVML's read-ahead (start, NVML open, first
sample, its thread's CPU), the config, the app made, `App.run`, the terminal driver started,
the first snapshot shown, each paint Textual sends (its size), the first frame drawn
(`first_frame_drawn`), the engines' first judgement; at the fifth snapshot, the objects the
cyclic GC still walks (those not frozen) and a full collection's cost.  A measuring tool only: it wraps
private names of Textual and gputui, which nothing in gputui itself does.
"""

from __future__ import annotations

import time

T_SCRIPT = time.monotonic()

import functools  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from importlib.machinery import ModuleSpec  # noqa: E402
from types import ModuleType  # noqa: E402


class Trace:
    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        self._main = threading.main_thread().ident
        self._main_cpu = 0.0

    def mark(self, what: str, **extra: object) -> None:
        now = time.monotonic()
        on_main = threading.get_ident() == self._main
        if on_main:
            self._main_cpu = time.thread_time()
        line = {"t": now, "what": what, "main_cpu": self._main_cpu, "thread": threading.current_thread().name}
        line.update(extra)
        os.write(self._fd, (json.dumps(line) + "\n").encode())


def wrap(
    owner: object, name: str, before: str | None = None, after: str | None = None, once: bool = False
) -> None:
    orig = getattr(owner, name)
    done = [False]

    @functools.wraps(orig)  # (Textual counts a handler's parameters through __wrapped__)
    def wrapped(*args: object, **kwargs: object) -> object:
        active = not (once and done[0])
        if active and before:
            TRACE.mark(before)
        try:
            return orig(*args, **kwargs)
        finally:
            if active and after:
                TRACE.mark(after)
            done[0] = True

    setattr(owner, name, wrapped)


def report(trace_path: str, timeline_path: str) -> None:
    """The marks, in ms from the fork, beside the pty's first byte, complete and settled."""
    with open(timeline_path) as f:
        tl = json.loads(f.readline())
    t0 = tl["t0_monotonic"]
    with open(trace_path) as f:
        marks = [json.loads(line) for line in f if line.strip()]
    rows = [(m["t"] - t0, m["what"], m["main_cpu"], m["thread"], m) for m in marks]
    for key in ("first_byte_s", "complete_s", "settle_s"):
        if tl.get(key) is not None:
            rows.append((tl[key], f"pty: {key}", None, "", {}))
    for t, what, cpu, thread, m in sorted(rows, key=lambda r: r[0]):
        extra = {k: v for k, v in m.items() if k not in ("t", "what", "main_cpu", "thread")}
        cpu_s = f"main CPU {cpu * 1000:6.1f}" if cpu is not None else " " * 15
        print(
            f"{t * 1000:7.1f} ms  {cpu_s}  {what:34s} {thread if thread != 'MainThread' else ''} {extra or ''}"
        )


if __name__ == "__main__" and sys.argv[1:2] == ["--report"]:
    report(sys.argv[2], sys.argv[3])
    sys.exit(0)

TRACE = Trace(sys.argv[1])
TRACE.mark("script (Python and site done)", at=T_SCRIPT)

paints = [0]


def on_textual_app(module: object) -> None:
    """Each paint Textual sends (App._display), marked."""
    App = module.App  # type: ignore[attr-defined]
    _display = App._display

    def display(self: object, screen: object, renderable: object) -> None:
        paints[0] += 1
        TRACE.mark(f"paint {paints[0]} begins")
        _display(self, screen, renderable)
        TRACE.mark(f"paint {paints[0]} sent")

    App._display = display


def on_linux_driver(module: object) -> None:
    wrap(module.LinuxDriver, "start_application_mode", "driver start", "driver started")  # type: ignore[attr-defined]


class Watch:
    """A meta-path finder that marks when a watched module's import begins and ends and
    calls its hook on the new module, leaving the order of imports as gputui has it."""

    def __init__(self, hooks: dict[str, object]) -> None:
        self.hooks = hooks

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name not in self.hooks:
            return None
        import importlib.util

        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module
        hook = self.hooks[name]

        def traced(module: ModuleType) -> None:
            TRACE.mark(f"import {name}")
            exec_module(module)
            TRACE.mark(f"imported {name}")
            hook(module)  # type: ignore[operator]

        spec.loader.exec_module = traced  # type: ignore[method-assign]
        return spec


def on_nvml_source(module: object) -> None:
    S = module.NvmlSource  # type: ignore[attr-defined]
    _open_and_sample = S._open_and_sample

    def open_and_sample(self: object) -> None:
        c0 = time.thread_time()
        TRACE.mark("read-ahead starts")
        _open_and_sample(self)
        TRACE.mark("read-ahead done", thread_cpu_ms=round((time.thread_time() - c0) * 1000, 1))

    S._open_and_sample = open_and_sample
    wrap(S, "_sample", after="a sample taken")
    wrap(S, "start_background", "slow thread starts")


def on_config(module: object) -> None:
    wrap(module, "load", after="config loaded")


shown = [0]


def gc_at_the_fifth_tick(*args: object) -> None:
    """At the fifth snapshot shown: how many objects the cyclic GC still walks (not frozen)
    and what a full collection of them costs."""
    shown[0] += 1
    if shown[0] == 5:
        import gc

        c0 = time.perf_counter()
        gc.collect()
        TRACE.mark(
            "gc at the 5th tick",
            walked=len(gc.get_objects()),
            frozen=gc.get_freeze_count(),
            full_collection_ms=round((time.perf_counter() - c0) * 1000, 2),
        )


def on_app(module: object) -> None:
    app = module.GpuTuiApp  # type: ignore[attr-defined]
    wrap(app, "__init__", "app made: begins", "app made")
    wrap(app, "run", "App.run")
    wrap(app, "on_mount", "on_mount", "on_mount done")
    wrap(app, "_show_snapshot", "snapshot shown: begins", "snapshot shown")
    show = app._show_snapshot

    def show_and_count(self: object, *args: object) -> None:
        show(self, *args)
        gc_at_the_fifth_tick()

    app._show_snapshot = show_and_count
    wrap(app, "_judge_first", "engines: first judgement asked")


def on_poller(module: object) -> None:
    wrap(module.Poller, "first_frame_drawn", "first frame drawn (call_after_refresh)")  # type: ignore[attr-defined]


sys.meta_path.insert(
    0,
    Watch(
        {
            "gputui.cli": lambda m: wrap(m, "remembered", after="state read"),
            "gputui.config": on_config,
            "gputui.telemetry.nvml.source": on_nvml_source,
            "pynvml": lambda m: None,
            "psutil": lambda m: None,
            "gputui.ui.app": on_app,
            "gputui.telemetry.poller": on_poller,
            "textual.app": on_textual_app,
            "textual.drivers.linux_driver": on_linux_driver,
        }
    ),
)
from gputui import cli  # noqa: E402

sys.argv = ["gputui", *sys.argv[2:]]
sys.exit(cli.main())
