"""Command line: `gputui [options]` runs the monitor; subcommands run headless.

Imports are deferred so headless subcommands never pay for Textual, and the TUI starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, NoReturn

from gputui import __version__
from gputui.commands.common import load_config, positive

if TYPE_CHECKING:
    from gputui.config import Config
    from gputui.state import SavedState
    from gputui.telemetry.source import Source

DEMO_RECORDING = os.path.join(os.path.dirname(__file__), "data", "demo.jsonl.gz")

#: Subcommands: modules gputui.commands.NAME with NAME, add_parser(subparsers) and
#: run(args) -> exit code, imported when named (a one-shot `gputui snapshot` pays for no other).
COMMANDS = ("record", "snapshot", "watch", "export", "diag", "stress", "cluster", "serve", "stacks")
REPLAYING = ("snapshot", "watch", "export")
"""Subcommands that play a recording (their own --replay; the global --replay/--demo too)."""


def command_module(name: str) -> ModuleType:
    return importlib.import_module(f"gputui.commands.{name}")


def named_command(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str | None:
    """The first word of `argv` that names a subcommand and is not the value of a top-level
    option (`gputui --replay watch snapshot`: "watch" is a file)."""
    takes_value = {s for a in parser._actions if a.nargs != 0 for s in a.option_strings}
    return next(
        (a for i, a in enumerate(argv) if a in COMMANDS and (i == 0 or argv[i - 1] not in takes_value)), None
    )


def _top_level_parser(
    kind: type[argparse.ArgumentParser] = argparse.ArgumentParser,
) -> argparse.ArgumentParser:
    parser = kind(
        prog="gputui",
        description="A terminal GPU monitor: every GPU live, its processes, and the host.",
        epilog="Run `gputui COMMAND --help` for a subcommand.  Keys inside the monitor: press ?",
    )
    parser.add_argument("--version", action="version", version=f"gputui {__version__}")
    parser.add_argument(
        "-i",
        "--interval",
        type=positive,
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
    parser.add_argument(
        "--readonly",
        action="store_true",
        default=None,
        help="never signal processes: the kill keys are hidden and disabled",
    )
    parser.add_argument(
        "--no-remember",
        dest="remember",
        action="store_false",
        default=None,
        help="neither restore nor save the interval, layout, sort and filters "
        "($XDG_STATE_HOME/gputui/state.json)",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help="read settings from FILE (default $XDG_CONFIG_HOME/gputui/config.toml)",
    )
    parser.add_argument(
        "--print-config", action="store_true", help="print the default settings, with comments, and exit"
    )
    # a browser session of `gputui serve` (set by serve on the session's command line, which
    # the page cannot touch): readonly unless "signals", no program the page could name
    parser.add_argument(
        "--serve-session", choices=("readonly", "signals"), default=None, help=argparse.SUPPRESS
    )
    parser.add_argument("--serve-parent", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--diag-python", default=None, help=argparse.SUPPRESS)
    return parser


def _add_commands(parser: argparse.ArgumentParser, only: str | None) -> None:
    """Every subcommand, or `only` that one (the others are not imported): parsing a command
    line that names it gives the same result either way."""
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS if only is None else (only,):
        command_module(name).add_parser(sub)


class _NotPlain(Exception):
    """The line is not a plain `gputui [options]` (see `_parse`)."""


class _PlainParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _NotPlain(message)


def _parse(argv: list[str]) -> argparse.Namespace:
    """The parsed line.  A plain `gputui [options]`, the monitor, is parsed without the
    subcommands' parsers (building them imports every subcommand's module); anything else,
    help, or a line that does not parse so, gets them all, so help, errors and usage list
    every subcommand as before."""
    plain = _top_level_parser(_PlainParser)
    command = named_command(plain, argv)
    if command is None and not any(a.startswith(("-h", "--h")) for a in argv):
        try:
            args = plain.parse_args(argv)
        except _NotPlain:
            pass  # parse again below, with every subcommand: argparse says what is wrong
        else:
            args.command = None
            return args
    parser = _top_level_parser()
    _add_commands(parser, command)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:  # `gputui ... | head -1`: the reader is done; end as SIGPIPE would
        from gputui.commands.common import SIGPIPE_EXIT, stdout_gone

        stdout_gone()
        return SIGPIPE_EXIT


def _main(argv: Sequence[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # only the subcommand named is imported and registered (`gputui --help` and a mistyped
    # command still see them all)
    args = _parse(argv)
    if args.serve_session is not None and args.serve_parent is not None:
        from gputui.rules.lifeline import die_with_parent

        if not die_with_parent(args.serve_parent):
            return 0  # serve is gone already: so is this session's browser
    if args.print_config:
        from gputui.config import default_text

        sys.stdout.write(default_text())
        return 0
    if args.command is not None:
        problem = _global_source(args)
        if problem is not None:
            print(f"gputui {args.command}: {problem}", file=sys.stderr)
            return 2
        command = command_module(args.command)
        if getattr(command, "USES_CONFIG", False):
            args.settings = load_config(args, f"gputui {args.command}").config
        return int(command.run(args))
    return run_tui(args)


def _global_source(args: argparse.Namespace) -> str | None:
    """Apply `gputui --replay F COMMAND` / `gputui --demo COMMAND` to a subcommand that
    replays (its own --replay wins); why not, for one that cannot."""
    flag = "--demo" if args.demo else "--replay" if args.replay is not None else None
    if flag is None:
        return None
    if args.command in REPLAYING:
        if args.demo and args.replay is None:
            args.replay = DEMO_RECORDING
        return None
    if args.command == "serve":
        return f"{flag} goes after --: gputui serve -- {flag}{' FILE' if flag == '--replay' else ''}"
    if args.command == "cluster":
        return f"{flag} does not apply: it shows what Prometheus or the exporters serve"
    if args.command == "stacks":
        return f"{flag} does not apply: it reads this machine's processes"
    return f"{flag} does not apply: it works on this machine's GPUs"


def remembered(args: argparse.Namespace, settings: Config) -> tuple[SavedState, str | None, Path | None]:
    """(what the last run left, a one-line warning about its file, where to save at exit):
    nothing read and nowhere to save with --no-remember or `remember = false`."""
    from gputui import state

    remember = settings.ui.remember if args.remember is None else args.remember
    if not remember:
        return state.SavedState(), None, None
    saved, warning = state.load()
    return saved, warning, state.default_path()


def is_readonly(args: argparse.Namespace, settings: Config) -> bool:
    """--readonly, else the config file's `readonly`; always in a readonly browser session of
    `gputui serve` (a config's `readonly = false` cannot undo it)."""
    if args.serve_session == "readonly":
        return True
    return bool(settings.ui.readonly if args.readonly is None else args.readonly)


def _needs_terminal() -> int:
    print("gputui: the monitor needs a terminal; for headless output use `gputui record`", file=sys.stderr)
    return 2


def _in_browser(args: argparse.Namespace) -> bool:
    """A browser session of `gputui serve` (no terminal; the page ends it)."""
    from gputui.serve.child import in_browser  # (asked only without a terminal)

    return args.serve_session is not None or in_browser()


def run_tui(args: argparse.Namespace) -> int:
    no_terminal = (
        not sys.stdout.isatty() and not os.environ.get("GPUTUI_ALLOW_NOTTY") and not _in_browser(args)
    )
    replay_path = DEMO_RECORDING if args.demo else args.replay
    live = None
    if replay_path is None:
        if no_terminal:
            return _needs_terminal()
        from gputui.telemetry.nvml.source import NvmlSource

        live = NvmlSource()
        live.prefetch()  # NVML opens on a thread while the config, the state and Textual load
    from gputui.config import load

    loaded = load(args.config)
    settings = loaded.config
    saved, state_warning, state_path = remembered(args, settings)
    if live is None:
        from gputui.telemetry.recording import RecordingError, ReplaySource

        assert replay_path is not None
        try:
            replay = ReplaySource(replay_path)
        except RecordingError as exc:
            print(f"gputui: {exc}", file=sys.stderr)
            return 2
        if not 1 <= args.start <= len(replay.ticks):
            print(
                f"gputui: --start {args.start}: the recording has ticks 1 to {len(replay.ticks)}",
                file=sys.stderr,
            )
            return 2
        if no_terminal:  # (after the file's own errors, which matter more)
            return _needs_terminal()
        replay.seek(args.start - 2)
        source: Source = replay
        interval = args.interval or replay.interval
    else:
        source = live
        interval = args.interval or saved.interval or settings.ui.interval
    from gputui.ui.app import CHILD_KILL_WAIT_S, GpuTuiApp, kill_children

    app = GpuTuiApp(
        source=source,
        interval=interval,
        demo=args.demo,
        readonly=is_readonly(args, settings),
        default_sort=settings.ui.default_sort,
        config=settings,
        config_errors=loaded.errors,
        saved=saved,
        state_path=state_path,
        state_warning=state_warning,
        serve_session=args.serve_session is not None,
        diag_python=args.diag_python,
    )
    try:
        app.run()
    finally:
        kill_children(CHILD_KILL_WAIT_S)  # a diagnosis or stress run left running: gone with us
    for error in loaded.errors:  # shown in the TUI too; repeated where it stays readable
        print(f"gputui: config: {error}", file=sys.stderr)
    if state_warning:
        print(f"gputui: {state_warning}", file=sys.stderr)
    return app.return_code or 0
