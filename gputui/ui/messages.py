"""Messages widgets post to the app, as small dataclasses (a widget that asks for something
the app does posts one of these instead of importing the screen that does it)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


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
