"""Log lines that anyone who can reach serve's port can cause (refusals, connections closed
unheard, accepts that failed): at most one line per kind per interval, with a count, so a
flood of them cannot flood the log."""

from __future__ import annotations

import logging
from collections.abc import Callable

INTERVAL_S = 10.0
"""One line per kind this often, at most."""


class QuietLog:
    """The first line of a kind is written at once; later ones within `interval` are only
    counted, and told in one line when the interval ends (and so on while they go on)."""

    def __init__(
        self,
        log: logging.Logger,
        call_later: Callable[[float, Callable[[], None]], object],
        interval: float = INTERVAL_S,
    ) -> None:
        self.log = log
        self.call_later = call_later
        self.interval = interval
        self.counts: dict[str, int] = {}
        """Kinds in an open interval: how many lines of it were held back so far."""

    def note(self, kind: str, line: str) -> None:
        """`line`, of `kind` ("refused: wrong token"), written now unless one of its kind was."""
        if kind in self.counts:
            self.counts[kind] += 1
            return
        self.log.warning("%s", line)
        self._open(kind)

    def _open(self, kind: str) -> None:
        self.counts[kind] = 0
        self.call_later(self.interval, lambda: self._close(kind))

    def _close(self, kind: str) -> None:
        held = self.counts.pop(kind, 0)
        if held:
            self.log.warning("%s: %d more in the last %g s", kind, held, self.interval)
            self._open(kind)  # (while they go on: one line an interval)
