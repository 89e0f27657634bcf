"""Command line: `gputui [options]` runs the monitor; subcommands run headless.

Imports are deferred so headless subcommands never pay for Textual, and the TUI starts fast.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from gputui import __version__

DEMO_RECORDING = Path(__file__).parent / "data" / "demo.jsonl.gz"


def _positive(value: str) -> float:
    try:
        f = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not f > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0: {value!r}")
    return f


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gputui",
        description="A terminal GPU monitor: every GPU live, its processes, and the host.",
        epilog="Run `gputui COMMAND --help` for a subcommand.  Keys inside the monitor: press ?",
    )
    parser.add_argument("--version", action="version", version=f"gputui {__version__}")
    parser.add_argument(
        "-i",
        "--interval",
        type=_positive,
        default=None,
        metavar="S",
        help="seconds between refreshes (default 1; a replay defaults to its recorded interval)",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--replay", metavar="FILE", help="play a recording instead of live data")
    source.add_argument("--demo", action="store_true", help="play the bundled recording of real GPUs")
    parser.add_argument(
        "--start",
        type=int,
        default=1,
        metavar="TICK",
        help="with --replay/--demo: begin at this recorded tick (default 1)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    rec = sub.add_parser(
        "record",
        help="write a recording of this machine's GPUs (headless)",
        description="Sample NVML and the host every INTERVAL seconds and write a gputui "
        "recording (JSON lines; gzip-compressed when FILE ends in .gz).  Ctrl-C stops it "
        "and leaves a valid file.",
    )
    rec.add_argument("file", metavar="FILE")
    rec.add_argument(
        "--duration",
        type=_positive,
        default=None,
        metavar="S",
        help="stop after S seconds (default: until Ctrl-C)",
    )
    rec.add_argument(
        "--interval", type=_positive, default=1.0, metavar="S", help="seconds between ticks (default 1)"
    )
    rec.add_argument("--note", default=None, help="a note stored in the recording's header")
    rec.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "record":
        return cmd_record(args)
    return run_tui(args)


def cmd_record(args: argparse.Namespace) -> int:
    from gputui.telemetry.nvml import NvmlSource
    from gputui.telemetry.recording import RecordingWriter

    path = Path(args.file)
    if path.exists() and not args.force:
        print(f"gputui record: {path} exists; pass --force to overwrite it", file=sys.stderr)
        return 2
    source = NvmlSource()
    info = source.open()
    problem = info.system.nvml_problem
    if problem is not None:
        print(f"gputui record: NVML unavailable: {problem.error}\n  {problem.meaning}", file=sys.stderr)
        source.close()
        return 2
    stop = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    info_with_topology = type(info)(info.system, info.devices, source.read_topology())
    try:
        writer = RecordingWriter(path, info_with_topology, args.interval, note=args.note)
    except OSError as exc:
        print(f"gputui record: cannot write {path}: {exc.strerror}", file=sys.stderr)
        source.close()
        return 2
    start = time.monotonic()
    next_due = start
    with writer:
        while not stop:
            writer.write(source.sample())
            if args.duration is not None and time.monotonic() - start >= args.duration:
                break
            next_due = max(next_due + args.interval, time.monotonic())
            while not stop and time.monotonic() < next_due:
                time.sleep(min(0.1, next_due - time.monotonic()))
    source.close()
    print(
        f"gputui record: {writer.ticks} ticks of {len(info.devices)} GPU(s) written to {path}",
        file=sys.stderr,
    )
    return 0


def run_tui(args: argparse.Namespace) -> int:
    replay_path = str(DEMO_RECORDING) if args.demo else args.replay
    if replay_path is not None:
        from gputui.telemetry.recording import RecordingError, ReplaySource

        try:
            source = ReplaySource(replay_path)
        except RecordingError as exc:
            print(f"gputui: {exc}", file=sys.stderr)
            return 2
        if not 1 <= args.start <= len(source.ticks):
            print(
                f"gputui: --start {args.start}: the recording has ticks 1 to {len(source.ticks)}",
                file=sys.stderr,
            )
            return 2
        source.seek(args.start - 2)
        interval = args.interval or source.interval
    else:
        from gputui.telemetry.nvml import NvmlSource

        source = NvmlSource()  # type: ignore[assignment]
        source.prefetch()  # type: ignore[attr-defined]  # NVML opens while Textual loads
        interval = args.interval or 1.0
    if not sys.stdout.isatty() and not os.environ.get("GPUTUI_ALLOW_NOTTY"):
        print(
            "gputui: the monitor needs a terminal; for headless output use `gputui record`", file=sys.stderr
        )
        return 2
    from gputui.ui.app import GpuTuiApp

    app = GpuTuiApp(source=source, interval=interval, demo=args.demo)
    app.run()
    return app.return_code or 0
