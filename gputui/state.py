"""What the monitor remembers between runs: `$XDG_STATE_HOME/gputui/state.json` (default
`~/.local/state/gputui/state.json`).

The refresh interval, the Overview's layout, the Processes tab's sort and filters and the
cards' sparklines, as the user left them.  The config file says how gputui starts the first
time; this file says how it was left (it wins over the config file, command-line flags win
over both).  `remember = false` in the config file's [ui], or `--no-remember`, neither reads
nor writes it.

The file is written atomically (a temporary file in the same directory, then a rename),
mode 0600 in a 0700 directory.  It is read as untrusted: only a regular file owned by this
user, at most MAX_BYTES, every field checked against the same limits as the config file;
anything else gives one line saying why and the defaults (the file is then rewritten at
exit).  Pure stdlib (no Textual).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gputui.config import CARD_SPARKLINES, CardConfig, UiConfig
from gputui.options import limits
from gputui.telemetry.metrics import sort_field

LAYOUTS = ("auto", "cards", "compact")
"""The Overview's layouts, in the order `c` steps through them."""
MAX_BYTES = 16 * 1024
MAX_SEARCH = 200
VERSION = 1


@dataclass(frozen=True)
class Filters:
    mine: bool = False
    compute_only: bool = False
    gpu: int | None = None
    search: str = ""


@dataclass(frozen=True)
class SavedState:
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


def load(path: Path | None = None) -> tuple[SavedState, str | None]:
    """The saved state, and a one-line warning when the file was there but not usable (then
    the defaults).  Never raises."""
    p = path or default_path()
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return SavedState(), None
    except OSError as exc:
        return SavedState(), f"{p}: cannot read it ({exc.strerror or exc}); using the defaults"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise StateError("not a regular file")
        if st.st_uid != os.geteuid():
            raise StateError("owned by another user")
        if st.st_size > MAX_BYTES:
            raise StateError(f"larger than {MAX_BYTES} bytes")
        raw = os.read(fd, MAX_BYTES + 1)
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise StateError("not valid JSON") from exc
        return from_json(data), None
    except (StateError, OSError) as exc:
        return SavedState(), f"{p}: ignored ({exc}); using the defaults"
    finally:
        os.close(fd)


def save(state: SavedState, path: Path | None = None) -> str | None:
    """Write the state atomically, mode 0600; a one-line problem instead of raising."""
    p = path or default_path()
    tmp = None
    try:
        p.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".state-", suffix=".tmp", dir=p.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), 0o600)
            json.dump(to_json(state), f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
        tmp = None
    except OSError as exc:
        return f"{p}: cannot save the settings ({exc.strerror or exc})"
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return None
