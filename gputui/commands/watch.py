"""`gputui watch`: evaluate the alert rules headless; print each alert, run a command for it."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from typing import Any

from gputui.commands.common import (
    add_config_option,
    add_replay_options,
    judging_config,
    non_negative,
    nvml_unavailable,
    open_replay,
    positive,
)

NAME = "watch"
PROG = "gputui watch"
USES_CONFIG = True


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        NAME,
        help="headless alerts: print each one as JSON, optionally run a command for it",
        description="Sample the GPUs, evaluate the alert rules of the config file ([alerts], see "
        "`gputui --print-config`) and print every alert that fires or clears as one JSON line on "
        "stdout.  With --alert-cmd, also run CMD for it with the alert as JSON on stdin "
        "(rate-limited per alert, killed after --timeout; it never delays sampling).",
        epilog="Example:  gputui watch --alert-cmd 'mail -s \"GPU alert\" ops@example.com'",
    )
    p.add_argument(
        "--alert-cmd",
        metavar="CMD",
        default=None,
        help="run CMD for each alert, the alert as JSON on stdin; split like a shell would, "
        "run without one (see --shell)",
    )
    p.add_argument("--shell", action="store_true", default=None, help="run CMD with /bin/sh -c")
    p.add_argument(
        "--rate-limit",
        type=non_negative,
        default=None,
        metavar="MIN",
        help="at most one command per alert in MIN minutes (default 15)",
    )
    p.add_argument(
        "--timeout", type=positive, default=None, metavar="S", help="kill CMD after S seconds (default 30)"
    )
    p.add_argument(
        "--no-resolved", action="store_true", help="run CMD only when an alert fires, not when it clears"
    )
    p.add_argument("--quiet", action="store_true", help="do not print the alerts on stdout")
    p.add_argument(
        "--interval",
        type=positive,
        default=argparse.SUPPRESS,  # absent: the global -i/--interval stands
        metavar="S",
        help="seconds between samples (default [ui] interval)",
    )
    p.add_argument("--duration", type=positive, default=None, metavar="S", help="stop after S seconds")
    add_replay_options(p, "evaluate the alerts")
    add_config_option(p)


def run(args: argparse.Namespace) -> int:
    from gputui.config import Config
    from gputui.export.alert_command import AlertCommand, command_argv
    from gputui.export.snapshot import dumps
    from gputui.stacks.sampler import for_source
    from gputui.telemetry.alerts import AlertEngine, AlertEvent, event_json
    from gputui.telemetry.hub import Hub
    from gputui.telemetry.recording import RecordingError

    settings: Config = getattr(args, "settings", None) or Config()
    wc = settings.watch
    cmd = args.alert_cmd if args.alert_cmd is not None else wc.alert_cmd
    shell = wc.shell if args.shell is None else args.shell
    rate_minutes = wc.rate_limit_minutes if args.rate_limit is None else args.rate_limit
    if rate_minutes < 0:
        print(f"{PROG}: --rate-limit must not be negative", file=sys.stderr)
        return 2

    if args.replay is not None:
        source: Any = open_replay(PROG, args.replay, loop=False)
        if source is None:
            return 2
    else:
        from gputui.telemetry.nvml.source import NvmlSource

        source = NvmlSource()
    info = source.open()
    if info.system.nvml_problem is not None:
        source.close()
        return nvml_unavailable(PROG, info.system.nvml_problem)

    settings = judging_config(PROG, args, source) if args.replay is not None else settings
    hub = Hub(capacity=2, alerts=AlertEngine(settings.alerts, settings.hints, settings.health))
    hub.use_stacks(for_source(source.local_processes, settings.health))
    hub.set_info(info)
    hub.follow(source.seekable)  # a replay's alerts: those of its ticks up to each
    runner: AlertCommand | None = None
    if cmd:
        try:
            argv = command_argv(cmd, shell)
        except ValueError as exc:
            print(f"{PROG}: --alert-cmd: {exc}", file=sys.stderr)
            return 2
        runner = AlertCommand(
            argv,
            rate_limit=rate_minutes * 60,
            timeout=args.timeout or wc.timeout_seconds,
            resolved=wc.resolved and not args.no_resolved,
            info=lambda: hub.info,
            prog=PROG,
        )
        hub.subscribe_alerts(runner.submit)
    out_lock = threading.Lock()

    def print_events(events: list[AlertEvent]) -> None:
        with out_lock:
            for e in events:
                print(dumps(event_json(e, hub.info), pretty=False), flush=True)

    if not args.quiet:
        hub.subscribe_alerts(print_events)

    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    deadline = None if args.duration is None else time.monotonic() + args.duration
    try:
        if args.replay is not None:
            # A recording plays once, in this thread, at --interval (default: as recorded).
            interval = args.interval or source.interval
            for _ in range(len(source.ticks)):
                try:
                    snap = source.sample()
                except RecordingError as exc:  # a bad line further into the recording
                    print(f"{PROG}: {exc}", file=sys.stderr)
                    return 2
                hub.publish(snap)
                if stop.wait(interval) or (deadline is not None and time.monotonic() >= deadline):
                    break
            else:
                if deadline is not None:  # --duration asked for more than the recording holds
                    print(
                        f"{PROG}: the recording ended after its {len(source.ticks)} samples, "
                        f"before --duration {args.duration:g} s",
                        file=sys.stderr,
                    )
        else:
            from gputui.telemetry.poller import Poller

            def on_error(exc: BaseException) -> None:
                print(f"{PROG}: telemetry error: {exc}", file=sys.stderr)

            poller = Poller(source, args.interval or settings.ui.interval, hub.publish, on_error=on_error)
            poller.start()
            stop.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
            poller.stop()
    except BrokenPipeError:
        sys.stderr.close()
    finally:
        if runner is not None:
            runner.close()
        hub.use_stacks(None)
    return 0
