"""The environment a diagnosis or stress child gets: the user's (it is what their training
sees) without gputui's own settings, with the few that make the protocol reliable.

Which variables of another environment reach a child (`passes`): those that decide how
CUDA, torch and NCCL start and where libraries come from (`TAKEN_PREFIXES`, `TAKEN_NAMES`,
names as the libraries spell them: upper case); nothing else.  A credential (`secret`: a
name with TOKEN, SECRET, PASSWORD, KEY... as one of its words) reaches no child at all, even
from gputui's own environment: a diagnosis never needs one.  They are taken from a process's
environment (`gputui diag --pid`), and from gputui's own when the child runs as another user
(root diagnosing a user's environment: root's other variables stay with root).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from gputui.rules.multicast import MULTICAST_OFF

if TYPE_CHECKING:
    from gputui.diag.privilege import RunAs

TAKEN_PREFIXES = (
    "CUDA_", "NCCL_", "PYTORCH_", "TORCH_", "NVIDIA_", "CUDNN_", "CUBLAS_", "NVTE_", "TRITON_",
    "XLA_", "LD_", "PYTHON", "CONDA_", "OMP_", "MKL_", "HF_", "TRANSFORMERS_",
)  # fmt: skip
TAKEN_NAMES = frozenset(
    (
        "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TMPDIR", "VIRTUAL_ENV", "RANK",
        "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
        "SLURM_JOB_ID", "SLURM_PROCID",
    )
)  # fmt: skip


#: A variable with one of these as a word of its name (between underscores, any case) holds a
#: credential: it never reaches a child, whatever environment the child starts from.
SECRET_WORDS = frozenset(
    (
        "TOKEN", "TOKENS", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD", "PASSPHRASE",
        "KEY", "KEYS", "APIKEY", "CREDENTIAL", "CREDENTIALS", "AUTH", "COOKIE", "COOKIES",
    )
)  # fmt: skip


#: A word that ends with one of these holds a credential too (PGPASSWORD, HF_AUTHTOKEN).
SECRET_ENDINGS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE")
#: Words that hold a credential in a longer name, as well-known tools spell them (MYSQL_PWD,
#: GITHUB_PAT), and whole names (sshpass's SSHPASS); PWD alone is the shell's directory.
SECRET_PARTS = frozenset(("PWD", "PAT"))
SECRET_NAMES = frozenset(("SSHPASS",))


def secret(name: str) -> bool:
    """Whether the variable holds a credential (HF_TOKEN, AWS_SECRET_ACCESS_KEY, hf_token,
    PGPASSWORD, MYSQL_PWD)."""
    words = name.upper().split("_")
    if not SECRET_WORDS.isdisjoint(words) or name.upper() in SECRET_NAMES:
        return True
    if len(words) > 1 and not SECRET_PARTS.isdisjoint(words):
        return True
    return any(word.endswith(SECRET_ENDINGS) for word in words)


def passes(name: str) -> bool:
    """Whether a variable of another environment reaches the child."""
    if secret(name):
        return False
    return name in TAKEN_NAMES or name.startswith(TAKEN_PREFIXES)


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
    python: str,
    overrides: Mapping[str, str | None] | None = None,
    base: Mapping[str, str] | None = None,
    run_as: RunAs | None = None,
) -> tuple[dict[str, str], dict[str, str | None]]:
    """The child's environment: the user's (it is what their training sees) with gputui's own
    settings removed and the few that make the protocol reliable added.  A child that runs as
    another user (`run_as`) gets only the variables that pass, and that user's HOME, USER and
    LOGNAME.

    Returns (environment, changes) where changes maps each variable gputui set or removed
    (None) to its new value, for the report.  `overrides` values of None unset a variable.
    """
    env = dict(os.environ if base is None else base)
    changes: dict[str, str | None] = {}
    if run_as is not None:
        env = {name: value for name, value in env.items() if passes(name)}
        for name, value in run_as.env().items():
            if env.get(name) != value:
                env[name] = value
                changes[name] = value
    foreign = not same_interpreter(python)
    for name in list(env):
        own = name in DROPPED or name.startswith(DROPPED_PREFIXES) or (foreign and name in FOREIGN_DROPPED)
        if own or secret(name):
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
