"""History: fixed-size rings per GPU and metric, filled from the real recordings."""

from __future__ import annotations

import math
import sys

import pytest

from gputui.telemetry.history import GPU_METRICS, HISTORY, HOST_METRICS, History, Ring
from gputui.telemetry.hub import Hub
from gputui.telemetry.model import Snapshot
from gputui.telemetry.recording import RecordingHeader
from gputui.telemetry.replay_judge import Engines


def same(a: list[float], b: list[float | None]) -> bool:
    """Equal, with None in `b` standing for NaN in `a`."""
    return len(a) == len(b) and all(
        (y is None and math.isnan(x)) or (y is not None and x == float(y)) for x, y in zip(a, b, strict=True)
    )


# --------------------------------------------------------------------------------------
# Ring
# --------------------------------------------------------------------------------------


def test_ring_keeps_the_newest_values_in_order() -> None:
    ring = Ring(5)
    assert len(ring) == 0
    assert ring.last() == []
    assert ring.latest() is None
    for v in range(3):
        ring.append(v)
    assert ring.last() == [0.0, 1.0, 2.0]
    assert len(ring) == 3
    for v in range(3, 12):
        ring.append(v)
    assert len(ring) == 5
    assert ring.capacity == 5
    assert ring.last() == [7.0, 8.0, 9.0, 10.0, 11.0]
    assert list(ring) == [7.0, 8.0, 9.0, 10.0, 11.0]
    assert ring.latest() == 11.0


@pytest.mark.parametrize("appended", [5, 6, 7, 8, 9, 10, 13])
def test_ring_last_n_across_the_wraparound(appended: int) -> None:
    ring = Ring(5)
    for v in range(appended):
        ring.append(v)
    everything = list(range(appended))[-5:]
    for n in range(8):
        expected = everything[len(everything) - min(n, len(everything)) :]
        assert ring.last(n) == [float(v) for v in expected], (appended, n)
    assert ring.last(-3) == []
    assert ring.last(None) == [float(v) for v in everything]


def test_ring_none_is_nan_and_latest_reports_none() -> None:
    ring = Ring(3)
    ring.append(1)
    ring.append(None)
    values = ring.last()
    assert values[0] == 1.0
    assert math.isnan(values[1])
    assert ring.latest() is None  # the newest is "no value"
    ring.append(2.5)
    assert ring.latest() == 2.5
    ring.append(None)
    ring.append(None)
    ring.append(None)
    assert all(math.isnan(v) for v in ring.last())


def test_ring_capacity_one_and_invalid() -> None:
    ring = Ring(1)
    for v in (1, 2, 3):
        ring.append(v)
    assert ring.last() == [3.0]
    assert ring.last(5) == [3.0]
    with pytest.raises(ValueError, match="at least 1"):
        Ring(0)


def test_ring_buffer_does_not_grow() -> None:
    ring = Ring(100)
    buffer = ring._buf
    size = sys.getsizeof(buffer)
    for v in range(1000):  # 10x capacity
        ring.append(v)
    assert ring._buf is buffer  # the same array, written in place
    assert len(ring._buf) == 100
    assert sys.getsizeof(ring._buf) == size
    assert len(ring) == 100
    assert ring.last() == [float(v) for v in range(900, 1000)]


# --------------------------------------------------------------------------------------
# History from the real recordings
# --------------------------------------------------------------------------------------


def test_history_keeps_each_gpus_recorded_values(
    x2_recording: tuple[RecordingHeader, list[Snapshot]],
) -> None:
    _, ticks = x2_recording
    history = History(capacity=len(ticks) + 10)
    for snap in ticks:
        history.append(snap)
    assert history.ticks == len(ticks)
    assert history.gpu_indices() == [0, 1]
    for gpu in (0, 1):
        for m in HISTORY:  # each as the registry reads it (GPM's figures off `activity`)
            recorded = [m.value(snap.gpus[gpu]) for snap in ticks]
            assert same(history.series(gpu, m.field), recorded), (gpu, m.field)
    # pcie_rx is None before the first slow pass: NaN, not 0
    assert math.isnan(history.series(0, "pcie_rx")[0])
    assert history.series(1, "gpu_util", 3) == [float(s.gpus[1].gpu_util) for s in ticks[-3:]]  # type: ignore[arg-type]
    assert same(history.timestamps.last(), [s.timestamp for s in ticks])
    assert same(history.host["cpu_percent"].last(), [s.host.cpu_percent for s in ticks])  # type: ignore[union-attr]
    assert same(history.host["mem_used"].last(), [s.host.mem_used for s in ticks])  # type: ignore[union-attr]
    assert set(history.host) == set(HOST_METRICS)
    assert history.series(5, "gpu_util") == []


