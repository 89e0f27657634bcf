"""Make DERIVED recordings of a spinning GPU and of a job with a stopped or an exited rank,
from REAL H100 recordings, until the real ones (bench/device_health.sh) are in tests/fixtures.

    python bench/derive_health.py [--out-dir tests/fixtures/derived]

Writes three files, each with `derived` set in its header and a note that begins
"DERIVED (not a real machine)":

* `h100-spin-derived.jsonl.gz`: the real H100 GPM recording (tests/fixtures/h100-gpm): its
  first 10 ticks (idle, no CUDA context: 70 W) as recorded, then 150 ticks that replay the
  real "idle holding 8 GiB" phase (a process holds a CUDA context, nothing runs: ~120 W)
  in a loop, 1 s apart, with utilization and GPM replaced by what a spinning kernel
  (`torch.cuda._sleep`) measured on an H100 on 2026-11-25 (shared/REFERENCE.md, "A stuck
  job"): NVML utilization 100 %, GR engine 99.97 %, SM active 0.76 %, SM occupancy 0.01 %,
  DRAM 0, tensor 0, and power +0.6 W (131.3 W spinning against 130.7 W idle that day).
  Clocks, temperatures, memory and the process are the real idle-holding ticks'.
* `h100-job-stopped-derived.jsonl.gz`: the real torchrun-like job on an H100
  (tests/fixtures/h100-x1-job: launcher 455, ranks 456/457/458 with `--rank 0/1/2`, a
  bystander, a Slurm-like holder): its 9 ticks as recorded (every process "R"), then 180
  ticks looping over them, 1 s apart, where rank 1 is stopped ("T", 0 % CPU) and every
  other process sleeps ("S", 0 % CPU, per-process SM 0) with GPU utilization 0 %: what the
  real gloo job showed with rank 1 under SIGSTOP (REFERENCE.md).  Power, clocks and
  memory are the real ticks'.
* `h100-job-exited-derived.jsonl.gz`: the same, but rank 1 is gone instead of stopped
  (NVML stops listing a process that has exited).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputui.telemetry.model import GpmSample, GpuProcess, Snapshot
from gputui.telemetry.recording import RecordingHeader, RecordingWriter, read_recording

ROOT = Path(__file__).resolve().parents[1]
GPM_BASE = "tests/fixtures/h100-gpm/recording.jsonl.gz"
JOB_BASE = "tests/fixtures/h100-x1-job/recording.jsonl.gz"
GENERATOR = "bench/derive_health.py"
IDLE_TICKS = 10
SPIN_TICKS = 150
JOB_TICKS = 180
IDLE_HOLDING = (125, 141)
"""Ticks of the H100 GPM recording wholly inside "idle holding 8 GiB" (phases.json)."""
SPIN = {
    "gpu_util": 100,
    "graphics_active": 99.97,
    "sm_active": 0.76,
    "sm_occupancy": 0.01,
    "dram_active": 0.0,
    "tensor_active": 0.0,
    "power_delta": 0.6,
}
"""The spinning kernel on an H100, 2026-11-25 (REFERENCE.md): GPM's fractions as percent."""
STOPPED_RANK = "1"


def _rank(p: GpuProcess) -> str | None:
    c = p.cmdline or ()
    return c[c.index("--rank") + 1] if "--rank" in c and c.index("--rank") + 1 < len(c) else None


