"""A job's health in the TUI: the verdict lines above the process list, and the job view
(`J` on a process of a job): the ranks side by side, the verdict, the job's energy.

Everything shown comes from the hub's `HealthReport` (gputui.telemetry.health), computed on
the poller's thread where the hints are; the UI only lays it out.  The verdict texts are
built from numbers and fixed words; a Slurm job id or pod name in a job's label is escaped
(`gputui.telemetry.alerts.job_label`).  Nothing here is markup.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar

from rich.style import Style
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen

from gputui.telemetry.health_config import STUCK_VERDICTS
from gputui.telemetry.model import MachineInfo, Snapshot
from gputui.ui.processes.lines import fmt_mem
from gputui.ui.render import Line, S, fit
from gputui.ui.widgets.text import TextLines

if TYPE_CHECKING:
    from textual.widget import Widget

    from gputui.telemetry.health_report import HealthReport, JobHealth, RankHealth
    from gputui.telemetry.hub import Hub
    from gputui.ui.processes.rows import ProcessRow

PREFIX = {**dict.fromkeys(STUCK_VERDICTS, "stuck: "), "stuck": "", "straggler": "straggler: "}
"""Said before a verdict's line ("stuck in a collective since ..." says it already)."""
MAX_VERDICT_LINES = 3
"""Verdict lines above the process list; more jobs with one: "+ N more"."""


def verdict_text(job: JobHealth) -> str:
    v = job.verdict
    return "" if v is None else PREFIX.get(v.kind, "") + v.short


JOB_VIEW_HINT = "  J: job view"


def verdict_line(job: JobHealth, width: int) -> Line:
    """A job's verdict in `width` cells (one spare): who and what whole first ("stuck: rank 1
    (PID 815, GPU 1) is the one the others wait for"); the job's label and the `J` hint
    where they fit, the label before the hint; only then is the verdict itself cut."""
    from gputui.telemetry.alerts import job_label  # (the engines' modules: not for the first frame)

    room = width - 1
    what = verdict_text(job)
    full = f" ⚠ {job_label(job)}: {what}"
    short = f" ⚠ {what}"
    for text, hint in ((full, JOB_VIEW_HINT), (full, ""), (short, JOB_VIEW_HINT), (short, "")):
        if len(text) + len(hint) <= room:
            return [(text, S.warn), (hint, S.dim)] if hint else [(text, S.warn)]
    return [(fit(short, max(10, room)), S.warn)]


def job_for_row(report: HealthReport | None, row: ProcessRow | None) -> JobHealth | None:
    """The job the row belongs to: a launcher's row (tree mode) or one of the job's ranks."""
    if report is None or row is None:
        return None
    if row.launcher is not None:
        return next((j for j in report.jobs if j.launcher == row.proc.pid), None)
    return report.job_of(row.proc.pid)


def verdict_jobs(report: HealthReport | None, pids: set[int]) -> list[JobHealth]:
    """The jobs with a verdict that have a process among `pids` (the list's rows), in the
    order their lines show."""
    if report is None:
        return []
    return [j for j in report.jobs if j.verdict is not None and any(r.pid in pids for r in j.ranks)]


def verdict_lines(report: HealthReport | None, pids: set[int], width: int) -> list[Line]:
    """One warning line per job of `verdict_jobs`, for the top of the process list."""
    jobs = verdict_jobs(report, pids)
    lines: list[Line] = [verdict_line(job, width) for job in jobs[:MAX_VERDICT_LINES]]
    if len(jobs) > MAX_VERDICT_LINES:
        lines.append([(f" + {len(jobs) - MAX_VERDICT_LINES} more jobs with a verdict", S.warn)])
    return lines


# --------------------------------------------------------------------------------------
# the job view
# --------------------------------------------------------------------------------------

