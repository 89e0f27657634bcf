"""Job health (gputui.telemetry.health) and the process state it reads.

Recordings: the REAL H100 recordings of `bench/device.sh health` (tests/fixtures/h100-health:
one kernel spinning, the same 32x512 wide, spinning beside bf16 work, tiny kernels, idle, a
torchrun job with rank 1 SIGSTOPped, process states included), the REAL H100 GPM recording
(busy, float32, copies, tiny kernels, idle) and the REAL 2x H200 GPM recording.  They are 45 s
long, so the tests that need a verdict use thresholds of 30 s (REAL_CFG), as the device run's
own log (device_health.log) did.  Only what no real recording shows is DERIVED, and says so:
a rank that exited (tests/fixtures/derived/h100-job-exited-derived.jsonl.gz) and every rank
blocked (the real stopped job with rank 1 put in state S, in the test).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import DERIVED, H100_GPM, H100_JOB, X8_240
from gpm_support import ALL, phase_ticks

from gputui.telemetry.health import HealthEngine, idle_power, rank_number, spin_signature
from gputui.telemetry.health_config import HealthConfig
from gputui.telemetry.health_report import HealthReport
from gputui.telemetry.host.processes import ProcessInspector
from gputui.telemetry.model import GpuProcess, Snapshot
from gputui.telemetry.recording import FORMAT_VERSION, RecordingWriter, read_recording

HEALTH = DERIVED.parent / "h100-health"
SPIN = HEALTH / "spin.jsonl.gz"
SPIN_WIDE = HEALTH / "spin-wide.jsonl.gz"
SPIN_BUSY = HEALTH / "spin-busy.jsonl.gz"
TINY = HEALTH / "tiny.jsonl.gz"
IDLE = HEALTH / "idle.jsonl.gz"
STOPPED = HEALTH / "jobrank-stopped.jsonl.gz"
REAL_CFG = HealthConfig(spin_seconds=30, stuck_seconds=30)
"""The real recordings are 45 s long: 30 s thresholds (as device_health.log)."""
STOP_PID, LAUNCHER = 1200, 1013
EXITED_DERIVED = DERIVED / "h100-job-exited-derived.jsonl.gz"
H200_X2_GPM = H100_GPM.parents[1] / "h200-x2-gpm" / "recording.jsonl.gz"
JOBS_240 = DERIVED / "h200x8-nvswitch-240procs-jobs.jsonl.gz"


def ticks(path: Path) -> list[Snapshot]:
    return read_recording(path)[1]


def run(snaps: list[Snapshot], cfg: HealthConfig | None = None) -> list[HealthReport]:
    engine = HealthEngine(cfg)
    return [engine.update(s) for s in snaps]


def derived_header(path: Path) -> None:
    header = read_recording(path)[0]
    assert (
        header.derived is not None and header.note and header.note.startswith("DERIVED (not a real machine)")
    )


# --------------------------------------------------------------------------------------
# the process state, from real processes
# --------------------------------------------------------------------------------------


def _state_of(pid: int) -> str | None:
    (p,) = ProcessInspector(verify_gpu_files=False).enrich([GpuProcess(gpu_index=0, pid=pid)])
    return p.state


def _wait_state(pid: int, want: str, timeout: float = 10.0) -> str | None:
    deadline = time.monotonic() + timeout
    got = _state_of(pid)
    while got != want and time.monotonic() < deadline:
        time.sleep(0.02)
        got = _state_of(pid)
    return got


def test_state_of_real_processes_sleeping_stopped_running(children) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    children += [sleeper, spinner]
    assert _wait_state(sleeper.pid, "S") == "S"
    os.kill(sleeper.pid, signal.SIGSTOP)
    assert _wait_state(sleeper.pid, "T") == "T"
    os.kill(sleeper.pid, signal.SIGCONT)
    assert _wait_state(sleeper.pid, "S") == "S"
    assert _wait_state(spinner.pid, "R") == "R"  # on a busy 2-core machine it may wait its turn


def test_state_is_kept_across_ticks_by_the_same_inspector(children) -> None:
    """The second and later ticks (the tracked path) read the state too."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    children.append(sleeper)
    inspector = ProcessInspector(verify_gpu_files=False)
    row = [GpuProcess(gpu_index=0, pid=sleeper.pid)]
    time.sleep(0.3)
    assert inspector.enrich(row)[0].state == "S"
    os.kill(sleeper.pid, signal.SIGSTOP)
    deadline = time.monotonic() + 10
    while inspector.enrich(row)[0].state != "T":
        assert time.monotonic() < deadline
        time.sleep(0.02)


