"""Energy per job (gputui/telemetry/job_energy.py) from the REAL H100 torchrun recording
(tests/fixtures/h100-health/jobrank-stopped.jsonl.gz: 3 ranks on GPU 0, NVML's energy
counter read every 10 s)."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import FIXTURES

from gputui.telemetry.health import HealthEngine
from gputui.telemetry.job_energy import EnergyMeter
from gputui.telemetry.recording import read_recording

STOPPED = FIXTURES / "h100-health" / "jobrank-stopped.jsonl.gz"


def _last_job(snaps):
    engine = HealthEngine()
    for s in snaps:
        engine.update(s)
    (job,) = engine.current.jobs
    return job


def test_energy_of_a_job_holding_its_gpu_alone() -> None:
    snaps = read_recording(STOPPED)[1]
    assert snaps[0].gpus[0].energy is None  # the first tick: no counter read yet
    e = _last_job(snaps).energy
    assert e is not None and e.gpus == (0,) and e.shared == () and e.unknown == ()
    first, last = snaps[1].gpus[0].energy, snaps[-1].gpus[0].energy
    assert e.joules == pytest.approx((last - first) / 1000.0)  # 4717.6 J
    assert e.wh == pytest.approx(1.3104, abs=1e-4) and e.since == snaps[1].timestamp
    # ~118 W for the 40 s between the first and the last counter reading
    assert 100 < e.joules / 40 < 130
    assert e.text().startswith("1.31 Wh on GPU 0 since ")


def test_the_first_tick_without_a_counter_is_unknown_not_zero() -> None:
    snaps = read_recording(STOPPED)[1]
    e = _last_job(snaps[:1]).energy
    assert e is not None and e.joules is None and e.unknown == (0,)
    assert e.text() == "GPU 0: no energy counter"


def test_a_gpu_shared_with_another_process_is_named_not_counted() -> None:
    """DERIVED in the test: a bystander (PID 4242, no job) holding memory on GPU 0 from tick 20."""
    snaps = read_recording(STOPPED)[1]
    bystander = dataclasses.replace(snaps[-1].processes[0], pid=4242, launcher=None, job=None, rank=None)
    snaps = [
        dataclasses.replace(s, processes=(*s.processes, bystander)) if k >= 20 else s
        for k, s in enumerate(snaps)
    ]
    e = _last_job(snaps).energy
    assert e is not None and e.joules is None and e.shared == (0,) and e.gpus == ()
    assert e.text() == "GPU 0 shared: energy not split"
    # once shared, it stays shared: the bystander gone again does not make the figure whole
    e2 = _last_job(
        [*snaps, dataclasses.replace(read_recording(STOPPED)[1][-1], timestamp=snaps[-1].timestamp + 1)]
    ).energy
    assert e2 is not None and e2.shared == (0,)


def test_a_counter_that_goes_back_starts_again() -> None:
    meter = EnergyMeter()
    key = ("launcher", "1")
    assert meter.update(key, [0], {0: 5_000_000}, [], 10.0).joules == 0.0
    assert meter.update(key, [0], {0: 6_000_000}, [], 20.0).joules == pytest.approx(1000.0)
    reloaded = meter.update(key, [0], {0: 100}, [], 30.0)  # the driver reloaded
    assert reloaded.joules == 0.0 and reloaded.since == 30.0
    meter.forget([])
    assert meter.update(key, [0], {0: 200}, [], 40.0).since == 40.0
