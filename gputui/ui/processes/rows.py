"""The processes view's rows as plain data: rows from a snapshot, the view's sort and
filters, how the rows are arranged (tree, jobs), and where the cursor goes.  No Textual
here: tested and benchmarked on its own.  The table's lines are in `lines.py`.

A row is one process on one GPU, keyed by (GPU index, PID).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from gputui.telemetry.host.cmdline import readable_command
from gputui.telemetry.model import GpuProcess, Job, LauncherProcess, Snapshot
from gputui.telemetry.process_metrics import PROCESS_METRIC, PROCESS_METRICS, ProcessMetric, sort_field
from gputui.untrusted import literal  # the one rule: escapes

RowKey = tuple[int, int]
"""(GPU index, PID): one row."""
Ident = tuple[int, float]
"""(PID, start time): one process, as signals.py checks it."""

NOT_VISIBLE = "not visible from this PID namespace"


# --------------------------------------------------------------------------------------
# untrusted text
# --------------------------------------------------------------------------------------


def _quote(arg: str) -> str:
    if arg and not any(ch.isspace() for ch in arg) and "'" not in arg and '"' not in arg:
        return arg
    return "'" + arg.replace("'", "'\\''") + "'"


def command_text(cmdline: Sequence[str] | None, name: str | None = None) -> str:
    """The command line as one string (arguments with spaces quoted), escaped by `literal`;
    a process whose command line is empty (a kernel thread, a zombie) shows as [name]."""
    if cmdline:
        return literal(" ".join(_quote(a) for a in cmdline))
    return f"[{literal(name)}]" if name else "?"


def _gpu_set(gpus: Sequence[int]) -> str:
    """A launcher's GPUs in a few cells: "3", "0-7", "0,2", "4×" (four, not contiguous)."""
    if not gpus:
        return ""
    if len(gpus) == 1:
        return str(gpus[0])
    if list(gpus) == list(range(gpus[0], gpus[-1] + 1)):
        return f"{gpus[0]}-{gpus[-1]}"
    text = ",".join(map(str, gpus))
    return text if len(text) <= 3 else f"{len(gpus)}×"


# --------------------------------------------------------------------------------------
# rows
# --------------------------------------------------------------------------------------


@dataclass(slots=True)
class ProcessRow:
    """One process as the table shows it."""

    key: RowKey
    proc: GpuProcess
    command: str
    """Display text of the command line (escaped)."""
    haystack: str
    """What `/` searches as text: user, command line and job, lower case (the PID: `matches`)."""
    elapsed: float | None
    """Seconds since the process started, at the snapshot's time."""
    job: str = ""
    """The JOB column's text (escaped): `slurm 48213.0`, `pod ns/name`, ...; "" when unknown."""
    prefix: str = ""
    """In tree mode: the branch drawn before the command (`├─ `)."""
    launcher: LauncherProcess | None = None
    """Set on a launcher's row (tree mode): the launcher itself; its ranks are rows below it."""
    gpus: tuple[int, ...] = ()
    """On a launcher's row: the GPUs of its ranks."""

    @property
    def ident(self) -> Ident | None:
        p = self.proc
        return (p.pid, p.create_time) if p.visible and p.create_time is not None else None

    @property
    def is_compute(self) -> bool:
        return "C" in self.proc.type or self.proc.type == "M"

    @property
    def gpu_text(self) -> str:
        """The GPU column: a launcher's row shows its ranks' GPUs."""
        return _gpu_set(self.gpus) if self.launcher is not None else str(self.proc.gpu_index)


