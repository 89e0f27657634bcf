"""The processes view's lines as plain data: cells, the table's lines, the summary and
the notices above it.  No Textual here: tested and benchmarked on its own.  The rows, sort,
filters and cursor are in `rows.py`.

Values are rounded for display (GiB to 0.1, percent to 1, elapsed time to the minute
after the first one) so that fewer cells change from one tick to the next: what crosses
SSH is the changed cells.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.style import Style

from gputui.telemetry.metric_types import Unit
from gputui.telemetry.model import DeviceInfo, MachineInfo, Snapshot
from gputui.ui.processes.rows import (
    COLUMN_BY_KEY,
    COLUMNS,
    MIN_COMMAND,
    Column,
    Ident,
    ProcessRow,
    ViewState,
)
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
