"""The REAL 4x H100 scenario matrix (tests/fixtures/h100-x4-matrix, issue 32): each slot two
2-rank NCCL jobs recorded at once, with the ranks' PIDs, the fault times and the raw py-spy
stacks captured beside the recording.  Helpers to judge a slot as `[health] stuck_seconds =
30, straggler_seconds = 30` (the live run's settings) and to read its files."""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass
from pathlib import Path

from conftest import FIXTURES

from gputui.telemetry.health import HealthEngine
from gputui.telemetry.health_config import HealthConfig
from gputui.telemetry.health_report import HealthReport, JobHealth
from gputui.telemetry.model import Snapshot
from gputui.telemetry.nccl.model import NcclView
from gputui.telemetry.recording import read_recording
from gputui.telemetry.stack_evidence import StackEvidence

MATRIX = FIXTURES / "h100-x4-matrix"
CFG = HealthConfig(stuck_seconds=30, straggler_seconds=30, spin_seconds=30)
"""The live run's [health] settings (bench/device_matrix.sh's fast.toml)."""
SLOTS = (
    "1-healthy-stopped",
    "2-exit-early-killed",
    "3-mismatch-slow-gpu",
    "4-slow-host-loader-stall",
    "5-checkpoint-healthy",
)


@dataclass(frozen=True)
class Slot:
    name: str
    path: Path
    ticks: tuple[Snapshot, ...]
    ranks: dict[str, tuple[int, int]]
    """job ("a", "b") -> (rank 0's PID, rank 1's PID)."""
    launchers: dict[str, int]

    def key(self, job: str) -> tuple[str, ...]:
        return ("launcher", str(self.launchers[job]))

    def fault(self, job: str) -> float | None:
        """When the job's fault came (the harness's signal, else the bad rank's own log line)."""
        faults = self.path / "faults.txt"
        if faults.exists():
            for line in faults.read_text().splitlines():
                t, _, pid, *_ = line.split()
                if int(pid) in self.ranks[job]:
                    return float(t)
        for line in (self.path / f"{job}.log").read_text().split("rank "):
            m = re.match(r"(\d+) fault (\S+) at step \d+ t=([\d.]+)", line)
            if m and m.group(2) not in ("healthy",):
                return float(m.group(3))
        return None


@functools.cache
def slot(name: str) -> Slot:
    path = MATRIX / name
    words = (path / "pids.txt").read_text().split()
    # "ranks: a P0 P1 b P0 P1; launchers LA LB"
    a = (int(words[2]), int(words[3]))
    b = (int(words[5]), int(words[6].rstrip(";")))
    return Slot(
        name,
        path,
        tuple(read_recording(path / "recording.jsonl.gz")[1]),
        {"a": a, "b": b},
        {"a": int(words[8]), "b": int(words[9])},
    )


def judge(snaps: tuple[Snapshot, ...] | list[Snapshot], cfg: HealthConfig = CFG) -> list[HealthReport]:
    engine = HealthEngine(cfg)
    return [engine.update(s) for s in snaps]


def job_in(report: HealthReport, key: tuple[str, ...]) -> JobHealth | None:
    return next((j for j in report.jobs if j.key == key), None)


# --------------------------------------------------------------------------------------
# the py-spy stacks captured beside the recording (stacks-35.txt, stacks-55.txt)
# --------------------------------------------------------------------------------------


def stack_sections(path: Path) -> tuple[float, dict[int, bytes]]:
    """(when the capture began, PID -> `py-spy dump --pid PID`'s output as captured) of one
    stacks-*.txt (the --native dumps left out)."""
    text = path.read_text()
    first, *_ = text.splitlines()
    taken = float(first.split()[1])
    out: dict[int, bytes] = {}
    for part in text.split("\n## ")[1:]:
        head, _, body = part.partition("\n")
        if not head.startswith("py-spy dump --pid "):
            continue
        kept = []
        for line in body.splitlines():  # up to what follows the dump (nvidia-smi's table)
            if line and not line.startswith(("Process ", "Python ", "Thread ", "    ", "Error", "Caused")):
                break
            kept.append(line)
        out[int(head.split()[-1])] = "\n".join(kept).encode()
    return taken, out


