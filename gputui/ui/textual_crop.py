"""Crop Textual's partial screen updates to their dirty cells: the one place gputui touches
a private name of Textual's (docs/textual-upstream.md is the upstream issue draft).

Textual 8's `ChopsUpdate.render_segments` crops each dirty span at its end but not at its
start (a "TODO: crop to x extents" in its source): a figure that changes in the middle of a
160-column card line re-sends the line from the widget's left edge, so the steady monitor
writes about six times the bytes it needs to.  `install()` replaces that one method with
one that crops both ends.

It is installed only where a probe shows Textual still behaves as described: a partial
update built with Textual's own constructor, whose dirty span starts mid-line, must render
(with Textual's method) as a move to the line's start and the line up to the span's end; the
replacement must render the same cells from the span's start.  Any other answer (the
constructor changed, an attribute is gone, or Textual already crops) leaves Textual as it
is, and gputui works with more bytes.  No version list: CI runs the probe's tests against
the newest Textual 8.x as well as the pinned one.  `GPUTUI_NO_TEXTUAL_CROP=1` turns it off.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from typing import Any

log = logging.getLogger(__name__)

_installed: dict[str, Any] = {}
""""original": Textual's own render_segments, once the replacement is installed."""


def _pieces(update: Any) -> Iterator[tuple[int, int, Any]]:
    """A partial update's pieces as (row, column, strip), each chop cropped at both ends to
    the dirty span it overlaps."""
    chops, chop_ends = update.chops, update.chop_ends
    for y, x1, x2 in update.spans:
        for end, (x, strip) in zip(chop_ends[y], chops[y].items(), strict=False):
            if strip is None or x >= x2 or end <= x1:
                continue
            start, stop = max(x, x1), min(end, x2)
            yield y, start, strip if (start == x and stop == end) else strip.crop(start - x, stop - x)


def render_cropped(update: Any, console: Any) -> str:
    """The terminal sequence for a partial update, dirty cells only."""
    from rich.control import Control

    move_to = Control.move_to
    return "".join(move_to(x, y).segment.text + piece.render(console) for y, x, piece in _pieces(update))


def _probe(chops_update: type, original: Callable[[Any, Any], str]) -> str | None:
    """None when Textual behaves as this module was written for, else why not."""
    from rich.console import Console
    from rich.control import Control
    from rich.segment import Segment
    from textual.strip import Strip

    console = Console(color_system=None, force_terminal=True, width=40, legacy_windows=False)
    strip = Strip([Segment("a" * 10), Segment("WXYZ"), Segment("b" * 6)], 20)
    try:
        update = chops_update([{0: strip}], [(0, 10, 14)], [[20]])  # cells 10..13 changed
        stock = original(update, console)
        cropped = render_cropped(update, console)
    except Exception as exc:  # a changed constructor or attribute: leave Textual alone
        return f"Textual's partial update is not what the crop was written for ({exc!r})"
    from_line_start = Control.move_to(0, 0).segment.text + "a" * 10 + "WXYZ"
    if stock != from_line_start:
        return "Textual no longer re-sends dirty lines from their start"
    if cropped != Control.move_to(10, 0).segment.text + "WXYZ":
        return "the crop does not render the dirty span of Textual's update"
    return None


def install() -> bool:
    """Install the cropping renderer where the probe passes; True when it is in place."""
    if _installed:
        return True
    if os.environ.get("GPUTUI_NO_TEXTUAL_CROP"):
        return False
    try:
        from textual import _compositor
    except ImportError:  # pragma: no cover
        return False
    chops_update = getattr(_compositor, "ChopsUpdate", None)
    original = getattr(chops_update, "render_segments", None)
    if chops_update is None or original is None:
        log.info("Textual has no ChopsUpdate.render_segments: partial updates not cropped")
        return False
    why_not = _probe(chops_update, original)
    if why_not is not None:
        log.info("partial updates not cropped: %s", why_not)
        return False
    _installed["original"] = original
    chops_update.render_segments = render_cropped
    return True


def uninstall() -> None:
    """Put Textual's own method back (tests)."""
    original = _installed.pop("original", None)
    if original is not None:
        from textual import _compositor

        _compositor.ChopsUpdate.render_segments = original  # type: ignore[method-assign]
