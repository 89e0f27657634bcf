"""A child dies with the gputui that started it (diagnosis, stress, their NCCL workers).

Standard library only, Python 3.8+, no gputui imports: the diagnosis children load this file by
its path (`gputui/diag/probe/__init__.py`); gputui imports it as `gputui.rules.lifeline`.
"""

from __future__ import annotations

import os
import signal
import sys

PR_SET_PDEATHSIG = 1

PARENT_VAR = "GPUTUI_PARENT_PID"
"""Set by gputui in the environment of a child it starts (diagnosis, stress): the PID the
child must not outlive."""


def die_with_parent(parent: int) -> bool:
    """Ask the kernel to SIGKILL this process when its parent dies (SIGKILL of the parent
    included); False when the parent is not `parent` any more (it died before the request:
    the caller exits now).  The kernel watches the *thread* that started this process:
    gputui starts its children from its main thread.  Linux only; elsewhere only the parent
    check is made."""
    if sys.platform.startswith("linux"):
        import ctypes  # here: only children use it (not the monitor's start)

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    return os.getppid() == parent


def tie_to_parent() -> bool:
    """In a child gputui started: die with it (`PARENT_VAR`), and take the variable out of
    the environment so the child's own children (NCCL workers) are not tied to gputui.
    False: gputui is gone already (exit now).  True without the variable (run by hand)."""
    value = os.environ.pop(PARENT_VAR, "")
    if not (value.isascii() and value.isdigit() and len(value) < 10):
        return True
    return die_with_parent(int(value))
