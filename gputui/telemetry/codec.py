"""The recording format's values: a dataclass of `gputui.telemetry.model` as plain JSON (fields
equal to their default left out), and back with validation (unknown fields, wrong types,
numbers out of range and non-finite floats are refused with where and why).  The file
around the values (header, lines, gzip, limits) is recording.py's."""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from collections.abc import Callable
from typing import Any

from gputui.telemetry.model import MachineInfo, Snapshot, field_type

MAX_INT = 2**64
"""Integers in a recording are counters and sizes of 64 bits at most."""


class FieldError(Exception):
    """A value that does not fit its field (recording.py adds the file and line)."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}" if where else message)


# --------------------------------------------------------------------------------------
# Encoding: dataclass -> plain JSON values, leaving out fields equal to their default.
# --------------------------------------------------------------------------------------


def _encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for f in _fields(type(value)):
            if not f.compare:
                continue  # e.g. Snapshot.sample_cost: a property of this run, not the data
            v = getattr(value, f.name)
            if f.default is not dataclasses.MISSING and v == f.default:
                continue
            out[f.name] = _encode(v)
        return out
    if isinstance(value, tuple | list):
        return [_encode(v) for v in value]
    return value


_FIELDS: dict[type, tuple[dataclasses.Field[Any], ...]] = {}


def _fields(cls: type) -> tuple[dataclasses.Field[Any], ...]:
    fs = _FIELDS.get(cls)
    if fs is None:
        fs = _FIELDS[cls] = dataclasses.fields(cls)
    return fs


def encode_machine(info: MachineInfo) -> dict[str, Any]:
    return typing.cast(dict[str, Any], _encode(info))


def encode_snapshot(snap: Snapshot) -> dict[str, Any]:
    return typing.cast(dict[str, Any], _encode(snap))


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


# --------------------------------------------------------------------------------------
# Decoding with validation: converters compiled once per type from the annotations.
# --------------------------------------------------------------------------------------

Converter = Callable[[Any, str], Any]
_CONVERTERS: dict[Any, Converter] = {}


def _type_name(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def _converter(tp: Any) -> Converter:
    conv = _CONVERTERS.get(tp)
    if conv is None:
        conv = _CONVERTERS[tp] = _make_converter(tp)
    return conv


def _make_converter(tp: Any) -> Converter:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"unsupported union {tp}")
        sub = _converter(inner[0])
        optional = len(inner) != len(args)

        def conv_opt(v: Any, where: str) -> Any:
            if v is None and optional:
                return None
            return sub(v, where)

        return conv_opt
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            item = _converter(args[0])

            def conv_var(v: Any, where: str) -> Any:
                if not isinstance(v, list):
                    raise FieldError(where, f"expected a list, got {_type_name(v)}")
                return tuple(item(x, f"{where}[{k}]") for k, x in enumerate(v))

            return conv_var
        items = [_converter(a) for a in args]

        def conv_fixed(v: Any, where: str) -> Any:
            if not isinstance(v, list) or len(v) != len(items):
                raise FieldError(where, f"expected a list of {len(items)} values, got {v!r:.60}")
            return tuple(c(x, f"{where}[{k}]") for k, (c, x) in enumerate(zip(items, v, strict=True)))

        return conv_fixed
    if dataclasses.is_dataclass(tp):
        return _dataclass_converter(tp)
    if tp is bool:

        def conv_bool(v: Any, where: str) -> Any:
            if not isinstance(v, bool):
                raise FieldError(where, f"expected true/false, got {_type_name(v)}")
            return v

        return conv_bool
    if tp is int:

        def conv_int(v: Any, where: str) -> Any:
            if not isinstance(v, int) or isinstance(v, bool):
                raise FieldError(where, f"expected an integer, got {_type_name(v)} {v!r:.40}")
            if not -MAX_INT < v < MAX_INT:
                raise FieldError(where, "integer out of range (more than 64 bits)")
            return v

        return conv_int
    if tp is float:

        def conv_float(v: Any, where: str) -> Any:
            if not isinstance(v, int | float) or isinstance(v, bool):
                raise FieldError(where, f"expected a number, got {_type_name(v)} {v!r:.40}")
            if isinstance(v, int) and not -MAX_INT < v < MAX_INT:
                raise FieldError(where, "number out of range")
            if not math.isfinite(v):
                raise FieldError(where, f"expected a finite number, got {v!r}")
            return float(v)

        return conv_float
    if tp is str:

        def conv_str(v: Any, where: str) -> Any:
            if not isinstance(v, str):
                raise FieldError(where, f"expected a string, got {_type_name(v)}")
            return v

        return conv_str
    raise TypeError(f"no converter for {tp!r}")


def _dataclass_converter(cls: Any) -> Converter:
    specs: list[tuple[str, Converter, bool]] = []
    for f in dataclasses.fields(cls):
        if not f.compare:
            continue
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        specs.append((f.name, _lazy(cls, f.name), required))
    known = {name for name, _, _ in specs}
    name = cls.__name__

    def conv(v: Any, where: str) -> Any:
        if not isinstance(v, dict):
            raise FieldError(where, f"expected an object ({name}), got {_type_name(v)}")
        unknown = v.keys() - known
        if unknown:
            raise FieldError(where, f"unknown field(s) for {name}: {', '.join(sorted(unknown))}")
        kwargs = {}
        prefix = f"{where}." if where else ""
        for fname, fconv, required in specs:
            if fname in v:
                kwargs[fname] = fconv(v[fname], prefix + fname)
            elif required:
                raise FieldError(where, f"missing field {fname!r} for {name}")
        return cls(**kwargs)

    return conv


def _lazy(cls: Any, name: str) -> Converter:
    """The converter of field `name` of `cls`, its type resolved on first use (dataclasses can
    refer to each other; a field's type may be imported only then: `model.field_type`)."""
    cell: list[Converter] = []

    def conv(v: Any, where: str) -> Any:
        if not cell:
            cell.append(_converter(field_type(cls, name)))
        return cell[0](v, where)

    return conv


def decode_machine(obj: Any, where: str = "machine") -> MachineInfo:
    return typing.cast(MachineInfo, _converter(MachineInfo)(obj, where))


def decode_snapshot(obj: Any, where: str = "") -> Snapshot:
    return typing.cast(Snapshot, _converter(Snapshot)(obj, where))
