"""What decides which libraries and which torch get loaded here: the dynamic loader's and
Python's variables, a torch that shadows the installed one, and the CUDA variables that change
how kernels are loaded or how torch decides that CUDA is available.  Named even when harmless:
they explain why the same code behaves differently in another shell."""

from __future__ import annotations

import importlib.util
import os
import site
import sys
import time

from .protocol import check
from .registry import declare

#: (variable, what it does): each one set is named in the result.
LOADER_VARIABLES = (
    ("LD_PRELOAD", "loaded into every process before any other library"),
    ("LD_AUDIT", "a loader audit library: sees and may redirect every library load"),
    ("LD_LIBRARY_PATH", "searched for shared libraries (CUDA, cuDNN, NCCL) before the system's"),
    ("PYTHONHOME", "where Python looks for its own standard library and site-packages"),
    ("PYTHONPATH", "searched for Python packages (torch too) before site-packages"),
    ("PYTHONPLATLIBDIR", "the name of the platform library directory Python uses"),
    ("PYTHONNOUSERSITE", "the user's site-packages (~/.local) is not used"),
    ("PYTHONUSERBASE", "where the user's site-packages live"),
    ("PYTHONSAFEPATH", "the current directory / script directory is not put first on sys.path"),
    ("CUDA_HOME", "the CUDA toolkit used to build extensions (nvcc, headers), not torch's own runtime"),
    ("CUDA_PATH", "the CUDA toolkit used to build extensions (nvcc, headers), not torch's own runtime"),
    ("TORCH_CUDA_ARCH_LIST", "the GPU architectures CUDA extensions are compiled for (builds only)"),
    ("CUDA_MODULE_LOADING", "LAZY (the default) loads kernels on first use; EAGER loads all at start"),
    ("CUDA_FORCE_PTX_JIT", "1: ignore the compiled kernels and JIT-compile PTX instead"),
    ("CUDA_DISABLE_PTX_JIT", "1: never JIT-compile PTX"),
    ("PYTORCH_NVML_BASED_CUDA_CHECK", "1: torch.cuda.is_available() asks NVML instead of initialising CUDA"),
    ("CUDA_MPS_PIPE_DIRECTORY", "CUDA goes through the MPS server there (it renumbers the visible GPUs)"),
    ("CUDA_MPS_LOG_DIRECTORY", "the MPS server's logs"),
)


def _on(env, name):
    return env.get(name, "0").strip() not in ("", "0")


def torch_origin():
    """Where `import torch` would load from, found without importing it (None: nowhere)."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    locations = list(spec.submodule_search_locations or [])
    if locations:
        return os.path.realpath(locations[0])
    return os.path.realpath(spec.origin) if spec.origin else None


def _under(path, directory):
    directory = os.path.realpath(directory)
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def shadowing(env, origin):
    """Why the torch that would load is not the environment's own, or None."""
    if origin is None:
        return None
    for entry in [e for e in env.get("PYTHONPATH", "").split(os.pathsep) if e]:
        if _under(origin, entry):
            return "torch comes from %s, a PYTHONPATH entry, not this environment's packages" % origin
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user and _under(origin, user):
        return (
            "torch comes from the user's site-packages (%s), which comes before this environment's" % origin
        )
    return None


@declare("env.loader", "environment", "What decides which libraries and torch load")
def loader(p):
    t0 = time.monotonic()
    env = os.environ
    named = [(n, env[n], what) for n, what in LOADER_VARIABLES if n in env]
    origin = torch_origin()
    cwd_torch = os.path.join(os.getcwd(), "torch")
    ev = {
        "variables": {n: v for n, v, _ in named},
        "torch_origin": origin,
        "sys_path": list(sys.path),
        "user_site": site.getusersitepackages() if site.ENABLE_USER_SITE else None,
        "user_site_enabled": bool(site.ENABLE_USER_SITE),
        "torch_in_current_directory": os.path.exists(cwd_torch),
    }
    warn, cause, fix = [], None, []

    def flag(text, why, *steps):
        nonlocal cause
        warn.append(text)
        cause = cause or why
        fix.extend(s for s in steps if s not in fix)

    shadow = shadowing(env, origin)
    if shadow:
        flag(shadow, "torch-shadowed", "unset PYTHONPATH   # or remove the entry that holds torch")
    if ev["torch_in_current_directory"] and not _on(env, "PYTHONSAFEPATH"):
        flag(
            "a torch in the current directory (%s) shadows the installed one for `python -c`, `python -m` "
            "and scripts run from here" % cwd_torch,
            "torch-shadowed",
        )
    if env.get("LD_PRELOAD", "").strip():
        flag("LD_PRELOAD=%s is loaded into every process" % env["LD_PRELOAD"], "ld-preload")
    if env.get("LD_AUDIT", "").strip():
        flag("LD_AUDIT=%s sees every library load" % env["LD_AUDIT"], "ld-preload")
    if "PYTHONHOME" in env:
        flag("PYTHONHOME=%s decides where Python's libraries come from" % env["PYTHONHOME"], "pythonhome")
    if _on(env, "CUDA_FORCE_PTX_JIT"):
        flag(
            "CUDA_FORCE_PTX_JIT=%s: every kernel is JIT-compiled from PTX" % env["CUDA_FORCE_PTX_JIT"],
            "ptx-jit-forced",
        )
    if _on(env, "CUDA_DISABLE_PTX_JIT"):
        flag(
            "CUDA_DISABLE_PTX_JIT=%s: a GPU without compiled kernels in torch gets 'no kernel image'"
            % env["CUDA_DISABLE_PTX_JIT"],
            "ptx-jit-disabled",
        )
    if _on(env, "PYTORCH_NVML_BASED_CUDA_CHECK"):
        flag(
            "PYTORCH_NVML_BASED_CUDA_CHECK=%s: is_available() can say True and CUDA still fail"
            % env["PYTORCH_NVML_BASED_CUDA_CHECK"],
            "nvml-based-check",
        )
    others = ["%s=%s" % (n, v) for n, v, _ in named if not any(("%s=" % n) in w for w in warn)]
    if warn:
        summary = "; ".join(warn) + ("; also set: " + ", ".join(others) if others else "")
    elif others:
        summary = "set: " + ", ".join(others)
    else:
        summary = "nothing set that changes which libraries or which torch load"
    if origin and not shadow:
        summary += "; torch would load from %s" % origin
    note = "; ".join("%s: %s" % (n, what) for n, _, what in named) or None
    check(
        "env.loader",
        "environment",
        "What decides which libraries and torch load",
        "WARN" if warn else "PASS",
        summary,
        ev,
        cause=cause,
        fix=fix,
        note=note,
        t0=t0,
    )
    return True
