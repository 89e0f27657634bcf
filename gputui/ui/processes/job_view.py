"""A job's health in the TUI: the verdict lines above the process list, and the job view
(`J` on a process of a job): the ranks side by side, the verdict, the job's energy.

Everything shown comes from the hub's `HealthReport` (gputui.telemetry.health), computed on
the poller's thread where the hints are; the UI only lays it out.  The verdict texts are
built from numbers and fixed words; a Slurm job id or pod name in a job's label is escaped
(`gputui.telemetry.alerts.job_label`).  Nothing here is markup.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen

from gputui.telemetry.alerts import job_label
from gputui.telemetry.health_report import STUCK_VERDICTS, HealthReport, JobHealth, RankHealth
from gputui.telemetry.model import MachineInfo, Snapshot
from gputui.telemetry.verdicts.words import duration, shown
from gputui.ui.processes.lines import fmt_mem
from gputui.ui.processes.nccl_lines import nccl_lines
from gputui.ui.processes.widgets import TextLines
from gputui.ui.render import Line, S, fit

if TYPE_CHECKING:
    from gputui.telemetry.hub import Hub
    from gputui.ui.processes.process_list import ProcessList
    from gputui.ui.processes.rows import ProcessRow

PREFIX = {**dict.fromkeys(STUCK_VERDICTS, "stuck: "), "stuck": "", "straggler": "straggler: "}
"""Said before a verdict's line ("stuck in a collective since ..." says it already)."""
MAX_WHY_LINES = 8
"""The verdict's evidence, one clause a line ("; " between them in the text)."""
MAX_VERDICT_LINES = 3
"""Verdict lines above the process list; more jobs with one: "+ N more"."""


def verdict_text(job: JobHealth) -> str:
    v = job.verdict
    return "" if v is None else PREFIX.get(v.kind, "") + v.short


def job_for_row(report: HealthReport | None, row: ProcessRow | None) -> JobHealth | None:
    """The job the row belongs to: a launcher's row (tree mode) or one of the job's ranks."""
    if report is None or row is None:
        return None
    if row.launcher is not None:
        return next((j for j in report.jobs if j.launcher == row.proc.pid), None)
    return report.job_of(row.proc.pid)


def verdict_lines(report: HealthReport | None, pids: set[int], width: int) -> list[Line]:
    """One warning line per job with a verdict that has a process among `pids` (the list's
    rows), for the top of the process list."""
    if report is None:
        return []
    jobs = [j for j in report.jobs if j.verdict is not None and any(r.pid in pids for r in j.ranks)]
    lines: list[Line] = []
    for job in jobs[:MAX_VERDICT_LINES]:
        text = f" ⚠ {job_label(job)}: {verdict_text(job)}"
        lines.append([(fit(text, max(10, width - 14)), S.warn), ("  J: job view", S.dim)])
    if len(jobs) > MAX_VERDICT_LINES:
        lines.append([(f" + {len(jobs) - MAX_VERDICT_LINES} more jobs with a verdict", S.warn)])
    return lines


# --------------------------------------------------------------------------------------
# the job view
# --------------------------------------------------------------------------------------

COLUMNS = ("rank", "PID", "GPU", "util", "SM", "tensor", "memory", "power", "state", "CPU", "in state")
WIDTHS = (5, 8, 5, 6, 7, 7, 10, 8, 6, 7, 10)


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v:.0f}%"


def _rank_cells(r: RankHealth, now: float) -> tuple[str, ...]:
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


def _row(cells: Sequence[str], style: object) -> Line:
    text = " " + " ".join(c.rjust(w) for c, w in zip(cells, WIDTHS, strict=True))
    return [(text, style)]  # type: ignore[list-item]