class RowBuilder:
    """Turns a snapshot's processes into rows, remembering each command line's display
    text (a live process keeps the same command line for its whole life)."""

    MAX_CACHE = 4096

    def __init__(self) -> None:
        self._commands: dict[tuple[tuple[str, ...] | None, str | None], tuple[str, str]] = {}
        self._jobs: dict[Job, str] = {}

    def rows(self, snapshot: Snapshot | None) -> list[ProcessRow]:
        if snapshot is None:
            return []
        return [self.row(p, snapshot.timestamp) for p in snapshot.processes]

    def row(self, p: GpuProcess, now: float, key: RowKey | None = None) -> ProcessRow:
        cache = self._commands
        if len(cache) > self.MAX_CACHE:
            cache.clear()
            self._jobs.clear()
        ck = (p.cmdline, p.name)
        texts = cache.get(ck)
        if texts is None:
            readable = readable_command(p.cmdline)
            cmd = literal(readable) if readable else command_text(p.cmdline, p.name)
            texts = cache[ck] = (cmd, f"{cmd} {command_text(p.cmdline, p.name)}".lower())
        cmd, low = texts
        job = ""
        if p.job is not None:
            from gputui.telemetry.host.jobs import job_label  # (cgroups: not for the first frame)

            job = self._jobs.get(p.job) or self._jobs.setdefault(p.job, literal(job_label(p.job)))
        user = p.user or ""
        return ProcessRow(
            key or (p.gpu_index, p.pid),
            p,
            cmd if p.visible else NOT_VISIBLE,
            f"{user.lower()} {low} {job.lower()}" if p.visible else "",
            max(0.0, now - p.create_time) if p.create_time is not None else None,
            job,
        )

    def launcher_rows(self, snapshot: Snapshot | None) -> list[ProcessRow]:
        """One row per launcher of the snapshot (tree mode), keyed (-1, PID); its GPUs and
        GPU memory are filled in by `arrange` from the ranks shown below it."""
        if snapshot is None:
            return []
        out = []
        for lp in snapshot.launchers:
            proc = GpuProcess(
                gpu_index=-1,
                pid=lp.pid,
                type="job",
                name=lp.name,
                user=lp.user,
                cmdline=lp.cmdline,
                create_time=lp.create_time,
                job=lp.job,
                launcher=lp.launcher,
            )
            row = self.row(proc, snapshot.timestamp, (-1, lp.pid))
            row.launcher = lp
            out.append(row)
        return out


# --------------------------------------------------------------------------------------
# columns, sorting and filtering
# --------------------------------------------------------------------------------------


Column = ProcessMetric
"""A column of the table: the registry's process entry (gputui/telemetry/metrics.py)."""
COLUMNS: tuple[Column, ...] = PROCESS_METRICS
COLUMN_BY_KEY = PROCESS_METRIC
MIN_COMMAND = 20
"""Narrower than this, columns are dropped (by priority) to leave room for the command."""


def _sort_value(key: str) -> Callable[[ProcessRow], object]:
    col = COLUMN_BY_KEY[key]
    if col.sort is not None:
        return col.sort
    if col.unit in ("text", "command"):
        return lambda r: (col.value(r) or "").lower()
    return col.value


@dataclass
class ViewState:
    """How the table is sorted and filtered (what the summary line shows)."""

    sort_key: str = "gpu"
    descending: bool = False
    mine: bool = False
    """Only processes of the user running gputui."""
    gpu: int | None = None
    """Only this GPU."""
    compute_only: bool = False
    search: str = ""
    """Case-insensitive text searched in user, command line and job; digits also find the
    PIDs that are or begin with them (`search_matches`)."""
    job: str | None = None
    """Only this job (its JOB column text)."""
    tree: bool = False
    """GPU processes under their launchers (torchrun, mpirun, ...)."""
    by_job: bool = False
    """Rows grouped by job (then sorted within each)."""
    hscroll: int = 0
    """Cells the command column is scrolled sideways (← →)."""

    def filters(self) -> list[str]:
        out = []
        if self.gpu is not None:
            out.append(f"GPU {self.gpu}")
        if self.job is not None:
            out.append(f"job {self.job}")
        if self.mine:
            out.append("mine")
        if self.compute_only:
            out.append("compute")
        if self.search:
            out.append(f"/{self.search}")
        return out


def view_state_for(sort: str | None) -> ViewState:
    """The initial view for a `default_sort` setting: a field name, "-" first for descending
    (e.g. "-gpu_memory"); GPU then PID for None or a name that is not a column."""
    if not sort:
        return ViewState()
    found = sort_field(sort.removeprefix("-"))
    if found is None:
        return ViewState()
    col, inverted = found
    return ViewState(sort_key=col.key, descending=sort.startswith("-") != inverted)


def search_matches(row: ProcessRow, needle: str) -> bool:
    """`/`'s rule: `needle` (lower case) is in the row's user, command line or job, or it is
    ASCII digits that the row's PID is or begins with (`65` finds 650 and 651, not 1650)."""
    if needle in row.haystack:
        return True
    digits = needle.strip()
    return digits.isascii() and digits.isdigit() and str(row.proc.pid).startswith(digits)


