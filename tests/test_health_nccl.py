"""Job health on REAL NCCL jobs, one rank per GPU, rank 1 SIGSTOPped 8 s in, recorded by
`BACKEND=nccl NPROC=N bench/device_job_check.sh`: two H200s (tests/fixtures/h200-x2-nccl)
and four (tests/fixtures/h200-x4-nccl).

What a waiting rank looked like, live: its GPU's graphics engine 100 %, SM activity 16.67 %
on 2 GPUs and 12.12 % on 4 (NCCL's wait kernel, one block per channel), SM occupancy 4.17 % /
3.03 %, no tensor/FP64/FP32/FP16 work, DRAM 0 %, 140-152 W (the stopped rank's idle GPU:
121-125 W); its host thread busy-waiting in `torch.cuda.synchronize` (state R, 100 % CPU).
The spinning signature must match that (not only a one-block kernel), and the spinning GPU,
not the host thread's CPU, says the rank waits.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from conftest import FIXTURES, H100_GPM, gputui

from gputui.telemetry.health import HealthEngine, idle_power, spin_signature
from gputui.telemetry.health_config import HealthConfig
from gputui.telemetry.health_report import HealthReport
from gputui.telemetry.model import Snapshot
from gputui.telemetry.recording import read_recording

NCCL = FIXTURES / "h200-x2-nccl" / "stopped.jsonl.gz"
NCCL4 = FIXTURES / "h200-x4-nccl" / "stopped.jsonl.gz"
HEALTH = FIXTURES / "h100-health"
INPUT_BOUND = FIXTURES / "h100-input-bound"
H200_X2_GPM = FIXTURES / "h200-x2-gpm" / "recording.jsonl.gz"
REAL_CFG = HealthConfig(spin_seconds=30, stuck_seconds=30)
JOBS = {
    # recording: (launcher, [(rank, PID, GPU)]), rank 1 stopped
    NCCL: (654, [(0, 814, 0), (1, 815, 1)]),
    NCCL4: (943, [(0, 1127, 0), (1, 1129, 1), (2, 1130, 2), (3, 1131, 3)]),
}
BOTH = pytest.mark.parametrize("path", list(JOBS), ids=lambda p: p.parent.name)


def ticks(path) -> list[Snapshot]:
    return read_recording(path)[1]


def run(snaps: list[Snapshot], cfg: HealthConfig) -> list[HealthReport]:
    engine = HealthEngine(cfg)
    return [engine.update(s) for s in snaps]


def stop_ts(snaps: list[Snapshot]) -> float:
    return next(s.timestamp for s in snaps if any(p.state == "T" for p in s.processes))


@BOTH
def test_the_recording_is_real(path) -> None:
    header = read_recording(path)[0]
    n = len(JOBS[path][1])
    assert header.derived is None and header.note.startswith(f"real NVIDIA H200: torchrun {n} ranks (nccl")
    assert header.machine.system.device_count == n


@BOTH
def test_the_nccl_wait_is_the_spinning_signature(path) -> None:
    """Each waiting rank's GPU from the first GPM window after the stop; the stopped rank's
    idle GPU (1) never; and not a tick of the job computing before the stop."""
    snaps = ticks(path)
    stop = stop_ts(snaps)
    engine = HealthEngine(HealthConfig(spin_seconds=0))
    spun: dict[int, list[float]] = {gpu: [] for _, _, gpu in JOBS[path][1]}
    for s in snaps:
        r = engine.update(s)
        for i in r.gpus:
            spun[i].append(s.timestamp - stop)
    assert spun.pop(1) == []
    for seen in spun.values():
        assert seen and 0 < seen[0] <= 4  # GPM's 2 s window lags the stop
        assert len(seen) >= len(snaps) - 12  # every tick from then on


@BOTH
def test_the_stopped_rank_is_the_one_the_nccl_ranks_wait_for(path) -> None:
    """The other ranks spin (their host threads busy at 100 % CPU do not make them
    "computing"), rank 1 is stopped: after 30 s rank 1 is named, as for the gloo job."""
    launcher, ranks = JOBS[path]
    snaps = ticks(path)
    reports = run(snaps, REAL_CFG)
    (job,) = reports[-1].jobs
    assert job.key == ("launcher", str(launcher))
    assert [(r.rank, r.pid, r.gpu, r.state, r.condition) for r in job.ranks] == [
        (rank, pid, gpu, "T" if rank == 1 else "R", "stopped" if rank == 1 else "spinning")
        for rank, pid, gpu in ranks
    ]
    assert all(r.cpu_percent is not None and r.cpu_percent > 90 for r in job.ranks if r.rank != 1)
    stopped = ranks[1][1]
    v = job.verdict
    assert v is not None and v.kind == "culprit" and v.pids == (stopped,)
    assert v.short == f"rank 1 (PID {stopped}, GPU 1) is the one the others wait for"
    assert f"{len(ranks) - 1} spinning on its GPU" in v.why
    stop = stop_ts(snaps)
    named = [s.timestamp - stop for s, r in zip(snaps, reports, strict=True) if r.jobs and r.jobs[0].verdict]
    assert named and 30 <= named[0] <= 30 + 4 + 1, named[:1]  # the threshold + GPM's lag


@BOTH
def test_the_nccl_job_in_the_snapshot(tmp_path, path) -> None:
    launcher, ranks = JOBS[path]
    cfg = tmp_path / "c.toml"
    cfg.write_text("[health]\nstuck_seconds = 30\nspin_seconds = 30\n")
    args = ("--tick", "75", "--json", "--processes", "--config", str(cfg))
    r = gputui("snapshot", "--replay", str(path), *args)
    assert r.returncode == 0, r.stderr
    h = json.loads(r.stdout)["health"]
    (job,) = h["jobs"]
    v = job["verdict"]
    assert job["launcher"] == launcher
    assert v["kind"] == "culprit" and v["culprits"] == [{"pid": ranks[1][1], "rank": 1, "gpu": 1}]
    assert [g["index"] for g in h["gpus"]] == [gpu for rank, _, gpu in ranks if rank != 1]
    assert all(g["arithmetic_active"] == 0.0 for g in h["gpus"])


def test_the_h100_wide_spin_is_the_signature_too() -> None:
    """32 blocks x 512 threads polling a flag on the H100 (SM 24.24 %): NCCL's shape."""
    reports = run(ticks(HEALTH / "spin-wide.jsonl.gz"), HealthConfig(spin_seconds=0))
    assert sum(0 in r.gpus for r in reports) >= 30