@pytest.mark.parametrize(
    ("env", "want"),
    [
        ({"RANK": "5", "LOCAL_RANK": "1"}, 5),
        ({"OMPI_COMM_WORLD_RANK": "3", "SLURM_PROCID": "9"}, 3),
        ({"SLURM_PROCID": "2"}, 2),
        ({"RANK": "abc", "PMI_RANK": "4"}, 4),
        ({"RANK": "9" * 40}, None),
        ({"RANK": "-1"}, None),
        ({}, None),
    ],
)
def test_rank_from_a_real_processs_environment(children, env: dict[str, str], want: int | None) -> None:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")
    }
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], env={**base, **env})
    children.append(child)
    while not Path(f"/proc/{child.pid}/environ").read_bytes():  # mid-exec: not yet its environment
        time.sleep(0.001)
    (p,) = ProcessInspector(verify_gpu_files=False).enrich([GpuProcess(gpu_index=0, pid=child.pid)])
    assert p.rank == want


def test_the_environments_rank_wins_over_the_command_line() -> None:
    """The real job's ranks came from RANK in their environment; a `--rank 7` put on every
    command line (derived in the test) does not change who is named."""
    snaps = [
        dataclasses.replace(
            s,
            processes=tuple(
                dataclasses.replace(p, cmdline=(*(p.cmdline or ()), "--rank", "7")) for p in s.processes
            ),
        )
        for s in ticks(STOPPED)
    ]
    assert rank_number(snaps[-1].processes[0].cmdline) == 7
    v = run(snaps, REAL_CFG)[-1].jobs[0].verdict
    assert v is not None and v.short == "rank 1 (PID 1200, GPU 0) is the one the others wait for"


def test_state_of_an_exited_process_is_not_invented(children) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    (p,) = ProcessInspector(verify_gpu_files=False).enrich([GpuProcess(gpu_index=0, pid=child.pid)])
    assert p.state is None and not p.visible


def test_recordings_carry_the_state_and_say_version_3(tmp_path: Path) -> None:
    header, snaps = read_recording(H100_JOB)
    assert all(p.state is None for s in snaps for p in s.processes)  # older file: unknown, not "R"
    snap = dataclasses.replace(
        snaps[0], processes=tuple(dataclasses.replace(p, state="T") for p in snaps[0].processes)
    )
    out = tmp_path / "r.jsonl"
    with RecordingWriter(out, header.machine, header.interval) as w:
        w.write(snap)
    lines = out.read_text().splitlines()
    assert json.loads(lines[0])["version"] == FORMAT_VERSION >= 3
    assert all(p["state"] == "T" for p in json.loads(lines[1])["processes"])
    assert read_recording(out)[1][0].processes == snap.processes


# --------------------------------------------------------------------------------------
# the spinning signature
# --------------------------------------------------------------------------------------


def test_derived_fixtures_say_they_are_derived_and_real_ones_real() -> None:
    derived_header(EXITED_DERIVED)
    for path in (SPIN, SPIN_WIDE, SPIN_BUSY, TINY, IDLE, STOPPED):
        header = read_recording(path)[0]
        assert header.derived is None and header.note and header.note.startswith("real NVIDIA H100")


def test_spinning_gpu_is_waiting_in_a_collective_after_the_threshold() -> None:
    """The real spinning kernel (1 block, 1 thread, from 5 s): the signature from the first
    GPM window that covers only the spin (13 s), "waiting in a collective" 30 s later."""
    snaps = ticks(SPIN)
    reports = run(snaps, REAL_CFG)
    first = next(k for k, r in enumerate(reports) if 0 in r.gpus)
    since = snaps[first].timestamp
    assert since - snaps[0].timestamp == pytest.approx(13, abs=0.01)
    for s, r in zip(snaps[first:], reports[first:], strict=True):
        h = r.gpus[0]
        assert h.certain and h.since == since
        assert h.waiting == (s.timestamp - since >= 30), s.timestamp - since
    last = reports[-1].gpus[0]
    assert last.short == "waiting in a collective for 32 s?"
    assert "SM 0.8 %" in last.evidence and "DRAM 0.0 %" in last.evidence
    assert "GR engine 100.0 %" in last.evidence
    assert all(0 not in r.gpus for r in reports[:first])  # idle, and the window that began idle


