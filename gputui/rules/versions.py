"""Version strings as (major, minor).

Standard library only, Python 3.8+, no gputui imports: the diagnosis children load this file by
its path (`gputui/diag/probe/__init__.py`); gputui imports it as `gputui.rules.versions`.
"""

from __future__ import annotations

import re

_VERSION = re.compile(r"\s*(\d+)(?:\.(\d+))?")


def version_tuple(text: object) -> tuple[int, int] | None:
    """(major, minor) of a version string: "12.8" -> (12, 8), "12.8.1" -> (12, 8),
    "13" -> (13, 0), "2.13.0+cpu" -> (2, 13); None when it does not start with a number."""
    if text is None or isinstance(text, bool):
        return None
    m = _VERSION.match(str(text))
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2) or 0)
