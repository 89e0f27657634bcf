"""A recording's own judging settings: the header's `settings` (recording format 7).

A real recording of a stuck job is often shorter than the waits the defaults ask for
(`[health] stuck_seconds` 120 s): played as it is, it never shows a verdict.  Its header may
then say which waits it is judged with, `{"health": {"stuck_seconds": 30, "spin_seconds":
30}}`: every replay of it (the TUI, snapshot, watch, export) applies them, and says so.

Only how long to wait may be set (`RECORDING_KEYS`): a recording is data, not configuration;
it cannot switch a rule off or move a threshold of what counts as waiting.  Values are
checked as the config file's are (the same limits, one line).  A key the user's own config
file sets is never overridden: the user's value is kept, and that is said too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

from gputui.telemetry.health_config import HealthConfig

if TYPE_CHECKING:
    from gputui.config import Config, LoadedConfig

RECORDING_KEYS: dict[str, tuple[str, ...]] = {
    "health": ("stuck_seconds", "spin_seconds", "straggler_seconds"),
}
"""Table -> the settings a recording may carry: how long ranks wait before a verdict."""
TABLES: dict[str, type] = {"health": HealthConfig}

Settings = dict[str, dict[str, float]]


def validate(raw: Any) -> Settings | None:
    """A header's `settings`, checked; ValueError with what is wrong, in one line (the
    caller adds where)."""
    from gputui.config import check_setting

    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValueError("settings: expected an object or null")
    out: Settings = {}
    for table, values in raw.items():
        allowed = RECORDING_KEYS.get(table)
        if allowed is None:
            raise ValueError(f"settings: {table}: a recording may set only [health] {', '.join(_keys())}")
        if not isinstance(values, dict):
            raise ValueError(f"settings: {table}: expected an object")
        for key, value in values.items():
            if key not in allowed:
                raise ValueError(f"settings: {table}.{key}: a recording may set only {', '.join(_keys())}")
            problem = check_setting(TABLES[table], key, value)
            if problem:
                raise ValueError(f"settings: {table}.{key}: {problem}")
            out.setdefault(table, {})[key] = float(value)
    return out


def _keys() -> list[str]:
    return [k for keys in RECORDING_KEYS.values() for k in keys]


class Judging(NamedTuple):
    config: Config
    """The settings to judge the recording with."""
    note: str | None
    """What was taken from the recording and what kept from the user's file, one line
    (None: the recording carries no settings)."""
    banner: str | None
    """The same, short enough for an 80-column banner."""


def applied(loaded: LoadedConfig, settings: Mapping[str, Mapping[str, float]] | None) -> Judging:
    """The settings to judge a recording with: the user's config, with the recording's
    `settings` for the keys the user's file does not set; and the lines that say so."""
    config = loaded.config
    if not settings:
        return Judging(config, None, None)
    taken: list[tuple[str, float]] = []
    kept: list[tuple[str, float]] = []
    for table, values in settings.items():
        current = getattr(config, table)
        changes = {}
        for key, value in values.items():
            if f"{table}.{key}" in loaded.keys:
                kept.append((key, getattr(current, key)))
            else:
                changes[key] = value
                taken.append((key, value))
        config = replace(config, **{table: replace(current, **changes)})
    tables = "[" + "], [".join(settings) + "]"
    if taken:
        note = f"judged with this recording's {tables} {_listed(taken, ' = ')}"
        banner = f"waits from the recording: {_listed(taken, ' ')}"
    else:
        wanted = [(k, v) for values in settings.values() for k, v in values.items()]
        note = f"this recording is meant to be judged with {tables} {_listed(wanted, ' = ')}"
        banner = f"the recording's waits not used: yours set {', '.join(k for k, _ in kept)}"
    if kept:
        note += f"; {_listed(kept, ' = ')} from your config kept"
        if taken:
            banner += f" (yours: {', '.join(k for k, _ in kept)})"
    return Judging(config, note, banner)


def _listed(items: list[tuple[str, float]], sep: str) -> str:
    return ", ".join(f"{k}{sep}{v:g}" for k, v in items)
