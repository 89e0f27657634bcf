"""The top-level command line, without the subcommands' own options: `gputui [options]`
and which subcommand a line names.  Shared by the command line (`gputui.cli`) and by what
checks a command line it will start (`gputui serve -- ARGS`), so neither imports the other."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from gputui import __version__
from gputui.commands.common import positive

#: Subcommands: modules gputui.commands.NAME with NAME, add_parser(subparsers) and
#: run(args) -> exit code, imported when named (a one-shot `gputui snapshot` pays for no other).
COMMANDS = ("record", "snapshot", "watch", "export", "diag", "stress", "cluster", "serve", "stacks")
DEMO_JOB_START = 50
"""Where `--demo-job` begins: the verdict and the spinning GPU's hint are on screen."""


def named_command(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str | None:
    """The first word of `argv` that names a subcommand and is not the value of a top-level
    option (`gputui --replay watch snapshot`: "watch" is a file)."""
    takes_value = {s for a in parser._actions if a.nargs != 0 for s in a.option_strings}
    return next(
        (a for i, a in enumerate(argv) if a in COMMANDS and (i == 0 or argv[i - 1] not in takes_value)), None
    )


def top_level_parser(
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
    source.add_argument(
        "--demo-job",
        action="store_true",
        help="play the bundled recording of a real stuck NCCL job (two H200s, rank 1 stopped)",
    )
    parser.add_argument(
        "--start",
        type=int,
        default=None,
        metavar="TICK",
        help=f"with --replay/--demo: begin at this recorded tick (default 1; --demo-job: {DEMO_JOB_START})",
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
