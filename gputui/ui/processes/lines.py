"""The processes view as plain data: rows from a snapshot, sorting, filtering, where the
cursor goes, and the table's lines.  No Textual here: tested and benchmarked on its own.

A row is one process on one GPU, keyed by (GPU index, PID).  Values are rounded for
display (GiB to 0.1, percent to 1, elapsed time to the minute after the first one) so
that fewer cells change from one tick to the next: what crosses SSH is the changed cells.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.style import Style

from gputui.telemetry.cmdline import readable_command
from gputui.telemetry.jobs import job_label
from gputui.telemetry.metrics import PROCESS_METRIC, PROCESS_METRICS, ProcessMetric, Unit, sort_field
from gputui.telemetry.model import DeviceInfo, GpuProcess, Job, LauncherProcess, MachineInfo, Snapshot
from gputui.telemetry.proctree import forest
from gputui.ui.render import (
    CURSOR,
    CURSOR_DIM,
    CYAN,
    DIM,
    GIB,
    GREEN,
    GREY,
    MIB,
    RED,
    TEXT,
    WHITE,
    YELLOW,
    Line,
    S,
    fit,
    fmt_mhz,
    fmt_rate,
    fmt_temp,
    fmt_watts,
    pad,
    pad_line,
)
from gputui.untrusted import literal  # the one rule: escapes

if TYPE_CHECKING:
    pass

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


# --------------------------------------------------------------------------------------
# rows
# --------------------------------------------------------------------------------------


@dataclass(slots=True)
class ProcessRow:
    key: RowKey
    proc: GpuProcess
    command: str
    """Display text of the command line (escaped)."""
    haystack: str
    """What `/` searches: user and command line, lower case."""
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
    """Case-insensitive text searched in user, command line and job."""
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
        if needle and needle not in r.haystack:
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


# --------------------------------------------------------------------------------------
# formatting
# --------------------------------------------------------------------------------------


def fmt_mem(value: int | None) -> str:
    """Compact memory: 10.2GiB, 734MiB (0.1 GiB steps above 1 GiB: fewer changing cells)."""
    if value is None:
        return "N/A"
    if value >= 100 * GIB:
        return f"{value / GIB:.0f}GiB"
    if value >= GIB:
        return f"{value / GIB:.1f}GiB"
    return f"{value / MIB:.0f}MiB"


def fmt_elapsed(seconds: float | None) -> str:
    """42s, 12m, 3h05m, 2d03h: to the minute after the first one, so the column is quiet."""
    if seconds is None:
        return "N/A"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    m = s // 60
    if m < 60:
        return f"{m}m"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h" if d < 100 else f"{d}d"


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


def fmt_pct_cell(value: float | None) -> str:
    return "N/A" if value is None else f"{value:.0f}"


def _text_cell(value: object, visible: bool) -> str:
    return literal(str(value)) if value else ("?" if not visible else "N/A")


#: How a value of each registry unit reads in a table cell (compact, few changing cells).
CELL_TEXT: dict[Unit, Callable[[Any, bool], str]] = {
    "%": lambda v, _: fmt_pct_cell(v),
    "B": lambda v, _: fmt_mem(v),
    "B/s": lambda v, _: fmt_rate(v),
    "W": lambda v, _: fmt_watts(v),
    "MHz": lambda v, _: fmt_mhz(v),
    "°C": lambda v, _: fmt_temp(v),
    "s": lambda v, _: fmt_elapsed(v),
    "mJ": lambda v, _: "N/A" if v is None else str(v),
    "count": lambda v, _: "N/A" if v is None else str(v),
    "pstate": lambda v, _: "N/A" if v is None else f"P{v}",
    "mask": lambda v, _: "N/A" if v is None else f"0x{v:x}",
    "flag": lambda v, _: "N/A" if v is None else ("yes" if v else "no"),
    "text": _text_cell,
    "command": lambda v, _: str(v),
}


def cell_text(row: ProcessRow, col: Column) -> str:
    """One cell: the column's value in its unit's format; a host-side fact of a process not
    visible from here is blank (not N/A: there is nothing to ask)."""
    p = row.proc
    if col.cell is not None:
        return col.cell(row)
    if col.host and not p.visible:
        return ""
    return CELL_TEXT[col.unit](col.value(row), p.visible)


# --------------------------------------------------------------------------------------
# the table's lines
# --------------------------------------------------------------------------------------

CURSOR_BG = CURSOR
CURSOR_BG_UNFOCUSED = CURSOR_DIM


class PS:
    """Styles of the processes view."""

    header = Style(color=GREY, bold=True)
    header_sorted = Style(color=WHITE, bold=True, underline=True)
    gpu = Style(color=CYAN, bold=True)
    text = Style(color=TEXT)
    command = Style(color=GREY)
    hidden = Style(color=YELLOW, italic=True)
    mark = Style(color=YELLOW, bold=True)
    marked = Style(color=YELLOW)
    busy = Style(color=GREEN)
    note_ok = Style(color=GREEN, bold=True)
    note_warn = Style(color=YELLOW, bold=True)
    note_bad = Style(color=RED, bold=True)
    dim = Style(color=DIM)
    launcher = Style(color=CYAN)


_WITH_BG: dict[tuple[Style, str], Style] = {}


def _on(style: Style, bg: str | None) -> Style:
    if bg is None:
        return style
    out = _WITH_BG.get((style, bg))
    if out is None:
        out = _WITH_BG[(style, bg)] = style + Style(bgcolor=bg)
    return out


def merge_runs(line: Line) -> Line:
    """Join neighbouring runs of one style: each run costs a colour escape on the wire."""
    out: Line = []
    for text, style in line:
        if not text:
            continue
        if out and out[-1][1] == style:
            out[-1] = (out[-1][0] + text, style)
        else:
            out.append((text, style))
    return out


def visible_columns(width: int, jobs: bool = False) -> list[Column]:
    """The columns that fit, dropping the highest priority numbers first; the JOB column
    only when some row has a job (`jobs`)."""
    cols = [c for c in COLUMNS if jobs or c.key != "job"]
    while True:
        used = 2 + sum(c.width + 1 for c in cols if c.width)
        if used + MIN_COMMAND <= width:
            return cols
        droppable = [c for c in cols if c.priority > 0]
        if not droppable:
            return cols
        worst = max(droppable, key=lambda c: (c.priority, cols.index(c)))
        cols.remove(worst)


def column_spans(cols: Sequence[Column], width: int) -> list[tuple[Column, int, int]]:
    """Each column's cells [x0, x1) on the line (for clicks on the header)."""
    spans = []
    x = 2  # the mark column and a space
    for c in cols:
        w = c.width if c.width else max(0, width - x)
        spans.append((c, x, x + w))
        x += w + 1
    return spans


