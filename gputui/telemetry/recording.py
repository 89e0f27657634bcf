"""Recordings: a versioned JSON-lines file of static facts and one snapshot per tick.

Format (version 7), one JSON object per line, UTF-8, optionally gzip-compressed (".gz"):

  line 1   header  {"format": "gputui-recording", "version": 7, "created": ISO-8601,
                    "gputui": "<version>", "interval": seconds, "derived": null | {...},
                    "note": str | null, "settings": null | {...}, "machine": MachineInfo}
  line 2+  tick    Snapshot: {"seq", "timestamp", "gpus": [GpuSample], "processes":
                    [GpuProcess], "host": HostSample, "launchers", "stacks": StackEvidence,
                    "nccl": NcclView}

Objects use the field names of the dataclasses in `gputui.telemetry.model`; a field that
is absent takes its default (None for every measured value), so fields equal to their
default are left out when writing.  Readers reject unknown fields and wrong types with
the file name, line number and the field's path, so a hand-edited file fails loudly.

Versions: 2 added `GpuSample.gpm` (GPM activity); 3 added `GpuProcess.state` (the process's
R/S/D/T/Z state at the tick) and `GpuProcess.rank`; 4 added `GpuSample.video_clock`; 5 added
`GpuProcess.worker_cpu` (its child processes' CPU); 6 added `Job.owner` (a rootless
container's user, with `Job.source` "rootless"); 7 added `Snapshot.stacks` (where the ranks
of a suspected job were, from their Python stacks: the evidence behind a verdict),
`Snapshot.nccl` (NCCL RAS's answers, on the tick after each round of questions:
gputui.telemetry.nccl.model) and the header's `settings` (the `[health]` waits a short
recording is judged with: `gputui.recording_settings`). Older files read as they are (no
GPM, no state, no workers, no stacks, no RAS answers: N/A). A file of a newer version than
this gputui knows is refused with "upgrade gputui": since readers reject unknown fields, a
version-2 reader would otherwise fail on the first process's `state` with a message that
does not say what to do."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import gzip
import io
import json
import os
import re
import typing
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from gputui import __version__
from gputui.telemetry.codec import (
    FieldError,
    decode_machine,
    decode_snapshot,
    dumps,
    encode_machine,
    encode_snapshot,
)
from gputui.telemetry.gpm_check import checked
from gputui.telemetry.model import GpuSample, MachineInfo, Snapshot, Topology
from gputui.untrusted import escaped, label

FORMAT_NAME = "gputui-recording"
FORMAT_VERSION = 7
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6, 7)
"""Versions this gputui reads: each later version only added fields with defaults."""

MAX_LINE_CHARS = 8 * 2**20
"""The longest line a reader accepts.  A tick of 16 GPUs with 256 processes is about 90 KB;
a longer line is refused before it is read whole (a small gzip can hold a huge line)."""
MAX_TOTAL_CHARS = 2 * 2**30
"""The most characters read from one recording, blank lines included: all of them are kept
in memory (for seeking), so a small gzip of many lines is refused before it fills it.  A
tick of 2 GPUs is about 2 KB: a day at 1 s is 170 MB."""
MAX_TIME = 253402300800.0
"""Timestamps must lie in [0, MAX_TIME): 1970 to the end of year 9999, what every time
formatter gputui uses can show."""


class RecordingError(ValueError):
    """A recording file that cannot be read, with where and why."""

    def __init__(self, path: str | os.PathLike[str], line: int | None, message: str) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(escaped(f"{where}: {message}"))  # the name and fields are the file's
        self.path = str(path)
        self.line = line
        self.message = message


# --------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordingHeader:
    """A recording's first line: the machine, the interval, who made it."""

    machine: MachineInfo
    interval: float
    created: str
    gputui_version: str
    derived: dict[str, Any] | None = None
    """Set for files made from other recordings (e.g. scaled to 16 GPUs): how and from what."""
    note: str | None = None
    settings: dict[str, dict[str, float]] | None = None
    """The settings the recording is judged with, checked (`recording_settings.validate`):
    {"health": {"stuck_seconds": 30.0}}; None: the user's."""


def _open_read(path: str | os.PathLike[str]) -> tuple[IO[str], IO[bytes]]:
    """The recording's text (decompressed when it begins with gzip's magic) and the file
    under it, to close after the text.  Only a regular file is opened (`safefile.open_data`:
    a FIFO or /dev/zero is refused, not read); a symbolic link is followed, and anyone may
    own the file: a recording is data the user chose, not configuration."""
    from gputui.safefile import open_data

    raw = os.fdopen(open_data(path), "rb")
    try:
        magic = raw.read(2)
        raw.seek(0)
        if magic == b"\x1f\x8b":
            return io.TextIOWrapper(gzip.GzipFile(fileobj=raw, mode="rb"), encoding="utf-8"), raw
        return io.TextIOWrapper(raw, encoding="utf-8"), raw
    except BaseException:
        raw.close()
        raise