COLUMNS = ("rank", "PID", "GPU", "util", "SM", "tensor", "memory", "power", "state", "CPU", "in state")
WIDTHS = (5, 8, 5, 6, 7, 7, 10, 8, 6, 7, 10)
"""The columns' widths where the view is wide enough; narrower, each column is as wide as its
widest cell, and past that whole columns are left out in `DROP_ORDER` (never cut)."""
DROP_ORDER = ("in state", "tensor", "util", "power", "SM", "memory", "GPU")
"""The columns a narrow view leaves out, first to last: rank, PID, state and CPU always stay."""


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v:.0f}%"


def _rank_cells(r: RankHealth, now: float) -> tuple[str, ...]:
    from gputui.telemetry.verdicts.words import duration

    since = "–" if r.state_since is None else duration(max(0.0, now - r.state_since))
    return (
        "?" if r.rank is None else str(r.rank),
        str(r.pid),
        ",".join(map(str, r.gpus)) or str(r.gpu),
        _pct(r.util),
        _pct(r.sm),
        _pct(r.tensor),
        "–" if r.memory is None else fmt_mem(r.memory),
        "–" if r.power is None else f"{r.power:.0f} W",
        r.state or "?",
        "–" if r.cpu_percent is None else f"{r.cpu_percent:.0f}%",
        since,
    )


def _table_width(widths: Sequence[int]) -> int:
    return 1 + sum(widths) + len(widths) - 1


def _layout(rows: Sequence[Sequence[str]], width: int) -> list[tuple[int, int]]:
    """(column, width) of each column shown, in order, for rows of cells to fit `width`."""
    if _table_width(WIDTHS) <= width:
        return list(enumerate(WIDTHS))
    natural = {i: max(len(r[i]) for r in (COLUMNS, *rows)) for i in range(len(COLUMNS))}
    for name in DROP_ORDER:
        if _table_width(list(natural.values())) <= width:
            break
        del natural[COLUMNS.index(name)]
    spare = width - _table_width(list(natural.values()))
    while spare > 0:  # what is left, a cell at a time, toward the wide widths
        grow = [i for i, w in natural.items() if w < WIDTHS[i]][:spare]
        if not grow:
            break
        for i in grow:
            natural[i] += 1
        spare -= len(grow)
    return list(natural.items())


def _row(cells: Sequence[str], layout: Sequence[tuple[int, int]], style: Style) -> Line:
    text = " " + " ".join(cells[i].rjust(w) for i, w in layout)
    return [(text, style)]


def _wrapped(text: str, width: int, first: str, rest: str, style: Style) -> list[Line]:
    """`text` at word boundaries in lines of `width`, the first after `first`, the others after
    `rest` (nothing cut: the verdict and its evidence are read whole)."""
    room = max(10, width - max(len(first), len(rest)) - 1)
    chunks = textwrap.wrap(text, room, break_on_hyphens=False) or [""]
    return [[((first if k == 0 else rest) + chunk, style)] for k, chunk in enumerate(chunks)]


Section = Callable[["JobHealth", float, int], list[Line]]
"""One part of the job view: (the job, the report's time, the width) -> its lines (none: the
part has nothing to say).  `SECTIONS` lists them in order; a new part is a function added
there."""


def title_section(job: JobHealth, now: float, width: int) -> list[Line]:
    from gputui.telemetry.alerts import job_label

    return [[(" " + job_label(job), S.title), (f"  {len(job.ranks)} ranks", S.label)]]


def verdict_section(job: JobHealth, now: float, width: int) -> list[Line]:
    v = job.verdict
    if v is None:
        judge = " no verdict: no rank has waited long enough to judge ([health] stuck_seconds)"
        return [[(judge, S.ok)]]
    lines = _wrapped(verdict_text(job), width, " ⚠ ", "   ", S.warn)
    clauses = v.why.split("; ")
    for k, clause in enumerate(clauses):  # the evidence, a clause a line, word for word
        lines += _wrapped(clause + (";" if k < len(clauses) - 1 else ""), width, "   ", "     ", S.label)
    return lines


