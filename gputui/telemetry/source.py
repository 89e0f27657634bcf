"""What the poller needs from a source of snapshots: live NVML or a recording."""

from __future__ import annotations

from typing import Protocol

from gputui.telemetry.model import MachineInfo, Snapshot, Topology


class Source(Protocol):
    """A source of snapshots.  All methods are called from the poller thread only."""

    live: bool
    """True for real hardware, False for a recording."""
    label: str
    local_processes: bool
    """True when the processes' PIDs are this machine's (live NVML), so the processes view
    may signal them; False for a recording (its PIDs were another machine's, or another time's)."""
    """Shown in the header: "live", or the recording's file name."""

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
