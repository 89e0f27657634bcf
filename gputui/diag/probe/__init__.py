"""gputui's diagnosis child: why CUDA, cuDNN or NCCL do not work in *this* interpreter.

Runs INSIDE the interpreter being diagnosed, as a directory (`python .../probe`) or a module
(`python -m gputui.diag.probe`), so it uses the standard library only (plus torch, which it
probes, and libnvidia-ml / libcuda through ctypes) and stays compatible with Python 3.8.  It
imports nothing from gputui: the rules it shares with gputui (gputui/rules.py, and the table of
variables that change how CUDA, torch and NCCL start, gputui/startvars.py) are loaded by file
path (`rules` and `startvars` below).

One module per layer, in the order a layer depends on the one before: `system` (Python, the
driver through NVML, /dev/nvidia*, cuInit), `visibility`, `environment`, `torch_layer`,
`devices` (GPUs and cuDNN), `compute` (matmul, autocast, peers, NCCL), `health`.  Each check
is declared with its id, group, title and the facts it needs (`registry.declare`); `main.PLAN`
is the order they run in.  Every check is isolated: an exception becomes that check's FAIL
with the traceback and what it was looking at, and the checks that do not need it still run.

Protocol (version 1): one JSON object per line on stdout, UTF-8.  Everything else a library
prints goes to stderr (stdout's file descriptor is moved aside before anything is imported).
Every object has "v" (the protocol version) and "event":

  {"v": 1, "event": "hello", "tool": "probe", "python": "3.11.7", "executable": "...",
   "prefix": "...", "pid": 123, "uid": 1000, "euid": 1000, "gid": 1000, "groups": [1000],
   "time": 1795000000.0}
  {"v": 1, "event": "phase", "name": "torch-import", "state": "start" | "end", "title": "..."}
  {"v": 1, "event": "check", "id": "torch.build", "group": "torch", "title": "...",
   "status": "PASS" | "WARN" | "FAIL" | "SKIP", "summary": "one line",
   "evidence": {...}, "cause": "cpu-only-wheel" | null, "fix": ["..."], "note": "..." | null,
   "seconds": 0.01}
  {"v": 1, "event": "done", "seconds": 3.2}

`cause` names the failure mode (gputui/diag/verdicts/causes/ explains each and adds its
fix); `fix` holds the steps only this process can know (a directory, a variable).  Phases
bracket slow steps so a parent that has to kill a hung child can say what was running.  Any
other line on stdout is not part of the protocol.

Run by hand: `python gputui/diag/probe` prints the events; `--no-nccl` skips the multi-GPU
all-reduce.
"""

import importlib.util
import os
import sys

_GPUTUI = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RULES_PATH = os.path.join(_GPUTUI, "rules.py")
"""gputui/rules.py: the rules the children share with gputui."""
STARTVARS_PATH = os.path.join(_GPUTUI, "startvars.py")
"""gputui/startvars.py: the variables that change how CUDA, torch and NCCL start."""


def _load(name, path):
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while the file runs
        spec.loader.exec_module(module)
    return sys.modules[name]


def load_rules():
    """gputui/rules.py, loaded by its path (gputui itself is not importable here)."""
    return _load("_gputui_rules", RULES_PATH)


rules = load_rules()
startvars = _load("_gputui_startvars", STARTVARS_PATH)
