"""The H100 GPM recording's phases: which ticks ran which known load."""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path

from conftest import H100_GPM

from gputui.telemetry.model import Snapshot
from gputui.telemetry.recording import read_recording

PHASES = H100_GPM.parent / "phases.json"
SLOW_LAG = 2.2
"""A tick carries the GPM window of the last slow pass: up to the slow interval (2 s) and a
pass's cost older than the tick."""


@functools.cache
def h100_ticks() -> tuple[Snapshot, ...]:
    return tuple(read_recording(H100_GPM)[1])


@functools.cache
def phase_ticks(name: str) -> tuple[Snapshot, ...]:
    """The ticks whose GPM window lies wholly inside the phase `name`."""
    doc = json.loads(PHASES.read_text())
    phase = next(p for p in doc["phases"] if p["name"] == name)
    out = []
    for t in h100_ticks():
        w = t.gpus[0].gpm
        if w is None or w.window is None:
            continue
        if phase["start"] <= t.timestamp - w.window - SLOW_LAG and t.timestamp <= phase["end"]:
            out.append(t)
    return tuple(out)


BF16 = "bf16 matmul 8192"
FP32 = "float32 matmul 8192 (TF32 off)"
COPIES = "2 GiB device copies"
TINY_SYNC = "64x64 matmul + synchronize"
TINY = "64x64 matmul, no synchronize"
IDLE = "idle"
IDLE_HOLDING = "idle holding 8 GiB"
ALL = (IDLE, BF16, FP32, COPIES, TINY_SYNC, TINY, IDLE_HOLDING)


def dmon_rows(path: Path) -> list[dict[str, float]]:
    """`nvidia-smi dmon --gpm-metrics` as logged (gzip): one dict a row, by column name,
    without dmon's own first window ("-")."""
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    names = lines[0].lstrip("#").split()
    rows = []
    for line in lines:
        if line.startswith("#"):
            continue
        cells = dict(zip(names, line.split(), strict=True))
        if cells["smutil"] != "-":
            rows.append({k: float(v) for k, v in cells.items()})
    return rows