def test_spinning_under_the_default_threshold_is_not_yet_waiting() -> None:
    """32 s of the real spin under the default 2 minutes: seen, not yet claimed."""
    last = run(ticks(SPIN))[-1].gpus[0]
    assert not last.waiting and last.short == "one kernel spinning for 32 s"


def test_spin_threshold_is_the_configs() -> None:
    reports = run(ticks(SPIN), HealthConfig(spin_seconds=10))
    waiting = [r for r in reports if 0 in r.gpus and r.gpus[0].waiting]
    assert waiting and 10 <= waiting[0].gpus[0].seconds < 11.1  # the first tick at or past 10 s
    before = [r.gpus[0].seconds for r in reports if 0 in r.gpus and not r.gpus[0].waiting]
    assert before and max(before) < 10


@pytest.mark.parametrize("path", [TINY, IDLE, STOPPED], ids=lambda p: p.name)
def test_real_loads_that_are_not_a_spinning_kernel_are_never_called_spinning(path: Path) -> None:
    """Measured on the H100: tiny kernels (GR 18 %), idle, and a gloo job (its GPU idle):
    never the signature, not even for a moment (the wide spin is: tests/test_health_nccl.py)."""
    assert all(r.gpus == {} for r in run(ticks(path), HealthConfig(spin_seconds=0)))


def test_a_spinning_kernel_beside_real_work_is_not_called_spinning() -> None:
    """The real spin-busy run: the kernel spins alone from 9 s (seen from the first GPM window
    that covers only it, 13 s), then bf16 matmuls of a second process run beside it (PID 933,
    18-43 s): SMs 41 %, DRAM 15 %, 515 W, never the signature while they compute (a GPU
    shared with a process that computes hides a spinning kernel, as documented)."""
    snaps = ticks(SPIN_BUSY)
    reports = run(snaps, HealthConfig(spin_seconds=0))
    busy = [r for s, r in zip(snaps, reports, strict=True) if any(p.pid == 933 for p in s.processes)]
    alone = [r for s, r in zip(snaps, reports, strict=True) if 0 in r.gpus]
    assert len(busy) >= 25 and all(r.gpus == {} for r in busy)
    assert alone and max(r.timestamp for r in alone) < min(r.timestamp for r in busy)


def test_the_wide_spin_reads_sm_24_percent() -> None:
    """The wide spin's figures, as documented in docs/job-health.md (matched: SM under 50 %,
    no arithmetic)."""
    w = ticks(SPIN_WIDE)[-1].gpus[0].activity
    assert w is not None and w.graphics_active == pytest.approx(100, abs=0.1)
    assert w.sm_active == pytest.approx(24.24, abs=0.01) and w.dram_active == 0


@pytest.mark.parametrize("phase", ALL)
def test_real_loads_are_never_called_spinning(phase: str) -> None:
    """Busy bf16/float32/copies, tiny kernels with and without synchronizing, idle and idle
    holding memory, measured on the H100: none shows the signature, even for a moment."""
    engine = HealthEngine(HealthConfig(spin_seconds=0))
    for s in ticks(H100_GPM):  # in order, so the engine learns the idle power as live
        r = engine.update(s)
        if s in phase_ticks(phase):
            assert r.gpus == {}, (phase, r.gpus)


def test_without_gpm_says_what_cannot_be_told_apart() -> None:
    """The real spinning ticks with GPM taken out (derived in the test, as on an Ampere):
    utilization 100 % at idle power from 11 s is a spinning kernel or tiny kernels, and the
    finding says so."""
    snaps = [
        dataclasses.replace(s, gpus=tuple(dataclasses.replace(g, gpm=None) for g in s.gpus))
        for s in ticks(SPIN)
    ]
    last = run(snaps, REAL_CFG)[-1].gpus[0]
    assert not last.certain and last.waiting
    assert last.short == "spinning or tiny kernels for 34 s?"
    assert "cannot be told apart" in last.evidence