def _waiting_tick():
    g = ticks(NCCL)[-1].gpus[0]
    assert spin_signature(g, idle_power(121.0, 700.0, HealthConfig()), HealthConfig()) is True
    return g


@pytest.mark.parametrize("pipe", ["tensor_active", "fp64_active", "fp32_active", "fp16_active"])
def test_arithmetic_in_any_pipe_is_work_not_a_spin(pipe: str) -> None:
    """DERIVED from the real waiting tick: the same figures with one pipe at 5 % are a kernel
    that computes (a reduction, a small GEMM), not one polling a flag."""
    g = _waiting_tick()
    busy = dataclasses.replace(g, gpm=dataclasses.replace(g.gpm, **{pipe: 5.0}))
    assert spin_signature(busy, idle_power(121.0, 700.0, HealthConfig()), HealthConfig()) is False


@pytest.mark.parametrize("pipe", ["tensor_active", "fp64_active", "fp32_active", "fp16_active"])
def test_a_missing_pipe_figure_is_not_zero(pipe: str) -> None:
    g = _waiting_tick()
    blind = dataclasses.replace(g, gpm=dataclasses.replace(g.gpm, **{pipe: None}))
    assert spin_signature(blind, idle_power(121.0, 700.0, HealthConfig()), HealthConfig()) is False


def test_the_sm_bound_is_strict_and_the_configs() -> None:
    g = _waiting_tick()
    idle = idle_power(121.0, 700.0, HealthConfig())
    at = HealthConfig(spin_max_sm=g.gpm.sm_active)
    assert spin_signature(g, idle, at) is False
    assert spin_signature(g, idle, HealthConfig(spin_max_sm=g.gpm.sm_active + 0.01)) is True
    wide = dataclasses.replace(g, gpm=dataclasses.replace(g.gpm, sm_active=HealthConfig().spin_max_sm))
    assert spin_signature(wide, idle, HealthConfig()) is False


@pytest.mark.parametrize(
    "path",
    [
        H100_GPM,
        H200_X2_GPM,
        INPUT_BOUND / "input-bound.jsonl.gz",
        INPUT_BOUND / "gpu-bound.jsonl.gz",
        HEALTH / "tiny.jsonl.gz",
        HEALTH / "idle.jsonl.gz",
        HEALTH / "jobrank-stopped.jsonl.gz",
    ],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_real_work_is_never_the_wide_signature(path) -> None:
    """Every real recording of work (bf16, float32, copies, tiny kernels, a DataLoader-bound
    loop, a GPU-bound one, idle, a gloo job): not one tick reads as spinning."""
    assert all(r.gpus == {} for r in run(ticks(path), HealthConfig(spin_seconds=0)))
