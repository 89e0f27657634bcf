"""What a signal from a process list is sent to, and what became of it: plain data shared by
the signal path (`gputui.ui.processes.signals`), its confirmation (`screens.SignalDialog`) and
the app's one record of sent signals (`gputui.ui.context.SentSignals`)."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gputui.control.signals import PinnedProcess, ProcessIdentity, SignalResult


@dataclass
class SignalTarget:
    """One process as the confirmation shows it (merged over its GPUs)."""

    identity: ProcessIdentity
    gpus: list[int] = field(default_factory=list)
    gpu_memory: int | None = None
    command: str = ""
    pinned: PinnedProcess | None = None
    """Held from the moment the confirmation is shown (see `gputui.control.signals.pin`)."""
    role: str = ""
    """In a whole-job signal: how it belongs to the job ("launcher", "child of 123", ...)."""


@dataclass
class SignalWatch:
    """A signal sent (or refused) and what became of the process."""

    result: SignalResult
    at: float
    """time.monotonic() when it was sent."""
    exited_after: float | None = None
    """Seconds from sending to the process being gone."""


def signal_number(name: str) -> int:
    """ "TERM" -> signal.SIGTERM."""
    return int(getattr(signal, f"SIG{name}"))