def test_history_is_bounded_when_fed_ten_times_its_capacity(
    x1_recording: tuple[RecordingHeader, list[Snapshot]],
) -> None:
    _, ticks = x1_recording
    capacity = 15
    history = History(capacity)
    history.append(ticks[0])
    buffers = {m: history._gpus[0][m]._buf for m in GPU_METRICS}
    sizes = {m: sys.getsizeof(b) for m, b in buffers.items()}
    fed = [ticks[k % len(ticks)] for k in range(1, 10 * capacity)]
    for snap in fed:
        history.append(snap)
    assert history.ticks == 10 * capacity
    for m in GPU_METRICS:
        ring = history._gpus[0][m]
        assert ring._buf is buffers[m]
        assert len(ring._buf) == capacity
        assert sys.getsizeof(ring._buf) == sizes[m]
        assert len(ring) == capacity
    # and what is kept is the newest `capacity` ticks, oldest first
    newest = fed[-capacity:]
    assert same(history.series(0, "temperature"), [s.gpus[0].temperature for s in newest])
    assert same(history.series(0, "power_draw"), [s.gpus[0].power_draw for s in newest])
    assert same(history.timestamps.last(), [s.timestamp for s in newest])
    assert len(history.timestamps) == capacity


def test_history_clear(x2_recording: tuple[RecordingHeader, list[Snapshot]]) -> None:
    _, ticks = x2_recording
    history = History(50)
    for snap in ticks[:10]:
        history.append(snap)
    history.clear()
    assert history.ticks == 0
    assert history.capacity == 50
    assert history.gpu_indices() == []
    assert history.timestamps.last() == []
    assert history.host["cpu_percent"].last() == []


def test_history_with_a_snapshot_without_host(x2_recording: tuple[RecordingHeader, list[Snapshot]]) -> None:
    _, ticks = x2_recording
    history = History(10)
    history.append(Snapshot(seq=ticks[0].seq, timestamp=ticks[0].timestamp, gpus=ticks[0].gpus))
    assert math.isnan(history.host["cpu_percent"].last()[0])
    assert history.host["cpu_percent"].latest() is None


def test_hub_publishes_to_history_latest_and_listeners(
    x2_recording: tuple[RecordingHeader, list[Snapshot]],
) -> None:
    header, ticks = x2_recording
    hub = Hub(capacity=20)
    seen: list[int] = []
    infos = []
    hub.subscribe(lambda s: seen.append(s.seq))
    hub.subscribe_info(infos.append)
    hub.set_info(header.machine)
    for snap in ticks[:30]:
        hub.publish(snap)
    assert infos == [header.machine]
    assert hub.info == header.machine
    assert seen == list(range(1, 31))
    assert hub.latest == ticks[29]
    assert hub.series(1, "temperature") == [float(s.gpus[1].temperature) for s in ticks[10:30]]  # type: ignore[arg-type]
    assert hub.series(1, "temperature", 2) == [float(s.gpus[1].temperature) for s in ticks[28:30]]  # type: ignore[arg-type]
    assert hub.host_series("cpu_percent", 1) == [ticks[29].host.cpu_percent]  # type: ignore[union-attr]
    hub.reset()
    assert hub.latest is None
    assert hub.info is None
    assert hub.series(0, "gpu_util") == []


# --------------------------------------------------------------------------------------
# History keyed by sample time: replays that step back or loop
# --------------------------------------------------------------------------------------