def energy_section(job: JobHealth, now: float, width: int) -> list[Line]:
    return [[(" energy: ", S.label), (job.energy.text() if job.energy else "not read yet", S.value)]]


def ranks_section(job: JobHealth, now: float, width: int) -> list[Line]:
    """The ranks side by side (the verdict's in its colour), then the ranks that have gone."""
    from gputui.telemetry.verdicts.words import duration

    named = set(job.verdict.pids) if job.verdict is not None else set()
    rows: list[tuple[tuple[str, ...], Style]] = [
        (_rank_cells(r, now), S.warn if r.pid in named else S.value) for r in job.ranks
    ]
    for r in job.exited:
        at = "?" if r.exited_at is None else duration(max(0.0, now - r.exited_at)) + " ago"
        cells = ("?" if r.rank is None else str(r.rank), str(r.pid), str(r.gpu), *("",) * 5, "gone", "", at)
        rows.append((cells, S.bad))
    layout = _layout([cells for cells, _ in rows], width - 1)  # a cell of margin on the right
    return [[], _row(COLUMNS, layout, S.label), *(_row(cells, layout, style) for cells, style in rows)]


def where_section(job: JobHealth, now: float, width: int) -> list[Line]:
    """Where each rank's stack was, as the verdict read it (its frames are outside text)."""
    from gputui.telemetry.verdicts.words import shown

    read = [r for r in job.ranks if r.where is not None]
    if not read:
        return []
    lines: list[Line] = [[], [(" where the ranks were (their Python stacks, read for the verdict)", S.label)]]
    for r in read:
        w = r.where
        assert w is not None
        if w.place == "unread":
            text = f"could not be read: {shown(w.message or w.reason, 120)}"
        else:
            text = f"{w.place.replace('_', ' ')}: {shown(w.call)} ({shown(w.at)})"
        lines += _wrapped(f"{r.who}: {text}", width, "  ", "    ", S.value)
    return lines


def legend_section(job: JobHealth, now: float, width: int) -> list[Line]:
    legend = "state: R running · S sleeping · D disk wait · T stopped · Z zombie"
    return [[], *_wrapped(legend, width, " ", " ", S.dim)]


SECTIONS: list[Section] = [
    title_section,
    verdict_section,
    energy_section,
    ranks_section,
    where_section,
    legend_section,
]


def job_lines(job: JobHealth | None, now: float, width: int) -> list[Line]:
    """The job view's content: each of `SECTIONS` in turn."""
    if job is None:
        return [[(" the job has ended (no rank is running)", S.dim)]]
    return [line for section in SECTIONS for line in section(job, now, width)]


class JobScreen(ModalScreen[None]):
    """`J` on a process of a job: its ranks side by side, the verdict and the energy,
    refreshed every tick (the app gives a top screen the tick)."""

    DEFAULT_CSS = """
    JobScreen { align: center middle; }
    JobScreen > Vertical { width: 100%; height: 100%; border: round $accent; background: $surface; }
    JobScreen VerticalScroll { height: 1fr; scrollbar-size-vertical: 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "Back", key_display="esc", tooltip="Back to the process list"),
        Binding("P", "stacks", "Stacks", tooltip="Python stacks of every rank"),
    ]

    def __init__(self, hub: Hub, key: tuple[str, ...], *, local: bool) -> None:
        super().__init__()
        self.hub = hub
        self.key = key
        """The job's key (gputui.telemetry.health.JobHealth.key)."""
        self.local = local
        """The processes are this machine's (live): their stacks can be read."""

    def job(self) -> JobHealth | None:
        return _job(self.hub, self.key)

    def compose(self) -> ComposeResult:
        with Vertical():
            with VerticalScroll():
                yield TextLines(self._lines, id="job-lines")
            yield TextLines(lambda width: [[(" esc back · P stacks of every rank", S.label)]], id="hint")

    def _lines(self, width: int) -> list[Line]:
        report = self.hub.health_report()
        now, job = (report.timestamp if report else 0.0), self.job()
        lines = job_lines(job, now, width)
        if job is not None:  # NCCL's own view of the job (gputui.telemetry.nccl)
            from gputui.ui.processes.nccl_lines import nccl_lines

            pids = {r.pid for r in (*job.ranks, *job.exited)}
            lines += nccl_lines(self.hub.nccl_view(), pids, now, width, self.hub.nccl_absent())
        return lines

    def show_snapshot(self, info: MachineInfo | None, snapshot: Snapshot) -> None:
        if self.is_mounted:
            self.query_one("#job-lines", TextLines).update_lines()

    def action_close(self) -> None:
        self.dismiss(None)

    def action_stacks(self) -> None:
        open_job_stacks(self, self.hub, self.key, local=self.local)


