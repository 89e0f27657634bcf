"""`gputui stress`: how fast and how healthy each GPU is under load, with per-GPU verdicts.

Runs gputui/diag/stress.py in the chosen interpreter (all selected GPUs in parallel) while
gputui's own poller samples the GPUs (temperature, power, clocks, throttle reasons).
Exit status: 0 every GPU passed, 1 warnings, 2 failures, 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any

from gputui.commands.common import (
    Interrupted,
    interruptible,
    killed_line,
    non_negative,
    positive,
    say,
    stdout_gone,
)

NAME = "stress"


def gpu_list(value: str) -> list[int]:
    try:
        out = [int(x) for x in value.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of GPU indices: {value!r}") from None
    if not out or any(i < 0 for i in out):
        raise argparse.ArgumentTypeError(f"not a list of GPU indices: {value!r}")
    return out


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "stress",
        help="stress-test the GPUs: matmul TFLOP/s per precision, bandwidth, burn with result checks",
        description="Matmul throughput per precision (vs the datasheet), memory bandwidth (device, "
        "host pinned/pageable, peer-to-peer), then a burn of DURATION seconds whose results are "
        "compared with each other and a float64 reference, with NVML health before/after.  "
        "Exit status: 0 every GPU passed, 1 warnings, 2 failures.",
    )
    p.add_argument("--duration", type=positive, default=60.0, metavar="S", help="burn seconds (default 60)")
    p.add_argument(
        "--gpus", type=gpu_list, default=None, metavar="0,1", help="torch GPU indices (default: all)"
    )
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument(
        "--json", action="store_true", help="print the report as JSON (gputui/diag/report.schema.json)"
    )
    fmt.add_argument("--markdown", action="store_true", help="print the report as Markdown")
    p.add_argument(
        "--python",
        metavar="PATH",
        default=None,
        help="the interpreter to run it in (default: the active venv or conda environment, else "
        "gputui's own; as root, one another user controls runs as that user, or is refused)",
    )
    p.add_argument(
        "--timeout", type=positive, default=None, metavar="S", help="kill it after S s (default DURATION+600)"
    )
    p.add_argument(
        "--monitor-interval",
        type=non_negative,
        default=1.0,
        metavar="S",
        help="gputui's own sampling of the GPUs during the run, seconds (0: off; default 1)",
    )
    # test-only: corrupt one burn result on this GPU / run on the CPU; not for users
    p.add_argument("--inject-corruption", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--test-cpu", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--child-arg", action="append", default=[], help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    from gputui.diag.interpreters import default_interpreter
    from gputui.diag.session import StressMonitor, StressSession
    from gputui.diag.target import TargetError, python_target
    from gputui.diag.verdicts import (
        EXIT_CODES,
        report_json,
        report_markdown,
        stress_markdown,
        stress_only_report,
    )

    python = args.python or default_interpreter()
    try:
        target = python_target(python, "--python")
    except TargetError as exc:
        print(f"gputui stress: {exc}", file=sys.stderr)
        return 2
    extra = list(args.child_arg)
    if args.inject_corruption is not None:
        extra += ["--inject-corruption", str(args.inject_corruption)]
    if args.test_cpu:
        extra.append("--test-cpu")
    monitor = StressMonitor()
    poller, source = None, None
    if args.monitor_interval > 0:
        from gputui.telemetry.nvml.source import NvmlSource
        from gputui.telemetry.poller import Poller

        source = NvmlSource()
        poller = Poller(source, args.monitor_interval, monitor.observe)
    progress = sys.stderr.isatty() or not (args.json or args.markdown)
    shown: set[str] = set()
    lock = threading.Lock()
    session: StressSession

    def on_update(kind: str) -> None:
        if not progress or kind != "phase":
            return
        phase = session.results.current_phase()
        with lock:
            if phase and phase not in shown:
                shown.add(phase)
                print(f"gputui stress: {phase}", file=sys.stderr, flush=True)

    session = StressSession(
        python,
        duration=args.duration,
        gpus=args.gpus,
        extra_args=extra,
        timeout=args.timeout,
        monitor=monitor,
        on_update=on_update,
        run_as=target.privileges,
    )
    interrupted: Interrupted | None = None
    with interruptible():
        if poller is not None:
            poller.start()
        session.start()
        try:
            session.wait()
        except KeyboardInterrupt as exc:
            interrupted = exc if isinstance(exc, Interrupted) else Interrupted()
            session.cancel()
            session.wait(60)
        finally:
            if poller is not None:
                poller.stop()
    stress = session.report()
    if source is not None and session.child.pid is not None:
        stress["child"]["gpu_processes_left"] = gpu_processes_left(source, session.child.pid)
    report = stress_only_report(python, stress)
    try:
        if args.json:
            sys.stdout.write(report_json(report))
        elif args.markdown:
            sys.stdout.write(report_markdown(report))
        else:
            print("\n".join(stress_markdown(stress)))
        sys.stdout.flush()
    except BrokenPipeError:  # `| head`: the reader is done
        stdout_gone()
    except OSError:  # stdout gone with the terminal (SIGHUP)
        pass
    if interrupted is not None:
        say(killed_line("stress", "stress", interrupted, stress.get("child") or {}))
        return interrupted.exit_code
    return EXIT_CODES[stress["status"]]


def gpu_processes_left(source: Any, pid: int) -> list[int]:
    """The stress child's PID if NVML still lists it on a GPU (it must not)."""
    try:
        snap = source.sample()
    except Exception:
        return []
    return sorted({p.pid for p in snap.processes if p.pid == pid})
