"""`gputui export`: serve Prometheus /metrics (dcgm-exporter's names) from the poller's samples."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from gputui.commands.common import (
    add_config_option,
    add_replay_options,
    judging_config,
    nvml_unavailable,
    open_replay,
    positive,
)

NAME = "export"
PROG = "gputui export"
USES_CONFIG = True


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        NAME,
        help="serve Prometheus /metrics with dcgm-exporter's metric names",
        description="Sample the GPUs every --interval seconds and serve the latest sample at "
        "http://LISTEN/metrics in Prometheus' text format, with dcgm-exporter's metric names and "
        "labels (existing DCGM dashboards work) plus gputui_* metrics for processes and the host.  "
        "Scrapes never call NVML.  Listens on 127.0.0.1 only unless --allow-remote is given.",
        epilog="Example:  gputui export --listen 0.0.0.0:9400 --allow-remote",
    )
    p.add_argument(
        "--listen",
        metavar="HOST:PORT",
        default=None,
        help="address to serve on (default 127.0.0.1:9400; port 0 picks a free one)",
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback --listen address (anyone who can reach it sees your GPUs, "
        "processes and users)",
    )
    p.add_argument(
        "--interval",
        type=positive,
        default=argparse.SUPPRESS,
        metavar="S",
        help="seconds between samples (default 1)",
    )
    p.add_argument("--no-processes", action="store_true", help="leave out the per-process series")
    add_replay_options(p, "serve the metrics")
    add_config_option(p)


def run(args: argparse.Namespace) -> int:
    from gputui.config import Config
    from gputui.export.address import checked_listen

    settings: Config = getattr(args, "settings", None) or Config()
    listen = args.listen or settings.export.listen
    try:
        exposes = "/metrics shows every GPU process with its user"
        host, port = checked_listen(listen, args.allow_remote, exposes)
    except ValueError as exc:
        print(f"{PROG}: --listen: {exc}", file=sys.stderr)
        return 2

    from prometheus_client.registry import CollectorRegistry

    from gputui.export.prometheus import GpuCollector, metrics_app, serve
    from gputui.stacks.sampler import for_source
    from gputui.telemetry.alerts import AlertEngine
    from gputui.telemetry.health import HealthEngine
    from gputui.telemetry.hints import HintEngine
    from gputui.telemetry.hub import Hub
    from gputui.telemetry.poller import Poller
    from gputui.telemetry.recording import RecordingError

    if args.replay is not None:
        source: Any = open_replay(PROG, args.replay)
        if source is None:
            return 2
        interval = args.interval or source.interval
    else:
        from gputui.telemetry.nvml.source import NvmlSource

        source = NvmlSource()
        interval = args.interval or settings.export.interval
    info = source.open()  # the poller's open() returns the same, at once
    if info.system.nvml_problem is not None:
        source.close()
        return nvml_unavailable(PROG, info.system.nvml_problem)

    if args.replay is not None:
        settings = judging_config(PROG, args, source)
    hub = Hub(
        capacity=2,
        alerts=AlertEngine(settings.alerts, settings.hints, settings.health),
        hints=HintEngine(settings.hints, settings.health),
        health=HealthEngine(settings.health),
    )
    hub.use_stacks(for_source(source.local_processes, settings.health))
    hub.follow(source.seekable)  # a replay's alerts: those of its ticks up to each

    said: set[str] = set()

    def on_error(exc: BaseException) -> None:
        # a replay loops past a bad line again and again: say each problem once
        message = f"{PROG}: {exc}" if isinstance(exc, RecordingError) else f"{PROG}: telemetry error: {exc}"
        if message not in said and len(said) < 100:
            said.add(message)
            print(message, file=sys.stderr, flush=True)

    poller = Poller(source, interval, hub.publish, hub.set_info, on_error)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(
        GpuCollector(hub, poller, processes=settings.export.processes and not args.no_processes)
    )
    try:
        server = serve(host, port, metrics_app(registry, hub))
    except OSError as exc:
        print(f"{PROG}: cannot listen on {listen}: {exc.strerror or exc}", file=sys.stderr)
        source.close()
        return 2
    poller.start()
    shown = f"[{host}]" if ":" in host else host
    print(f"{PROG}: serving http://{shown}:{server.server_port}/metrics", file=sys.stderr, flush=True)
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    stop.wait()
    server.shutdown()
    poller.stop()
    hub.use_stacks(None)
    return 0
