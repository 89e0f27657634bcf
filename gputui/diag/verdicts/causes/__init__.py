"""The cause catalogue: each failure mode the children name, in plain words, with the exact
commands that fix it (which depend on facts gathered across checks: the driver's CUDA
version, the interpreter's path), and the PyTorch wheel indexes and minimum drivers those
commands need.

One module per layer holds its causes (`system`, `visibility`, `torch_layer`, `compute`,
`environment`, `health`, `child`); `CAUSES` is all of them, in that order.
"""

from gputui.diag.verdicts.causes.base import Cause, Context
from gputui.diag.verdicts.causes.child import CHILD
from gputui.diag.verdicts.causes.compute import COMPUTE
from gputui.diag.verdicts.causes.environment import ENVIRONMENT
from gputui.diag.verdicts.causes.health import HEALTH
from gputui.diag.verdicts.causes.system import SYSTEM
from gputui.diag.verdicts.causes.torch_layer import TORCH
from gputui.diag.verdicts.causes.visibility import VISIBILITY
from gputui.diag.verdicts.causes.wheels import min_driver_for, torch_index_for

CAUSES: dict[str, Cause] = {**SYSTEM, **VISIBILITY, **TORCH, **COMPUTE, **ENVIRONMENT, **HEALTH, **CHILD}

__all__ = ["CAUSES", "Cause", "Context", "min_driver_for", "torch_index_for"]
