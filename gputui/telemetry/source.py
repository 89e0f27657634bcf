"""What the poller needs from a source of snapshots: live NVML or a recording."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from gputui.telemetry.model import MachineInfo, Snapshot, Topology

if TYPE_CHECKING:
    from gputui.telemetry.recording import RecordingHeader


class Seekable(Protocol):
    """A recording being played: it knows its ticks and where it is, and can go back (the
    app's step back, the tick counter in the header, the banner)."""

    header: RecordingHeader
    ticks: Sequence[Snapshot]

    @property
    def position(self) -> int:
        """Index of the tick most recently returned by sample() (-1 before the first)."""
        ...

    @property
    def interval(self) -> float:
        """Seconds between the recorded ticks."""
        ...

    def seek(self, position: int) -> None:
        """Make the next sample() return tick `position + 1` (wrapping)."""
        ...


class Source(Protocol):
    """A source of snapshots.  All methods are called from the poller thread only."""

    live: bool
    """True for real hardware, False for a recording."""
    label: str
    """Shown in the header: "live", or the recording's file name."""
    local_processes: bool
    """True when the processes' PIDs are this machine's (live NVML), so the processes view
    may signal them; False for a recording (its PIDs were another machine's, or another time's)."""

    @property
    def seekable(self) -> Seekable | None:
        """The recording's controls, for a replay; None for live data."""
        ...

    def open(self) -> MachineInfo:
        """Read the static facts.  Never raises for a missing driver: see SystemInfo."""
        ...

    def sample(self) -> Snapshot:
        """Produce the next snapshot."""
        ...

    def read_topology(self) -> Topology | None:
        """How the GPUs are connected (static, possibly slow to read)."""
        ...

    def notes(self) -> list[str]:
        """Problems seen once each (functions missing from the driver, unexpected errors)."""
        ...

    def close(self) -> None: ...


def take_ready(source: Source) -> tuple[MachineInfo, Snapshot] | None:
    """The source's static facts and a first snapshot if it read them ahead and has them at
    hand now (NvmlSource's prefetch, while the UI loads), handed over once; else None.  The
    one call the UI thread makes on a source, at mount, so that the first frame is drawn with
    the data: it never blocks (a source without the capability, or still reading, gives None)."""
    take = getattr(source, "take_ready", None)
    return take() if take is not None else None


def start_background(source: Source) -> None:
    """Tell the source the monitor's first frame is on screen: it may start what it left
    for later (NvmlSource: its slow-cadence thread).  Called on the poller's thread, as
    every method of a source; a source without such work ignores it."""
    start = getattr(source, "start_background", None)
    if start is not None:
        start()
