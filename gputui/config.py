"""The config file: `$XDG_CONFIG_HOME/gputui/config.toml` (default `~/.config/gputui/config.toml`).

Every setting is a field of the frozen dataclasses below, declared once with its comment and
limits (`gputui.options.option`); the reader, the validator and `gputui --print-config` all
work from them.  A file with an unknown key, a wrong type or a value out of range is not
half-applied: every problem is reported with the file, line and key, and gputui runs with
the defaults.  Command-line flags override the file.  Pure stdlib (no Textual).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import re
import sys
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gputui.options import option
from gputui.palette import DEFAULT_PALETTE, PALETTE_NAMES, THEME_COLORS
from gputui.telemetry.alert_config import AlertConfig
from gputui.telemetry.health_config import HealthConfig
from gputui.telemetry.hints import HintConfig
from gputui.telemetry.metrics import CARD_CHARTS, CARD_DEFAULT_ITEMS, CARD_ITEMS
from gputui.telemetry.process_metrics import SORT_KEYS
from gputui.toml_bounds import first_excess
from gputui.untrusted import escaped

THEMES = tuple(THEME_COLORS)
CARD_SPARKLINES = CARD_CHARTS
CARD_INFO = tuple(CARD_ITEMS)

_COLOR = re.compile(r"^#[0-9a-fA-F]{6}$")
MAX_BYTES = 1024 * 1024
"""The largest config file read (the defaults, every setting commented, are about 12 KiB)."""


def _check_sort(value: str) -> str | None:
    if value.removeprefix("-") in SORT_KEYS:
        return None
    return f"expected one of {', '.join(SORT_KEYS)} (a leading - sorts descending), got {value!r}"


def _check_listen(value: str) -> str | None:
    from gputui.export.address import parse_listen  # stdlib only

    try:
        parse_listen(value)
    except ValueError as exc:
        return str(exc)
    return None


@dataclass(frozen=True)
class UiConfig:
    """The config file's [ui]: the monitor."""

    interval: float = option(
        "seconds between refreshes (live data); -i/--interval overrides", 1.0, min=0.1, max=60.0
    )
    theme: str = option(
        "colours: default | colorblind (blue/orange for green/red) | light (for a light "
        "terminal background) | mono (no colour)",
        "default",
        choices=THEMES,
    )
    readonly: bool = option(
        "hide and disable every action that changes something (signals to processes); --readonly overrides",
        False,
    )
    default_sort: str = option(
        f"process table order: a process field ({', '.join(SORT_KEYS)}); a leading - sorts descending",
        "-gpu_memory",
        check=_check_sort,
    )
    remember: bool = option(
        "remember the refresh interval, layout, sort, filters and sparklines between runs "
        "($XDG_STATE_HOME/gputui/state.json); --no-remember overrides",
        True,
    )
    colors: dict[str, str] = option(
        'override single colours of the theme: name = "#rrggbb" (xterm-256 colours show '
        "exactly over SSH).  Names: " + ", ".join(PALETTE_NAMES),
        factory=dict,
        choices=PALETTE_NAMES,
    )


@dataclass(frozen=True)
class CardConfig:
    """The config file's [cards]: what each GPU card shows."""

    sparklines: tuple[str, ...] = option(
        "history charts on each GPU card, top to bottom (1 to 4 of: " + ", ".join(CARD_SPARKLINES) + ")",
        ("util", "mem", "power"),
        choices=CARD_SPARKLINES,
        min=1,
        max=4,
    )
    info: tuple[str, ...] = option(
        "facts on each card's info line, in order (any of: " + ", ".join(CARD_INFO) + ")",
        CARD_DEFAULT_ITEMS,
        choices=CARD_INFO,
        min=0,
        max=len(CARD_INFO),
    )


@dataclass(frozen=True)
class WatchConfig:
    """The config file's [watch]: `gputui watch`."""

    alert_cmd: str = option(
        "command run for each alert, the alert as JSON on stdin (split like a shell "
        "would, but run without one); --alert-cmd overrides",
        "",
    )
    shell: bool = option("run alert_cmd through /bin/sh -c (pipes, $VARS); --shell overrides", False)
    rate_limit_minutes: float = option(
        "at most one command per alert (rule + GPU/process) in this many minutes", 15.0, min=0.0
    )
    timeout_seconds: float = option("kill an alert command still running after this long", 30.0, min=0.1)
    resolved: bool = option("also run the command when an alert clears", True)