def job_lines(job: JobHealth | None, now: float, width: int) -> list[Line]:
    """The job view's content."""
    if job is None:
        return [[(" the job has ended (no rank is running)", S.dim)]]
    lines: list[Line] = [[(" " + job_label(job), S.title), (f"  {len(job.ranks)} ranks", S.label)]]
    v = job.verdict
    if v is not None:
        lines.append([(" ⚠ " + fit(verdict_text(job), max(10, width - 4)), S.warn)])
        clauses = v.why.split("; ")
        for clause in clauses[:MAX_WHY_LINES]:
            lines.append([("   " + fit(clause, max(10, width - 4)), S.label)])
        if len(clauses) > MAX_WHY_LINES:
            lines.append([(f"   + {len(clauses) - MAX_WHY_LINES} more", S.dim)])
    else:
        judge = " no verdict: no rank has waited long enough to judge ([health] stuck_seconds)"
        lines.append([(judge, S.ok)])
    lines.append([(" energy: ", S.label), (job.energy.text() if job.energy else "not read yet", S.value)])
    lines.append([])
    lines.append(_row(COLUMNS, S.label))
    named = set(v.pids) if v is not None else set()
    for r in job.ranks:
        style = S.warn if r.pid in named else S.value
        lines.append(_row(_rank_cells(r, now), style))
    for r in job.exited:
        at = "?" if r.exited_at is None else duration(max(0.0, now - r.exited_at)) + " ago"
        cells = ("?" if r.rank is None else str(r.rank), str(r.pid), str(r.gpu), *("",) * 5, "gone", "", at)
        lines.append(_row(cells, S.bad))
    lines += _where_lines(job, width)
    lines.append([])
    lines.append([(" state: R running · S sleeping · D disk wait · T stopped · Z zombie", S.dim)])
    return lines


def _where_lines(job: JobHealth, width: int) -> list[Line]:
    """Where each rank's stack was, as the verdict read it (its frames are outside text)."""
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
        lines.append([("  " + fit(f"{r.who}: {text}", max(10, width - 3)), S.value)])
    return lines


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

    def __init__(self, hub: Hub, key: tuple[str, ...], stacks: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.hub = hub
        self.stacks = stacks
        self.key = key
        """The job's key (gputui.telemetry.health.JobHealth.key)."""

    def job(self) -> JobHealth | None:
        report = self.hub.health_report()
        return None if report is None else next((j for j in report.jobs if j.key == self.key), None)

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
            lines += nccl_lines(self.hub.nccl_view(), {r.pid for r in (*job.ranks, *job.exited)}, now, width)
        return lines

    def show_snapshot(self, info: MachineInfo | None, snapshot: Snapshot) -> None:
        if self.is_mounted:
            self.query_one("#job-lines", TextLines).update_lines()

    def action_close(self) -> None:
        self.dismiss(None)

    def action_stacks(self) -> None:
        if self.stacks is not None:
            self.stacks()


# --------------------------------------------------------------------------------------
# the keys: J and P on a process list's row
# --------------------------------------------------------------------------------------


def open_job_view(plist: ProcessList, row: ProcessRow | None) -> None:
    if row is None:
        return
    job = job_for_row(plist.hub.health_report(), row)
    if job is None:
        plist.notify(
            f"PID {row.proc.pid} is not a rank of a job gputui follows (a launcher such as torchrun, "
            "a Slurm job step or a pod with two GPU processes or more).",
            markup=False,
        )
        return
    plist.app.push_screen(JobScreen(plist.hub, job.key, lambda: _job_stacks(plist, job.key)))


def open_stacks(plist: ProcessList, row: ProcessRow | None) -> None:
    """A process's stacks; on a launcher's row (tree mode), every rank's."""
    if row is None:
        return
    if row.launcher is not None:
        job = job_for_row(plist.hub.health_report(), row)
        if job is not None:
            _job_stacks(plist, job.key)
            return
    if not _stacks_allowed(plist):
        return
    if row.ident is None:
        plist.notify(f"PID {row.proc.pid} cannot be read: {row.command}", severity="warning", markup=False)
        return
    from gputui.ui.processes.stacks_view import StacksScreen

    plist.app.push_screen(StacksScreen([row.ident], f"PID {row.proc.pid}"))


def _stacks_allowed(plist: ProcessList) -> bool:
    if plist.signals_possible:  # this machine's processes (read-only and serve sessions too)
        return True
    from gputui.ui.processes.stacks_view import REPLAY_REFUSAL

    plist.notify(REPLAY_REFUSAL, severity="warning", markup=False)
    return False


def _job_stacks(plist: ProcessList, key: tuple[str, ...]) -> None:
    if not _stacks_allowed(plist):
        return
    report = plist.hub.health_report()
    job = None if report is None else next((j for j in report.jobs if j.key == key), None)
    if job is None or not job.ranks:
        plist.notify("The job has no rank running.", markup=False)
        return
    from gputui.ui.processes.stacks_view import StacksScreen

    targets = [(r.pid, r.create_time) for r in job.ranks]
    plist.app.push_screen(StacksScreen(targets, f"every rank of the {job_label(job)}"))
