"""Add jobs and launchers to a DERIVED recording, for the tree-mode benchmark.

    python bench/derive_jobs.py [--base tests/fixtures/derived/h200x8-nvswitch-240procs.jsonl.gz]
        [--out tests/fixtures/derived/h200x8-nvswitch-240procs-jobs.jsonl.gz]

The base's derived processes carry `--worker=W`: the processes with the same W on the 8
GPUs become one job, under one invented `torchrun` launcher (PID 30000 + W, started 1 s
before its first rank) and one invented Slurm job (`48200 + W`, step 0).  Processes without
`--worker=` (none in the 240-process file) are left alone.  Everything else is copied.
The layout is the one a real torchrun job has (bench/device_jobs.py recorded one on an
H100: tests/fixtures/h100-x1-job); the numbers here are only to measure the tree's cost.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputui.telemetry.model import GpuProcess, Job, LauncherProcess
from gputui.telemetry.recording import RecordingWriter, read_recording

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "tests/fixtures/derived/h200x8-nvswitch-240procs.jsonl.gz"
OUT = ROOT / "tests/fixtures/derived/h200x8-nvswitch-240procs-jobs.jsonl.gz"
LAUNCHER_PID = 30000
SLURM_JOB = 48200


def worker(p: GpuProcess) -> int | None:
    for arg in p.cmdline or ():
        m = re.fullmatch(r"--worker=(\d+)", arg)
        if m:
            return int(m.group(1))
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default=str(BASE))
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args()
    header, ticks = read_recording(a.base)
    first: dict[int, float] = {}
    for snap in ticks:
        for p in snap.processes:
            w = worker(p)
            if w is not None and p.create_time is not None:
                first[w] = min(first.get(w, p.create_time), p.create_time)
    derived = dict(header.derived or {})
    derived["how"] = (
        derived.get("how", "") + " Then bench/derive_jobs.py: processes with the same --worker=W "
        "form one job under an invented torchrun launcher (PID 30000+W) and Slurm job 48200+W."
    )
    derived["generator"] = "bench/derive_recording.py + bench/derive_jobs.py"
    note = (header.note or "DERIVED (not a real machine)") + " Launchers and jobs invented (tree benchmark)."
    with RecordingWriter(a.out, header.machine, interval=header.interval, derived=derived, note=note) as w:
        for snap in ticks:
            procs = []
            jobs: set[int] = set()
            for p in snap.processes:
                wk = worker(p)
                if wk is None:
                    procs.append(p)
                    continue
                jobs.add(wk)
                job = Job("slurm", str(SLURM_JOB + wk), step="0")
                procs.append(dataclasses.replace(p, launcher=LAUNCHER_PID + wk, job=job))
            launchers = tuple(
                LauncherProcess(
                    pid=LAUNCHER_PID + wk,
                    create_time=round(first[wk] - 1.0, 2),
                    kind="torchrun",
                    name="python3",
                    user="root",
                    cmdline=(
                        "/opt/torch/.venv/bin/python3",
                        "/opt/torch/.venv/bin/torchrun",
                        "--nproc-per-node",
                        "8",
                        "bench/load/ddp_like.py",
                        "--seconds",
                        "70",
                    ),
                    pgid=LAUNCHER_PID + wk,
                    sid=LAUNCHER_PID + wk,
                    job=Job("slurm", str(SLURM_JOB + wk), step="0"),
                )
                for wk in sorted(jobs)
            )
            w.write(dataclasses.replace(snap, processes=tuple(procs), launchers=launchers))
    print(f"{a.out}: {len(ticks)} ticks")


if __name__ == "__main__":
    main()