def fixture_stacks(s: Slot) -> list[tuple[float, StackEvidence]]:
    """The stacks of each capture of the slot, as the live sampler builds its evidence: the
    same parser (`parse_text`) and the same reading (`rank_where`).  A dump that failed (the
    stopped rank, a rank that had gone) is left out: the live path's reasons for those need
    the process itself (its state then), which a text file does not hold."""
    from gputui.stacks.model import StackResult
    from gputui.stacks.pyspy_text import parse_text
    from gputui.stacks.where import rank_where

    created = {p.pid: p.create_time for t in s.ticks for p in t.processes}
    out = []
    for name in ("stacks-35.txt", "stacks-55.txt"):
        taken, dumps = stack_sections(s.path / name)
        ranks = []
        for pid, raw in sorted(dumps.items()):
            if not raw.startswith(b"Process ") or b"\nError: " in raw:
                continue  # py-spy failed (it exits non-zero: the live path reads why)
            res = StackResult(pid, created.get(pid), threads=parse_text(raw, pid))
            ranks.append(rank_where(res, taken))
        out.append((taken, StackEvidence(tuple(ranks))))
    return out


def with_stacks(s: Slot) -> tuple[Snapshot, ...]:
    """The slot's ticks with each capture's stacks in the first tick at or after it began, as
    the live sampler would have put them (they were captured beside the recording, not in it)."""
    ticks = list(s.ticks)
    for taken, ev in fixture_stacks(s):
        k = next(k for k, t in enumerate(ticks) if t.timestamp >= taken)
        ticks[k] = dataclasses.replace(ticks[k], stacks=ev)
    return tuple(ticks)


# --------------------------------------------------------------------------------------
# NCCL RAS's answers captured beside the recording (ras.jsonl.gz)
# --------------------------------------------------------------------------------------

HOST = "192.0.2.2"
"""The matrix machine's address, as its RAS answers give it."""
ADDRS = {"localhost:28028": "a", "localhost:28029": "b"}


def ras_views(s: Slot) -> list[NcclView]:
    """A view per round of questions (both addresses, every 5 s), as RasWatch builds one: the
    real JSON answers parsed with the live parser, counts_since carried from round to round,
    each answer's PIDs the job's ranks whose environment named its address."""
    from ras_support import captured

    from gputui.telemetry.nccl.model import RasAnswer, carry_since, parse_json

    rounds: dict[int, list[tuple[float, RasAnswer]]] = {}
    last: dict[str, RasAnswer] = {}
    t0 = s.ticks[0].timestamp
    for c in captured(s.name):
        if c.format != "json":
            continue
        pids = s.ranks[ADDRS[c.addr]]
        if c.ok:
            answer = dataclasses.replace(parse_json(c.body), addr=c.addr, pids=pids)
            answer = carry_since(last.get(c.addr), answer, c.t)
            last[c.addr] = answer
        else:
            answer = RasAnswer(c.addr, pids=pids, reason="no answer in time")
        rounds.setdefault(round((c.t - t0) / 5), []).append((c.t, answer))
    return [
        NcclView(max(t for t, _ in got), tuple(a for _, a in got), (HOST,))
        for _, got in sorted(rounds.items())
    ]


def with_ras(s: Slot, ticks: tuple[Snapshot, ...] | None = None) -> tuple[Snapshot, ...]:
    """The slot's ticks (or `ticks`) with each round's view in the first tick after it, as the
    live source puts it (Snapshot.nccl)."""
    out = list(ticks if ticks is not None else s.ticks)
    for view in ras_views(s):
        k = next((k for k, t in enumerate(out) if t.timestamp >= view.asked_at), None)
        if k is not None:
            out[k] = dataclasses.replace(out[k], nccl=view)
    return tuple(out)