def header_line(cols: Sequence[Column], state: ViewState, width: int) -> Line:
    """Column titles; the sorted one highlighted with its direction (the arrow takes the
    separator's cell when the title fills its column)."""
    line: Line = [("  ", None)]
    rest = max(0, width - 2 - sum(c.width + 1 for c in cols if c.width))
    for c in cols:
        w = c.width or rest
        sorted_here = c.key == state.sort_key
        arrow = ("▼" if state.descending else "▲") if sorted_here else ""
        style = PS.header_sorted if sorted_here else PS.header
        if c.align == "<" and len(c.title) + len(arrow) <= w:
            text, sep = pad(c.title + arrow, w), " "
        else:
            text, sep = pad(c.title, w, c.align), arrow or " "
        line.append((text, style))
        if c.width:
            line.append((sep, style if arrow else None))
    return merge_runs(pad_line(line, width))


@dataclass(frozen=True, slots=True)
class RowNote:
    """What happened to a row after a signal, shown before its command."""

    text: str
    style: Style


def row_line(
    row: ProcessRow,
    cols: Sequence[Column],
    width: int,
    *,
    cursor: bool = False,
    focused: bool = True,
    marked: bool = False,
    note: RowNote | None = None,
    hscroll: int = 0,
) -> Line:
    bg = (CURSOR_BG if focused else CURSOR_BG_UNFOCUSED) if cursor else None
    visible = row.proc.visible
    base = PS.marked if marked else PS.text
    line: Line = [("*" if marked else " ", _on(PS.mark, bg)), (" ", _on(base, bg))]
    used = 2
    for c in cols:
        if c.width:
            text = pad(cell_text(row, c), c.width, c.align)
            if c.key == "gpu":
                style = PS.gpu
            elif c.key == "sm_util" and (row.proc.sm_util or 0) >= 50:
                style = PS.busy
            else:
                style = base
            line.append((text + " ", _on(style, bg)))
            used += c.width + 1
            continue
        rest = max(0, width - used)
        if note is not None and rest > 0:
            note_text = fit(note.text, rest) + " "
            line.append((note_text, _on(note.style, bg)))
            rest -= len(note_text)
        if rest > 0 and row.prefix:
            branch = row.prefix[:rest]
            line.append((branch, _on(PS.dim, bg)))
            rest -= len(branch)
        if rest > 0:
            style = PS.hidden if not visible else (PS.marked if marked else PS.command)
            if row.launcher is not None:
                style = PS.launcher
            command = row.command
            if hscroll > 0 and visible:
                command = "…" + command[hscroll + 1 :] if hscroll < len(command) else "…"
            line.append((fit(command, rest), _on(style, bg)))
    return merge_runs(pad_line(line, width, _on(base, bg) if bg else None))


