"""What a command line is, read from its argv: the readable form the Processes tab shows
(the script and its arguments first, the interpreter after), and whether it is the launcher
of a distributed job.  Pure functions of the argv; no I/O."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence

_PYTHON = re.compile(r"(python|pypy)(\d+(\.\d+)?)?([dmu]*)")
#: Python options that take a value (`-X dev`, `-W ignore`, `--check-hash-based-pycs x`).
_PY_OPTS_WITH_VALUE = frozenset({"-X", "-W", "--check-hash-based-pycs"})


def is_python(argv0: str) -> bool:
    return bool(_PYTHON.fullmatch(os.path.basename(argv0)))


def python_target(argv: Sequence[str]) -> tuple[str, str | None, int] | None:
    """For a Python command line: (interpreter basename, "-m" or None, index of the script or
    module in argv); None when argv is not `python ... script|-m module` (e.g. `-c`, or
    a bare interpreter)."""
    if not argv or not is_python(argv[0]):
        return None
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "-m":
            return (os.path.basename(argv[0]), "-m", i + 1) if i + 1 < len(argv) else None
        if a.startswith("-m") and len(a) > 2:  # -mtorch.distributed.run
            return None
        if a == "-c" or (a.startswith("-c") and len(a) > 2):
            return None
        if a == "--":
            return (os.path.basename(argv[0]), None, i + 1) if i + 1 < len(argv) else None
        if a in _PY_OPTS_WITH_VALUE:
            i += 2
            continue
        if a.startswith("-") and a != "-":
            i += 1
            continue
        return os.path.basename(argv[0]), None, i
    return None


def _quote(arg: str) -> str:
    return shlex.quote(arg) if arg == "" or any(ch.isspace() or ch in "'\"" for ch in arg) else arg


def readable_command(argv: Sequence[str] | None) -> str | None:
    """The command with what identifies it first: `train.py --lr 3e-4 (python3)`,
    `torch.distributed.run --nproc-per-node 4 train.py (python3 -m)`, `torchrun ...` for a
    console script run by Python, `mpirun -np 4 ./a.out` (the executable's base name) for
    anything else.  None for an empty command line.  Not escaped: pass it through the
    literal filter."""
    if not argv:
        return None
    target = python_target(argv)
    if target is not None:
        interp, dash_m, at = target
        head = argv[at] if dash_m else os.path.basename(argv[at])
        rest = " ".join(_quote(a) for a in argv[at + 1 :])
        where = f"({interp} -m)" if dash_m else f"({interp})"
        return " ".join(x for x in (head, rest, where) if x)
    head = os.path.basename(argv[0]) or argv[0]
    return " ".join(_quote(a) for a in [head, *argv[1:]])


# --------------------------------------------------------------------------------------
# launchers
# --------------------------------------------------------------------------------------

#: Executables (base names) that launch the ranks of a distributed job.
LAUNCHER_EXES: dict[str, str] = {
    "torchrun": "torchrun",
    "mpirun": "mpirun",
    "mpiexec": "mpirun",
    "orterun": "mpirun",
    "prterun": "mpirun",
    "mpiexec.hydra": "mpirun",
    "prted": "mpirun",
    "orted": "mpirun",
    "hydra_pmi_proxy": "mpirun",
    "srun": "srun",
    "deepspeed": "deepspeed",
    "accelerate": "accelerate",
}
#: Python modules run with `-m` that launch ranks.
LAUNCHER_MODULES: dict[str, str] = {
    "torch.distributed.run": "torchrun",
    "torch.distributed.launch": "torchrun",
    "deepspeed.launcher.runner": "deepspeed",
    "deepspeed.launcher.launch": "deepspeed",
    "accelerate.commands.launch": "accelerate",
    "accelerate.commands.accelerate_cli": "accelerate",
}


def launcher_kind(argv: Sequence[str] | None, name: str | None = None) -> str | None:
    """ "torchrun", "mpirun", "srun", "deepspeed" or "accelerate" when the command line is a
    launcher of distributed ranks (run directly, as a console script, or with `python -m`);
    None otherwise.  `accelerate` counts only as `accelerate launch`."""
    if argv:
        target = python_target(argv)
        if target is not None:
            _interp, dash_m, at = target
            if dash_m:
                return LAUNCHER_MODULES.get(argv[at])
            exe, args = os.path.basename(argv[at]), argv[at + 1 :]
        else:
            exe, args = os.path.basename(argv[0]), argv[1:]
        kind = LAUNCHER_EXES.get(exe)
        if kind == "accelerate" and (not args or args[0] != "launch"):
            return None
        return kind
    if name:
        kind = LAUNCHER_EXES.get(name)
        return None if kind == "accelerate" else kind
    return None
