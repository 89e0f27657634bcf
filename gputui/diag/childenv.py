"""The environment a diagnosis or stress child gets: the user's (it is what their training
sees) without gputui's own settings, with the few that make the protocol reliable."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from gputui.rules.multicast import MULTICAST_OFF

#: Set in every child: unbuffered UTF-8 output, and a Python traceback on a fatal signal
#: (so a segfault in a CUDA library shows where it happened in the stderr tail).
CHILD_SETTINGS = {
    "PYTHONUNBUFFERED": "1",
    "PYTHONIOENCODING": "utf-8",
    "PYTHONFAULTHANDLER": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}
#: Variables of gputui's own process that must not leak into the diagnosed interpreter.
DROPPED = ("PYTHONSTARTUP", "PYTHONINSPECT")
DROPPED_PREFIXES = ("GPUTUI_", "TEXTUAL")
#: Dropped when the child is another interpreter than gputui's: they point at gputui's Python.
FOREIGN_DROPPED = ("PYTHONHOME", "PYTHONEXECUTABLE", "__PYVENV_LAUNCHER__")


def child_env(
    python: str, overrides: Mapping[str, str | None] | None = None, base: Mapping[str, str] | None = None
) -> tuple[dict[str, str], dict[str, str | None]]:
    """The child's environment: the user's (it is what their training sees) with gputui's own
    settings removed and the few that make the protocol reliable added.

    Returns (environment, changes) where changes maps each variable gputui set or removed
    (None) to its new value, for the report.  `overrides` values of None unset a variable.
    """
    env = dict(os.environ if base is None else base)
    changes: dict[str, str | None] = {}
    foreign = not same_interpreter(python)
    for name in list(env):
        if name in DROPPED or name.startswith(DROPPED_PREFIXES) or (foreign and name in FOREIGN_DROPPED):
            del env[name]
            changes[name] = None
    for name, setting in {**CHILD_SETTINGS, **MULTICAST_OFF}.items():
        if env.get(name) != setting:
            env[name] = setting
            changes[name] = setting
    for name, override in (overrides or {}).items():
        if override is None:
            env.pop(name, None)
        else:
            env[name] = override
        changes[name] = override
    return env, changes


def own_settings(env: Mapping[str, str]) -> list[str]:
    """The variables of `env` that hold gputui's own settings for its children (not the user's)."""
    return [name for name, value in {**CHILD_SETTINGS, **MULTICAST_OFF}.items() if env.get(name) == value]


def same_interpreter(python: str) -> bool:
    """Whether `python` is gputui's own interpreter: the same binary and the same virtual
    environment (two venvs share their base binary, each bin/python a link to it, and are
    still two interpreters)."""
    try:
        if not os.path.samefile(python, sys.executable):
            return False
    except OSError:
        return False
    return _venv_of(python) == _venv_of(sys.executable)


def _venv_of(python: str) -> str | None:
    """The virtual environment `python` starts in (Python's own rule: a pyvenv.cfg beside the
    executable or one directory up, found from the path as given, not its link target)."""
    here = os.path.dirname(os.path.abspath(python))
    for d in (here, os.path.dirname(here)):
        if os.path.isfile(os.path.join(d, "pyvenv.cfg")):
            return d
    return None
