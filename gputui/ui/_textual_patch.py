"""Send only the changed cells of a partial screen update.

Textual 8's `ChopsUpdate.render_segments` crops each dirty span at its end but not its
start ("TODO: crop to x extents" in its source), so changing "614" in the middle of a
160-column line re-sends the line from its left edge, once per dirty span.  Over SSH
that is most of gputui's traffic.  This installs a version that crops both ends; the
picture is identical, the bytes are not.  It is installed only on the Textual versions it
was checked against (`CHECKED_VERSIONS`), and only if Textual's internals are still what it
was written for; anywhere else it does nothing (gputui then works as before, only with more
bytes).  tests/test_textual_patch.py pins the behaviour: on a new Textual, read
`ChopsUpdate.render_segments` again, run that test, and add the version.
"""

from __future__ import annotations

import logging
import os
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


def _render_segments(self: Any, console: Any) -> str:

    from rich.control import Control

    sequences: list[str] = []
    append = sequences.append
    move_to = Control.move_to
    chops = self.chops
    chop_ends = self.chop_ends
    last_y = self.spans[-1][0]
    for y, x1, x2 in self.spans:
        line = chops[y]
        ends = chop_ends[y]
        for end, (x, strip) in zip(ends, line.items(), strict=False):
            if strip is None or x >= x2 or end <= x1:
                continue
            start = max(x, x1)
            stop = min(end, x2)
            piece = strip if (start == x and stop == end) else strip.crop(start - x, stop - x)
            append(move_to(start, y).segment.text)
            append(piece.render(console))
        if y != last_y:
            append("\n")
    return "".join(sequences)


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
        probe = chops_update([{0: None}], [(0, 0, 1)], [[1]])
        if not all(hasattr(probe, a) for a in ("chops", "spans", "chop_ends")):
            return False
    except Exception:  # a different constructor: leave Textual alone
        return False
    _state["original"] = chops_update.render_segments
    chops_update.render_segments = _render_segments
    _state["installed"] = True
    return True