def table_lines(
    rows: Sequence[ProcessRow],
    state: ViewState,
    width: int,
    height: int,
    *,
    top: int,
    cursor: int,
    focused: bool,
    marks: set[Ident],
    notes: dict[Ident, RowNote],
    empty_text: str = "no GPU processes",
) -> tuple[list[Column], list[Line]]:
    """The header and the rows from `top` that fit in `height` lines (always `height`
    lines, so the widget's size does not change with the row count)."""
    cols = visible_columns(width, any(r.job for r in rows))
    lines: list[Line] = [header_line(cols, state, width)]
    body = max(0, height - 1)
    for i in range(top, min(len(rows), top + body)):
        row = rows[i]
        ident = row.ident
        lines.append(
            row_line(
                row,
                cols,
                width,
                cursor=i == cursor,
                focused=focused,
                marked=ident in marks if ident is not None else False,
                note=notes.get(ident) if ident is not None else None,
                hscroll=state.hscroll,
            )
        )
    if not rows and body > 0:
        lines.append(pad_line([("  " + empty_text, PS.dim)], width))
    while len(lines) < height:
        lines.append([(" " * width, None)])
    return cols, lines


# --------------------------------------------------------------------------------------
# the lines above the table
# --------------------------------------------------------------------------------------

UNLISTED_MIN = GIB
UNLISTED_MIN_FRACTION = 0.01


def unlisted_memory(info: MachineInfo | None, snapshot: Snapshot | None) -> list[tuple[int, int]]:
    """(GPU, bytes) where the GPU's used memory exceeds what its listed processes hold by a
    significant amount (>= 1 GiB and >= 1 % of the GPU): memory of processes NVML does not
    list to us (other containers or VMs, MIG instances we cannot see).  The CUDA context of
    each listed process (5-15 MiB on an H200) and, on drivers without NVML's v2 memory
    info, the ~600 MiB the driver reserves are below the threshold."""
    if info is None or snapshot is None:
        return []
    totals: dict[int, DeviceInfo] = {d.index: d for d in info.devices}
    listed: dict[int, int] = {}
    unknown: set[int] = set()
    for p in snapshot.processes:
        if p.gpu_memory is None:
            unknown.add(p.gpu_index)
        else:
            listed[p.gpu_index] = listed.get(p.gpu_index, 0) + p.gpu_memory
    out = []
    for g in snapshot.gpus:
        if g.lost or g.mem_used is None or g.index in unknown:
            continue
        extra = g.mem_used - listed.get(g.index, 0)
        dev = totals.get(g.index)
        total = dev.memory_total if dev is not None and dev.memory_total else 0
        if extra >= UNLISTED_MIN and extra >= UNLISTED_MIN_FRACTION * total:
            out.append((g.index, extra))
    return out


