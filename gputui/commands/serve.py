"""`gputui serve`: the whole app in a browser, through the Textual project's textual-serve,
behind a secret token (gputui.serve)."""

from __future__ import annotations

import argparse
import os
import shlex
import socket
import sys
from typing import Any

NAME = "serve"
PROG = "gputui serve"
RESERVED = ("--serve-session", "--serve-parent", "--diag-python")
"""gputui's options that only serve may give a session."""


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        NAME,
        help="serve gputui in a web browser (textual-serve)",
        description="Serve gputui as a web page: each browser that opens the printed URL (it holds a "
        "secret token) gets its own gputui, readonly unless --allow-signals.  Arguments after -- are "
        "gputui's own: `gputui serve -- --demo`, `gputui serve -- cluster --prometheus URL`.  Listens "
        "on 127.0.0.1 only unless --allow-remote is given.",
        epilog="Example:  gputui serve --listen 127.0.0.1:8080 -- --demo",
    )
    p.add_argument(
        "--listen",
        metavar="HOST:PORT",
        default="127.0.0.1:8080",
        help="address to serve on (default 127.0.0.1:8080; port 0 picks a free one)",
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback --listen address: the token is then all that protects the port "
        "(prefer an SSH tunnel or a TLS proxy)",
    )
    p.add_argument(
        "--public-url", metavar="URL", default=None, help="the URL browsers reach it at, behind a proxy"
    )
    p.add_argument(
        "--allow-origin",
        metavar="URL",
        action="append",
        default=[],
        help="also accept pages and websockets from this origin (a reverse proxy); repeatable",
    )
    p.add_argument(
        "--token-file",
        metavar="PATH",
        default=None,
        help="read the token from PATH (yours, not writable by others) instead of making a new one "
        "(or set $GPUTUI_SERVE_TOKEN)",
    )
    p.add_argument(
        "--allow-signals",
        action="store_true",
        help="let the page signal (kill) processes: anyone with the token can then kill your processes",
    )
    p.add_argument(
        "--python",
        metavar="PATH",
        default=None,
        help="the Python the Diagnostics tab diagnoses (the page cannot choose another)",
    )
    p.add_argument(
        "--max-sessions",
        type=int,
        default=4,
        metavar="N",
        help="browser sessions at once (default 4; each is a gputui process)",
    )
    p.add_argument("app_args", nargs=argparse.REMAINDER, metavar="-- GPUTUI-ARGS", help="gputui's arguments")


def app_command(app_args: list[str], *, signals: bool = False, python: str | None = None) -> str:
    """The shell command textual-serve runs for each browser: this Python, this gputui, in
    serve's session mode.  `exec`: the session is serve's own child (it dies with serve)."""
    rest = app_args[1:] if app_args[:1] == ["--"] else app_args
    mode = ["--serve-session", "signals" if signals else "readonly", "--serve-parent", str(os.getpid())]
    if python is not None:
        mode += ["--diag-python", python]
    return "exec " + shlex.join([sys.executable, "-m", "gputui", *mode, *rest])


def app_args_problem(app_args: list[str]) -> str | None:
    rest = app_args[1:] if app_args[:1] == ["--"] else app_args
    for arg in rest:
        if arg.split("=", 1)[0] in RESERVED:
            return f"{arg.split('=', 1)[0]} is serve's to give"
    from gputui.cmdline import named_command, top_level_parser

    command = named_command(top_level_parser(), rest)
    if command not in (None, "cluster"):
        return f"`{command}` is no app: serve runs the monitor (`-- --demo`) or `-- cluster ...`"
    return None


def python_problem(path: str) -> str | None:
    if not os.path.isabs(path):
        return "give an absolute path"
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        return "not an executable file"
    return None


def run(args: argparse.Namespace) -> int:
    from gputui.export.address import checked_listen
    from gputui.serve.auth import TOKEN_ENV, Gate, TokenError, choose_token, host_port, secret_path

    def fail(message: str) -> int:
        print(f"{PROG}: {message}", file=sys.stderr)
        return 2

    try:
        host, port = checked_listen(
            args.listen,
            args.allow_remote,
            "the token would then be all that protects the page (use an SSH tunnel: "
            "ssh -L 8080:127.0.0.1:8080 HOST)",
        )
    except ValueError as exc:
        return fail(f"--listen: {exc}")
    if not 1 <= args.max_sessions <= 64:
        return fail(f"--max-sessions: 1 to 64, got {args.max_sessions}")
    problem = app_args_problem(args.app_args)
    if problem is not None:
        return fail(problem)
    if args.python is not None and (problem := python_problem(args.python)) is not None:
        return fail(f"--python {args.python}: {problem}")
    try:
        token, origin = choose_token(args.token_file)
    except TokenError as exc:
        return fail(str(exc))
    os.environ.pop(TOKEN_ENV, None)  # sessions (and what they run) never see it
    try:
        from gputui.serve import upstream
        from gputui.serve.server import GuardedServer
        from gputui.serve.sessions import Sessions
    except ImportError:
        from gputui.extras import install_hint

        return fail(f"the textual-serve package is missing: {install_hint('serve', 'textual-serve')}")
    if (problem := upstream.probe()) is not None:
        return fail(
            f"textual-serve {upstream.version()} does not fit: {problem} "
            f"(gputui serve works with textual-serve {upstream.TESTED})"
        )
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.create_server((host, port), family=family, backlog=64)
    except OSError as exc:
        return fail(f"--listen {args.listen}: {exc.strerror or exc}")
    port = sock.getsockname()[1]
    try:
        gate = Gate.for_listen(token, host, port, args.allow_origin, args.public_url)
    except ValueError as exc:
        sock.close()
        return fail(f"--allow-origin/--public-url: {exc}")
    command = app_command(args.app_args, signals=args.allow_signals, python=args.python)
    server = GuardedServer(
        command, sock, gate, Sessions.capped(args.max_sessions), public_url=args.public_url
    )
    shown = socket.gethostname() if host in ("0.0.0.0", "::") else host  # noqa: S104
    base = args.public_url.rstrip("/") if args.public_url else f"http://{host_port(shown, port)}"
    print(f"{PROG}: open {base}{secret_path(token)}", file=sys.stderr)
    if origin != "new":
        print(f"{PROG}: the token comes from {origin}", file=sys.stderr)
    if args.allow_remote:
        print(
            f"{PROG}: --allow-remote: the token is ALL that protects this port, and it crosses the network "
            "in clear text: prefer an SSH tunnel (ssh -L) or a TLS proxy (--public-url https://...)",
            file=sys.stderr,
        )
    if args.allow_signals:
        print(f"{PROG}: --allow-signals: whoever has the token can kill your processes", file=sys.stderr)
    sys.stderr.flush()
    server.serve()
    return 0