def spin(out: Path) -> None:
    header, ticks = read_recording(ROOT / GPM_BASE)
    lo, hi = IDLE_HOLDING
    holding = ticks[lo:hi]
    dt = header.interval
    snaps = list(ticks[:IDLE_TICKS])
    t0 = snaps[-1].timestamp
    for k in range(SPIN_TICKS):
        real = holding[k % len(holding)]
        g = real.gpus[0]
        w = g.gpm or GpmSample(window=2.0)
        w = dataclasses.replace(
            w,
            graphics_active=SPIN["graphics_active"],
            sm_active=SPIN["sm_active"],
            sm_occupancy=SPIN["sm_occupancy"],
            dram_active=SPIN["dram_active"],
            tensor_active=SPIN["tensor_active"],
        )
        g = dataclasses.replace(
            g,
            gpu_util=int(SPIN["gpu_util"]),
            power_draw=None if g.power_draw is None else round(g.power_draw + SPIN["power_delta"], 3),
            gpm=w,
        )
        ts = t0 + (k + 1) * dt
        procs = tuple(dataclasses.replace(p, state="R", sm_util=100) for p in real.processes)
        snaps.append(dataclasses.replace(real, seq=IDLE_TICKS + k, timestamp=ts, gpus=(g,), processes=procs))
    derived = {
        "from": GPM_BASE,
        "how": (
            f"ticks 0-{IDLE_TICKS - 1} as recorded (idle, no context); then {SPIN_TICKS} ticks 1 s apart "
            f"looping over real ticks {lo}-{hi - 1} ('idle holding 8 GiB') with gpu_util, GPM "
            "graphics/SM/occupancy/DRAM/tensor set to the spinning kernel's H100 figures of 2026-11-25 "
            "(REFERENCE.md) and power +0.6 W; process state R and sm_util 100 set"
        ),
        "generator": GENERATOR,
        "seed": 0,
        "args": {"spin": SPIN},
    }
    note = "DERIVED (not a real machine): an H100 spinning one kernel, built from real idle ticks"
    _write(out / "h100-spin-derived.jsonl.gz", header, snaps, derived, note)


def job(out: Path, exited: bool) -> None:
    header, ticks = read_recording(ROOT / JOB_BASE)
    dt = header.interval
    snaps = [
        dataclasses.replace(s, processes=tuple(dataclasses.replace(p, state="R") for p in s.processes))
        for s in ticks
    ]
    t0 = snaps[-1].timestamp
    for k in range(JOB_TICKS):
        real = ticks[k % len(ticks)]
        g = dataclasses.replace(real.gpus[0], gpu_util=0)
        procs = []
        for p in real.processes:
            if _rank(p) == STOPPED_RANK:
                if exited:
                    continue
                procs.append(dataclasses.replace(p, state="T", cpu_percent=0.0, sm_util=0))
            else:
                procs.append(dataclasses.replace(p, state="S", cpu_percent=0.0, sm_util=0))
        snaps.append(
            dataclasses.replace(
                real, seq=len(ticks) + k, timestamp=t0 + (k + 1) * dt, gpus=(g,), processes=tuple(procs)
            )
        )
    what = "gone (exited)" if exited else "state T, 0 % CPU"
    derived = {
        "from": JOB_BASE,
        "how": (
            f"the {len(ticks)} real ticks with state R; then {JOB_TICKS} ticks 1 s apart looping over them "
            f"with rank {STOPPED_RANK} {what}, every other process state S at 0 % CPU and sm_util 0, "
            "GPU utilization 0 (what the real gloo job showed with rank 1 under SIGSTOP, REFERENCE.md)"
        ),
        "generator": GENERATOR,
        "seed": 0,
        "args": {"exited": exited},
    }
    note = f"DERIVED (not a real machine): the real H100 torchrun-like job with rank 1 {what}"
    name = "h100-job-exited-derived.jsonl.gz" if exited else "h100-job-stopped-derived.jsonl.gz"
    _write(out / name, header, snaps, derived, note)


def _write(
    path: Path, header: RecordingHeader, snaps: list[Snapshot], derived: dict[str, Any], note: str
) -> None:
    with RecordingWriter(path, header.machine, header.interval, derived=derived, note=note) as w:
        for s in snaps:
            w.write(s)
    print(f"{path}: {len(snaps)} ticks")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", default=str(ROOT / "tests/fixtures/derived"))
    out = Path(ap.parse_args().out_dir)
    spin(out)
    job(out, exited=False)
    job(out, exited=True)


if __name__ == "__main__":
    main()
