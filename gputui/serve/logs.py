"""serve's log (stderr): a line when a session starts and when it ends, nothing a request.

- `QuietLog`: lines that anyone who can reach the port can cause (refusals, malformed
  requests, connections closed unheard, accepts that failed) come at most one per kind per
  interval, with a count, so a flood of them cannot flood the log.
- `HttpErrors`: aiohttp's server log (a malformed request was a traceback with the request's
  bytes in it) as such lines.
- `SafeLines`: no token and no control character reaches a line, tracebacks included.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable
from typing import Any

from aiohttp.http_exceptions import HttpProcessingError

from gputui.untrusted import escaped

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

    def note(self, kind: str, line: str, exc: BaseException | None = None) -> None:
        """`line`, of `kind` ("refused: wrong token"), written now unless one of its kind was
        in this interval (with `exc`'s traceback, if given)."""
        if kind in self.counts:
            self.counts[kind] += 1
            return
        self.log.warning("%s", line, exc_info=exc)
        self._open(kind)

    def _open(self, kind: str) -> None:
        self.counts[kind] = 0
        self.call_later(self.interval, lambda: self._close(kind))

    def _close(self, kind: str) -> None:
        held = self.counts.pop(kind, 0)
        if held:
            self.log.warning("%s: %d more in the last %g s", kind, held, self.interval)
            self._open(kind)  # (while they go on: one line an interval)


class HttpErrors(logging.Logger):
    """The logger aiohttp's web server writes to (its `logger=`): a request it could not read
    is a refusal (no traceback: the message quotes the request); an error in a handler is one
    line an interval, its traceback the first time."""

    def __init__(self, quiet: QuietLog) -> None:
        super().__init__("gputui.serve.http", logging.INFO)
        self.quiet = quiet

    def debug(self, msg: object, *args: object, **kwargs: Any) -> None:
        pass

    def exception(self, msg: object, *args: object, exc_info: Any = True, **kwargs: Any) -> None:
        self.error(msg, *args, exc_info=exc_info, **kwargs)

    def error(self, msg: object, *args: object, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info")
        if not isinstance(exc, BaseException):
            exc = sys.exc_info()[1]
        if isinstance(exc, HttpProcessingError):
            self.quiet.note(
                "refused: malformed requests", f"refused a malformed request ({type(exc).__name__})"
            )
        else:
            name = type(exc).__name__ if exc is not None else "error"
            self.quiet.note(f"request failed: {name}", f"a request failed: {name}", exc)


class SafeLines(logging.Formatter):
    """serve's lines as written: tokens taken out, should a path (or a query naming one)
    reach one, and what a terminal would obey escaped (an exception's text, in a traceback
    too, may quote a client)."""

    _TOKENS = re.compile(r"(token=|/s/)[^&/\s\"']*")

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(name)s: %(message)s", "%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return "\n".join(escaped(self._TOKENS.sub(r"\1…", line)) for line in text.split("\n"))