def test_real_loads_without_gpm_are_not_called_spinning() -> None:
    """Without GPM the busy phases are at high power, the tiny kernels under 95 % util."""
    snaps = [
        dataclasses.replace(s, gpus=tuple(dataclasses.replace(g, gpm=None) for g in s.gpus))
        for s in ticks(H100_GPM)
    ]
    assert all(r.gpus == {} for r in run(snaps, HealthConfig(spin_seconds=0)))


@pytest.mark.parametrize(
    "change",
    [
        {"power_draw": None},
        {"power_limit": None},
        {"gpm_sm": None},
        {"gpm_dram": None},
        {"lost": True},
    ],
    ids=["power", "power-limit", "sm", "dram", "lost"],
)
def test_missing_evidence_is_not_a_spinning_gpu(change: dict) -> None:
    """None is not 0: a spinning tick without its power, power limit, SM or DRAM figure."""
    g = ticks(SPIN)[-1].gpus[0]
    assert spin_signature(g, 200.0, HealthConfig()) is True
    if "gpm_sm" in change:
        g = dataclasses.replace(g, gpm=dataclasses.replace(g.gpm, sm_active=None))
    elif "gpm_dram" in change:
        g = dataclasses.replace(g, gpm=dataclasses.replace(g.gpm, dram_active=None))
    else:
        g = dataclasses.replace(g, **change)
    idle = idle_power(None, g.power_limit, HealthConfig())
    assert spin_signature(g, idle, HealthConfig()) is False


def test_dram_traffic_is_not_spinning() -> None:
    """A kernel that moves memory is working, whatever the SMs' figure."""
    g = ticks(SPIN)[-1].gpus[0]
    g = dataclasses.replace(g, gpm=dataclasses.replace(g.gpm, dram_active=5.0))
    assert spin_signature(g, 200.0, HealthConfig()) is False


def test_idle_power_rule() -> None:
    cfg = HealthConfig()
    assert idle_power(None, None, cfg) is None
    assert idle_power(70.0, 700.0, cfg) == pytest.approx(140.0)  # lowest seen + 10 % of the limit
    assert idle_power(None, 700.0, cfg) == pytest.approx(210.0)  # nothing seen: 20 % + 10 %
    assert idle_power(650.0, 700.0, cfg) == pytest.approx(210.0)  # busy since start: capped


def test_spinning_at_busy_power_is_not_the_signature() -> None:
    """The power rule: the same GPM figures at a busy GPU's power are not a spinning kernel."""
    g = ticks(SPIN)[-1].gpus[0]
    busy = dataclasses.replace(g, power_draw=400.0)
    assert spin_signature(busy, idle_power(70.0, 700.0, HealthConfig()), HealthConfig()) is False


# --------------------------------------------------------------------------------------
# the job's verdict
# --------------------------------------------------------------------------------------


def test_stopped_rank_is_the_one_the_others_wait_for() -> None:
    """The real torchrun job (3 gloo ranks on GPU 0), rank 1 SIGSTOPped at 10 s: the
    others sleep in the all_reduce (state S, ~0 % CPU, GPU idle) from 11 s and count as
    blocked once their CPU over the last 5 s is under 2 % (14 s); 30 s later rank 1 is
    named, and not a tick before."""
    snaps = ticks(STOPPED)
    reports = run(snaps, REAL_CFG)
    (job,) = reports[-1].jobs
    assert job.key == ("launcher", str(LAUNCHER)) and job.launcher == LAUNCHER
    assert [(r.rank, r.pid, r.state, r.condition) for r in job.ranks] == [
        (0, 1199, "S", "blocked"),
        (1, 1200, "T", "stopped"),
        (2, 1201, "S", "blocked"),
    ]
    v = job.verdict
    assert v is not None and v.kind == "culprit" and v.pids == (STOP_PID,)
    assert v.short == "rank 1 (PID 1200, GPU 0) is the one the others wait for"
    assert "is stopped (state T since" in v.why and "SIGCONT" in v.why and "2 blocked" in v.why
    stop_ts = next(s.timestamp for s in snaps if any(p.state == "T" for p in s.processes))
    assert v.since == stop_ts
    named = [s.timestamp - stop_ts for s, r in zip(snaps, reports, strict=True) if r.jobs[0].verdict]
    # the threshold, + the CPU window (5 s) the wait's start is judged on
    assert named and 30 <= named[0] <= 30 + 5 + 1, named[:1]
    assert named == [t for t in (s.timestamp - stop_ts for s in snaps) if t >= named[0]]


