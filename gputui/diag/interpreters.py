"""Which Python interpreters could be the user's training environment (for the picker).

Nothing is executed here: candidates are found by looking at the environment variables and
the usual conda/venv places, so listing them is instant.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Interpreter:
    path: str
    """The python executable."""
    label: str
    """Where it was found: "active venv", "conda env 'x'", "python3 on PATH", ..."""


def _python_in(prefix: str | Path) -> str | None:
    for name in ("bin/python", "bin/python3"):
        candidate = Path(prefix) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def conda_env_dirs(env: Mapping[str, str], home: Path) -> list[Path]:
    """Directories that hold conda environments (each subdirectory is one)."""
    dirs: list[Path] = []
    for entry in env.get("CONDA_ENVS_PATH", "").split(os.pathsep) + env.get("CONDA_ENVS_DIRS", "").split(
        os.pathsep
    ):
        if entry:
            dirs.append(Path(entry).expanduser())
    for install in ("anaconda3", "miniconda3", "miniforge3", "mambaforge", "micromamba", ".conda"):
        dirs.append(home / install / "envs")
    dirs.append(Path("/opt/conda/envs"))
    for key in ("CONDA_PREFIX", "CONDA_EXE", "MAMBA_ROOT_PREFIX"):
        value = env.get(key)
        if not value:
            continue
        root = Path(value)
        if key == "CONDA_EXE" or (key == "CONDA_PREFIX" and root.parent.name == "envs"):
            root = root.parent.parent
        dirs.append(root / "envs")
    return dirs


def find_interpreters(env: Mapping[str, str] | None = None, home: Path | None = None) -> list[Interpreter]:
    """Candidates, most likely first, without duplicates."""
    env = os.environ if env is None else env
    home = Path.home() if home is None else home
    out: list[Interpreter] = []
    seen: set[str] = set()

    def add(path: str | None, label: str) -> None:
        if not path:
            return
        key = os.path.abspath(path)
        if key in seen:
            return
        seen.add(key)
        out.append(Interpreter(key, label))

    if env.get("VIRTUAL_ENV"):
        add(_python_in(env["VIRTUAL_ENV"]), f"active venv ({env['VIRTUAL_ENV']})")
    if env.get("CONDA_PREFIX"):
        name = env.get("CONDA_DEFAULT_ENV") or Path(env["CONDA_PREFIX"]).name
        add(_python_in(env["CONDA_PREFIX"]), f"active conda env '{name}'")
    add(sys.executable, "gputui's own interpreter")
    for name in ("python3", "python"):
        found = shutil.which(name, path=env.get("PATH"))
        add(found, f"{name} on PATH")
    for envs_dir in conda_env_dirs(env, home):
        try:
            children = sorted(envs_dir.iterdir())
        except OSError:
            continue
        for child in children:
            add(_python_in(child), f"conda env '{child.name}'")
        base = envs_dir.parent
        if (base / "conda-meta").is_dir():
            add(_python_in(base), f"conda base ({base})")
    return out


def default_interpreter(env: Mapping[str, str] | None = None) -> str:
    """The environment the user works in: the active venv, else the active conda env, else
    the interpreter running gputui."""
    env = os.environ if env is None else env
    for key in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        if env.get(key):
            python = _python_in(env[key])
            if python:
                return python
    return sys.executable
