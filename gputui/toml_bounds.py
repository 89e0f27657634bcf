"""Bounds a TOML text must keep before it is parsed: no number longer than MAX_NUMBER_CHARS,
no array or inline table nested deeper than MAX_NESTING.

Python's TOML parser converts a 5000-digit integer with a ValueError (Python refuses more
than 4300 digits), a 400-digit one into an int that float() cannot take, and recurses once
per level of nesting until RecursionError.  No setting needs either, so the text is scanned
first, strings and comments skipped, and the first excess is named with its line.

A scanner, not a parser: it only has to find the excess in a file tomllib would accept;
a file that is not TOML gets tomllib's own error.  Standard library only.
"""

from __future__ import annotations

import re

MAX_NUMBER_CHARS = 40
"""Longest run of number characters (digits, letters, `.`, `_` not counted) starting with a
digit; a float64 needs at most 24 (`-2.2250738585072014e-308`)."""
MAX_NESTING = 32
"""Deepest nesting of arrays and inline tables (table headers count their brackets too)."""

_TOKENS = re.compile(
    r'''"""(?:[^\\]|\\.)*?"""{1,3}'''  # multi-line basic string (up to two quotes may end it)
    r"|'''.*?'''{1,3}"  # multi-line literal string
    r'|"(?:[^"\\\n]|\\.)*"?'  # basic string (an unclosed one: tomllib says so)
    r"|'[^'\n]*'?"  # literal string
    r"|#[^\n]*"  # comment
    r"|[\[{]|[\]}]"  # nesting
    r"|[0-9][0-9A-Za-z_.:+-]*",  # a number, date or digit-led bare key
    re.DOTALL,
)


def first_excess(text: str) -> tuple[int, str] | None:
    """(line, what) for the first number too long or nesting too deep; None when within."""
    depth = 0
    for m in _TOKENS.finditer(text):
        token = m.group()
        first = token[0]
        if first in "[{":
            depth += 1
            if depth > MAX_NESTING:
                return _line(text, m.start()), f"nested more than {MAX_NESTING} deep"
        elif first in "]}":
            depth = max(0, depth - 1)
        elif first.isdigit() and len(token) - token.count("_") > MAX_NUMBER_CHARS:
            return _line(text, m.start()), f"a number longer than {MAX_NUMBER_CHARS} characters"
    return None


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1