def test_stopped_rank_is_not_named_under_the_default_threshold() -> None:
    """35 s of waiting under the default 2 minutes: no verdict yet (a slow step is not a hang)."""
    assert all(j.verdict is None for r in run(ticks(STOPPED)) for j in r.jobs)


def test_bystanders_are_not_ranks() -> None:
    """The holder in a Slurm-like cgroup is one process: no job verdict; the bystander has none."""
    (job,) = run(ticks(STOPPED), REAL_CFG)[-1].jobs
    assert {r.pid for r in job.ranks} == {1199, 1200, 1201}


def test_rank_that_exited_is_named_with_its_time() -> None:
    """DERIVED: no real recording has a rank that exited while the others wait."""
    snaps = ticks(EXITED_DERIVED)
    (job,) = run(snaps)[-1].jobs
    gone_ts = next(s.timestamp for s in snaps if not any(p.pid == 457 for p in s.processes))
    assert [r.pid for r in job.exited] == [457] and job.exited[0].exited_at == gone_ts
    v = job.verdict
    assert v is not None and v.kind == "exited" and v.pids == (457,)
    at = time.strftime("%H:%M:%S", time.gmtime(gone_ts))
    assert v.short == f"rank 1 (PID 457, GPU 0) has gone (at {at}) while the others wait"


def test_every_rank_waiting_is_stuck_since_when_they_all_began() -> None:
    """DERIVED in the test: the real stopped job with rank 1 blocked like the others (no real
    recording has every rank blocked)."""
    snaps = [
        dataclasses.replace(
            s,
            processes=tuple(dataclasses.replace(p, state="S") if p.state == "T" else p for p in s.processes),
        )
        for s in ticks(STOPPED)
    ]
    (job,) = run(snaps, REAL_CFG)[-1].jobs
    v = job.verdict

    # the ranks' CPU over the last 5 s (5 ticks) is under 2 % from this tick on
    def mean_cpu(k: int, pid: int) -> float:
        cpu = [p.cpu_percent for t in snaps[max(0, k - 4) : k + 1] for p in t.processes if p.pid == pid]
        return sum(cpu) / len(cpu)

    start = next(
        s.timestamp
        for k, s in enumerate(snaps)
        if all(mean_cpu(j, p.pid) < 2 for j in range(k, len(snaps)) for p in snaps[j].processes)
    )
    assert v is not None and v.kind == "stuck" and v.since == start
    assert v.short == f"stuck in a collective since {time.strftime('%H:%M:%S', time.gmtime(start))}"
    assert "3 blocked (state S, ~0 % CPU, GPU idle)" in v.why


def test_a_resumed_rank_clears_the_verdict() -> None:
    snaps = ticks(STOPPED)
    engine = HealthEngine(REAL_CFG)
    for s in snaps:
        engine.update(s)
    assert engine.current.jobs[0].verdict is not None
    resumed = dataclasses.replace(
        snaps[-1],
        timestamp=snaps[-1].timestamp + 1,
        processes=tuple(dataclasses.replace(p, state="R", cpu_percent=100.0) for p in snaps[-1].processes),
    )
    assert engine.update(resumed).jobs[0].verdict is None


@pytest.mark.parametrize("missing", ["state", "cpu_percent"])
def test_missing_state_or_cpu_gives_no_verdict(missing: str) -> None:
    """None is not 0: ranks whose state (older recordings) or CPU is unknown are not 'blocked'."""
    snaps = [
        dataclasses.replace(
            s,
            processes=tuple(
                dataclasses.replace(p, **{missing: None}) if p.state != "T" else p for p in s.processes
            ),
        )
        for s in ticks(STOPPED)
    ]
    (job,) = run(snaps, REAL_CFG)[-1].jobs
    assert job.verdict is None
    assert {r.condition for r in job.ranks if r.pid != STOP_PID} <= {"unknown", "computing"}


