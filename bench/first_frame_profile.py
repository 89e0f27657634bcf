"""Where the first frame's time goes: run gputui in this terminal (use a pseudo-terminal:
`script -qc 'T0=$(date +%s.%N) python bench/first_frame_profile.py --demo' /dev/null`), profile it from the
interpreter's start until the first snapshot is on screen, then quit and print the top
functions by cumulative time and the moments of the start-up.

    python bench/first_frame_profile.py [--out FILE.prof | --no-profile] [gputui arguments...]

--no-profile: only the moments (the profiler roughly doubles the import time).
--from-mount: profile from the app's mount only (what Textual and gputui do to draw).
--trace FILE: no profile; run for 2 s instead of stopping at the first frame, and write to FILE
every moment, every write to the terminal (its size) and every snapshot (its processes, and how
many of them are described: name and user known), to see what the repaints after the first
frame wait for.  Run it in a sized pseudo-terminal:
`T0=$(date +%s.%N) python bench/pty_timeline.py --start -- python bench/first_frame_profile.py --trace F`.
"""

from __future__ import annotations

import contextlib
import cProfile
import os
import pstats
import sys
import time

import psutil

T0 = float(os.environ.get("T0") or psutil.Process().create_time())
"""The start: $T0 (`T0=$(date +%s.%N) python ...`), else the process's creation time
(which the kernel gives to about a second)."""
marks: list[tuple[str, float]] = []


def mark(what: str) -> None:
    marks.append((what, time.time() - T0))


class AfterImport:
    """A meta-path finder that calls `hooks[name](module)` once module `name` has loaded."""

    def __init__(self, hooks: dict) -> None:  # type: ignore[type-arg]
        self.hooks = hooks

    def find_spec(self, name, path=None, target=None):  # type: ignore[no-untyped-def]
        hook = self.hooks.pop(name, None)
        if hook is None:
            return None
        import importlib.util

        spec = importlib.util.find_spec(name)
        assert spec is not None
        assert spec.loader is not None
        loader = spec.loader
        real_exec = loader.exec_module

        def exec_module(module):  # type: ignore[no-untyped-def]
            real_exec(module)
            hook(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def traced(cls: type, name: str) -> None:
    """Mark the start and end of `cls.name` (with the thread that ran it)."""
    real = getattr(cls, name)

    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        import threading

        who = f"{cls.__name__}.{name} [{threading.current_thread().name}]"
        mark(f"{who} starts")
        cpu = time.thread_time()
        try:
            return real(*args, **kwargs)
        finally:
            mark(f"{who} ends ({(time.thread_time() - cpu) * 1000:.1f} ms of this thread's CPU)")

    setattr(cls, name, wrapper)


def main() -> int:
    out = "/tmp/gputui-first-frame.prof"
    argv = sys.argv[1:]
    profile = True
    if argv[:1] == ["--out"]:
        out, argv = argv[1], argv[2:]
    elif argv[:1] == ["--no-profile"]:
        profile, argv = False, argv[1:]
    from_mount = argv[:1] == ["--from-mount"]
    if from_mount:
        argv = argv[1:]
    trace = None
    if argv[:1] == ["--trace"]:
        trace, argv, profile = argv[1], argv[2:], False
    mark("interpreter up, profiler starts")
    prof = cProfile.Profile()
    if profile and not from_mount:
        prof.enable()
    from gputui import cli

    mark("gputui.cli imported")
    if trace is not None:
        with contextlib.suppress(ImportError):  # (versions that hold the collector at start)
            from gputui import gc_hold

            traced(gc_hold, "release")  # type: ignore[arg-type]

    def patch_app(app_module):  # type: ignore[no-untyped-def]
        mark("gputui.ui.app imported (Textual)")
        cls = app_module.GpuTuiApp
        original = cls._show_snapshot  # (a poller tick's, or the one read ahead, at mount)

        def show_snapshot(self, snap, position):  # type: ignore[no-untyped-def]
            first = self.snapshot is None
            original(self, snap, position)
            if trace is not None:
                procs = snap.processes
                described = sum(1 for p in procs if p.name and p.user)
                mark(f"snapshot: {len(procs)} processes, {described} described")
            if first:
                mark("first snapshot handled")

                def drawn() -> None:
                    mark("first snapshot drawn")
                    if trace is None:
                        self.exit(0)
                    else:
                        self.set_timer(2.0, lambda: self.exit(0))

                self.call_after_refresh(drawn)

        cls._show_snapshot = show_snapshot
        real_mount = cls.on_mount

        def on_mount(self):  # type: ignore[no-untyped-def]
            mark("app mounted")
            if profile and from_mount:
                prof.enable()
            return real_mount(self)

        cls.on_mount = on_mount
        if trace is not None:
            from textual.drivers.linux_driver import LinuxDriver

            real_write = LinuxDriver.write

            def write(self, data: str) -> None:  # type: ignore[no-untyped-def]
                mark(f"write {len(data.encode())} B")
                real_write(self, data)

            LinuxDriver.write = write  # type: ignore[method-assign]

    def patch_nvml(nvml):  # type: ignore[no-untyped-def]
        if trace is not None:
            traced(nvml.NvmlSource, "_open")
            traced(nvml.NvmlSource, "sample")
            traced(nvml.NvmlSource, "open")
            traced(nvml.NvmlSource, "_slow_sample")

    # patched as they load, so that the start-up keeps its own order (the app's modules are
    # imported while NVML opens in the background)
    sys.meta_path.insert(0, AfterImport({"gputui.ui.app": patch_app, "gputui.telemetry.nvml": patch_nvml}))
    os.environ.setdefault("GPUTUI_ALLOW_NOTTY", "1")
    sys.argv = ["gputui", "--no-remember", *argv]
    with contextlib.suppress(SystemExit):
        cli.main()
    prof.disable()
    with open(trace, "w") if trace else contextlib.nullcontext(sys.stderr) as report:
        for what, t in marks:
            print(f"{t:7.3f} s  {what}", file=report)
    if not profile:
        return 0
    prof.dump_stats(out)
    stats = pstats.Stats(out, stream=sys.stderr)
    stats.sort_stats("cumulative").print_stats(45)
    return 0


if __name__ == "__main__":
    sys.exit(main())
