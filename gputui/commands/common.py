"""Argument types and helpers shared by the subcommands."""

from __future__ import annotations

import argparse


def positive(value: str) -> float:
    """An argparse type: a number greater than zero."""
    try:
        f = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not f > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0: {value!r}")
    return f
