"""What panes, screens and widgets may know of the app, typed: they are handed a
`PaneContext` and never look the app's attributes up by name.

It fails closed: a context made without saying otherwise is read-only and has no source,
so a pane built without the app's context offers no action that changes something.
`readonly` is fixed when the context is made (a frozen dataclass): nothing renames or
re-enables it afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.config import Config
from gputui.state import Filters

if TYPE_CHECKING:
    from gputui.telemetry.source import Source
    from gputui.ui.processes.sent import SignalWatch
    from gputui.ui.render import Line

DEMO_RECORDING = Path(__file__).resolve().parents[1] / "data" / "demo.jsonl.gz"


class SourceState:
    """The app's current source, which changes when the demo is opened."""

    __slots__ = ("demo", "source")

    def __init__(self, source: Source | None = None, *, demo: bool = False) -> None:
        self.source = source
        self.demo = demo
        """The source is the bundled demo recording."""

    @property
    def local_processes(self) -> bool:
        """The processes are this machine's (live), so they can be signalled."""
        return self.source is not None and self.source.local_processes

    @property
    def demo_available(self) -> bool:
        """The bundled recording can be opened instead (it is not open already)."""
        return not self.demo and DEMO_RECORDING.exists()


@dataclass
class SentSignals:
    """The signals sent from this app and what became of them: one record that both
    process lists (the Overview's and the Processes tab's) read and write, so a signal sent
    from one shows on the other's rows and status line (`gputui.ui.processes.signals`)."""

    watches: dict[tuple[int, float], SignalWatch] = field(default_factory=dict)
    """By (PID, start time): the latest signal sent to (or refused for) the process."""
    status: dict[int, Line] = field(default_factory=dict)
    """The outcome of the latest signals, by PID (the line under the table)."""
    job_batch: tuple[str, list[tuple[int, float]]] | None = None
    """The latest whole-job signal: its title and its members (the status line's summary)."""


@dataclass(frozen=True)
class PaneContext:
    """The app's settings and source, for its panes and screens."""

    readonly: bool = True
    """Offer no action that changes something (signals to processes).  True unless the app
    says otherwise: a pane given no context fails closed."""
    config: Config = field(default_factory=Config)
    """Settings from the config file (or the defaults)."""
    default_sort: str | None = None
    """Initial process-table order: a GpuProcess field, "-" prefix for descending."""
    filters: Filters = field(default_factory=Filters)
    """The Processes tab's initial filters (as the last run left them)."""
    sources: SourceState = field(default_factory=SourceState)
    serve_session: bool = False
    """A browser session of `gputui serve`: nothing the page does may run a program it names
    (no interpreter chooser, no stress run); only `diag_python` is diagnosed."""
    diag_python: str | None = None
    """The Python the Diagnostics tab diagnoses (serve's --python); None: the default."""
    signals: SentSignals = field(default_factory=SentSignals, compare=False)
    """What was signalled, shared by every process list of the app."""


LOCKED = PaneContext()
"""The context of a pane built without one: read-only, no source."""
