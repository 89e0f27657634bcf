"""The fleet's stuck jobs on the cluster screen: one row per job above the GPUs (worst first,
naming the rank, host and PID to look at), and a job's own screen (`enter` on its row): its
nodes, each node's verdict line, and what NCCL's RAS says of its ranks.

Everything here comes from exporters (labels, verdict lines, RAS's host names): drawn
through `clean`, the one filter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.style import Style
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen

from gputui.cluster.jobs import RAS_ONLY, SLOW, FleetJob, NodeJob, job_text
from gputui.cluster.model import ClusterState
from gputui.ui.render import Line, S, clean, line_len, pad, pad_line
from gputui.ui.widgets.footer import KeyFooter
from gputui.ui.widgets.lines import LineWidget

FLAG_W = 7
MAX_TITLE_W = 40


@dataclass(frozen=True)
class JobRow:
    """A job's row in the cluster table (above the GPUs)."""

    job: FleetJob


def flag(job: FleetJob) -> tuple[str, Style]:
    """The row's first word and its style: STUCK, NCCL (RAS only), SLOW (a straggler)."""
    if job.severity == RAS_ONLY:
        return "NCCL", S.bad
    if job.severity == SLOW:
        return "SLOW", S.warn
    return "STUCK", S.lost


def look_text(job: FleetJob) -> str:
    """ "rank 1 on node-a, PID 1129 (GPU 1)", or "" when nothing names a rank."""
    look = job.look_at()
    if look is None:
        return ""
    rank, host, pid, gpu = look
    who = f"rank {rank}" if rank else "a rank"
    where = f" on {host}" if host else ""
    pid_text = f", PID {pid}" if pid else ""
    gpu_text = f" (GPU {gpu})" if gpu else ""
    return f"{who}{where}{pid_text}{gpu_text}"


