"""Declaring configuration fields: a dataclass field with its comment and limits.

The config file's reader, its validator and `gputui --print-config` all read this metadata,
so a setting is described in exactly one place.  Pure stdlib: telemetry code uses it too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any


def option(
    doc: str,
    default: Any = dataclasses.MISSING,
    *,
    factory: Callable[[], Any] | None = None,
    **limits: Any,
) -> Any:
    """A config field.  limits: min, max (numbers), choices (allowed values or list items),
    check (a function returning an error message or None)."""
    meta = {"doc": doc, **limits}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def limits(cls: type, name: str) -> tuple[Any, Any]:
    """(min, max) of a config field, for whatever else is held to the config file's limits
    (the state file, the chart picker)."""
    meta = next(f.metadata for f in dataclasses.fields(cls) if f.name == name)
    return meta.get("min"), meta.get("max")