@dataclass(frozen=True)
class ExportConfig:
    """The config file's [export]: `gputui export`."""

    listen: str = option(
        "address:port to serve /metrics on; a non-loopback address also needs --allow-remote",
        "127.0.0.1:9400",
        check=_check_listen,
    )
    interval: float = option("seconds between samples; --interval overrides", 1.0, min=0.1, max=60.0)
    processes: bool = option("export one series per GPU process (gputui_process_*)", True)


def _check_url(value: str) -> str | None:
    from gputui.cluster.http import check_url  # stdlib only

    return check_url(value) if value else None


@dataclass(frozen=True)
class ClusterLabels:
    """The config file's [cluster.labels]: the exporters' label names."""

    host: str = option("label naming the host", "Hostname")
    gpu: str = option("label with the GPU's index", "gpu")
    uuid: str = option("label with the GPU's UUID", "UUID")
    model: str = option("label with the GPU's model name", "modelName")
    pod: str = option("label with the Kubernetes pod using the GPU", "pod")
    namespace: str = option("label with the pod's namespace", "namespace")
    container: str = option("label with the pod's container", "container")
    driver: str = option("label with the driver version", "DCGM_FI_DRIVER_VERSION")


@dataclass(frozen=True)
class ClusterConfig:
    """The config file's [cluster]: `gputui cluster`."""

    prometheus: str = option(
        "Prometheus server (http(s)://host:9090) for `gputui cluster`; --prometheus overrides",
        "",
        check=_check_url,
    )
    targets: tuple[str, ...] = option(
        "exporters to scrape directly when no Prometheus server is given (host:port or URLs)", ()
    )
    selector: str = option('extra PromQL label matchers for every query, e.g. job="dcgm-exporter"', "")
    refresh: float = option("seconds between refreshes; --refresh overrides", 5.0, min=1.0, max=300.0)
    timeout: float = option(
        "seconds one request may take in all (a slower one counts as failed)", 5.0, min=0.5, max=120.0
    )
    history_minutes: float = option("span of the drill-in's history charts", 15.0, min=1.0, max=1440.0)
    max_response_mib: int = option("largest answer accepted from a server or exporter", 64, min=1, max=1024)
    auth_header: str = option(
        'Authorization header value sent with every request (e.g. "Bearer ..."); never shown', "", secret=True
    )
    auth_header_file: str = option("read the Authorization header value from this file instead", "")
    basic_auth_user: str = option("HTTP basic auth user", "")
    basic_auth_password: str = option("HTTP basic auth password; never shown", "", secret=True)
    basic_auth_password_file: str = option("read the basic auth password from this file instead", "")
    tls_ca_file: str = option("CA certificate file (PEM) to verify https servers with", "")
    tls_insecure_skip_verify: bool = option("do not verify https certificates (a test server only)", False)
    tls_client_cert: str = option("client certificate file (PEM) for mutual TLS", "")
    tls_client_key: str = option("the client certificate's key file (PEM)", "")
    labels: ClusterLabels = option(
        "which label carries each fact (dcgm-exporter's names)", factory=ClusterLabels
    )


@dataclass(frozen=True)
class Config:
    """Every setting of the config file, section by section."""

    ui: UiConfig = option("the monitor", factory=UiConfig)
    cards: CardConfig = option("what each GPU card shows", factory=CardConfig)
    alerts: AlertConfig = option(
        "alert thresholds: the TUI colours the GPU and counts active alerts in the header; "
        "`gputui watch --alert-cmd` runs a command",
        factory=AlertConfig,
    )
    hints: HintConfig = option(
        "efficiency hints from GPM activity (Hopper and newer): tensor cores idle under float32 "
        "work, tiny kernels, memory-bound, memory held while idle",
        factory=HintConfig,
    )
    health: HealthConfig = option(
        "job health: a GPU spinning in a collective, a stuck job, the rank the others wait for "
        "(docs/job-health.md); the alert is [alerts.job_stuck]",
        factory=HealthConfig,
    )
    watch: WatchConfig = option("`gputui watch`: headless alerts", factory=WatchConfig)
    export: ExportConfig = option("`gputui export`: Prometheus /metrics", factory=ExportConfig)
    cluster: ClusterConfig = option(
        "`gputui cluster`: GPUs of many hosts, from Prometheus or the exporters", factory=ClusterConfig
    )


