"""NVML's clock-event (throttle) reasons that mean the GPU runs slower than it should.

Standard library only, Python 3.8+, no gputui imports: the diagnosis children load this file by
its path (`gputui/diag/probe/__init__.py`); gputui imports it as `gputui.rules.clocks`.
"""

from __future__ import annotations

#: NVML clock-event (throttle) reason bits that mean the GPU runs slower than it should.
SLOWDOWN_REASONS: tuple[tuple[int, str], ...] = (
    (0x008, "HW slowdown"),
    (0x020, "SW thermal"),
    (0x040, "HW thermal"),
    (0x080, "HW power brake"),
)
SLOWDOWN_MASK = 0
for _bit, _name in SLOWDOWN_REASONS:
    SLOWDOWN_MASK |= _bit


def slowdown_names(mask: int | None) -> list[str]:
    """The slowdown reasons set in an NVML clock-event mask."""
    return [name for bit, name in SLOWDOWN_REASONS if (mask or 0) & bit]
