"""`g`: which Python the diagnosis runs, and with which environment.

- A browser session of `gputui serve` (or any run given `--diag-python`): that interpreter
  only.  The page chooses the selected row, and a process's /proc/PID/exe is a program the
  page would then have gputui run: never.
- A process selected (the cursor of a focused process list) in live data: that process's
  interpreter (the path it runs by, the same file as /proc/PID/exe: gputui.diag.argv0) with
  its environment's CUDA, NCCL, torch and library variables
  (gputui.diag.target), after checking the PID is still the process the row showed.
- In a replay the PIDs are another machine's: the selection is not used, and that is said.
- Nothing selected: on the Diagnostics tab the last choice again; else an interpreter chosen
  with `e`; else gputui.diag.target's default (your busiest GPU process of this tick, else
  the python3 on PATH, else gputui's own), and the header says which and why.
- Whoever's process or interpreter it is, the target says whose privileges its child runs
  with (as root: another user's runs as that user, or is refused: gputui.diag.privilege).

What it knows of the app comes through the pane: its `PaneContext` and its hub (the latest
snapshot); the app only says which row was selected and whether its Diagnostics tab was
already showing (`DiagnosticsPane.diagnose`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputui.diag.target import (
    Target,
    TargetError,
    busiest_own,
    default_target,
    process_target,
    python_target,
)

if TYPE_CHECKING:
    from textual.widget import Widget

    from gputui.telemetry.model import Snapshot
    from gputui.ui.context import PaneContext
    from gputui.ui.processes.rows import ProcessRow

SERVE_WHY = "gputui serve's --python (a browser session diagnoses no interpreter the page chose)"


def selected_row(focused: Widget | None) -> ProcessRow | None:
    """The process under the cursor of the focused widget, when it is a process list."""
    from gputui.ui.processes.widgets import ProcessTable

    return focused.current if isinstance(focused, ProcessTable) else None


def _same_process(pid: int, create_time: float) -> bool:
    import psutil

    from gputui.stacks.dump import START_TIME_TOLERANCE
    from gputui.telemetry.host.starttime import start_time

    try:
        return abs(start_time(psutil.Process(pid)) - create_time) <= START_TIME_TOLERANCE
    except (psutil.Error, TypeError):
        return False


def _busiest(ctx: PaneContext, snap: Snapshot | None) -> int | None:
    if snap is None or not ctx.sources.local_processes:
        return None
    found = [(p.pid, p.gpu_memory) for p in snap.processes if p.visible and p.gpu_memory is not None]
    return busiest_own(found)


def choose(
    ctx: PaneContext,
    snap: Snapshot | None,
    row: ProcessRow | None,
    *,
    shown: str,
    last: Target | None = None,
    picked: bool = False,
) -> tuple[Target | None, str | None]:
    """The target (None: the interpreter chosen with `e`, as the header already shows it), and
    a note to show when the selection was not used (None: nothing to say).  `snap`: the
    latest snapshot; `shown`: the interpreter the tab shows; `last`: the target of the last
    `g`, when it is pressed on the Diagnostics tab itself (None otherwise); `picked`: `shown`
    was chosen with `e`.  TargetError: the default cannot be run safely (see
    gputui.diag.privilege)."""
    if ctx.serve_session or ctx.diag_python:
        why = SERVE_WHY if ctx.serve_session else "--diag-python"
        return python_target(ctx.diag_python or shown, why), None
    note = None
    if row is not None and row.launcher is None:
        pid = row.proc.pid
        if not ctx.sources.local_processes:
            note = f"PID {pid} is in a recording (another machine's process): not diagnosed here"
        elif row.ident is None or not _same_process(*row.ident):
            note = f"PID {pid} has exited or cannot be read from here: not diagnosed"
        else:
            try:
                return process_target(pid), None
            except TargetError as exc:
                note = f"PID {pid} not diagnosed: {exc}"
    if note is None and row is None:
        if last is not None:
            return last, None  # g on the Diagnostics tab: the same again
        if picked:
            return None, None
    target = default_target(_busiest(ctx, snap))
    if note is not None:
        target.notes.insert(0, note)
    return target, note
