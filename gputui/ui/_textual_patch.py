"""Send the terminal only the cells that changed.

Two things, both checked against the Textual versions in `CHECKED_VERSIONS`:

1. Textual 8's `ChopsUpdate.render_segments` crops each dirty span at its end but not its
   start ("TODO: crop to x extents" in its source), so changing "614" in the middle of a
   160-column line re-sends the line from its left edge, once per dirty span.  `install`
   replaces it with a version that crops both ends.
2. `TerminalCells` keeps what the terminal shows, row by row, and cuts each update to the
   pieces that differ from it (`gputui.ui.cells_app.CellsApp` uses it).  Textual paints
   the first screen three times as its layout settles, the later two identical to the
   first; with this the terminal gets one paint, and the first frame is over when it is.

The picture is identical, the bytes are not.  Both are used only where Textual's internals
are still what they were written for; anywhere else gputui works as before, with more
bytes.  tests/test_textual_patch.py pins the behaviour: on a new Textual, read
`ChopsUpdate.render_segments`, `LayoutUpdate` and `App._display` again, run that test, and
add the version.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)

_state: dict[str, Any] = {"installed": False, "original": None}

CHECKED_VERSIONS = frozenset({"8.2.8"})
"""Textual versions whose `ChopsUpdate.render_segments` this replaces was read and tested."""


def checked(version: str) -> bool:
    """The patch was checked against this Textual version."""
    return version in CHECKED_VERSIONS


def textual_version() -> str:
    """Textual's version: from the name of its dist-info directory beside the package, where
    that is one of the checked versions (a stat each), else `textual.__version__` (which asks
    importlib.metadata: 16 ms of the monitor's start-up, on the path to the first frame)."""
    import textual

    site = os.path.dirname(os.path.dirname(os.path.abspath(textual.__file__)))
    for version in sorted(CHECKED_VERSIONS):
        if os.path.isdir(os.path.join(site, f"textual-{version}.dist-info")):
            return version
    return str(textual.__version__)


def _pieces(update: Any) -> Iterator[tuple[int, int, Any]]:
    """The pieces of a screen update, as (row, column, strip): a full update's rows whole, a
    partial update's chops cropped at both ends to its dirty spans."""
    from textual._compositor import LayoutUpdate
    from textual.strip import Strip

    if isinstance(update, LayoutUpdate):
        x = update.region.x
        for y, line in enumerate(update.strips, update.region.y):
            yield y, x, Strip.join(line)
        return
    chops = update.chops
    chop_ends = update.chop_ends
    for y, x1, x2 in update.spans:
        for end, (x, strip) in zip(chop_ends[y], chops[y].items(), strict=False):
            if strip is None or x >= x2 or end <= x1:
                continue
            start = max(x, x1)
            stop = min(end, x2)
            yield y, start, strip if (start == x and stop == end) else strip.crop(start - x, stop - x)


def _render_segments(self: Any, console: Any) -> str:
    from rich.control import Control

    move_to = Control.move_to
    return "".join(move_to(x, y).segment.text + piece.render(console) for y, x, piece in _pieces(self))


class TerminalCells:
    """What the terminal shows, row by row, as gputui last sent it; to send only what changed.

    Textual repaints whole widgets: the first screen three times over as its layout settles,
    and on every tick each line of a card whose one figure changed.  Curses keeps a copy of
    the screen and sends only the cells that differ; this does the same for Textual's updates.
    A row is known once a full-width piece of it was sent; a piece of a known row identical to
    what the row holds there is not sent again.  Anything that may have changed the terminal
    behind gputui's back (a new size, a suspend and resume, ctrl+l) calls `reset`, and then
    everything is sent again.  Sending more than needed is always safe; this only ever skips
    a piece the terminal already shows, cell for cell (tests/test_textual_patch.py feeds both
    streams through a terminal emulator and compares).
    """

    def __init__(self) -> None:
        self.rows: dict[int, Any] = {}
        self.size: tuple[int, int] | None = None
        self.cursor: tuple[int, int] | None = None

    def reset(self) -> None:
        """Forget what the terminal shows: the next updates are sent whole."""
        self.rows.clear()
        self.size = None
        self.cursor = None

    def changes(self, update: Any, console: Any, size: tuple[int, int]) -> str:
        """The terminal sequence that brings the screen up to `update`: only its pieces that
        differ from what the terminal shows.  Empty when nothing does."""
        from rich.control import Control
        from textual.strip import Strip

        if size != self.size:
            self.reset()
            self.size = size
        move_to = Control.move_to
        rows = self.rows
        out: list[str] = []
        for y, x, piece in _pieces(update):
            width = piece.cell_length
            known = rows.get(y)
            if known is not None:
                shown = known.crop(x, x + width)
                if shown == piece or shown.simplify() == piece.simplify():  # (cut differently)
                    continue
                rows[y] = Strip.join([known.crop(0, x), piece, known.crop(x + width)]).simplify()
            elif x == 0 and width == size[0]:
                rows[y] = piece
            out.append(move_to(x, y).segment.text)
            out.append(piece.render(console))
        return "".join(out)


def sent_update(text: str) -> Any:
    """`text`, already reduced to what changed, as a compositor update for Textual's
    `_display` to write (it calls `render_segments` on those)."""
    cls = _state.get("sent")
    if cls is None:
        from textual._compositor import CompositorUpdate

        class SentUpdate(CompositorUpdate):
            def __init__(self, text: str) -> None:
                self.text = text

            def render_segments(self, console: Any) -> str:
                return self.text

        cls = _state["sent"] = SentUpdate
    return cls(text)


def install() -> bool:
    """Install the cropping renderer if Textual's internals are what it was written for."""
    if _state["installed"]:
        return True
    if os.environ.get("GPUTUI_NO_TEXTUAL_PATCH"):
        return False  # escape hatch (and a way to measure what the patch saves)
    try:
        from textual import _compositor
        from textual.strip import Strip
    except ImportError:  # pragma: no cover
        return False
    version = textual_version()
    if not checked(version):
        log.info("Textual %s is not a version the partial-update patch was checked on", version)
        return False
    chops_update = getattr(_compositor, "ChopsUpdate", None)
    if (
        chops_update is None
        or not hasattr(chops_update, "render_segments")
        or not hasattr(_compositor, "Control")
        or not hasattr(Strip, "crop")
        or not hasattr(Strip, "render")
    ):
        log.info("Textual internals changed; partial-update cropping not installed")
        return False
    try:
        from textual.app import App
        from textual.geometry import Region

        probe = chops_update([{0: None}], [(0, 0, 1)], [[1]])
        full = _compositor.LayoutUpdate([[]], Region(0, 0, 1, 1))
        if not all(hasattr(probe, a) for a in ("chops", "spans", "chop_ends")):
            return False
        if not (hasattr(full, "strips") and hasattr(full, "region") and hasattr(App, "_display")):
            return False
    except Exception:  # a different constructor: leave Textual alone
        return False
    _state["original"] = chops_update.render_segments
    chops_update.render_segments = _render_segments
    _state["installed"] = True
    return True


def will_write(app: Any) -> bool:
    """Textual's `App._display` (8.2.8) writes an update to the terminal, rather than drop
    it: the conditions it checks, so that what is not written is not counted as shown."""
    driver = app._driver
    return bool(
        app._running
        and not app._closed
        and not app._batch_count
        and driver is not None
        and not driver.is_headless
        and not driver.is_inline
        and not driver.is_web
    )


def is_screen_update(renderable: object) -> bool:
    """A full or partial screen update of the compositor's (not an inline app's)."""
    from textual._compositor import ChopsUpdate, LayoutUpdate

    return isinstance(renderable, (LayoutUpdate, ChopsUpdate))
