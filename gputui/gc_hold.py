"""Python's cyclic garbage collector, held off while the monitor starts.

Starting the monitor creates about 100,000 objects that live as long as it does (modules,
classes, Textual's widgets and styles).  As they pile up, the collector walks them again and
again: 69 ms of collections on the way to the first frame on a 2-core machine, one full
pass of them in the middle of the first paint (bench/RESULTS.md, "The first frame, fourth
pass").  Little that needs collecting is made in that time (~2,200 unreachable objects,
250 KB).

`hold()` turns the collector off as `gputui` starts; `release()`, once the first frame is on
screen, collects what the start-up left, moves the survivors into the permanent generation
(`gc.freeze()`: they are never garbage, and later collections need not walk them) and turns
the collector back on.  `gputui`'s `main` releases on every way out, and the monitor at the
latest RELEASE_AT_LATEST_S after it mounts, whether a frame came or not: the collector is
never left off.  A collector that was already off (a program that embeds gputui and called
`gc.disable()`) is left off.
"""

from __future__ import annotations

import gc

RELEASE_AFTER_FRAME_S = 0.5
"""How long after the first frame the release comes: after Textual's follow-up paints of
the start-up (30-50 ms), so that the collection (25-40 ms, once) delays none of them."""
RELEASE_AT_LATEST_S = 5.0
"""The monitor releases this long after it mounts even if no frame with data came (NVML
hung in its open, a source that failed)."""

_state = {"held": False}


def hold() -> None:
    """Turn the collector off until `release()`, if it is on."""
    if gc.isenabled():
        gc.disable()
        _state["held"] = True


def held() -> bool:
    """The collector is off because of `hold()`."""
    return _state["held"]


def release() -> None:
    """Collect, freeze the survivors and turn the collector back on (once; only if `hold()`
    turned it off)."""
    if not _state["held"]:
        return
    _state["held"] = False
    gc.collect()
    gc.freeze()
    gc.enable()