def test_real_job_recording_gives_no_verdict() -> None:
    """The real torchrun-like job computing (state unknown: a version-2 file)."""
    assert all(j.verdict is None for r in run(ticks(H100_JOB), HealthConfig(stuck_seconds=0)) for j in r.jobs)


def _two_rank_job() -> list[Snapshot]:
    """The real 2x H200 GPM recording (bf16 on GPU 0, float32 on GPU 1: two real trainings)
    with both processes put under one launcher (derived in the test)."""
    return [
        dataclasses.replace(
            s, processes=tuple(dataclasses.replace(p, launcher=9999, state="R") for p in s.processes)
        )
        for s in ticks(H200_X2_GPM)
    ]


def test_two_unrelated_trainings_are_no_stragglers() -> None:
    """bf16 (tensor 45 % of a busy 83 %) beside float32 (FP32 74 % of 98 %): different
    kernels read as a 24 % wait, under the default 50 %: no straggler."""
    reports = run(_two_rank_job(), HealthConfig(straggler_seconds=0))
    assert any(r.jobs for r in reports)
    assert all(j.verdict is None for r in reports for j in r.jobs)
    shares = [x.wait_share for r in reports for j in r.jobs for x in j.ranks if x.wait_share]
    assert shares and 0.2 < max(shares) < 0.3


@pytest.mark.parametrize(("setting", "named"), [(23.5, True), (24.2, False)])
def test_straggler_wait_is_the_bound_the_others_wait(setting: float, named: bool) -> None:
    """The same pair's shares are 23.6-24.2 %: with straggler_wait at 23.5 the float32 process
    (it waits least) is named, only after straggler_seconds; at 24.2 nobody."""
    reports = run(_two_rank_job(), HealthConfig(straggler_wait=setting, straggler_seconds=10))
    found = [r for r in reports if r.jobs and r.jobs[0].verdict is not None]
    assert bool(found) == named
    if named:
        v = found[-1].jobs[0].verdict
        assert v is not None and v.kind == "straggler" and v.pids == (599,)
        assert v.short == "the others wait ~24 % of each step for PID 599 (GPU 1)"
        first = found[0].jobs[0].verdict
        assert first is not None and found[0].timestamp - first.since >= 10


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        (["python", "train.py", "--rank", "3"], 3),
        (["python", "train.py", "--local-rank=2"], 2),
        (["python", "train.py", "--local_rank", "7"], 7),
        (["python", "train.py", "--rank"], None),
        (["python", "train.py", "--rank", "-1"], None),
        (["python", "train.py", "--rank", "\uff11"], None),  # a full-width digit
        (["python", "train.py", "--rank", "9" * 50], None),
        (["python", "--ranks", "2"], None),
        (None, None),
    ],
)
def test_rank_number_from_the_command_line(argv, want) -> None:
    assert rank_number(argv) == want


def test_disabled_gives_nothing() -> None:
    reports = run(ticks(STOPPED), HealthConfig(enabled=False))
    assert all(not r.jobs and not r.gpus for r in reports)


def test_a_replay_that_loops_starts_over() -> None:
    """Back to a tick 31 s into the stop: the waits are timed afresh from there (the
    replay's first tick seen is that one), so no verdict yet."""
    snaps = ticks(STOPPED)
    engine = HealthEngine(REAL_CFG)
    for s in snaps:
        engine.update(s)
    assert engine.current.jobs[0].verdict is not None
    later = next(k for k, s in enumerate(snaps) if any(p.state == "T" for p in s.processes)) + 31
    assert engine.update(snaps[later]).jobs[0].verdict is None


def test_the_one_not_waiting_must_be_known() -> None:
    """The others wait, but rank 1's state and CPU are unknown: nobody is blamed."""
    snaps = [
        dataclasses.replace(
            s,
            processes=tuple(
                dataclasses.replace(p, state=None, cpu_percent=None) if p.state == "T" else p
                for p in s.processes
            ),
        )
        for s in ticks(STOPPED)
    ]
    (job,) = run(snaps, REAL_CFG)[-1].jobs
    assert [r.condition for r in job.ranks] == ["blocked", "unknown", "blocked"]
    assert job.verdict is None


