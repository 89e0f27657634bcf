"""`record`: `dataclasses.dataclass` with shared `__eq__`, `__hash__` and `__repr__`.

Python's `@dataclass` writes the source of each method it adds to a class and compiles it,
once per class, every time the program starts: `__init__`, `__repr__`, `__eq__`,
`__hash__` and, for frozen classes, `__setattr__` and `__delattr__`.  gputui declares its
data as about a hundred dataclasses, many of them wide (a GPU sample has 44 fields), and
creating them was most of what gputui's own imports cost on the way to the first frame
(bench/RESULTS.md, "The first frame, fourth pass"; what this saves: "fifth pass").

`record` takes the same arguments and leaves `__init__`, immutability, slots, fields,
`replace()` and `asdict()` to `dataclasses` itself.  It makes `__eq__`, `__hash__` and
`__repr__` from closures over the class's field names instead of compiled source; what they
return is what the generated methods return (tests/test_records.py builds each kind of
class both ways and compares):

- `__eq__`: instances of exactly the same class compare as the tuples of their `compare`
  fields; anything else is `NotImplemented`.
- `__hash__`: added, set to None or left alone by dataclass's own table (frozen and eq, a
  class's own `__hash__`); the value is the hash of the tuple of the fields
  with `hash=True`, or `compare` where `hash` is unset.
- `__repr__`: `QualName(field=value, ...)` over the `repr` fields, `...` for a value that
  contains itself.

A method that the class body writes itself is kept, as with `dataclass`.  `order` and
`unsafe_hash` are not offered (nothing in gputui orders or hashes a mutable record).  The one visible
difference: `__dataclass_params__` says `eq=False, repr=False`, since `dataclasses` did not
make those two methods.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Sequence
from threading import get_ident
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:

    def dataclass_transform(**_: Any) -> Callable[[Any], Any]:
        return lambda f: f


_C = TypeVar("_C", bound=type)

_MISSING = object()


def _getter(names: Sequence[str]) -> Callable[[Any], tuple[Any, ...]]:
    """obj -> the tuple of its attributes `names` (a tuple for one name and for none too)."""
    if len(names) >= 2:
        return operator.attrgetter(*names)
    if len(names) == 1:
        (name,) = names
        return lambda obj: (getattr(obj, name),)
    return lambda obj: ()


def _make_eq(names: Sequence[str]) -> Callable[[Any, Any], Any]:
    values = _getter(names)

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    return __eq__


def _make_hash(names: Sequence[str]) -> Callable[[Any], int]:
    values = _getter(names)

    def __hash__(self: Any) -> int:
        return hash(values(self))

    return __hash__


def _make_repr(names: Sequence[str]) -> Callable[[Any], str]:
    running: set[tuple[int, int]] = set()

    def __repr__(self: Any) -> str:
        key = (id(self), get_ident())
        if key in running:
            return "..."
        running.add(key)
        try:
            inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
            return f"{self.__class__.__qualname__}({inner})"
        finally:
            running.discard(key)

    return __repr__


def _hash_action(body: dict[str, Any], eq: bool, frozen: bool) -> str:
    """dataclass's table (`_hash_action`, without `unsafe_hash`): "add", "none" or "" (leave
    the class's own or inherited `__hash__`)."""
    own = body.get("__hash__", _MISSING)
    explicit = not (own is _MISSING or (own is None and "__eq__" in body))
    if not eq:
        return ""
    if frozen:
        return "" if explicit else "add"
    return "" if explicit else "none"


@overload
def record(cls: _C, /) -> _C: ...


@overload
def record(
    *,
    init: bool = True,
    repr: bool = True,
    eq: bool = True,
    frozen: bool = False,
    match_args: bool = True,
    kw_only: bool = False,
    slots: bool = False,
) -> Callable[[_C], _C]: ...


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def record(
    cls: Any = None,
    /,
    *,
    init: bool = True,
    repr: bool = True,
    eq: bool = True,
    frozen: bool = False,
    match_args: bool = True,
    kw_only: bool = False,
    slots: bool = False,
) -> Any:
    """`@dataclass` with the same arguments (see the module's docstring)."""

    def wrap(c: _C) -> _C:
        body = dict(c.__dict__)  # before dataclass rebuilds the class for slots
        action = _hash_action(body, eq, frozen)
        made: Any = dataclasses.dataclass(
            c,
            init=init,
            repr=False,
            eq=False,
            frozen=frozen,
            match_args=match_args,
            kw_only=kw_only,
            slots=slots,
        )
        fields = dataclasses.fields(made)

        def put(name: str, method: Callable[..., Any]) -> None:
            method.__qualname__ = f"{made.__qualname__}.{name}"
            setattr(made, name, method)

        if repr and "__repr__" not in body:
            put("__repr__", _make_repr([f.name for f in fields if f.repr]))
        if eq and "__eq__" not in body:
            put("__eq__", _make_eq([f.name for f in fields if f.compare]))
        if action == "add":
            put("__hash__", _make_hash([f.name for f in fields if (f.compare if f.hash is None else f.hash)]))
        elif action == "none":
            made.__hash__ = None
        return cast(_C, made)

    if cls is None:
        return wrap
    return wrap(cls)
