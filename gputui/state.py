"""What the monitor remembers between runs: `$XDG_STATE_HOME/gputui/state.json` (default
`~/.local/state/gputui/state.json`).

The refresh interval, the Overview's layout, the Processes tab's sort and filters and the
cards' sparklines, as the user left them.  The config file says how gputui starts the first
time; this file says how it was left (it wins over the config file, command-line flags win
over both).  `remember = false` in the config file's [ui], or `--no-remember`, neither reads
nor writes it.

The file is written atomically (a temporary file in the same directory, then a rename),
mode 0600 in a 0700 directory, never through a symbolic link nor into a directory others
can write (gputui/safefile.py).  It is read as untrusted: only a regular file that nobody
else could have written, at most MAX_BYTES, every field checked against the same limits as
the config file; anything else gives one line saying why and the defaults (the file is then
rewritten at exit).  Pure stdlib (no Textual).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gputui.config import CARD_SPARKLINES, CardConfig, UiConfig
from gputui.options import limits
from gputui.safefile import Refused, read_private, write_private
from gputui.telemetry.process_metrics import sort_field
from gputui.untrusted import escaped

LAYOUTS = ("auto", "cards", "compact")
"""The Overview's layouts, in the order `c` steps through them."""
MAX_BYTES = 16 * 1024
MAX_SEARCH = 200
VERSION = 1


@dataclass(frozen=True)
class Filters:
    """The process list's filters, as the last run left them."""

    mine: bool = False
    compute_only: bool = False
    gpu: int | None = None
    search: str = ""


def portable(filters: Filters) -> Filters:
    """The filters that mean the same on any machine (mine, compute only): what is carried
    into the next run.  A GPU number or a search names this machine's GPUs and processes; in
    another machine's recording (or the demo) it would silently hide rows, so it lasts one
    run (issue 24 item 11)."""
    return Filters(mine=filters.mine, compute_only=filters.compute_only)


@dataclass(frozen=True)
class SavedState:
    """What one run leaves for the next."""

    interval: float | None = None
    """Seconds between refreshes (live data only; a replay keeps its recorded interval)."""
    layout: str = "auto"
    sort: str | None = None
    """The Processes tab's order: a column key, "-" first for descending."""
    filters: Filters = field(default_factory=Filters)
    sparklines: tuple[str, ...] | None = None
    """The cards' sparklines; None: the config file's."""


def default_path() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "gputui" / "state.json"


class StateError(ValueError):
    pass


def _want(cond: bool, what: str) -> None:
    if not cond:
        raise StateError(what)


def from_json(data: Any) -> SavedState:
    """The state a decoded file describes; StateError (one line) for anything else."""
    _want(isinstance(data, dict), "not a JSON object")
    _want(data.get("version") == VERSION, f"version is not {VERSION}")
    unknown = set(data) - {"version", "interval", "layout", "sort", "filters", "sparklines"}
    _want(not unknown, "unknown key " + (repr(sorted(unknown)[0])[:40] if unknown else ""))
    interval = data.get("interval")
    if interval is not None:
        lo, hi = limits(UiConfig, "interval")
        _want(
            isinstance(interval, (int, float)) and not isinstance(interval, bool) and lo <= interval <= hi,
            f"interval must be a number from {lo:g} to {hi:g}",
        )
        interval = float(interval)
    layout = data.get("layout", "auto")
    _want(layout in LAYOUTS, f"layout must be one of {', '.join(LAYOUTS)}")
    sort = data.get("sort")
    if sort is not None:
        _want(
            isinstance(sort, str) and sort_field(sort.removeprefix("-")) is not None,
            "sort is not a process column",
        )
    raw = data.get("filters", {})
    _want(isinstance(raw, dict), "filters is not an object")
    _want(not set(raw) - {"mine", "compute_only", "gpu", "search"}, "filters has an unknown key")
    mine, compute, gpu, search = (
        raw.get("mine", False),
        raw.get("compute_only", False),
        raw.get("gpu"),
        raw.get("search", ""),
    )
    _want(isinstance(mine, bool) and isinstance(compute, bool), "filters.mine/compute_only are not booleans")
    _want(
        gpu is None or (isinstance(gpu, int) and not isinstance(gpu, bool) and 0 <= gpu < 1024),
        "filters.gpu is not a GPU index",
    )
    _want(
        isinstance(search, str) and len(search) <= MAX_SEARCH and search.isprintable(),
        "filters.search is not printable text",
    )
    sparklines = data.get("sparklines")
    if sparklines is not None:
        lo, hi = limits(CardConfig, "sparklines")
        _want(
            isinstance(sparklines, list)
            and lo <= len(sparklines) <= hi
            and all(isinstance(s, str) and s in CARD_SPARKLINES for s in sparklines),
            f"sparklines must be {lo} to {hi} of {', '.join(CARD_SPARKLINES)}",
        )
        sparklines = tuple(sparklines)
    return SavedState(interval, layout, sort, Filters(mine, compute, gpu, search), sparklines)


def to_json(state: SavedState) -> dict[str, Any]:
    out = asdict(state)
    if state.sparklines is not None:
        out["sparklines"] = list(state.sparklines)
    return {"version": VERSION, **out}


def _bounded_int(text: str) -> int:
    """JSON integers of at most 20 digits: a longer one is no setting (and Python refuses to
    convert one of more than 4300 digits with a ValueError)."""
    if len(text.lstrip("-")) > 20:
        raise StateError("a number longer than 20 digits")
    return int(text)


def load(path: Path | None = None) -> tuple[SavedState, str | None]:
    """The saved state, and a one-line warning when the file was there but not usable (then
    the defaults).  Never raises."""
    p = path or default_path()
    shown = escaped(str(p))
    try:
        raw = read_private(p, MAX_BYTES, follow_symlinks=False)
        try:
            data = json.loads(raw.decode("utf-8"), parse_int=_bounded_int)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise StateError("not valid JSON") from exc
        return from_json(data), None
    except FileNotFoundError:
        return SavedState(), None
    except Refused as exc:
        return SavedState(), f"{shown}: ignored ({exc.why}); using the defaults"
    except StateError as exc:
        return SavedState(), f"{shown}: ignored ({exc}); using the defaults"
    except OSError as exc:
        return SavedState(), f"{shown}: cannot read it ({exc.strerror or exc}); using the defaults"


def save(state: SavedState, path: Path | None = None) -> str | None:
    """Write the state atomically, mode 0600 in a 0700 directory, never through a symbolic
    link nor into a directory others can write; a one-line problem instead of raising."""
    p = path or default_path()
    try:
        write_private(p, json.dumps(to_json(state), indent=1).encode("utf-8"))
    except Refused as exc:
        return f"cannot save the settings: {exc}"
    except OSError as exc:
        return f"{escaped(str(p))}: cannot save the settings ({exc.strerror or exc})"
    return None
