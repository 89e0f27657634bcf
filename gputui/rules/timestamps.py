"""Timestamps as ISO 8601 in UTC.

Standard library only, Python 3.8+, no gputui imports: the diagnosis children load this file by
its path (`gputui/diag/probe/__init__.py`); gputui imports it as `gputui.rules.timestamps`.
"""

from __future__ import annotations

import math
import time


def iso_utc(ts: float) -> str | None:
    """A Unix time as ISO 8601 in UTC to the second, with the "+00:00" suffix (what
    `datetime.isoformat` writes, and what `datetime.fromisoformat` reads on every Python
    version; "Z" only from 3.11).  None when the value is not a representable time."""
    try:
        if not math.isfinite(ts):
            return None
        return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(ts))
    except (OverflowError, OSError, ValueError, TypeError):
        return None