@dataclass(frozen=True)
class LoadedConfig:
    """The settings as read from a file, with where from and what was wrong."""

    config: Config
    path: Path | None
    """The file that was read; None when there was none."""
    errors: tuple[str, ...] = ()
    """Problems found ("FILE:LINE: key: what"); when there are any, `config` is the defaults."""
    keys: frozenset[str] = frozenset()
    """The dotted keys the file sets ("health.stuck_seconds"), tables included: what a
    recording's own settings never override (`recording_settings.applied`)."""


def default_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".config"
    return root / "gputui" / "config.toml"


def load(path: str | os.PathLike[str] | None = None) -> LoadedConfig:
    """Read the config file (`path`, else the default location).  Never raises: a missing
    default file means the defaults; any problem means the defaults plus `errors`."""
    from gputui.safefile import Refused, read_private_text

    explicit = path is not None
    p = Path(path) if path is not None else default_path()
    shown = escaped(str(p))
    try:
        text = read_private_text(p, MAX_BYTES)
    except FileNotFoundError:
        if explicit:
            return LoadedConfig(Config(), p, (f"{shown}: no such file; using the defaults",))
        return LoadedConfig(Config(), None)
    except Refused as exc:
        return LoadedConfig(Config(), p, (f"{exc}; using the defaults",))
    except OSError as exc:
        return LoadedConfig(
            Config(), p, (f"{shown}: cannot read it ({exc.strerror or exc}); using the defaults",)
        )
    config, errors = parse(text, str(p))
    return LoadedConfig(config, p, tuple(errors), frozenset() if errors else frozenset(key_lines(text)))


def check_setting(cls: Any, name: str, raw: Any) -> str | None:
    """Why `raw` is not a valid value of `cls`'s setting `name` (as the config file's reader
    would say), or None: for settings that come from elsewhere (a recording's header)."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    problem, _ = _leaf(typing.get_type_hints(cls)[name], raw, f.metadata)
    return problem


def parse(text: str, name: str = "config.toml") -> tuple[Config, list[str]]:
    """The Config a file's text describes, and its problems (then the Config is the default)."""
    # imported here: a first run with no config file never needs the TOML parser
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    name = escaped(name)
    excess = first_excess(text)  # before tomllib: a ValueError or RecursionError there
    if excess is not None:
        return Config(), [f"{name}:{excess[0]}: {excess[1]}"]
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = escaped(str(exc))
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        if m:
            msg = msg[: m.start()].strip()
            return Config(), [f"{name}:{m.group(1)}: TOML syntax: {msg} (column {m.group(2)})"]
        return Config(), [f"{name}: TOML syntax: {msg}"]
    except (ValueError, RecursionError) as exc:  # past the scan all the same: one line
        return Config(), [f"{name}: not a usable TOML file ({type(exc).__name__})"]
    lines = key_lines(text)
    errors: list[str] = []
    config = _build(Config, Config(), data, "", errors, lines, name)
    if errors:
        return Config(), errors
    return config, []


# --------------------------------------------------------------------------------------
# building and validating
# --------------------------------------------------------------------------------------


def _where(name: str, lines: dict[str, int], key: str) -> str:
    line = lines.get(key)
    while line is None and "." in key:  # a key written inline: report its table's line
        key = key.rsplit(".", 1)[0]
        line = lines.get(key)
    return f"{name}:{line}" if line is not None else name


