"""A widget drawn as lines of styled runs that repaints only the cells that changed.

Textual repaints a whole widget when it refreshes, and what crosses an SSH link is every
cell of that repaint.  A monitor changes a few numbers per second, so this widget keeps
the lines it drew last, compares the new ones cell by cell, and refreshes only the spans
that differ (`Widget.refresh(Region)`), which Textual turns into cursor moves plus those
cells.  Subclasses implement `build(width, height)`.

The comparison is done on whole lines at C speed: a line's characters and the (numbered)
styles of its cells become two integers, four bytes a cell, and the cells that differ are
the non-zero cells of their exclusive or.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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

#: A changed span: changed cells with gaps of fewer than MERGE_GAP unchanged ones (a byte a
#: cell, 0 where unchanged).
_SPAN = re.compile(rb"[^\x00]+(?:\x00{1,%d}[^\x00]+)*" % (MERGE_GAP - 1))

#: Style numbers kept per widget before they are numbered afresh (each number is one code
#: point, surrogates skipped, so at most 1,112,064).
MAX_STYLE_IDS = 1_000_000


@dataclass(frozen=True, slots=True)
class CellKey:
    """A drawn line's cells as two integers of four bytes a cell, lowest cell first: the
    code points of its characters, and the numbers of its cells' styles."""

    width: int
    text: int
    styles: int


class LineWidget(Widget):
    DEFAULT_CSS = """
    LineWidget {
        height: auto;
    }
    """

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._lines: list[Line] = []
        self._keys: list[CellKey] = []
        self._style_ids: dict[Style | None, str] = {}
        """Each style seen, numbered as one character (for `CellKey.styles`)."""
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
        if len(new) != len(self._lines) or len(self._style_ids) > MAX_STYLE_IDS:
            self._set_all(new, width)
            self.refresh(layout=True)
            return
        regions: list[Region] = []
        for y, line in enumerate(new):
            if line == self._lines[y]:
                continue
            padded = pad_line(line, width)
            key = line_key(padded, self._style_ids)
            old = self._keys[y]
            spans = changed_spans(old, key) if key.width == old.width == width else [(0, width)]
            self._lines[y] = line
            self._keys[y] = key
            self._strips[y] = self._padded_strip(padded, width)
            for x1, x2 in spans:
                self.cells_sent += x2 - x1
                regions.append(Region(x1, y, x2 - x1, 1))
        if regions:
            self.refresh(*regions)

    def relayout(self) -> None:
        """Rebuild from scratch (after a change that may alter the number of lines)."""
        self._built_width = -1
        self.update_lines()

    def _set_all(self, lines: list[Line], width: int) -> None:
        self._built_width = self._strips_width = width
        if len(self._style_ids) > MAX_STYLE_IDS:
            self._style_ids.clear()
        self._lines = list(lines)
        padded = [pad_line(line, width) for line in lines]
        self._keys = [line_key(p, self._style_ids) for p in padded]
        self._strips = [self._padded_strip(p, width) for p in padded]
        self.cells_sent += width * len(lines)

    def _style(self, style: Style | None) -> Style:
        out = self._style_cache.get(style)
        if out is None:
            base = self._base or Style()
            out = self._style_cache[style] = base + style if style is not None else base
        return out

    def _strip(self, line: Line, width: int) -> Strip:
        return self._padded_strip(pad_line(line, width), width)

    def _padded_strip(self, padded: Line, width: int) -> Strip:
        """The strip of a line already padded to `width`."""
        segments = []
        for text, style in padded:
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


def line_key(line: Line, ids: dict[Style | None, str]) -> CellKey:
    """The key of a line, one cell a character; `ids` numbers the styles (equal styles, one
    number) and gains the ones it lacks."""
    styles = []
    for text, style in line:
        sid = ids.get(style)
        if sid is None:
            n = len(ids) + 1
            sid = ids[style] = chr(n if n < 0xD800 else n + 0x800)  # (a code point, no surrogate)
        styles.append(sid * len(text))
    text = "".join(t for t, _ in line)
    return CellKey(
        len(text),
        int.from_bytes(text.encode("utf-32-le", "surrogatepass"), "little"),
        int.from_bytes("".join(styles).encode("utf-32-le"), "little"),
    )


def changed_spans(old: CellKey, new: CellKey) -> list[tuple[int, int]]:
    """The spans `[x1, x2)` of cells that differ between two lines of the same width, a span
    taking in gaps of fewer than MERGE_GAP unchanged cells."""
    diff = (old.text ^ new.text) | (old.styles ^ new.styles)
    if not diff:
        return []
    # A cell is four bytes, the highest always 0 (code points stop at 0x10FFFF): fold the
    # two above into the lowest, and keep that one byte a cell.
    diff |= (diff >> 8) | (diff >> 16)
    flags = diff.to_bytes(4 * new.width, "little")[::4]
    return [match.span() for match in _SPAN.finditer(flags)]
