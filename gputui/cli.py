"""Command line: `gputui [options]` runs the monitor; subcommands run headless.

Imports are deferred so headless subcommands never pay for Textual, and the TUI starts fast.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, NoReturn

from gputui.cmdline import COMMANDS, DEMO_JOB_START, named_command
from gputui.cmdline import top_level_parser as _top_level_parser
from gputui.commands.common import load_config

if TYPE_CHECKING:
    from gputui.config import Config, LoadedConfig
    from gputui.state import SavedState
    from gputui.telemetry.recording import ReplaySource
    from gputui.telemetry.source import Source

DEMO_RECORDING = os.path.join(os.path.dirname(__file__), "data", "demo.jsonl.gz")
DEMO_JOB_RECORDING = os.path.join(os.path.dirname(__file__), "data", "demo-job.jsonl.gz")
"""A real stuck NCCL job (tests/fixtures/h200-x2-nccl, rank 1 stopped), its header carrying
the waits it is judged with (docs/recordings.md, "The bundled demos")."""

REPLAYING = ("snapshot", "watch", "export")
"""Subcommands that play a recording (their own --replay; the global --replay/--demo too)."""


def command_module(name: str) -> ModuleType:
    return importlib.import_module(f"gputui.commands.{name}")


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
            args.loaded_config = load_config(args, f"gputui {args.command}")
            args.settings = args.loaded_config.config
        return int(command.run(args))
    return run_tui(args)


def _global_source(args: argparse.Namespace) -> str | None:
    """Apply `gputui --replay F COMMAND` / `gputui --demo COMMAND` to a subcommand that
    replays (its own --replay wins); why not, for one that cannot."""
    flag = (
        "--demo"
        if args.demo
        else "--demo-job"
        if args.demo_job
        else "--replay"
        if args.replay is not None
        else None
    )
    if flag is None:
        return None
    if args.command in REPLAYING:
        if args.replay is None:
            args.replay = DEMO_JOB_RECORDING if args.demo_job else DEMO_RECORDING
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


def open_tui_replay(
    path: str, start: int, loaded: LoadedConfig
) -> tuple[ReplaySource, Config, str | None] | None:
    """A recording for the monitor, at tick `start` (`--start`), the settings to judge it
    with (the user's, and the recording's own where the user sets none) and the banner's
    words for which; None after saying why it cannot be played."""
    from gputui.commands.common import open_replay
    from gputui.recording_settings import applied

    replay = open_replay("gputui", path, start, option="--start")
    if replay is None:
        return None
    judging = applied(loaded, replay.header.settings)
    return replay, judging.config, judging.banner


def run_tui(args: argparse.Namespace) -> int:
    # What start-up makes (modules, classes, the config, the recording's first ticks) lives
    # as long as the monitor: the cyclic collector is off while it is made, and it never
    # walks it again (`gc.freeze`) once the app runs; collections then look at new objects
    # only (with it on, start-up's collections, one a full one, cost ~30 ms of the first frame).
    # The price: start-up's own cyclic garbage is frozen with it and never freed, a one-off of
    # ~490 objects, ~100 KB (`--demo`, measured with gc.DEBUG_SAVEALL); collecting it first
    # would cost a full collection, 17-21 ms, the first frame's
    gc.disable()
    try:
        return _run_tui(args)
    finally:
        gc.enable()


def _run_tui(args: argparse.Namespace) -> int:
    no_terminal = (
        not sys.stdout.isatty() and not os.environ.get("GPUTUI_ALLOW_NOTTY") and not _in_browser(args)
    )
    replay_path = DEMO_RECORDING if args.demo else DEMO_JOB_RECORDING if args.demo_job else args.replay
    live = None
    if replay_path is None:
        if no_terminal:
            return _needs_terminal()
        from gputui.telemetry.nvml.source import NvmlSource

        live = NvmlSource()
        # NVML opens, and the first sample is taken, in a forked child while the config, the
        # state and Textual load: on another core, not competing with them for the GIL
        live.prefetch(in_child=True)
    from gputui.config import load

    loaded = load(args.config)
    settings = loaded.config
    saved, state_warning, state_path = remembered(args, settings)
    judged_with = None
    if live is None:
        assert replay_path is not None
        start = args.start if args.start is not None else DEMO_JOB_START if args.demo_job else 1
        opened = open_tui_replay(str(replay_path), start, loaded)
        if opened is None:
            return 2
        if no_terminal:  # (after the file's own errors, which matter more)
            return _needs_terminal()
        replay, settings, judged_with = opened
        source: Source = replay
        interval = args.interval or replay.interval
    else:
        source = live
        interval = args.interval or saved.interval or settings.ui.interval
    from gputui.ui.app import GpuTuiApp
    from gputui.ui.leaving import CHILD_KILL_WAIT_S, kill_children

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
        judged_with=judged_with,
        freeze_start_up=True,  # (the source's own start, after the first frame: frozen too)
    )
    gc.freeze()
    gc.enable()
    try:
        app.run()
    finally:
        kill_children(CHILD_KILL_WAIT_S)  # a diagnosis or stress run left running: gone with us
        if live is not None:
            live.drop_read_ahead()  # (an app that ended before its first frame never took it)
    for error in loaded.errors:  # shown in the TUI too; repeated where it stays readable
        print(f"gputui: config: {error}", file=sys.stderr)
    if state_warning:
        print(f"gputui: {state_warning}", file=sys.stderr)
    return app.return_code or 0