def filter_rows(rows: Iterable[ProcessRow], state: ViewState, me: str | None) -> list[ProcessRow]:
    gpu = state.gpu
    needle = state.search.lower()
    out = []
    for r in rows:
        if gpu is not None and r.key[0] != gpu:
            continue
        if state.mine and (not r.proc.visible or r.proc.user != me):
            continue
        if state.compute_only and not r.is_compute:
            continue
        if needle and not search_matches(r, needle):
            continue
        if state.job is not None and r.job != state.job:
            continue
        out.append(r)
    return out


def sort_rows(rows: Iterable[ProcessRow], key: str, descending: bool) -> list[ProcessRow]:
    """Sorted by `key`, ties by (GPU, PID) ascending; rows without a value (N/A, not
    visible) always last, whichever the direction."""
    base = sorted(rows, key=lambda r: r.key)
    value = _sort_value(key)
    known = [r for r in base if value(r) is not None]
    unknown = [r for r in base if value(r) is None]
    known.sort(key=value, reverse=descending)  # type: ignore[arg-type]  # stable: ties keep (GPU, PID)
    return known + unknown


def arrange(
    rows: Iterable[ProcessRow],
    state: ViewState,
    me: str | None,
    launchers: Sequence[ProcessRow] = (),
) -> list[ProcessRow]:
    """Filter, then sort: the rows the table shows, in order.  In tree mode each GPU
    process is under its launchers (rows from `RowBuilder.launcher_rows`), a launcher shown
    only above a shown rank, with its ranks' GPUs and GPU memory summed."""
    shown = filter_rows(rows, state, me)
    if state.by_job:
        shown = sorted(sort_rows(shown, state.sort_key, state.descending), key=lambda r: (not r.job, r.job))
    else:
        shown = sort_rows(shown, state.sort_key, state.descending)
    if not state.tree:
        for r in shown:
            r.prefix = ""
        return shown
    by_pid = {r.key[1]: r for r in launchers}
    used: dict[int, list[ProcessRow]] = {}
    for r in shown:
        parent = r.proc.launcher
        hops = 0
        while parent is not None and parent in by_pid and hops < 64:
            used.setdefault(parent, []).append(r)
            parent = by_pid[parent].proc.launcher
            hops += 1
    tops = []
    for pid, ranks in used.items():
        lr = by_pid[pid]
        mems = [r.proc.gpu_memory for r in ranks if r.proc.gpu_memory is not None]
        gpus = tuple(sorted({r.key[0] for r in ranks}))
        lr.gpus = gpus
        lr.proc = dataclasses.replace(
            lr.proc, gpu_index=gpus[0] if gpus else -1, gpu_memory=sum(mems) if mems else None
        )
        tops.append(lr)

    def parent_of(r: ProcessRow) -> RowKey | None:
        return (-1, r.proc.launcher) if r.proc.launcher is not None else None

    def order(sibs: list[ProcessRow]) -> list[ProcessRow]:
        return sort_rows(sibs, state.sort_key, state.descending)

    from gputui.telemetry.host.proctree import forest  # (tree mode only)

    out = []
    for r, prefix in forest([*tops, *shown], lambda r: r.key, parent_of, order):
        r.prefix = prefix
        out.append(r)
    return out


# --------------------------------------------------------------------------------------
# the cursor
# --------------------------------------------------------------------------------------


def place_cursor(
    keys: Sequence[RowKey],
    key: RowKey | None,
    index: int,
    screen_row: int,
    body_height: int,
    *,
    reordered: bool = False,
) -> tuple[int, int]:
    """Where the cursor and the view's top go after the rows changed: on the same process
    if it is still there, at the same screen row if possible; if it has gone, on the row
    that took its place (the next one, or the last).  After a new sort or filter
    (`reordered`) the first page is shown when the cursor's process is on it.  Returns
    (index, top); index -1 when there are no rows."""
    n = len(keys)
    if n == 0:
        return -1, 0
    new = -1
    if key is not None:
        try:
            new = keys.index(key)
        except ValueError:
            new = -1
    if new < 0:
        new = min(max(index, 0), n - 1)
    body = max(1, body_height)
    if reordered and new < body:
        screen_row = new
    top = new - max(0, min(screen_row, body - 1))
    top = max(0, min(top, max(0, n - body)))
    if new < top:
        top = new
    elif new >= top + body:
        top = new - body + 1
    return new, top