# --------------------------------------------------------------------------------------
# the keys: J and P on a process list's row (`opener`: the list, which says and pushes)
# --------------------------------------------------------------------------------------


def _job(hub: Hub, key: tuple[str, ...]) -> JobHealth | None:
    report = hub.health_report()
    return None if report is None else next((j for j in report.jobs if j.key == key), None)


def open_job_view(
    opener: Widget, hub: Hub, row: ProcessRow | None, *, local: bool, shown: set[int] | None = None
) -> None:
    """`J`: the job view of the row's job, or why there is none; with `shown` (the PIDs of
    the list's rows: J from the Overview's cards), of the first job whose verdict line the
    list shows, else the row's."""
    report = hub.health_report()
    first = next(iter(verdict_jobs(report, shown)), None) if shown is not None else None
    if first is not None:
        opener.app.push_screen(JobScreen(hub, first.key, local=local))
        return
    if row is None:
        return
    job = job_for_row(report, row)
    if job is None:
        opener.notify(
            f"PID {row.proc.pid} is not a rank of a job gputui follows (a launcher such as torchrun, "
            "a Slurm job step or a pod with two GPU processes or more).",
            markup=False,
        )
        return
    opener.app.push_screen(JobScreen(hub, job.key, local=local))


def open_stacks(opener: Widget, hub: Hub, row: ProcessRow | None, *, local: bool) -> None:
    """`P`: a process's stacks; on a launcher's row (tree mode), every rank's."""
    if row is None:
        return
    if row.launcher is not None:
        job = job_for_row(hub.health_report(), row)
        if job is not None:
            open_job_stacks(opener, hub, job.key, local=local)
            return
    if not _stacks_allowed(opener, local):
        return
    if row.ident is None:
        opener.notify(f"PID {row.proc.pid} cannot be read: {row.command}", severity="warning", markup=False)
        return
    from gputui.ui.processes.stacks_view import StacksScreen

    opener.app.push_screen(StacksScreen([row.ident], f"PID {row.proc.pid}"))


def _stacks_allowed(opener: Widget, local: bool) -> bool:
    if local:  # this machine's processes (read-only and serve sessions too)
        return True
    from gputui.ui.processes.stacks_view import REPLAY_REFUSAL

    opener.notify(REPLAY_REFUSAL, severity="warning", markup=False)
    return False


def open_job_stacks(opener: Widget, hub: Hub, key: tuple[str, ...], *, local: bool) -> None:
    """The stacks of every rank of the job `key`."""
    if not _stacks_allowed(opener, local):
        return
    job = _job(hub, key)
    if job is None or not job.ranks:
        opener.notify("The job has no rank running.", markup=False)
        return
    from gputui.telemetry.alerts import job_label
    from gputui.ui.processes.stacks_view import StacksScreen

    targets = [(r.pid, r.create_time) for r in job.ranks]
    opener.app.push_screen(StacksScreen(targets, f"every rank of the {job_label(job)}"))
