"""Native frames' names as a person reads them: a C++ symbol's template arguments and
parameter lists elided (pybind11's dispatch frames are ~1,700 characters of them), and an
address py-spy could not name, which differs in every process (ASLR), as one mark so that
identical ranks fold.  Pure functions, no I/O."""

from __future__ import annotations

import re

READABLE = 120
"""Characters of a native frame's name at most, as printed (longer: elided, then cut)."""
SCAN_LIMIT = 1 << 16
"""Characters of a symbol looked at: past this it is cut, whatever it holds (outside text)."""
UNRESOLVED = "?"
"""How an address py-spy could not name is printed (its library stays beside it)."""
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_OPERATOR = re.compile(r"operator(?:<<=|>>=|<=>|<<|>>|<=|>=|->\*|->|\(\)|\[\]|<|>)")
"""C++ operator names whose brackets are not groups (`operator<<`, `operator()`)."""
_OPEN = {"<": ">", "(": ")"}


def is_address(name: str) -> bool:
    """`0x7fbca0a2a1ca`: py-spy's name for a native frame it could not symbolicate."""
    return _ADDRESS.fullmatch(name) is not None


def readable_symbol(name: str, limit: int = READABLE) -> str:
    """`name` within `limit` characters: unchanged when it fits; else each outermost `<...>`
    and `(...)` group as `<…>` / `(…)` (`pybind11::cpp_function::initialize<…>(…)::{lambda(…)#1}
    ::_FUN`); a name still too long, or whose brackets do not balance, is cut with `…`."""
    if len(name) <= limit:
        return name
    text = name[:SCAN_LIMIT]
    out: list[str] = []
    stack: list[str] = []
    k = 0
    while k < len(text):
        op = _OPERATOR.match(text, k) if text.startswith("operator", k) else None
        if op is not None:  # an operator's own brackets: part of its name
            if not stack:
                out.append(op.group())
            k = op.end()
            continue
        ch = text[k]
        if ch in _OPEN:
            if not stack:
                out.append(ch + "…")
            stack.append(_OPEN[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
            if not stack:
                out.append(ch)
        elif ch in ")>" and not stack:
            return _cut(name, limit)  # a closing bracket with none open: not a C++ name
        elif not stack:
            out.append(ch)
        k += 1
    if stack:
        return _cut(name, limit)
    short = "".join(out)
    return short if len(short) <= limit else _cut(short, limit)


def _cut(text: str, limit: int) -> str:
    return text[: limit - 1] + "…"
