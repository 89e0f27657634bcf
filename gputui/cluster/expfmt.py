"""Reading the Prometheus text exposition format (what an exporter's /metrics answers).

Input from the network is untrusted: lines that do not parse are skipped and counted, the
number of series kept is bounded, and label values are kept as the text they are (the UI
filters them when it draws them).  Only what a GPU view needs is parsed: `name{labels}
value`; timestamps, HELP and TYPE lines are ignored.
"""

from __future__ import annotations

import codecs
import math
import re
from collections.abc import Container, Iterable, Iterator
from dataclasses import dataclass

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}

MAX_SERIES = 200_000
"""Series kept from one exposition (512 GPUs x 60 metrics is 31k): a runaway exporter is cut."""
MAX_LABEL_VALUE = 1024
"""Longer label values are cut: nothing a GPU view shows needs more."""


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


@dataclass(frozen=True, slots=True)
class Exposition:
    samples: list[Sample]
    bad_lines: int = 0
    """Lines that were not comments and did not parse."""
    truncated: bool = False
    """True when MAX_SERIES was reached and the rest was dropped."""


def _labels(text: str, pos: int) -> tuple[dict[str, str], int]:
    """Parse `{a="x",b="y"}` starting after the `{`; returns (labels, index after `}`)."""
    labels: dict[str, str] = {}
    n = len(text)
    while True:
        while pos < n and text[pos] in " \t,":
            pos += 1
        if pos < n and text[pos] == "}":
            return labels, pos + 1
        m = _LABEL_NAME.match(text, pos)
        if m is None:
            raise ValueError("label name")
        key = m.group(0)
        pos = m.end()
        while pos < n and text[pos] in " \t":
            pos += 1
        if text[pos : pos + 2] != '="':
            raise ValueError("label =")
        pos += 2
        out: list[str] = []
        while True:
            end = text.find('"', pos)
            slash = text.find("\\", pos, end if end >= 0 else n)
            if end < 0:
                raise ValueError("unterminated label value")
            if slash < 0:
                out.append(text[pos:end])
                pos = end + 1
                break
            out.append(text[pos:slash])
            esc = text[slash + 1 : slash + 2]
            out.append(_ESCAPES.get(esc, "\\" + esc))
            pos = slash + 2
        labels[key] = "".join(out)[:MAX_LABEL_VALUE]


def _value(text: str) -> float:
    word = text.split(None, 1)[0] if text else ""
    if word in ("+Inf", "Inf"):
        return math.inf
    if word == "-Inf":
        return -math.inf
    return float(word)  # NaN parses too


def parse(text: str, max_series: int = MAX_SERIES, names: Container[str] | None = None) -> Exposition:
    """The samples of an exposition; with `names`, only those metrics (the others' labels are
    never parsed: an exporter's per-process series cost nothing then)."""
    return parse_lines(text.splitlines(), max_series, names)


def lines_of(pieces: Iterable[bytes]) -> Iterator[str]:
    """The lines of a body arriving in byte pieces (UTF-8, undecodable bytes replaced): an
    exposition parsed as it arrives is never held whole."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    rest = ""
    for piece in pieces:
        lines = (rest + decoder.decode(piece)).split("\n")
        rest = lines.pop()
        yield from lines
    rest += decoder.decode(b"", final=True)
    if rest:
        yield rest


def parse_lines(
    lines: Iterable[str], max_series: int = MAX_SERIES, names: Container[str] | None = None
) -> Exposition:
    """`parse` of lines as they come: at `max_series` kept series it stops reading."""
    samples: list[Sample] = []
    bad = 0
    for raw in lines:
        line = raw.strip()
        if not line or line[0] == "#":
            continue
        m = _NAME.match(line)
        if m is None:
            bad += 1
            continue
        if names is not None and m.group(0) not in names:
            continue
        pos = m.end()
        try:
            labels: dict[str, str] = {}
            if pos < len(line) and line[pos] == "{":
                labels, pos = _labels(line, pos + 1)
            rest = line[pos:].strip()
            value = _value(rest)
        except (ValueError, IndexError):
            bad += 1
            continue
        if len(samples) >= max_series:
            return Exposition(samples, bad, truncated=True)
        samples.append(Sample(m.group(0), labels, value))
    return Exposition(samples, bad)
