"""A widget whose lines come from a function of the width: a summary, a notice, a status
line (the process lists, the job and stacks views, the cluster view)."""

from __future__ import annotations

from collections.abc import Callable

from gputui.ui.render import Line, pad_line
from gputui.ui.widgets.lines import LineWidget


class TextLines(LineWidget):
    """Lines set from outside (the summary, the notices, the status line)."""

    DEFAULT_CSS = """
    TextLines { height: auto; }
    """

    def __init__(self, builder: Callable[[int], list[Line]], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._builder = builder
        """`builder(width) -> lines`, called whenever the widget redraws."""

    def build(self, width: int, height: int) -> list[Line]:
        return [pad_line(line, width) for line in self._builder(width)]
