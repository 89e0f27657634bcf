"""The alert engine on real recordings that cross thresholds (idle -> busy -> idle).

Thresholds are chosen so that the values the real GPUs reported cross them: the H200s ran
at 32-40 °C idle and 58-65 °C under load, drew 80-130 W idle and ~680 W busy, and held
12.6 GiB (x1) / 8.6 GiB (x2) in an idle process before training started.
"""

from __future__ import annotations

import dataclasses

import pytest
from conftest import H200_X1

from gputui.telemetry.alert_config import AlertConfig, IdleRule, ProcessAgeRule, Switch, ThresholdRule
from gputui.telemetry.alerts import AlertEngine, AlertEvent, event_json
from gputui.telemetry.model import MachineInfo, Snapshot
from gputui.telemetry.recording import read_recording

OFF = ThresholdRule(False, 0.0, 0.0, 0.0)


def only(**rules: object) -> AlertConfig:
    """Every rule off except those given."""
    base = AlertConfig(
        memory=OFF,
        temperature=OFF,
        power=OFF,
        ecc=OFF,
        xid=OFF,
        gpu_lost=Switch(False),
        idle_memory=IdleRule(False, 0.0, 0, 0),
        process_age=ProcessAgeRule(False, 0.0, 0),
    )
    return dataclasses.replace(base, **rules)  # type: ignore[arg-type]


def run(info: MachineInfo, ticks: list[Snapshot], config: AlertConfig) -> list[tuple[int, AlertEvent]]:
    engine = AlertEngine(config)
    out = []
    for k, snap in enumerate(ticks):
        out += [(k, e) for e in engine.update(info, snap)]
    return out


@pytest.fixture(scope="module")
def x1v2() -> tuple[MachineInfo, list[Snapshot]]:
    header, ticks = read_recording(H200_X1)
    return header.machine, ticks


def test_temperature_fires_when_training_heats_the_gpus_and_clears_after(x2_recording):
    header, ticks = x2_recording
    events = run(header.machine, ticks, only(temperature=ThresholdRule(True, 55.0, 50.0, 0.0)))
    for gpu in (0, 1):
        mine = [(k, e) for k, e in events if e.alert.gpu == gpu]
        assert [e.state for _, e in mine] == ["firing", "resolved"], gpu
        (fire_k, fire), (clear_k, clear) = mine
        temps = [t.gpus[gpu].temperature for t in ticks]
        # fired at the first tick at or above 55 °C, cleared at the first one below 50 after it
        assert fire_k == next(k for k, t in enumerate(temps) if t >= 55)
        assert clear_k == next(k for k in range(fire_k, len(temps)) if temps[k] < 50)
        assert fire.alert.value == temps[fire_k]
        assert clear.alert.value == temps[clear_k]  # the value that cleared it
        assert clear.alert.since == fire.alert.since
        assert fire.alert.key == f"temperature:gpu{gpu}"
        assert f"GPU {gpu}: temperature {temps[fire_k]} °C" in fire.alert.message


