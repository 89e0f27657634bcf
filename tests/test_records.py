"""gputui.records.record must behave as dataclasses.dataclass does, method for method: the
same __init__, equality, hash, repr, immutability, slots, fields and replace(); only the
way __eq__, __hash__ and __repr__ are made differs (shared closures, not compiled source).

Each check builds the same class body twice, once with each decorator, and compares."""

from __future__ import annotations

import dataclasses
import math
import pathlib
import re
from typing import Any, ClassVar

import pytest

from gputui.records import record

DECORATORS = {"dataclass": dataclasses.dataclass, "record": record}


def make(decorator: Any, **options: Any) -> type:
    """One class body, with fields of every kind the package uses."""

    class Thing:
        """A thing."""

        KIND: ClassVar[str] = "thing"
        name: str
        size: float = 0.0
        tags: tuple[str, ...] = dataclasses.field(default_factory=tuple)
        cache: int = dataclasses.field(default=0, compare=False)
        secret: str = dataclasses.field(default="", repr=False)
        weight: int = dataclasses.field(default=1, hash=False)

    return decorator(**options)(Thing)


OPTION_SETS = [
    {},
    {"frozen": True},
    {"frozen": True, "slots": True},
    {"slots": True},
    {"eq": False},
    {"repr": False},
    {"frozen": True, "eq": False},
    {"kw_only": True},
]


def pair(**options: Any) -> tuple[type, type]:
    return make(dataclasses.dataclass, **options), make(record, **options)


def behaviour(cls: type) -> dict[str, Any]:
    """What a user of the class can observe, with the class's own name taken out."""
    kw = cls.__dataclass_fields__["name"].kw_only  # type: ignore[attr-defined]
    new = (lambda *a, **k: cls(**dict(zip(("name", "size"), a, strict=False), **k))) if kw else cls
    a = new("gpu", 1.5, tags=("x",), cache=3, secret="s", weight=2)
    same = new("gpu", 1.5, tags=("x",), cache=99, secret="s", weight=2)  # only compare=False differs
    heavier = new("gpu", 1.5, tags=("x",), cache=3, secret="s", weight=7)  # only hash=False differs
    other = new("gpu", 2.5)
    nan = float("nan")
    n1, n2 = new("n", nan), new("n", nan)
    out: dict[str, Any] = {
        "repr": re.sub(r" at 0x[0-9a-f]+", "", repr(a)),  # (object's own, with repr=False)
        "eq_same": a == same,
        "ne_same": a != same,
        "eq_other": a == other,
        "eq_heavier": a == heavier,
        "eq_self": a == a,  # noqa: PLR0124
        "eq_foreign": a == ("gpu", 1.5),
        "eq_nan_shared": n1 == n2,  # the same nan object: tuples compare by identity first
        "eq_nan_self": n1 == n1,  # noqa: PLR0124
        "hash_attr": cls.__dict__.get("__hash__", "inherited"),
        "fields": [(f.name, f.compare, f.repr, f.hash) for f in dataclasses.fields(cls)],
        "match_args": getattr(cls, "__match_args__", None),
        "slots": getattr(cls, "__slots__", None),
        "replace": dataclasses.astuple(dataclasses.replace(a, size=9.0)),
        "asdict": dataclasses.asdict(a),
    }
    out["hash_attr"] = "none" if out["hash_attr"] is None else type(out["hash_attr"]).__name__
    try:
        out["hash_eq"] = hash(a) == hash(same)
        out["hash_heavier"] = hash(a) == hash(heavier)  # weight is not hashed
        out["hash_ne"] = hash(a) == hash(other)
        out["hash_value"] = hash(a) if cls.__dict__.get("__hash__") is not None else None
    except TypeError as e:
        out["hash"] = str(e)
    try:
        a.size = 3.0
        out["set"] = a.size
    except dataclasses.FrozenInstanceError as e:
        out["set"] = f"frozen: {e}"
    try:
        del a.size
        out["del"] = "deleted"
    except (dataclasses.FrozenInstanceError, AttributeError) as e:
        out["del"] = f"{type(e).__name__}: {e}"
    try:
        a.extra = 1  # type: ignore[attr-defined]
        out["extra"] = "set"
    except (AttributeError, TypeError) as e:
        out["extra"] = type(e).__name__
    return out


