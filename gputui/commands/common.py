"""Argument types and helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gputui.config import Config, LoadedConfig
    from gputui.telemetry.model import NvmlProblem
    from gputui.telemetry.recording import ReplaySource


INSTALL = "{install}"
"""Where a subcommand's help names the command that installs its extra (`install_help`)."""


def install_help(extra: str, package: str) -> type[argparse.HelpFormatter]:
    """A help formatter that puts, where a help text says INSTALL, the command that installs
    gputui's `extra` for how this gputui was installed (gputui.extras): worked out only when
    help is shown (it reads the installed metadata).  That text is wrapped here, never inside
    a word at its hyphen (`py-` / `spy` would not paste as one command)."""

    class Hinted(argparse.RawDescriptionHelpFormatter):
        def add_text(self, text: str | None) -> None:
            if text and INSTALL in text:
                import shutil
                import textwrap

                from gputui.extras import install_hint

                text = text.replace(INSTALL, install_hint(extra, package))
                width = max(40, shutil.get_terminal_size().columns - 2)
                text = textwrap.fill(
                    " ".join(text.split()), width, break_on_hyphens=False, break_long_words=False
                )
            super().add_text(text)

    return Hinted


def positive(value: str) -> float:
    """An argparse type: a finite number greater than zero (`inf` and `nan` would overflow
    or never fire a timer)."""
    try:
        f = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not math.isfinite(f):
        raise argparse.ArgumentTypeError(f"must be a finite number: {value!r}")
    if not f > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0: {value!r}")
    return f


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP arrived: the command stops its children and exits 128+N."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Within: SIGTERM and SIGHUP raise `Interrupted` in the main thread, as Ctrl-C does
    (raises KeyboardInterrupt), so the command's cleanup runs (its children are killed)
    instead of the process dying with them left running."""

    fired: list[int] = []

    def raise_it(signum: int, frame: object) -> None:
        if not fired:  # once: a second signal must not break the cleanup the first started
            fired.append(signum)
            raise Interrupted(signum)

    previous = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError):  # not the main thread: left as it is
            previous[sig] = signal.signal(sig, raise_it)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def say(text: str) -> None:
    """A line on stderr that never fails (after a hang-up there is no terminal to write to)."""
    with contextlib.suppress(OSError, ValueError):
        print(text, file=sys.stderr, flush=True)


SIGPIPE_EXIT = 128 + signal.SIGPIPE
"""The exit status of a command whose reader left (`| head`), as SIGPIPE gives other tools."""


class ReaderGone(Exception):
    """stdout's reader has left (`| head -1`); stdout now goes to /dev/null."""


def stdout_gone() -> None:
    """Point stdout at /dev/null after a broken pipe: what is still buffered, and the
    interpreter's flush at exit, then go nowhere instead of raising again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def out(text: str) -> None:
    """A line on stdout, flushed; ReaderGone (after `stdout_gone`) when the reader left."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        stdout_gone()
        raise ReaderGone from None


def killed_line(command: str, what: str, interrupted: Interrupted, child: dict[str, Any]) -> str:
    """How an interrupted command ends: what stopped it, and any process that survived."""
    left = child.get("leftover_pids") or []
    line = f"gputui {command}: {signal.Signals(interrupted.signum).name}; the {what} process was killed"
    if left:
        line += f", but PID {', '.join(map(str, left))} survived SIGKILL"
    return line


def non_negative(value: str) -> float:
    """An argparse type: a finite number, zero or more."""
    try:
        f = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not math.isfinite(f) or f < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number, 0 or more: {value!r}")
    return f


def add_config_option(parser: argparse.ArgumentParser) -> None:
    """--config after the subcommand too (`gputui watch --config FILE`)."""
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="read settings from FILE (default $XDG_CONFIG_HOME/gputui/config.toml)",
    )


def load_config(args: argparse.Namespace, prog: str) -> LoadedConfig:
    """The config file for a headless command; its problems go to stderr (then defaults)."""
    from gputui.config import load

    loaded = load(getattr(args, "config", None))
    for error in loaded.errors:
        print(f"{prog}: config: {error}", file=sys.stderr)
    if loaded.errors and loaded.path is not None and loaded.path.exists():
        print(f"{prog}: config: using the defaults for every setting", file=sys.stderr)
    return loaded


def judging_config(prog: str, args: argparse.Namespace, source: Any) -> Config:
    """The settings to judge `source` with: the config file's (`args.loaded_config`, else
    read now), and a recording's own `[health]` waits where the file sets none, said on
    stderr (`recording_settings.applied`)."""
    from gputui.recording_settings import applied

    loaded = getattr(args, "loaded_config", None) or load_config(args, prog)
    replay = source.seekable
    judging = applied(loaded, replay.header.settings if replay is not None else None)
    if judging.note:
        print(f"{prog}: {judging.note}", file=sys.stderr)
    return judging.config


def nvml_unavailable(prog: str, problem: NvmlProblem) -> int:
    """Say why NVML cannot be used (exit status 2)."""
    code = f" (NVML error {problem.code})" if problem.code is not None else ""
    print(f"{prog}: NVML unavailable: {problem.error}{code}\n  {problem.meaning}", file=sys.stderr)
    return 2


def open_replay(
    prog: str, path: str, tick: int = 1, *, loop: bool = True, option: str = "--tick"
) -> ReplaySource | None:
    """A recording positioned so its next sample is `tick` (1-based, given as `option`); None
    after saying why."""
    from gputui.telemetry.recording import RecordingError, ReplaySource

    try:
        source = ReplaySource(path, loop=loop)
    except RecordingError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return None
    if not 1 <= tick <= len(source.ticks):
        print(f"{prog}: {option} {tick}: the recording has ticks 1 to {len(source.ticks)}", file=sys.stderr)
        return None
    source.seek(tick - 2)
    return source


def add_replay_options(parser: Any, what: str) -> None:
    parser.add_argument(
        "--replay",
        metavar="FILE",
        default=argparse.SUPPRESS,  # absent: the global `gputui --replay F COMMAND`'s, else None
        help=f"{what} from a gputui recording instead of this machine's GPUs (old recordings, tests)",
    )