class RecordingWriter:
    """Writes a recording line by line; each line is flushed, so an interrupted recording
    is still a valid file up to its last tick."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        machine: MachineInfo,
        interval: float,
        *,
        derived: dict[str, Any] | None = None,
        note: str | None = None,
        settings: dict[str, dict[str, float]] | None = None,
        replace: bool = True,
    ) -> None:
        """Raises `safefile.Refused` for a symbolic link, a FIFO or a device at `path` (never
        written through), FileExistsError when it exists and not `replace`, OSError."""
        from gputui.safefile import create_data

        self.path = str(path)
        self._raw = os.fdopen(create_data(path, replace=replace), "wb")
        if self.path.endswith(".gz"):
            # mtime=0: the same ticks give the same bytes (reproducible fixtures); the
            # filename goes in the gzip header, as GzipFile(path) put it
            raw = gzip.GzipFile(self.path, "wb", compresslevel=9, fileobj=self._raw, mtime=0)
            self._f: IO[str] = io.TextIOWrapper(raw, encoding="utf-8")
        else:
            self._f = io.TextIOWrapper(self._raw, encoding="utf-8")
        self.ticks = 0
        header = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "gputui": __version__,
            "interval": interval,
            "derived": derived,
            "note": note,
            "machine": encode_machine(machine),
        }
        if settings is not None:  # (absent: none, as in every file before version 7)
            header["settings"] = settings
        self._write(header)

    def _write(self, obj: Any) -> None:
        self._f.write(dumps(obj) + "\n")
        self._f.flush()

    def write(self, snap: Snapshot) -> None:
        self._write(encode_snapshot(snap))
        self.ticks += 1

    def close(self) -> None:
        try:
            self._f.close()
        finally:
            self._raw.close()  # (a GzipFile given a file object leaves it open)

    def __enter__(self) -> RecordingWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_HEADER_KEYS = {
    "format", "version", "created", "gputui", "interval", "derived", "note", "settings", "machine",
}  # fmt: skip


def _loads(path: str | os.PathLike[str], lineno: int, line: str, not_json: str | None = None) -> Any:
    """One line of JSON, or a RecordingError that says where and why (in one line)."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        message = not_json or f"not JSON: {exc.msg} at column {exc.colno}"
        raise RecordingError(path, lineno, message) from None
    except RecursionError:
        raise RecordingError(path, lineno, "JSON nested too deeply") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise RecordingError(path, lineno, f"number too long ({str(exc).split(':')[0]})") from None


def _parse_header(path: str | os.PathLike[str], line: str, lineno: int = 1) -> RecordingHeader:
    begins = label(line.strip()[:40])
    obj = _loads(path, lineno, line, f"not JSON: not a gputui recording (it begins {begins!r})")
    if not isinstance(obj, dict) or obj.get("format") != FORMAT_NAME:
        raise RecordingError(path, lineno, f'not a gputui recording (no "format": "{FORMAT_NAME}")')
    version = obj.get("version")
    if version not in READABLE_VERSIONS or isinstance(version, bool):
        raise RecordingError(
            path,
            1,
            f"recording format version {version!r}; this gputui reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))} (upgrade gputui to read newer files)",
        )
    unknown = obj.keys() - _HEADER_KEYS
    if unknown:
        raise RecordingError(path, 1, f"unknown header field(s): {', '.join(sorted(unknown))}")
    interval = obj.get("interval")
    if not isinstance(interval, int | float) or isinstance(interval, bool) or interval <= 0:
        raise RecordingError(path, 1, f"interval: expected a positive number, got {interval!r}")
    derived = obj.get("derived")
    if derived is not None and not isinstance(derived, dict):
        raise RecordingError(path, 1, "derived: expected an object or null")
    note = obj.get("note")
    if note is not None and not isinstance(note, str):
        raise RecordingError(path, 1, "note: expected a string or null")
    from gputui.recording_settings import validate

    try:
        settings = validate(obj.get("settings"))
    except ValueError as exc:
        raise RecordingError(path, 1, str(exc)) from None
    try:
        machine = decode_machine(obj.get("machine"))
    except FieldError as exc:
        raise RecordingError(path, 1, str(exc)) from None
    return RecordingHeader(
        machine=machine,
        interval=float(interval),
        created=str(obj.get("created", "")),
        gputui_version=str(obj.get("gputui", "")),
        derived=derived,
        note=note,
        settings=settings,
    )


def _check_time(where: str, ts: float | None) -> str | None:
    if ts is None or 0 <= ts < MAX_TIME:
        return None
    return f"{where}: {ts:g} is not a time gputui can show (seconds since 1970, before year 10000)"


