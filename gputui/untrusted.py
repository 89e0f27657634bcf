"""The one rule for untrusted text: what may reach a terminal, a spreadsheet or a JSON reader
as itself, and how the rest is shown.

Untrusted text is anything gputui did not write: process names, command lines, users,
environment values, GPU and host names, fields of a recording, file names, child output.
Every renderer (the TUI, CSV, JSON, `watch`, notifications) passes it through this module,
and nothing else decides:

- `visible(ch)`: the terminal draws it as a glyph that advances the cursor: not a control
  (C0, DEL, C1 such as the CSI U+009B), not a format, bidirectional or default-ignorable
  character (U+200B, U+202E, U+034F, U+3164 ...), not a line or paragraph separator, not
  zero-width (combining marks, conjoining Hangul vowels and finals), not a surrogate, private
  use or unassigned code point.
- `one_cell(ch)`: visible and exactly one cell wide (not East Asian wide or fullwidth):
  what a table cell may show as itself.
- `escaped` / `literal`: the rest as Python-style escapes (`\\x1b`, `\\u202e`); `label`
  replaces it with "?" where an exact copy does not matter (GPU and host names).
- `json_text`: JSON from `json.dumps` with every non-visible character as a `\\uXXXX`
  escape, so a JSON reader gets the exact string and a terminal gets no control.
- `csv_cell`: text for a spreadsheet: escaped, and a cell that begins with `=`, `+`, `-`,
  `@`, a tab or a carriage return gets a leading `'` (OWASP's CSV-injection rule).

Standard library only: the exporter, `watch` and the snapshot writers import it without
Textual.  Markup is never interpreted: TUI code draws runs of plain text and passes
`markup=False` wherever Textual would parse it.
"""

from __future__ import annotations

import functools
import re
import unicodedata

_ZERO_WIDTH_CATEGORIES = frozenset({"Mn", "Me", "Mc"})
"""Combining marks: drawn on (or beside) the previous cell, so their width depends on the
terminal.  Spacing marks (Mc) included: terminals disagree on them."""

_INVISIBLE_RANGES = (
    (0x115F, 0x115F),  # HANGUL CHOSEONG FILLER (default-ignorable)
    (0x1160, 0x11FF),  # Hangul jungseong / jongseong: zero width when conjoined
    (0x3164, 0x3164),  # HANGUL FILLER (default-ignorable)
    (0xD7B0, 0xD7FF),  # Hangul jamo extended-B: conjoining, zero width
    (0xFFA0, 0xFFA0),  # HALFWIDTH HANGUL FILLER (default-ignorable)
    (0x1F1E6, 0x1F1FF),  # regional indicators: pairs join into one flag of two cells
    (0x1F3FB, 0x1F3FF),  # emoji skin-tone modifiers: merge with the previous emoji
)
"""Printable code points (by `str.isprintable`) that are not combining marks yet take no
cell of their own: Unicode's printable default-ignorable code points and the characters
terminals join with their neighbour."""

_WIDE = frozenset({"W", "F"})
_WIDE_RANGES = (
    (0x2630, 0x2637),  # trigrams
    (0x268A, 0x268F),  # monograms and digrams
    (0x4DC0, 0x4DFF),  # Yijing hexagrams
    (0x1D300, 0x1D356),  # Tai Xuan Jing symbols
    (0x1D360, 0x1D376),  # counting-rod numerals
)
"""Wide since Unicode 16 (as Textual and terminals now draw them), narrow in the older
Unicode tables of the Python versions gputui supports."""


@functools.lru_cache(maxsize=8192)
def visible(ch: str) -> bool:
    """True when the terminal draws `ch` as a glyph of one or two cells."""
    if " " <= ch <= "~":
        return True
    if not ch.isprintable():  # controls, C1, formats, separators, surrogates, unassigned
        return False
    if unicodedata.category(ch) in _ZERO_WIDTH_CATEGORIES:
        return False
    code = ord(ch)
    return not any(lo <= code <= hi for lo, hi in _INVISIBLE_RANGES)


@functools.lru_cache(maxsize=8192)
def one_cell(ch: str) -> bool:
    """True when `ch` is visible and exactly one terminal cell wide."""
    if " " <= ch <= "~":
        return True
    if not visible(ch) or unicodedata.east_asian_width(ch) in _WIDE:
        return False
    code = ord(ch)
    return not any(lo <= code <= hi for lo, hi in _WIDE_RANGES)


def escape_char(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _printable_ascii(text: str) -> bool:
    return text.isascii() and text.isprintable()


def literal(text: str) -> str:
    """`text` with every character that is not one cell wide as an escape (ESC -> `\\x1b`,
    U+202E -> `\\u202e`, a wide character -> `\\u4e2d`): one character, one cell, and
    an escape sequence displayed, never obeyed."""
    if _printable_ascii(text):
        return text
    return "".join(ch if one_cell(ch) else escape_char(ch) for ch in text)


def escaped(text: str) -> str:
    """`text` with every character that is not visible as an escape; wide characters stay
    (for output that is not laid out in cells: CSV, messages on stderr)."""
    if _printable_ascii(text):
        return text
    return "".join(ch if visible(ch) else escape_char(ch) for ch in text)


def label(text: str) -> str:
    """`text` as one-cell characters for a label (a GPU or host name): whitespace controls
    become spaces, anything else not one cell wide becomes "?"."""
    if _printable_ascii(text):
        return text
    return "".join(ch if one_cell(ch) else " " if ch in "\t\n\r" else "?" for ch in text)


_NON_ASCII = re.compile("[^\x20-\x7e\n]")


def _json_escape(match: re.Match[str]) -> str:
    ch = match.group()
    if visible(ch):
        return ch
    code = ord(ch)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_text(dumped: str) -> str:
    """Output of `json.dumps(..., ensure_ascii=False)` with every non-visible character as a
    JSON escape.  `json.dumps` already escapes C0 controls inside strings, so a raw newline
    left here is the indentation's own; DEL, C1 and the invisible characters are escaped
    here.  The decoded strings are unchanged."""
    if dumped.isascii() and "\x7f" not in dumped:
        return dumped
    return _NON_ASCII.sub(_json_escape, dumped)


_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")


def inert(text: str) -> str:
    """`text` with every control character (C0, DEL, C1) and every bidirectional or
    zero-width format character as "?": the last guard before text becomes terminal
    cells, cheap enough for every run of every line (callers clean untrusted text first)."""
    return _CONTROLS.sub("?", text)


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(text: str) -> str:
    """Untrusted text for a CSV cell: escaped, and neutralised for spreadsheets (a leading
    `'` before `=`, `+`, `-`, `@`, tab or carriage return, as OWASP recommends)."""
    if text.startswith(_FORMULA_START):
        text = "'" + text
    return escaped(text)
