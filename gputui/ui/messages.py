"""Messages widgets post to the app, as small dataclasses (a widget that asks for something
the app does posts one of these instead of importing the screen that does it)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from gputui.telemetry.model import MachineInfo, Snapshot


@dataclass(eq=False)
class OpenGpuDetail(Message):
    """Show the detail view of one GPU (Enter on a card or a topology row)."""

    index: int


@dataclass(eq=False)
class GpuSelected(Message):
    """A card (or compact row) was selected on the Overview (None: no GPU selected)."""

    index: int | None


@dataclass(eq=False)
class ChartsChosen(Message):
    """The cards' charts were ticked (`C` on the Overview): the app remembers them."""

    sparklines: tuple[str, ...]


# ---- from the poller's thread to the app -----------------------------------------------


@dataclass(eq=False)
class SnapshotReady(Message):
    """A new tick from the poller (posted from its thread)."""

    snapshot: Snapshot
    generation: int
    position: tuple[int, int] | None
    """(tick, ticks) of a replay; None for live data."""

    def can_replace(self, message: Message) -> bool:
        # A UI that lags drops stale ticks instead of queueing them (history has them all).
        return isinstance(message, SnapshotReady)


@dataclass(eq=False)
class InfoReady(Message):
    """The static facts of a (new) source."""

    info: MachineInfo
    generation: int


@dataclass(eq=False)
class PollerFailed(Message):
    """The poller's source raised: the error, shown once."""

    error: BaseException
    generation: int
