"""Real interpreters for the diagnosis tests: one with the CPU build of torch, bare venvs, and
interpreters whose `import torch` raises, hangs or segfaults (a package named torch in a
temporary directory put first on PYTHONPATH)."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def torch_python() -> str | None:
    """An interpreter with torch installed: the test venv itself (the README's test command
    installs torch there, the CPU or the CUDA build), else $GPUTUI_TEST_TORCH_PYTHON."""
    candidates = [sys.executable, os.environ.get("GPUTUI_TEST_TORCH_PYTHON")]
    for candidate in candidates:
        if not candidate or not os.path.exists(candidate):
            continue
        if candidate == sys.executable:
            if importlib.util.find_spec("torch") is not None:  # found, not imported
                return candidate
            continue
        probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"
        if subprocess.run([candidate, "-c", probe], check=False, timeout=60).returncode == 0:
            return candidate
    return None


@functools.cache
def torch_cuda_build(python: str) -> str | None:
    """The CUDA version `python`'s torch was built for (torch.version.cuda), None for the
    CPU build: what the diagnosis of that interpreter must report."""
    code = "import torch, sys; sys.stdout.write(torch.version.cuda or '')"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    return out.stdout.strip() or None


@functools.cache
def torch_sees_a_gpu(python: str) -> bool:
    """Whether torch in `python` can use a GPU here (a CUDA build and a working driver)."""
    code = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    return subprocess.run([python, "-c", code], capture_output=True, check=False, timeout=300).returncode == 0


@functools.cache
def driver_present() -> bool:
    """Whether NVML initialises on this machine (a GPU driver is installed and running):
    the diagnosis's driver checks and the exporter's start depend on it.  Asked in a child,
    so the test process never initialises NVML."""
    code = "import pynvml; pynvml.nvmlInit(); pynvml.nvmlShutdown()"
    return (
        subprocess.run([sys.executable, "-c", code], capture_output=True, check=False, timeout=120).returncode
        == 0
    )


def need_torch_python() -> str:
    python = torch_python()
    if python is None:
        message = "no interpreter with torch: run the README's test command (it installs torch==2.13.0)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return python


def make_bare_venv(path: Path) -> str:
    """A venv without pip or torch: the 'torch is not installed' interpreter."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(path)
    return str(path / "bin" / "python")


def fake_torch(directory: Path, body: str) -> Path:
    """A package named torch whose import runs `body`; put `directory` first on PYTHONPATH."""
    pkg = directory / "torch"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(body)
    return directory


BROKEN = "raise ImportError('libcudnn.so.9: cannot open shared object file: No such file or directory')\n"
HANGS = "import time\ntime.sleep(600)\n"
SEGFAULTS = "import ctypes\nctypes.string_at(0)\n"


def gputui_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120):
    full_env = dict(os.environ)
    env = dict(env or {})
    # gputui from this checkout; an extra PYTHONPATH (a fake torch) goes first, for the child
    paths = [env.pop("PYTHONPATH", None), str(ROOT), full_env.get("PYTHONPATH")]
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    full_env.update(env)
    for key in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        full_env.pop(key, None)
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=full_env,
        stdin=subprocess.DEVNULL,
    )


def run_probe_checks(python: str, env: dict[str, str | None], *args: str) -> dict[str, dict[str, Any]]:
    """Run the diagnosis child for real (`python PROBE --no-nccl`) with these variables set (None:
    unset), and return its check events by id."""
    from gputui.diag import PROBE
    from gputui.diag.childenv import child_env

    child, _ = child_env(python, env)
    out = subprocess.run(
        [python, str(PROBE), "--no-nccl", *args],
        env=child,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {e["id"]: e for e in events if e.get("event") == "check"}
