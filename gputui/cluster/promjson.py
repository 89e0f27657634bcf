"""A Prometheus API answer read as it arrives, series by series, up to a cap.

`{"status":"success","data":{"resultType":"vector","result":[{...}, {...}, ...]}}`: the
members around the result are read whole (they are small; each at most MAX_VALUE), the
result's series one at a time (each at most MAX_SERIES_TEXT), and reading stops at
`max_series`: what is over the cap is never downloaded, decoded or held.  400,000 series
cost what the cap costs, and the first screen comes after the cap's worth of parsing.

The answer is untrusted: anything that is not the shape above is a `PrometheusError` (one
line), label values are cut at MAX_LABEL_VALUE, a series keeps at most MAX_LABELS labels, and
the label sets of one GPU's series (the same but for the metric's name) are held once.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gputui.cluster.expfmt import MAX_LABEL_VALUE

MAX_SERIES = 100_000
"""Series kept of one answer (512 GPUs are ~9,000 in the list's query)."""
MAX_SERIES_TEXT = 1 << 20
"""The largest one series may be as JSON text (a range query's points included)."""
MAX_VALUE = 1 << 20
"""The largest any other member may be (status, error, warnings...)."""
MAX_LABELS = 64
"""Labels kept of one series."""
_WS = " \t\n\r"
_Shared = dict[tuple[tuple[str, str], ...], dict[str, str]]
"""Label sets already held, by content: a GPU's series share one."""
_decoder = json.JSONDecoder()


class PrometheusError(Exception):
    pass


class _Refused(PrometheusError):
    pass


@dataclass(frozen=True, slots=True)
class PromSeries:
    name: str
    labels: Mapping[str, str]
    """Every label but __name__ (shared between series with the same labels: read only)."""
    value: Any
    """The raw `value` ([time, "number"]) of a vector or `values` of a matrix."""


@dataclass(frozen=True)
class Result:
    series: list[PromSeries]
    truncated: bool = False
    """More series followed the cap: they were not read."""


class _Text:
    """UTF-8 text from byte pieces, consumed from the front."""

    def __init__(self, pieces: Iterator[bytes]) -> None:
        self.pieces = pieces
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.buf = ""
        self.pos = 0
        self.eof = False

    def more(self) -> bool:
        """Append the next piece; False at the end of the answer."""
        if self.eof:
            return False
        piece = next(self.pieces, None)
        text = self.decoder.decode(piece or b"", final=piece is None)
        self.buf = self.buf[self.pos :] + text
        self.pos = 0
        if piece is None:
            self.eof = True
        return True

    def peek(self) -> str:
        """The next character that is not white space ("" at the end)."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _WS:
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise PrometheusError("the answer is not JSON")
        self.pos += 1

    def value(self, limit: int, what: str) -> Any:
        """The next JSON value, at most `limit` characters long."""
        self.peek()
        while True:
            try:
                value, end = _decoder.raw_decode(self.buf, self.pos)
            except ValueError:
                value, end = None, -1
            # a value that ends where the text does may go on (a number): read more first
            if end >= 0 and (end < len(self.buf) or self.eof):
                if end - self.pos > limit:
                    raise _Refused(f"{what} longer than {limit // 1024} KiB in the answer")
                self.pos = end
                return value
            if len(self.buf) - self.pos > limit:
                raise _Refused(f"{what} longer than {limit // 1024} KiB in the answer")
            if not self.more():
                raise PrometheusError("the answer is not JSON (cut short)")

    def members(self) -> Iterator[str]:
        """The keys of an object, one at a time; the caller reads each key's value."""
        self.expect("{")
        if self.peek() == "}":
            self.pos += 1
            return
        while True:
            key = self.value(MAX_VALUE, "a key")
            if not isinstance(key, str):
                raise PrometheusError("the answer is not JSON")
            self.expect(":")
            yield key
            c = self.peek()
            self.pos += 1
            if c == "}":
                return
            if c != ",":
                raise PrometheusError("the answer is not JSON")


def read_result(pieces: Iterator[bytes], kind: str, max_series: int = MAX_SERIES) -> Result:
    """The `kind` ("vector" or "matrix") result of an API answer, at most `max_series` series."""
    text = _Text(pieces)
    status: Any = None
    error: Any = None
    result: Result | None = None
    for key in text.members():
        if key == "data":
            if status not in (None, "success"):
                break
            result = _data(text, kind, max_series)
            if result.truncated:
                break  # the rest is never read
        else:
            value = text.value(MAX_VALUE, f"the {key[:20]!r} member")
            if key == "status":
                status = value
            elif key == "error":
                error = value
    if status != "success":
        said = f": {str(error)[:200]}" if error else f" (status {str(status)[:20]})"
        raise PrometheusError(f"query failed{said}")
    if result is None:
        raise PrometheusError(f"expected a {kind} result")
    return result


def _data(text: _Text, kind: str, max_series: int) -> Result:
    kept: list[PromSeries] = []
    shared: _Shared = {}
    result_type: Any = None
    seen = False
    for key in text.members():
        if key == "resultType":
            result_type = text.value(MAX_VALUE, "the result type")
            if result_type != kind:
                raise PrometheusError(f"expected a {kind} result")
        elif key == "result":
            seen = True
            text.expect("[")
            if text.peek() == "]":
                text.pos += 1
                continue
            while True:
                if len(kept) >= max_series:
                    return Result(kept, truncated=True)
                item = _series(text.value(MAX_SERIES_TEXT, "a series"), kind, shared)
                if item is not None:
                    kept.append(item)
                c = text.peek()
                text.pos += 1
                if c == "]":
                    break
                if c != ",":
                    raise PrometheusError("the answer is not JSON")
        else:
            text.value(MAX_VALUE, f"the {key[:20]!r} member")
    if not seen or result_type != kind:
        raise PrometheusError(f"expected a {kind} result")
    return Result(kept)


def _series(
    item: Any, kind: str, shared: dict[tuple[tuple[str, str], ...], dict[str, str]]
) -> PromSeries | None:
    """One series, its labels checked and capped (None for one that is not a series)."""
    if not isinstance(item, dict) or not isinstance(item.get("metric"), dict):
        return None
    name = ""
    labels: dict[str, str] = {}
    for k, v in item["metric"].items():
        if not isinstance(v, str):
            continue
        if k == "__name__":
            name = v[:MAX_LABEL_VALUE]
        elif len(labels) < MAX_LABELS:
            labels[k[:MAX_LABEL_VALUE]] = v[:MAX_LABEL_VALUE]
    key = tuple(sorted(labels.items()))
    labels = shared.setdefault(key, labels)
    return PromSeries(name, labels, item.get("value" if kind == "vector" else "values"))
