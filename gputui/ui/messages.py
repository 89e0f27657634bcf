"""Messages widgets post to the app, as small dataclasses (a widget that asks for something
the app does posts one of these instead of importing the screen that does it)."""

from __future__ import annotations

from textual.message import Message

from gputui.records import record


@record(eq=False)
class OpenGpuDetail(Message):
    """Show the detail view of one GPU (Enter on a card or a topology row)."""

    index: int


@record(eq=False)
class GpuSelected(Message):
    """A card (or compact row) was selected on the Overview (None: no GPU selected)."""

    index: int | None


@record(eq=False)
class ChartsChosen(Message):
    """The cards' charts were ticked (`C` on the Overview): the app remembers them."""

    sparklines: tuple[str, ...]
