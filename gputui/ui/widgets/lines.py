"""A widget drawn as lines of styled runs that repaints only the cells that changed.

Textual repaints a whole widget when it refreshes, and what crosses an SSH link is every
cell of that repaint.  A monitor changes a few numbers per second, so this widget keeps
the lines it drew last, compares the new ones cell by cell, and refreshes only the spans
that differ (`Widget.refresh(Region)`), which Textual turns into cursor moves plus those
cells.  Subclasses implement `build(width, height)`.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

from gputui.ui.render import Line, pad_line
from gputui.untrusted import inert

#: Unchanged cells between two changed spans below which one span is sent: a cursor move
#: costs about as many bytes as re-sending a few cells.
MERGE_GAP = 4


class LineWidget(Widget):
    DEFAULT_CSS = """
    LineWidget {
        height: auto;
    }
    """

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._lines: list[Line] = []
        self._cells: list[list[tuple[str, Style | None]]] = []
        self._strips: list[Strip] = []
        self._built_width = -1
        self._strips_width = -1
        """The width `_strips` were drawn for (`_built_width` is reset to force a rebuild)."""
        self._base: Style | None = None
        self._style_cache: dict[Style | None, Style] = {}
        self.cells_sent = 0
        """Cells refreshed since mount (for tests and benchmarks)."""

    # ---- for subclasses --------------------------------------------------------------

    def build(self, width: int, height: int) -> list[Line]:
        """Return the lines to show at this width (and available height)."""
        raise NotImplementedError

    def available_height(self) -> int:
        """Height the layout gives this widget (subclasses may look at their container)."""
        return self.size.height

    # ---- the diffing -----------------------------------------------------------------

    def update_lines(self) -> None:
        """Rebuild the lines and refresh what changed."""
        width = self.size.width
        if width <= 0:
            return
        new = self.build(width, self.available_height())
        base = self.rich_style
        if (
            new == self._lines
            and self.size.height == len(new)  # (the layout has them too)
            and (not new or (width == self._strips_width and base == self._base))
        ):
            self._built_width = width  # a relayout that changed nothing: no repaint, no layout
            return
        if width != self._built_width or base != self._base or not self._strips:
            self._base = base
            self._style_cache.clear()
            self._set_all(new, width)
            self.refresh(layout=True)
            return
        if len(new) != len(self._lines):
            self._set_all(new, width)
            self.refresh(layout=True)
            return
        for y, line in enumerate(new):
            if line == self._lines[y]:
                continue
            cells = _cells(pad_line(line, width))
            old = self._cells[y]
            spans = _changed_spans(old, cells) if len(cells) == len(old) == width else [(0, width)]
            self._lines[y] = line
            self._cells[y] = cells
            self._strips[y] = self._strip(line, width)
            for x1, x2 in spans:
                self.cells_sent += x2 - x1
                self.refresh(Region(x1, y, x2 - x1, 1))

    def relayout(self) -> None:
        """Rebuild from scratch (after a change that may alter the number of lines)."""
        self._built_width = -1
        self.update_lines()

    def _set_all(self, lines: list[Line], width: int) -> None:
        self._built_width = self._strips_width = width
        self._lines = list(lines)
        self._cells = [_cells(pad_line(line, width)) for line in lines]
        self._strips = [self._strip(line, width) for line in lines]
        self.cells_sent += width * len(lines)

    def _style(self, style: Style | None) -> Style:
        out = self._style_cache.get(style)
        if out is None:
            base = self._base or Style()
            out = self._style_cache[style] = base + style if style is not None else base
        return out

    def _strip(self, line: Line, width: int) -> Strip:
        segments = []
        for text, style in pad_line(line, width):
            if text:
                segments.append(Segment(inert(text), self._style(style)))
        return Strip(segments, width)

    # ---- Textual hooks ---------------------------------------------------------------

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        if width != self._built_width:
            lines = self.build(width, self.available_height())
            return len(lines)
        return len(self._lines)

    def render_line(self, y: int) -> Strip:
        if y < len(self._strips) and self._built_width == self.size.width:
            return self._strips[y]
        if self.size.width != self._built_width and self.size.width > 0:
            self._base = self.rich_style
            self._style_cache.clear()
            self._set_all(self.build(self.size.width, self.available_height()), self.size.width)
            if y < len(self._strips):
                return self._strips[y]
        return Strip.blank(self.size.width, self.rich_style)

    def on_resize(self) -> None:
        self._built_width = -1
        self.update_lines()

    def plain_lines(self) -> list[str]:
        """The text currently drawn, one string per line (for tests)."""
        return ["".join(t for t, _ in line) for line in self._lines]


def _cells(line: Line) -> list[tuple[str, Style | None]]:
    return [(ch, style) for text, style in line for ch in text]


def _changed_spans(
    old: list[tuple[str, Style | None]], new: list[tuple[str, Style | None]]
) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start = -1
    last = -1
    for x, (a, b) in enumerate(zip(old, new, strict=True)):
        if a == b:
            continue
        if start < 0:
            start = x
        elif x - last > MERGE_GAP:
            spans.append((start, last + 1))
            start = x
        last = x
    if start >= 0:
        spans.append((start, last + 1))
    return spans