@pytest.mark.parametrize("options", OPTION_SETS, ids=lambda o: ",".join(o) or "plain")
def test_behaves_as_dataclass(options: dict[str, Any]) -> None:
    reference, ours = pair(**options)
    got, want = behaviour(ours), behaviour(reference)
    if want.get("hash_value") is not None:
        # the generated hash and ours hash the same tuple
        assert got["hash_value"] == want["hash_value"]
    assert got == want


def test_own_methods_are_kept() -> None:
    """A class that writes its own __eq__, __repr__ or __hash__ keeps it, as with dataclass."""
    for decorator in DECORATORS.values():

        @decorator(frozen=True)
        class Own:
            value: int

            def __eq__(self, other: object) -> bool:
                return True

            def __repr__(self) -> str:
                return "own"

            def __hash__(self) -> int:
                return 7

        assert Own(1) == Own(2)
        assert repr(Own(1)) == "own"
        assert hash(Own(1)) == 7


def test_own_eq_without_hash_matches_dataclass() -> None:
    """Python sets __hash__ = None beside a class's own __eq__; a frozen dataclass then adds
    its field hash anyway, and an unfrozen one leaves it unhashable."""
    for frozen in (True, False):
        got = []
        for decorator in DECORATORS.values():

            @decorator(frozen=frozen)
            class OwnEq:  # noqa: PLW1641 (the point: no __hash__ of its own)
                value: int

                def __eq__(self, other: object) -> bool:
                    return isinstance(other, OwnEq)

            try:
                got.append(hash(OwnEq(3)) == hash((3,)))
            except TypeError:
                got.append("unhashable")
        assert got[0] == got[1], (frozen, got)


def test_recursive_repr_and_subclass_name() -> None:
    for decorator in DECORATORS.values():

        @decorator
        class Node:
            children: list[Any]

        class Leaf(Node):
            pass

        n = Node([])
        n.children.append(n)
        assert repr(n) == "test_recursive_repr_and_subclass_name.<locals>.Node(children=[...])"
        assert repr(Leaf([])).endswith(".Leaf(children=[])")
        assert Leaf([]) != Node([])  # different classes: never equal, as dataclass has it
        assert Leaf([]) == Leaf([])


def test_subclass_record_adds_fields() -> None:
    """A record that extends a record compares and prints all its fields; its parent's
    methods still use only the parent's."""

    @record(frozen=True)
    class Base:
        a: int

    @record(frozen=True)
    class Child(Base):
        b: int = 0

    assert Child(1, 2) != Child(1, 3)
    assert repr(Child(1, 2)).endswith("Child(a=1, b=2)")
    assert hash(Child(1, 2)) == hash((1, 2))
    assert Base(1) == Base(1)
    assert repr(Base(1)).endswith("Base(a=1)")


def test_empty_and_single_field() -> None:
    for decorator in DECORATORS.values():

        @decorator(frozen=True)
        class Empty:
            pass

        @decorator(frozen=True)
        class One:
            x: float

        assert Empty() == Empty()
        assert hash(Empty()) == hash(())
        assert One(1.0) == One(1.0)
        assert One(1.0) != One(2.0)
        assert hash(One(1.0)) == hash((1.0,))
        nan = math.nan
        assert One(nan) == One(nan)  # one nan object: equal, as (nan,) == (nan,)


def test_package_uses_one_decorator() -> None:
    """Every class in gputui is made with `record`, so the rule lives in one place (and
    start-up does not compile three methods per class again).  Not rules.py: diagnosis
    children load it by path into the interpreter being diagnosed (stdlib only, 3.8+)."""
    root = pathlib.Path(__file__).resolve().parent.parent / "gputui"
    plain = re.compile(r"^\s*@(dataclasses\.)?dataclass\b", re.M)
    offenders = [
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if p.name not in ("records.py", "rules.py") and plain.search(p.read_text())
    ]
    assert offenders == []