def _check_snapshot(snap: Snapshot, machine: MachineInfo) -> str | None:
    problem = _check_time("timestamp", snap.timestamp)
    if problem:
        return problem
    for k, p in enumerate(snap.processes):
        problem = _check_time(f"processes[{k}].create_time", p.create_time)
        if problem:
            return problem
    n = len(machine.devices)
    for g in snap.gpus:
        if not 0 <= g.index < n:
            return f"gpus: GPU index {g.index} but the header lists {n} GPU(s)"
    for p in snap.processes:
        if not 0 <= p.gpu_index < n:
            return f"processes: GPU index {p.gpu_index} but the header lists {n} GPU(s)"
    return None


def iter_recording(path: str | os.PathLike[str]) -> Iterator[RecordingHeader | Snapshot]:
    """Yield the header, then each snapshot, validating as it goes."""
    header, lines = _read_lines(path, require_ticks=False)
    yield header
    for lineno, line in lines:
        yield _decode_line(path, lineno, line, header)


def read_recording(path: str | os.PathLike[str]) -> tuple[RecordingHeader, list[Snapshot]]:
    it = iter_recording(path)
    header = next(it)
    assert isinstance(header, RecordingHeader)
    ticks = [s for s in it if isinstance(s, Snapshot)]
    if not ticks:
        raise RecordingError(path, None, "the recording has a header but no ticks")
    return header, ticks


class _LazyTicks(Sequence[Snapshot]):
    """The ticks of a recording, decoded (and validated) on first use, then kept.

    Replaying a large recording starts at once instead of after decoding every tick; a bad
    line is reported, with its line number, when the replay reaches it."""

    def __init__(
        self, path: str | os.PathLike[str], header: RecordingHeader, lines: list[tuple[int, str]]
    ) -> None:
        self._path = path
        self._header = header
        self._lines = lines
        self._cache: list[Snapshot | None] = [None] * len(lines)

    def __len__(self) -> int:
        return len(self._lines)

    @typing.overload
    def __getitem__(self, i: int) -> Snapshot: ...
    @typing.overload
    def __getitem__(self, i: slice) -> Sequence[Snapshot]: ...

    def __getitem__(self, i: int | slice) -> Snapshot | Sequence[Snapshot]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        snap = self._cache[i]
        if snap is None:
            snap = self._cache[i] = self.peek(i)
        return snap

    def peek(self, i: int) -> Snapshot:
        """Tick `i`: the one kept if it was decoded before, else decoded and not kept (a
        replay judged from its start up to a tick: `replay_judge`)."""
        snap = self._cache[i]
        if snap is not None:
            return snap
        lineno, line = self._lines[i]
        return _decode_line(self._path, lineno, line, self._header)

    def holds_nccl(self) -> bool:
        """Whether a tick holds a NCCL RAS view: only a line with an object under the key
        "nccl" is decoded (in JSON an unescaped `"nccl"` followed by `:` is a key; a string
        inside a value cannot make one), up to the first that holds a view."""
        for i, (_lineno, line) in enumerate(self._lines):
            if _NCCL_KEY.search(line) is None:
                continue
            try:
                if self.peek(i).nccl is not None:
                    return True
            except RecordingError:
                continue  # (said when the replay reaches it)
        return False


_NCCL_KEY = re.compile(r'"nccl"\s*:\s*\{')


def holds_nccl(ticks: Sequence[Snapshot]) -> bool:
    """Whether any of a replay's ticks holds a NCCL RAS view (a recording's lines are
    searched first, not all decoded: `_LazyTicks.holds_nccl`)."""
    if isinstance(ticks, _LazyTicks):
        return ticks.holds_nccl()
    return any(t.nccl is not None for t in ticks)


def _decode_line(path: str | os.PathLike[str], lineno: int, line: str, header: RecordingHeader) -> Snapshot:
    obj = _loads(path, lineno, line)
    try:
        snap = decode_snapshot(obj)
    except FieldError as exc:
        raise RecordingError(path, lineno, str(exc)) from None
    problem = _check_snapshot(snap, header.machine)
    if problem:
        raise RecordingError(path, lineno, problem)
    return _checked_gpm(snap)


def _checked_gpm(snap: Snapshot) -> Snapshot:
    """`snap` with every GPM window whose figures cannot be true replaced by N/A with the
    reason (`gpm.checked`): the file is readable, its impossible figures are not shown."""
    fixed: list[GpuSample] | None = None
    for k, g in enumerate(snap.gpus):
        if g.gpm is None:
            continue
        w = checked(g.gpm)
        if w is not g.gpm:
            fixed = fixed or list(snap.gpus)
            fixed[k] = dataclasses.replace(g, gpm=w)
    return snap if fixed is None else dataclasses.replace(snap, gpus=tuple(fixed))