def title_width(jobs: Sequence[FleetJob], width: int) -> int:
    """The job rows' title column: the longest title, at most MAX_TITLE_W and a third of the row."""
    longest = max((len(clean(j.title)) for j in jobs), default=8)
    return max(8, min(longest, MAX_TITLE_W, width // 3))


def job_row_line(row: JobRow, width: int, title_w: int, selected: bool = False) -> Line:
    job = row.job
    word, style = flag(job)
    head_style = S.title + Style(reverse=True) if selected else S.title
    out: Line = [(" ", None), (pad(word, FLAG_W - 1), style), (pad(clean(job.title), title_w), head_style)]
    look = look_text(job)
    nodes = len(job.nodes)
    parts: list[tuple[str, Style]] = []
    if look:
        parts.append((clean(look), S.value))
    parts.append((f"{nodes} node{'s' if nodes != 1 else ''}", S.label))
    if any(n.stale for n in job.nodes):
        parts.append(("as last seen (host down)", S.warn))
    summary = job.worst.summary or (f"{job.problems[0].problem} (NCCL RAS)" if job.problems else "")
    if summary:
        parts.append((clean(summary), S.text))
    for k, (text, st) in enumerate(parts):
        sep: Line = [("  ·  ", S.dim)] if k else [(" ", None)]
        room = width - line_len(out) - line_len(sep)
        if room < 4:
            break
        out += [*sep, (pad(text, room) if len(text) > room else text, st)]
    return pad_line(out, width)


# --------------------------------------------------------------------------------------
# one job's screen
# --------------------------------------------------------------------------------------


def node_lines(n: NodeJob, width: int) -> list[Line]:
    head: Line = [
        (" ", None),
        (pad(clean(n.host_name), 16), S.title),
        (" ", None),
        (pad(clean(job_text(n.job)), 22), S.label),
        (" ", None),
        (pad(clean(n.verdict or "no verdict"), 10), S.bad if n.stuck else S.warn if n.verdict else S.dim),
    ]
    named = [
        f"rank {n.rank}" if n.rank else "",
        f"PID {n.pid}" if n.pid else "",
        f"GPU {n.gpu}" if n.gpu else "",
    ]
    text = "  ".join(x for x in named if x)
    if text:
        head += [(" ", None), (text, S.value)]
    if n.stale:
        head += [("  as last seen (host down)", S.warn)]
    out = [pad_line(head, width)]
    if n.summary:
        out.append(pad_line([(" " * 18, None), (clean(n.summary), S.text)], width))
    return out


def job_lines(job: FleetJob | None, width: int) -> list[Line]:
    if job is None:
        return [[(" this job has no verdict now (or is no longer reported)", S.dim)]]
    word, style = flag(job)
    hint: Line = [("esc back ", S.label)]
    title: Line = [(" ", None), (word, style), ("  ", None), (clean(job.title), S.title)]
    nodes = len(job.nodes)
    title += [(f"  {nodes} node{'s' if nodes != 1 else ''} with a verdict", S.label)]
    gap = width - line_len(title) - line_len(hint)
    out: list[Line] = [[*title, (" " * gap, None), *hint] if gap > 0 else title]
    look = look_text(job)
    out.append(
        [(" look at: ", S.label), (clean(look) if look else "no rank named (every rank waits)", S.value)]
    )
    out.append([])
    out.append([(" nodes, worst first", S.label)])
    for n in job.nodes:
        out += node_lines(n, width)
    out.append([])
    out += nccl_lines(job, width)
    return out


def nccl_lines(job: FleetJob, width: int) -> list[Line]:
    if not job.comms and not job.problems:
        return [[(" NCCL RAS: nothing published for this job's ranks", S.dim)]]
    out: list[Line] = [[(" NCCL RAS", S.label)]]
    for c in job.comms:
        ranks = "?" if c.ranks is None else str(c.ranks)
        missing = "" if not c.missing else f", {c.missing} missing"
        out.append(
            pad_line(
                [
                    ("   communicator ", S.label),
                    (clean(c.comm), S.value),
                    (f"  {ranks} ranks{missing}", S.bad if c.missing else S.value),
                    (f"  (asked on {clean(_host(job, c.reported_by))})", S.dim),
                ],
                width,
            )
        )
    for p in job.problems:
        who = f"rank {p.rank}" if p.rank else "a rank"
        where = f" on {p.host}" if p.host else ""
        pid = f" (PID {p.pid})" if p.pid else ""
        what = f"{p.problem}" + (f" in {p.collective}" if p.collective else "")
        out.append(
            pad_line(
                [
                    ("   ", None),
                    (clean(f"{who}{where}{pid}"), S.value),
                    (": ", S.label),
                    (clean(what), S.bad),
                    (f"  communicator {clean(p.comm)}", S.dim),
                    (f"  (asked on {clean(_host(job, p.reported_by))})", S.dim),
                ],
                width,
            )
        )
    return out


def _host(job: FleetJob, key: str) -> str:
    return next((n.host_name for n in job.nodes if n.host == key), key)


class JobBoard(LineWidget):
    def __init__(self, owner: JobScreen) -> None:
        super().__init__(id="job-board")
        self.owner = owner

    def build(self, width: int, height: int) -> list[Line]:
        return job_lines(self.owner.job(), width)


class JobScreen(Screen[None]):
    """One job: its nodes with their verdict lines, and NCCL RAS's findings."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "app.pop_screen", "Back", tooltip="Back to every GPU"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, job_key: str, state: ClusterState | None) -> None:
        super().__init__()
        self.job_key = job_key
        self.state = state
        self.board = JobBoard(self)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="job-scroll"):
            yield self.board
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#job-scroll").focus()

    def job(self) -> FleetJob | None:
        if self.state is None:
            return None
        return next((j for j in self.state.jobs if j.key == self.job_key), None)

    def new_state(self, state: ClusterState) -> None:
        self.state = state
        self.board.relayout()


def stuck_jobs(state: ClusterState) -> int | None:
    """How many jobs are stuck; None where no exporter publishes job verdicts (unknown, not 0)."""
    if not state.jobs and not any(h.jobs.jobs for h in state.hosts):
        return None
    return sum(1 for j in state.jobs if j.stuck)