def test_config_fields_are_documented_with_limits() -> None:
    for f in dataclasses.fields(HealthConfig):
        assert f.metadata.get("doc"), f.name
        if f.type in ("float", "int"):
            assert "min" in f.metadata, f.name


def test_texts_carry_nothing_from_the_process() -> None:
    """Verdicts are built from numbers and fixed words: a hostile command line never shows."""
    hostile = "\x1b]52;c;ZXZpbA==\x07--rank"
    snaps = [
        dataclasses.replace(
            s,
            processes=tuple(
                dataclasses.replace(p, cmdline=(*(p.cmdline or ()), hostile, "1")) for p in s.processes
            ),
        )
        for s in ticks(STOPPED)
    ]
    (job,) = run(snaps, REAL_CFG)[-1].jobs
    assert job.verdict is not None
    assert "\x1b" not in job.verdict.short + job.verdict.why


# --------------------------------------------------------------------------------------
# cost: 8 GPUs, 240 processes, 1 Hz
# --------------------------------------------------------------------------------------


def test_8_gpus_240_processes_30_jobs_are_judged_each() -> None:
    """The derived 8-GPU recording with jobs (30 launchers; 240 processes at its busiest),
    every rank asleep: at the busiest tick each of the 30 jobs is judged with its ranks (4 or 8
    each, 212 in all).  What it
    costs is a benchmark, not a timed test (`python bench/bench_jobs.py health`: 2.2-2.5 ms
    a tick, bench/RESULTS.md)."""
    snaps = [
        dataclasses.replace(s, processes=tuple(dataclasses.replace(p, state="S") for p in s.processes))
        for s in ticks(JOBS_240)
    ]
    busiest = max(range(len(snaps)), key=lambda k: len(snaps[k].processes))
    assert len(snaps[busiest].processes) == 240
    report = run(snaps[: busiest + 1])[-1]
    assert len(report.jobs) == 30 and {len(j.ranks) for j in report.jobs} == {4, 8}
    assert sum(len(j.ranks) for j in report.jobs) == 212
    assert X8_240.exists()


def _as_slurm(p: GpuProcess, source: str) -> GpuProcess:
    from gputui.telemetry.model import Job

    return dataclasses.replace(p, launcher=None, job=Job("slurm", "555", step="0", source=source))


@pytest.mark.parametrize("source", ["unverified", "rootless", "environment"])
def test_a_job_not_verified_by_its_cgroup_is_never_merged_into_the_real_one(source: str) -> None:
    """The real stopped torchrun job as a root-verified Slurm job 555, step 0, plus one more
    processes on its GPU (rank 1's rows again, as PIDs 4242-4243, at 100 % CPU) whose cgroup
    or environment also says job 555 but is not root's word for it: it is never one of job
    555's ranks, the real verdict still names the stopped rank, and the exporter's job key
    of the impostor is not the real job's."""
    snaps = []
    for s in ticks(STOPPED):
        procs = [_as_slurm(p, "cgroup") for p in s.processes]
        fake = next((p for p in procs if p.pid == STOP_PID), None)
        if fake is not None:
            fake = _as_slurm(fake, source)  # two of them: a job of its own has 2 ranks at least
            for pid in (4242, 4243):
                procs.append(dataclasses.replace(fake, pid=pid, state="R", cpu_percent=100.0, rank=None))
        snaps.append(dataclasses.replace(s, processes=tuple(procs)))
    report = run(snaps, REAL_CFG)[-1]
    real = [j for j in report.jobs if j.key == ("slurm", "555", "0")]
    assert len(real) == 1
    assert sorted(r.pid for r in real[0].ranks) == [1199, 1200, 1201]
    assert real[0].verdict is not None and real[0].verdict.pids == (STOP_PID,)
    (fake,) = [j for j in report.jobs if any(r.pid == 4242 for r in j.ranks)]
    assert fake.key != ("slurm", "555", "0")
    from gputui.telemetry.alerts import job_label

    mark = {"unverified": "(unverified)", "rootless": "(rootless, user ?)", "environment": "(env)"}[source]
    assert job_label(real[0]) == "slurm 555.0" and job_label(fake) == f"slurm 555.0 {mark}"