def summary_line(
    shown: Sequence[ProcessRow],
    total: int,
    state: ViewState,
    width: int,
    *,
    marked: int = 0,
    gpus: int = 0,
    note: str = "",
) -> Line:
    """What is shown, how it is sorted and filtered (`note`: where the filters come from and
    how to clear them), and how many rows are marked."""
    shown = [r for r in shown if r.launcher is None]
    mem = sum(r.proc.gpu_memory or 0 for r in shown)
    n = len(shown)
    what = f"{n} process{'es' if n != 1 else ''}" if n == total else f"{n} of {total} processes"
    on = f" on {gpus} GPU{'s' if gpus != 1 else ''}" if gpus and state.gpu is None else ""
    col = COLUMN_BY_KEY[state.sort_key]
    arrow = "▼" if state.descending else "▲"
    line: Line = [
        (" " + what + on, S.title),
        (f" · {fmt_mem(mem)} GPU memory" if n else "", S.label),
        ("   sort ", S.label),
        (f"{col.title}{arrow}", S.value),
    ]
    if state.tree:
        line.append(("   tree", S.value))
    if state.by_job:
        line.append(("   grouped by job", S.value))
    filters = state.filters()
    line.append(("   filter ", S.label))
    line.append((literal(" · ".join(filters)) if filters else "none", PS.note_warn if filters else S.dim))
    if note:
        line.append((" " + note, S.label))
    if marked:
        line.append((f"   {marked} marked", PS.mark))
    return pad_line(line, width)


def notice_lines(
    rows: Sequence[ProcessRow],
    unlisted: Sequence[tuple[int, int]],
    width: int,
    *,
    live: bool,
    own_namespace: bool | None,
) -> list[Line]:
    """Warnings above the table: processes not visible from this PID namespace (and the
    fix), and GPU memory that no listed process holds."""
    out: list[Line] = []
    hidden = sum(1 for r in rows if not r.proc.visible)
    if hidden:
        n = f"{hidden} GPU process{'es' if hidden != 1 else ''}"
        if live:
            where = (
                "gputui runs in its own PID namespace (a container without --pid=host)"
                if own_namespace
                else "their PIDs do not exist here, or belong to other processes"
            )
            text = (
                f"⚠ {n} not visible from this PID namespace: {where}; NVML reports host PIDs. "
                "Run the container with --pid=host (Kubernetes: hostPID: true) to see and signal them."
            )
        else:
            text = f"⚠ {n} were not visible from the PID namespace where this was recorded."
        out.extend(_wrap(text, width, PS.note_warn))
    if unlisted:
        parts = ", ".join(f"GPU {g} {fmt_mem(b)}" for g, b in unlisted)
        if live and own_namespace:
            # what current drivers do (seen on 580): NVML called from a PID namespace lists
            # only that namespace's processes, so the others' memory is all that shows
            why = (
                "gputui runs in its own PID namespace (a container without --pid=host) and the "
                "driver lists only this namespace's processes; run the container with --pid=host "
                "(Kubernetes: hostPID: true) to see them"
            )
        else:
            why = "processes NVML does not show here: other containers or VMs"
        out.extend(_wrap(f"⚠ GPU memory used by no listed process: {parts} ({why})", width, PS.note_warn))
    return out


def _wrap(text: str, width: int, style: Style) -> list[Line]:
    import textwrap

    return [pad_line([(" " + chunk, style)], width) for chunk in textwrap.wrap(text, max(10, width - 2))]
