"""The REAL 4x H100 scenario matrix (tests/fixtures/h100-x4-matrix, issue 32): each slot two
2-rank NCCL jobs recorded at once, with the ranks' PIDs, the fault times and the raw py-spy
stacks captured beside the recording.  Helpers to judge a slot as `[health] stuck_seconds =
30, straggler_seconds = 30` (the live run's settings) and to read its files."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from conftest import FIXTURES

from gputui.telemetry.health import HealthEngine
from gputui.telemetry.health_report import HealthConfig, HealthReport, JobHealth
from gputui.telemetry.model import Snapshot
from gputui.telemetry.recording import read_recording

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
