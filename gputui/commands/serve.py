"""`gputui serve`: the whole app in a browser, through the Textual project's textual-serve."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import Any

NAME = "serve"
PROG = "gputui serve"


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        NAME,
        help="serve gputui in a web browser (textual-serve)",
        description="Serve gputui as a web page: each browser that opens it gets its own gputui "
        "(a new process, like a terminal would run).  Arguments after -- are gputui's own: "
        "`gputui serve -- --demo`, `gputui serve -- cluster --prometheus URL`.  Listens on "
        "127.0.0.1 only unless --allow-remote is given.",
        epilog="Example:  gputui serve --listen 127.0.0.1:8080 -- --readonly",
    )
    p.add_argument(
        "--listen",
        metavar="HOST:PORT",
        default="127.0.0.1:8080",
        help="address to serve on (default 127.0.0.1:8080)",
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback --listen address (anyone who can reach it sees your GPUs and can "
        "use every key, kill included unless you pass -- --readonly)",
    )
    p.add_argument(
        "--public-url", metavar="URL", default=None, help="the URL browsers reach it at, behind a proxy"
    )
    p.add_argument("app_args", nargs=argparse.REMAINDER, metavar="-- GPUTUI-ARGS", help="gputui's arguments")


def in_browser() -> bool:
    """True inside a textual-serve session: the app talks to a web page through pipes, and
    the page (not a terminal) ends it."""
    return os.environ.get("TEXTUAL_DRIVER", "").endswith(":WebDriver")


def app_command(app_args: list[str]) -> str:
    """The shell command textual-serve runs for each browser: this Python, this gputui."""
    rest = app_args[1:] if app_args[:1] == ["--"] else app_args
    return shlex.join([sys.executable, "-m", "gputui", *rest])


def run(args: argparse.Namespace) -> int:
    from gputui.export.address import checked_listen

    try:
        host, port = checked_listen(
            args.listen,
            args.allow_remote,
            "the page gives whoever opens it gputui's keys (pass -- --readonly, put it behind an "
            "authenticating proxy)",
        )
    except ValueError as exc:
        print(f"{PROG}: --listen: {exc}", file=sys.stderr)
        return 2
    if port == 0:
        print(f"{PROG}: --listen: give a port (the page's links name it)", file=sys.stderr)
        return 2
    try:
        from textual_serve.server import Server
    except ImportError:
        print(
            f"{PROG}: the textual-serve package is missing: pip install 'gputui[serve]' "
            "(or pip install textual-serve)",
            file=sys.stderr,
        )
        return 2
    shown = f"[{host}]" if ":" in host else host
    server = Server(
        app_command(args.app_args), host=host, port=port, title="gputui", public_url=args.public_url
    )
    print(f"{PROG}: serving http://{shown}:{port}/", file=sys.stderr, flush=True)
    server.serve()
    return 0
