"""`gputui record FILE`: write a recording of this machine's GPUs, headless."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from gputui.commands.common import nvml_unavailable, positive

NAME = "record"
USES_CONFIG = True
"""[health]: the verdict thresholds that decide whose stacks are read into the recording."""


DEFAULT_INTERVAL_S = 1.0


def add_parser(subparsers: Any) -> None:
    rec = subparsers.add_parser(
        "record",
        help="write a recording of this machine's GPUs (headless)",
        description="Sample NVML and the host every INTERVAL seconds and write a gputui "
        "recording (JSON lines; gzip-compressed when FILE ends in .gz).  Ctrl-C stops it "
        "and leaves a valid file.",
    )
    rec.add_argument("file", metavar="FILE")
    rec.add_argument(
        "--duration",
        type=positive,
        default=None,
        metavar="S",
        help="stop after S seconds (default: until Ctrl-C)",
    )
    rec.add_argument(
        "--interval",
        type=positive,
        default=argparse.SUPPRESS,
        metavar="S",
        help="seconds between ticks (default 1, or the global -i)",
    )
    rec.add_argument("--note", default=None, help="a note stored in the recording's header")
    rec.add_argument("--force", action="store_true", help="overwrite FILE if it exists")


def run(args: argparse.Namespace) -> int:
    from gputui.safefile import Refused
    from gputui.stacks.sampler import Evidence, for_source
    from gputui.telemetry.health import HealthEngine
    from gputui.telemetry.health_config import HealthConfig
    from gputui.telemetry.nvml.source import NvmlSource
    from gputui.telemetry.recording import RecordingWriter
    from gputui.untrusted import escaped

    path = Path(args.file)
    interval = args.interval or DEFAULT_INTERVAL_S  # its own --interval, else the global -i
    exists = f"gputui record: {escaped(str(path))} exists; pass --force to overwrite it"
    if os.path.lexists(path) and not args.force:  # (exists() follows a link: a dangling one "is not there")
        print(exists, file=sys.stderr)
        return 2
    source = NvmlSource()
    info = source.open()
    problem = info.system.nvml_problem
    if problem is not None:
        source.close()
        return nvml_unavailable("gputui record", problem)
    stop = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    info_with_topology = type(info)(info.system, info.devices, source.read_topology())
    try:
        writer = RecordingWriter(path, info_with_topology, interval, note=args.note, replace=args.force)
    except (Refused, FileExistsError) as exc:  # a symbolic or hard link, a FIFO or a device at
        # the name: never written through; or a file made there since the check above
        print(exists if isinstance(exc, FileExistsError) else f"gputui record: {exc}", file=sys.stderr)
        source.close()
        return 2
    except OSError as exc:
        print(f"gputui record: cannot write {escaped(str(path))}: {exc.strerror}", file=sys.stderr)
        source.close()
        return 2
    start = time.monotonic()
    next_due = start
    settings = getattr(args, "settings", None)
    health = settings.health if settings is not None else HealthConfig()
    evidence = Evidence(HealthEngine(health), for_source(True, health))  # the stacks behind verdicts
    with writer:
        while not stop:
            writer.write(evidence.judged(source.sample()))
            if args.duration is not None and time.monotonic() - start >= args.duration:
                break
            next_due = max(next_due + interval, time.monotonic())
            while not stop and time.monotonic() < next_due:
                time.sleep(min(0.1, next_due - time.monotonic()))
    source.close()
    evidence.close()
    print(
        f"gputui record: {writer.ticks} ticks of {len(info.devices)} GPU(s) written to {path}",
        file=sys.stderr,
    )
    return 0