def _shown(text: str, limit: int = 60) -> str:
    """Untrusted text from the file (a key, a value) for a message: escaped, cut."""
    text = escaped(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _value(raw: Any) -> str:
    return _shown(repr(raw))


def _type_name(v: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(
        type(v), "an array" if isinstance(v, list) else "a table" if isinstance(v, dict) else type(v).__name__
    )


def _build(
    cls: Any,
    default: Any,
    data: dict[str, Any],
    prefix: str,
    errors: list[str],
    lines: dict[str, int],
    name: str,
) -> Any:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in data:
        if key not in fields:
            close = difflib.get_close_matches(key, list(fields), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            table = f"[{prefix[:-1]}]" if prefix else "the top level"
            errors.append(
                f"{_where(name, lines, prefix + key)}: {prefix}{_shown(key)}: unknown key in {table}{hint}; "
                f"known: {', '.join(fields)}"
            )
    values: dict[str, Any] = {}
    for fname, f in fields.items():
        current = getattr(default, fname)
        if fname not in data:
            values[fname] = current
            continue
        raw = data[fname]
        key = prefix + fname
        tp = hints[fname]
        if dataclasses.is_dataclass(tp):
            if not isinstance(raw, dict):
                errors.append(f"{_where(name, lines, key)}: {key}: expected a table, got {_type_name(raw)}")
                values[fname] = current
                continue
            values[fname] = _build(tp, current, raw, key + ".", errors, lines, name)
            continue
        problem, value = _leaf(tp, raw, f.metadata)
        if problem and f.metadata.get("secret"):  # a credential is never echoed
            problem = f"expected a string (the value is not shown: {key} is a secret)"
        if problem:
            item, _, text = problem.partition("\0")  # a table's entry names itself
            where = f"{key}.{item}" if text else key
            errors.append(f"{_where(name, lines, where)}: {where}: {text or problem}")
            values[fname] = current
        else:
            values[fname] = value
    result = cls(**values)
    clear, above = getattr(result, "clear_below", None), getattr(result, "above", None)
    if clear is not None and above is not None and clear > above:
        key = prefix + ("clear_below" if "clear_below" in data else "above")
        errors.append(
            f"{_where(name, lines, key)}: {prefix}clear_below ({clear:g}) must not be above "
            f"{prefix}above ({above:g})"
        )
    return result


def _leaf(tp: Any, raw: Any, meta: typing.Mapping[str, Any]) -> tuple[str | None, Any]:
    """(problem, value) for one setting."""
    lo, hi, choices, check = meta.get("min"), meta.get("max"), meta.get("choices"), meta.get("check")
    origin = typing.get_origin(tp)
    if tp is bool:
        if not isinstance(raw, bool):
            return f"expected true or false, got {_type_name(raw)} {_value(raw)}", None
        return None, raw
    if tp in (int, float):
        if (
            isinstance(raw, bool)
            or not isinstance(raw, int | float)
            or (tp is int and isinstance(raw, float))
        ):
            what = "an integer" if tp is int else "a number"
            return f"expected {what}, got {_type_name(raw)} {_value(raw)}", None
        if not math.isfinite(raw):  # TOML has nan and inf: nan never crosses a threshold
            return f"must be a finite number, got {_value(raw)}", None
        if lo is not None and raw < lo:
            return f"must be at least {lo:g}, got {_value(raw)}", None
        if hi is not None and raw > hi:
            return f"must be at most {hi:g}, got {_value(raw)}", None
        return None, tp(raw)
    if tp is str:
        if not isinstance(raw, str):
            return f"expected a string, got {_type_name(raw)} {_value(raw)}", None
        if choices is not None and raw not in choices:
            return f"expected one of {', '.join(choices)}, got {_value(raw)}", None
        if check is not None and (problem := check(raw)):
            return problem, None
        return None, raw
    if origin is tuple:
        if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
            return f"expected an array of strings, got {_type_name(raw)} {_value(raw)}", None
        bad = [x for x in raw if choices is not None and x not in choices]
        if bad:
            shown = ", ".join(map(_value, bad[:3]))
            return f"unknown item(s) {shown}; expected any of {', '.join(choices or ())}", None
        if len(set(raw)) != len(raw):
            return "an item is listed twice", None
        if lo is not None and len(raw) < lo:
            return f"needs at least {lo} item(s)", None
        if hi is not None and len(raw) > hi:
            return f"takes at most {hi} items, got {len(raw)}", None
        return None, tuple(raw)
    if origin is dict:
        if not isinstance(raw, dict):
            return f"expected a table, got {_type_name(raw)}", None
        for k, v in raw.items():
            if choices is not None and k not in choices:
                return f"{_shown(k)}\0unknown name; expected any of {', '.join(choices)}", None
            if not isinstance(v, str) or not _COLOR.match(v):
                return f'{_shown(k)}\0expected a colour as "#rrggbb", got {_value(v)}', None
        return None, dict(raw)
    raise TypeError(f"no validator for {tp!r}")  # pragma: no cover - a programming error


# --------------------------------------------------------------------------------------
# where each key is written (tomllib gives no positions for valid files)
# --------------------------------------------------------------------------------------

_BARE = r"[A-Za-z0-9_-]+"
_QUOTED = r"\"(?:[^\"\\]|\\.)*\"|'[^']*'"
_PART = rf"(?:{_BARE}|{_QUOTED})"
_DOTTED = rf"{_PART}(?:\s*\.\s*{_PART})*"
_HEADER = re.compile(rf"^\s*\[\[?\s*({_DOTTED})\s*\]\]?")
_KEY = re.compile(rf"^\s*({_DOTTED})\s*=")


def _unquote(part: str) -> str:
    if part[:1] == "'":
        return part[1:-1]
    if part[:1] == '"':
        try:  # TOML's basic-string escapes are JSON's (\\uXXXX ...), bar a few rare ones
            return str(json.loads(part))
        except ValueError:
            return part[1:-1]
    return part


def _split_dotted(text: str) -> list[str]:
    return [_unquote(p) for p in re.findall(_PART, text)]


def key_lines(text: str) -> dict[str, int]:
    """Dotted key path -> the line (1-based) where it is first written, tables included.

    A line scanner, not a parser: good enough to point at a key in a file tomllib accepted
    (a line inside a multi-line string that looks like `key =` could mislead it)."""
    out: dict[str, int] = {}
    table: list[str] = []
    for n, line in enumerate(text.splitlines(), 1):
        m = _HEADER.match(line)
        if m:
            table = _split_dotted(m.group(1))
            for k in range(1, len(table) + 1):
                out.setdefault(".".join(table[:k]), n)
            continue
        m = _KEY.match(line)
        if m:
            parts = table + _split_dotted(m.group(1))
            for k in range(len(table) + 1, len(parts) + 1):
                out.setdefault(".".join(parts[:k]), n)
    return out


# --------------------------------------------------------------------------------------
# printing the defaults
# --------------------------------------------------------------------------------------


def default_palette() -> dict[str, str]:
    """The default theme's colours by name (gputui/palette.py)."""
    return dict(DEFAULT_PALETTE)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, tuple | list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {v!r} as TOML")  # pragma: no cover


def _comment(text: str, width: int = 92) -> list[str]:
    import textwrap

    return ["# " + line for line in textwrap.wrap(text, width - 2)]


def default_text() -> str:
    """The defaults as a commented TOML file (`gputui --print-config`); parses back to them."""
    out = [
        "# gputui configuration.  Save as " + "$XDG_CONFIG_HOME/gputui/config.toml",
        "# (default ~/.config/gputui/config.toml) and change what you need; delete the rest.",
        "# A file with an unknown key or a wrong type is reported (file, line, key) and",
        "# ignored as a whole: gputui then runs with these defaults.  Flags override the file.",
    ]
    _emit(out, Config(), [])
    return "\n".join(out) + "\n"


def _emit(out: list[str], obj: Any, path: list[str], doc: str | None = None) -> None:
    hints = typing.get_type_hints(type(obj))
    leaves = [f for f in dataclasses.fields(obj) if not dataclasses.is_dataclass(hints[f.name])]
    tables = [f for f in dataclasses.fields(obj) if dataclasses.is_dataclass(hints[f.name])]
    if path and (leaves or doc):
        out.append("")
        if doc:
            out += _comment(doc)
        if leaves:
            out.append(f"[{'.'.join(path)}]")
    for f in leaves:
        value = getattr(obj, f.name)
        if typing.get_origin(hints[f.name]) is dict:
            continue  # written as its own table below
        line = f"{f.name} = {_toml_value(value)}"
        doc_text = f.metadata["doc"]
        if len(line) + len(doc_text) + 4 <= 92:
            out.append(f"{line}  # {doc_text}")
        else:
            out += _comment(doc_text)
            out.append(line)
    for f in leaves:
        if typing.get_origin(hints[f.name]) is dict:
            out.append("")
            out += _comment(f.metadata["doc"])
            out.append(f"[{'.'.join([*path, f.name])}]")
            palette = default_palette()
            out += [f'# {k} = "{palette[k]}"' for k in PALETTE_NAMES]
    for f in tables:
        _emit(out, getattr(obj, f.name), [*path, f.name], f.metadata.get("doc"))