def test_hysteresis_keeps_a_hovering_value_from_flapping(x2_recording):
    header, ticks = x2_recording
    temps = [t.gpus[0].temperature for t in ticks]
    busy = [t for t in temps if t >= 55]
    threshold = sorted(busy)[len(busy) // 2]  # the median under load: crossed again and again
    flapping = run(header.machine, ticks, only(temperature=ThresholdRule(True, threshold, threshold, 0.0)))
    fired = [e for _, e in flapping if e.state == "firing" and e.alert.gpu == 0]
    assert len(fired) >= 3, f"the real temperature crosses {threshold} °C several times"
    steady = run(header.machine, ticks, only(temperature=ThresholdRule(True, threshold, 50.0, 0.0)))
    assert [e.state for _, e in steady if e.alert.gpu == 0] == ["firing", "resolved"]


def test_for_seconds_waits_until_the_value_has_held(x2_recording):
    header, ticks = x2_recording
    at_once = run(header.machine, ticks, only(power=ThresholdRule(True, 80.0, 50.0, 0.0)))
    held = run(header.machine, ticks, only(power=ThresholdRule(True, 80.0, 50.0, 10.0)))
    first = next(k for k, e in at_once if e.state == "firing" and e.alert.gpu == 0)
    later_k, later = next((k, e) for k, e in held if e.state == "firing" and e.alert.gpu == 0)
    assert ticks[later_k].timestamp - ticks[first].timestamp >= 10.0
    assert ticks[later_k - 1].timestamp - ticks[first].timestamp < 10.0
    assert later.alert.since == ticks[first].timestamp  # the episode began when the value crossed


def test_power_percent_of_the_limit(x1v2):
    info, ticks = x1v2
    events = run(info, ticks, only(power=ThresholdRule(True, 57.0, 40.0, 0.0)))  # 400 W of 700 W
    fired = [(k, e) for k, e in events if e.state == "firing"]
    assert fired, "training drew ~680 W of a 700 W limit"
    for k, e in fired:
        g = ticks[k].gpus[0]
        assert g.power_draw / g.power_limit * 100 >= 57
        assert e.alert.unit == "%"
    # the eval pauses (~120 W) cross back under 40 %: several episodes
    assert len(fired) >= 2


def test_memory_percent_fires_only_on_the_gpu_that_holds_more(x2_recording):
    header, ticks = x2_recording
    events = run(header.machine, ticks, only(memory=ThresholdRule(True, 10.0, 5.0, 0.0)))
    assert {e.alert.gpu for _, e in events} == {1}  # 18.8 of 140 GiB; GPU 0 peaked at 10.2 GiB
    assert [e.state for _, e in events] == ["firing", "resolved"]
    k = events[0][0]
    total = header.machine.devices[1].memory_total
    assert ticks[k].gpus[1].mem_used / total * 100 >= 10
    assert ticks[k - 1].gpus[1].mem_used / total * 100 < 10


def test_idle_while_memory_is_held(x1v2):
    """x1: an idle process holds 12.6 GiB before the training job starts: reserved but wasted."""
    info, ticks = x1v2
    rule = IdleRule(True, 0.2, 0, 1024)  # 12 s of the recording
    events = run(info, ticks, only(idle_memory=rule))
    assert events, "the recording has a GPU idle with 12.6 GiB held for 14 s"
    (fire_k, fire), (clear_k, clear) = events[:2]
    assert (fire.state, clear.state) == ("firing", "resolved")
    since_k = next(k for k, t in enumerate(ticks) if t.timestamp == fire.alert.since)
    for t in ticks[since_k : fire_k + 1]:  # idle and holding the whole time
        assert t.gpus[0].gpu_util == 0
        assert t.gpus[0].mem_used >= 1024 * 2**20
    assert ticks[fire_k].timestamp - fire.alert.since >= 12.0
    assert ticks[fire_k - 1].timestamp - fire.alert.since < 12.0
    g = ticks[clear_k].gpus[0]
    assert g.gpu_util > 0 or g.mem_used < 1024 * 2**20  # cleared because work started
    assert "while 12.6 GiB of memory is held" in fire.alert.message


def test_idle_at_startup_without_memory_is_not_an_alert(x1v2):
    info, ticks = x1v2
    events = run(info, ticks[:15], only(idle_memory=IdleRule(True, 0.0, 0, 1024)))
    assert events == []  # idle, but nothing held


def test_a_process_holding_memory_too_long(x2_recording):
    header, ticks = x2_recording
    events = run(header.machine, ticks, only(process_age=ProcessAgeRule(True, 0.01, 1024)))  # 36 s
    holder = 567  # the idle 8.6 GiB holder on GPU 1 (tests/fixtures/h200-x2)
    mine = [(k, e) for k, e in events if e.alert.pid == holder]
    assert [e.state for _, e in mine] == ["firing", "resolved"]
    (fire_k, fire), (gone_k, _) = mine
    created = next(p.create_time for p in ticks[fire_k].processes if p.pid == holder)
    assert ticks[fire_k].timestamp - created >= 36.0
    assert ticks[fire_k - 1].timestamp - created < 36.0
    assert fire.alert.since == created
    assert holder not in {p.pid for p in ticks[gone_k].processes}  # cleared when it exited
    assert fire.alert.gpu == 1
    assert fire.alert.key == f"process_age:gpu1:pid{holder}:{created:.2f}"
    assert "has held 8.6 GiB" in fire.alert.message
    # the DDP workers, started later, fire too: each its own alert, keyed by its pid
    workers = {e.alert.pid for _, e in events} - {holder}
    assert workers == {p.pid for t in ticks for p in t.processes} - {holder}


def test_ecc_and_gpu_lost_derived_from_a_real_tick(x2_recording):
    """No recording has ECC errors or a lost GPU: these ticks are real ones with one field
    changed (derived), to exercise the rules."""
    header, ticks = x2_recording
    base = ticks[50]
    bad = dataclasses.replace(
        base, gpus=(dataclasses.replace(base.gpus[0], ecc_volatile_uncorrected=2), base.gpus[1])
    )
    lost = dataclasses.replace(
        base, timestamp=base.timestamp + 1, gpus=(base.gpus[0], dataclasses.replace(base.gpus[1], lost=True))
    )
    engine = AlertEngine(AlertConfig())  # the defaults: ecc and gpu_lost are on
    assert [(e.state, e.alert.key) for e in engine.update(header.machine, bad)] == [("firing", "ecc:gpu0")]
    assert engine.active["ecc:gpu0"].value == 2
    # next tick: GPU 0 has its real 0 errors again (below clear_below = 1), GPU 1 is lost
    events = engine.update(header.machine, lost)
    assert sorted((e.state, e.alert.key) for e in events) == [
        ("firing", "gpu_lost:gpu1"),
        ("resolved", "ecc:gpu0"),
    ]
    assert set(engine.active) == {"gpu_lost:gpu1"}


def test_an_xid_fires_by_default_and_a_gpu_nobody_watches_raises_nothing(x2_recording):
    header, ticks = x2_recording
    base = ticks[50]

    def with_xids(ts_offset, count0, count1):
        g0, g1 = base.gpus
        return dataclasses.replace(
            base,
            timestamp=base.timestamp + ts_offset,
            gpus=(
                dataclasses.replace(g0, xid_count=count0, xid_last=43 if count0 else None),
                dataclasses.replace(g1, xid_count=count1),
            ),
        )

    engine = AlertEngine(AlertConfig())
    assert engine.update(header.machine, base) == []  # a recording without the watch: quiet
    assert engine.update(header.machine, with_xids(1, 0, None)) == []  # watched, none yet
    events = engine.update(header.machine, with_xids(2, 1, None))
    assert [(e.state, e.alert.key) for e in events] == [("firing", "xid:gpu0")]
    assert engine.active["xid:gpu0"].message.startswith("GPU 0: 1 Xid event(s) from the driver")
    assert engine.update(header.machine, with_xids(3, 2, None)) == []  # still active, no repeat
    assert engine.active["xid:gpu0"].value == 2


def test_replay_looping_back_resolves_everything(x2_recording):
    header, ticks = x2_recording
    engine = AlertEngine(only(temperature=ThresholdRule(True, 55.0, 50.0, 0.0)))
    for t in ticks[:60]:
        engine.update(header.machine, t)
    assert set(engine.active) == {"temperature:gpu0", "temperature:gpu1"}
    events = engine.update(header.machine, ticks[0])  # time went backwards
    assert sorted((e.state, e.alert.key) for e in events) == [
        ("resolved", "temperature:gpu0"),
        ("resolved", "temperature:gpu1"),
    ]
    assert engine.active == {}


def test_the_defaults_are_quiet_on_a_healthy_recording(x2_recording):
    header, ticks = x2_recording
    assert run(header.machine, ticks, AlertConfig()) == []


def test_alert_json_document(x2_recording):
    header, ticks = x2_recording
    engine = AlertEngine(only(temperature=ThresholdRule(True, 55.0, 50.0, 0.0)))
    events: list[AlertEvent] = []
    for t in ticks:
        events += engine.update(header.machine, t)
    doc = event_json(events[0], header.machine, suppressed=3)
    assert doc["format"] == "gputui-alert"
    assert doc["version"] == 1
    assert doc["state"] == "firing"
    assert doc["kind"] == "temperature"
    assert doc["hostname"] == "vm"
    assert doc["gpu"]["uuid"] == header.machine.devices[events[0].alert.gpu].uuid
    assert doc["unit"] == "°C"
    assert doc["threshold"] == 55.0
    assert doc["suppressed"] == 3
    assert doc["process"] is None
    assert doc["timestamp"].endswith("+00:00")