def test_a_step_back_drops_the_samples_from_the_future(
    x2_recording: tuple[RecordingHeader, list[Snapshot]],
) -> None:
    _, ticks = x2_recording
    history = History(100)
    for snap in ticks[50:70]:  # the training stretch: processes on both GPUs
        history.append(snap)
    history.append(ticks[64])  # `,` five times back from tick 70 (index 69) to index 64
    assert history.timestamps.last() == [s.timestamp for s in ticks[50:65]]
    for gpu in (0, 1):
        assert same(history.series(gpu, "power_draw"), [s.gpus[gpu].power_draw for s in ticks[50:65]])
    for p in ticks[64].processes:
        key = (p.gpu_index, p.pid)
        expected = [q.gpu_memory for s in ticks[50:65] for q in s.processes if (q.gpu_index, q.pid) == key]
        assert same(history.process_series(p.gpu_index, p.pid, "gpu_memory"), expected)
    history.append(ticks[65])  # and playing on from there continues in order
    assert history.timestamps.last() == [s.timestamp for s in ticks[50:66]]


def test_a_loop_starts_a_new_history(x2_recording: tuple[RecordingHeader, list[Snapshot]]) -> None:
    _, ticks = x2_recording
    history = History(1000)
    for _ in range(3):  # three loops of a 40-tick replay
        for snap in ticks[:40]:
            history.append(snap)
    assert history.timestamps.last() == [s.timestamp for s in ticks[:40]]
    assert same(history.series(0, "gpu_util"), [s.gpus[0].gpu_util for s in ticks[:40]])
    assert same(history.host["cpu_percent"].last(), [s.host.cpu_percent for s in ticks[:40]])  # type: ignore[union-attr]


class _Recorder:
    """A stand-in engine of each kind: what it judged, in order (the real engines' own tests
    are theirs; here only the Hub's handing over is checked)."""

    def __init__(self, made: list[str]) -> None:
        made.append("made")
        self.seen: list[int] = []
        self.current: dict[int, tuple[object, ...]] = {}
        self.active: dict[str, object] = {}
        self.config = type("Cfg", (), {"enabled": True})()

    def update(self, *args: object) -> object:
        snap = next(a for a in args if isinstance(a, Snapshot))
        self.seen.append(snap.seq)
        return [] if len(args) == 3 else None  # alerts: events; health: a report

    def reset(self) -> None:
        self.seen.clear()


def hub_making_engines(header: RecordingHeader) -> tuple[Hub, list[_Recorder], list[str]]:
    """A Hub that makes its three engines (recorders) when it first judges: the hub, the
    engines once made, and one entry a made engine."""
    made: list[str] = []
    engines: list[_Recorder] = []

    def make() -> Engines:
        engines.extend([_Recorder(made), _Recorder(made), _Recorder(made)])
        return Engines(*engines)  # type: ignore[arg-type]

    hub = Hub(capacity=20, make_engines=make)
    hub.set_info(header.machine)
    return hub, engines, made


def test_engines_made_later_judge_every_tick_in_order(
    x2_recording: tuple[RecordingHeader, list[Snapshot]],
) -> None:
    """The monitor's Hub makes its engines after the first frame: ticks published before
    (`judge=False`) are judged first, in order, once they are made; nothing is judged twice
    or skipped, and they are made once."""
    header, ticks = x2_recording
    hub, engines, made = hub_making_engines(header)
    seen: list[int] = []
    hub.subscribe(lambda s: seen.append(s.seq))
    hub.publish(ticks[0], judge=False)
    hub.publish(ticks[1], judge=False)
    assert made == [] and hub.hints_by_gpu() == {} and hub.health_report() is None
    assert hub.latest == ticks[1] and seen == [1, 2]  # stored and told as ever
    assert hub.judge_pending() is True  # made now; the two waiting ticks judged
    assert len(made) == 3 and [e.seen for e in engines] == [[1, 2]] * 3
    assert hub.judge_pending() is False  # nothing left to judge, nothing made again
    hub.publish(ticks[2])
    hub.publish(ticks[3], judge=False)  # made: judged at once all the same
    assert len(made) == 3 and [e.seen for e in engines] == [[1, 2, 3, 4]] * 3


def test_the_first_publish_that_judges_makes_the_engines_and_judges_what_waited(
    x2_recording: tuple[RecordingHeader, list[Snapshot]],
) -> None:
    header, ticks = x2_recording
    hub, engines, _made = hub_making_engines(header)
    hub.publish(ticks[0], judge=False)
    hub.publish(ticks[1])  # the poller's first tick: makes them, judges tick 1 then tick 2
    assert [e.seen for e in engines] == [[1, 2]] * 3
    hub.reset()
    hub.set_info(header.machine)
    hub.publish(ticks[5], judge=False)  # engines made: judged at once
    assert [e.seen for e in engines] == [[6]] * 3