def _read_lines(
    path: str | os.PathLike[str], require_ticks: bool = True
) -> tuple[RecordingHeader, list[tuple[int, str]]]:
    """The validated header and the raw tick lines (with their line numbers).

    A recording whose writer was interrupted is read up to its last complete line: a gzip
    stream that ends without its end-of-stream marker, or a last line cut short (no newline,
    not JSON), ends the recording instead of failing it.
    """
    from gputui.safefile import Refused

    try:
        f, raw = _open_read(path)
    except Refused as exc:
        raise RecordingError(path, None, exc.why) from None
    except OSError as exc:
        raise RecordingError(path, None, exc.strerror or str(exc)) from None
    lineno = 1  # the line being read, for errors from the decompressor
    lines: list[tuple[int, str]] = []
    total = 0

    def readline() -> str:
        nonlocal total
        line = f.readline(MAX_LINE_CHARS + 1)
        if len(line) > MAX_LINE_CHARS:
            raise RecordingError(path, lineno, f"line longer than {MAX_LINE_CHARS // 2**20} MiB")
        total += len(line)
        if total > MAX_TOTAL_CHARS:  # a gzip bomb of short lines: memory, or time
            raise RecordingError(
                path,
                lineno,
                f"larger than {MAX_TOTAL_CHARS // 2**20} MiB uncompressed (the most gputui reads)",
            )
        return line

    with raw, f:
        try:
            first = readline()
            while first and not first.strip() and lineno < 100:  # `nvidia-smi -q` begins blank
                lineno += 1
                first = readline()
            if not first.strip():
                raise RecordingError(path, 1, "empty file: not a gputui recording")
            header = _parse_header(path, first, lineno)
            while True:
                lineno += 1
                line = readline()
                if not line:
                    break
                if line.strip():
                    lines.append((lineno, line))
        except EOFError:
            # a gzip stream without its end marker: the writer was interrupted (each line
            # was flushed, so every line before the last one is complete)
            if lineno == 1:
                raise RecordingError(path, 1, "compressed file ends inside the header line") from None
        except (UnicodeDecodeError, gzip.BadGzipFile, zlib.error) as exc:
            raise RecordingError(path, lineno, f"unreadable: {exc}") from None
    if lines and not lines[-1][1].endswith("\n"):
        try:
            json.loads(lines[-1][1])
        except json.JSONDecodeError:
            lines.pop()  # the last line, cut short by an interrupted writer
        except (ValueError, RecursionError):
            pass  # complete but bad: reported with its line number when decoded
    if require_ticks and not lines:
        raise RecordingError(path, None, "the recording has a header but no ticks")
    return header, lines


class ReplaySource:
    """Plays a recording: one recorded snapshot per tick, looping at the end.

    The header and the first tick are validated when it is created (so `gputui --replay`
    fails fast on a wrong file); later ticks are decoded as the replay reaches them."""

    live = False
    local_processes = False

    def __init__(self, path: str | os.PathLike[str], *, loop: bool = True) -> None:
        self.path = Path(path)
        self.label = self.path.name
        self.loop = loop
        self.header, lines = _read_lines(path)
        self.ticks: Sequence[Snapshot] = _LazyTicks(path, self.header, lines)
        self.ticks[0]  # validate the first tick now
        self.position = -1
        """Index of the tick most recently returned by sample()."""
        self.loops = 0
        self._ready_taken = False

    @property
    def interval(self) -> float:
        return self.header.interval

    @property
    def seekable(self) -> ReplaySource:
        return self

    def open(self) -> MachineInfo:
        return self.header.machine

    def take_ready(self) -> tuple[MachineInfo, Snapshot] | None:
        """The recorded facts and the next tick, at hand (the file was read and its first
        tick decoded when the source was made): the app draws its first frame with them,
        as with NVML's read-ahead (`source.take_ready`).  Once per source; a tick that does
        not decode gives None and is left to the poller, which reports it."""
        if self._ready_taken:
            return None
        self._ready_taken = True
        position, loops = self.position, self.loops
        try:
            return self.open(), self.sample()  # (open: what a subclass says the facts are)
        except RecordingError:
            self.position, self.loops = position, loops
            return None

    def sample(self) -> Snapshot:
        nxt = self.position + 1
        if nxt >= len(self.ticks):
            if self.loop:
                nxt = 0
                self.loops += 1
            else:
                nxt = len(self.ticks) - 1
        self.position = nxt
        return self.ticks[nxt]

    def seek(self, position: int) -> None:
        """Make the next sample() return tick `position + 1` (wrapping).

        Seeking is not playing through the end: it never counts as a loop."""
        self.position = (position + 1) % len(self.ticks) - 1 if self.ticks else -1

    def read_topology(self) -> Topology | None:
        return self.header.machine.topology

    def notes(self) -> list[str]:
        return []

    def close(self) -> None:
        pass
