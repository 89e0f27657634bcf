"""The poller thread, driven by a ReplaySource on the real 2x H200 recording.

Nothing here asserts how long something took: waits are on queues and events with
generous timeouts, and "nothing more arrives" is checked over a window many intervals
long, which a correct poller passes however slow the machine is.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import X2_RECORDING

from gputui.telemetry.model import MachineInfo, Snapshot
from gputui.telemetry.poller import MAX_INTERVAL, MIN_INTERVAL, Poller
from gputui.telemetry.recording import ReplaySource

FAST = MIN_INTERVAL  # 0.1 s: the poller clamps anything shorter
WAIT = 10.0
"""Seconds to wait for something that should happen within one interval."""
QUIET = 0.6
"""Seconds (6 intervals) in which nothing may arrive."""


class Recorder:
    """Collects what the poller hands over, in order, on thread-safe queues."""

    def __init__(self) -> None:
        self.snapshots: queue.Queue[Snapshot] = queue.Queue()
        self.infos: queue.Queue[MachineInfo] = queue.Queue()
        self.errors: queue.Queue[BaseException] = queue.Queue()
        self.order: list[str] = []

    def on_snapshot(self, snap: Snapshot) -> None:
        self.order.append(f"snap {snap.seq}")
        self.snapshots.put(snap)

    def on_info(self, info: MachineInfo) -> None:
        self.order.append("info")
        self.infos.put(info)

    def on_error(self, exc: BaseException) -> None:
        self.order.append(f"error {exc}")
        self.errors.put(exc)

    def next(self) -> Snapshot:
        return self.snapshots.get(timeout=WAIT)

    def seqs(self, n: int) -> list[int]:
        return [self.next().seq for _ in range(n)]

    def assert_quiet(self) -> None:
        try:
            extra = self.snapshots.get(timeout=QUIET)
        except queue.Empty:
            return
        pytest.fail(f"unexpected snapshot seq {extra.seq}")


def make(source: Any, interval: float = FAST) -> tuple[Poller, Recorder]:
    rec = Recorder()
    poller = Poller(source, interval, rec.on_snapshot, rec.on_info, rec.on_error)
    return poller, rec


@pytest.fixture
def pollers() -> Iterator[list[Poller]]:
    """Pollers to stop at the end of the test, whatever happened."""
    started: list[Poller] = []
    yield started
    for p in started:
        p.stop(timeout=WAIT)


def test_snapshots_arrive_in_order_after_the_info(pollers: list[Poller]) -> None:
    source = ReplaySource(X2_RECORDING)
    poller, rec = make(source)
    pollers.append(poller)
    poller.start()
    assert rec.infos.get(timeout=WAIT) == source.header.machine
    got = [rec.next() for _ in range(6)]
    assert [s.seq for s in got] == [1, 2, 3, 4, 5, 6]
    assert got == source.ticks[:6]
    assert rec.order[0] == "info"
    assert poller.ticks >= 6
    assert poller.last_cost is not None
    assert poller.last_cost >= 0
    assert rec.errors.empty()


def test_a_first_tick_delivered_by_the_caller_is_not_taken_again(pollers: list[Poller]) -> None:
    """The app took the source's read-ahead facts and first snapshot at mount: the poller
    hands out no info and takes its first sample one interval later, not at once."""
    source = ReplaySource(X2_RECORDING)
    source.sample()  # (the tick the caller showed)
    rec = Recorder()
    poller = Poller(source, 0.5, rec.on_snapshot, rec.on_info, rec.on_error, first_delivered=True)
    pollers.append(poller)
    poller.start()
    with pytest.raises(queue.Empty):
        rec.snapshots.get(timeout=0.25)  # half an interval: not yet
    assert rec.next().seq == 2  # then the next one, on time
    assert rec.infos.empty()
    assert rec.errors.empty()


class Opened(ReplaySource):
    """A recording that says when the poller opens it."""

    def __init__(self) -> None:
        super().__init__(X2_RECORDING)
        self.opened = threading.Event()

    def open(self) -> MachineInfo:
        self.opened.set()
        return super().open()


def test_with_its_first_tick_delivered_the_source_opens_once_the_first_frame_is_up(
    pollers: list[Poller],
) -> None:
    """A live source read ahead in a child opens NVML in this process at `open`: not beside
    Textual's first layout and paint, but once the app says its first frame is drawn."""
    source = Opened()
    rec = Recorder()
    poller = Poller(source, 30.0, rec.on_snapshot, rec.on_info, rec.on_error, first_delivered=True)
    pollers.append(poller)
    poller.start()
    assert not source.opened.wait(QUIET)
    poller.first_frame_drawn()
    assert source.opened.wait(WAIT)
    assert rec.errors.empty()


def test_stopped_before_the_first_frame_was_up_it_never_opens_the_source(pollers: list[Poller]) -> None:
    """Quit at once: the poller stops without opening NVML (tens of ms the exit would wait
    for) and still closes the source (a read-ahead child is reaped there)."""
    closed = threading.Event()

    class Closing(Opened):
        def close(self) -> None:
            closed.set()
            super().close()

    source = Closing()
    rec = Recorder()
    poller = Poller(source, 30.0, rec.on_snapshot, rec.on_info, rec.on_error, first_delivered=True)
    poller.start()
    poller.stop()
    assert not poller.alive and closed.is_set() and not source.opened.is_set()
    assert rec.errors.empty()


def test_with_its_first_tick_delivered_and_no_word_of_the_frame_it_opens_an_interval_on(
    pollers: list[Poller],
) -> None:
    source = Opened()
    source.sample()  # (the tick the caller showed)
    rec = Recorder()
    poller = Poller(source, 0.3, rec.on_snapshot, rec.on_info, rec.on_error, first_delivered=True)
    pollers.append(poller)
    poller.start()
    assert source.opened.wait(WAIT)
    assert rec.next().seq == 2
    assert rec.infos.empty()


def test_facts_found_other_than_those_delivered_are_handed_out(pollers: list[Poller]) -> None:
    """The child's reading was handed out at mount; `open` here reads the facts anew: the
    same facts give no info callback, other ones (a GPU gone meanwhile) one."""
    delivered = ReplaySource(X2_RECORDING).open()
    same, other = Recorder(), Recorder()
    for rec, info in ((same, delivered), (other, MachineInfo(delivered.system, delivered.devices[:1]))):
        poller = Poller(
            ReplaySource(X2_RECORDING),
            FAST,
            rec.on_snapshot,
            rec.on_info,
            rec.on_error,
            first_delivered=True,
            delivered_info=info,
        )
        pollers.append(poller)
        poller.start()
        poller.first_frame_drawn()
        rec.next()
    assert same.infos.empty()
    assert other.infos.get(timeout=WAIT) == delivered
    assert same.errors.empty() and other.errors.empty()


def test_on_open_runs_once_on_the_pollers_thread_before_the_first_tick(pollers: list[Poller]) -> None:
    """The app's hook for what the source's open made (it freezes it with start-up's): after
    `open`, before any tick, on the poller's thread; a hook that raises is reported and the
    ticks go on."""
    for fails in (False, True):
        rec = Recorder()
        threads: list[str] = []

        def opened(rec: Recorder = rec, fails: bool = fails, threads: list[str] = threads) -> None:
            threads.append(threading.current_thread().name)
            rec.order.append("opened")
            if fails:
                raise RuntimeError("the hook broke")

        source = ReplaySource(X2_RECORDING)
        poller = Poller(source, FAST, rec.on_snapshot, rec.on_info, rec.on_error, on_open=opened)
        pollers.append(poller)
        poller.start()
        rec.seqs(3)
        assert rec.order[0] == "opened"
        if not fails:
            assert rec.order[:3] == ["opened", "info", "snap 1"]
        assert rec.order.count("opened") == 1 and threads == ["gputui-poller"]
        assert (rec.errors.qsize() == 1) is fails


class Background(ReplaySource):
    """A recording that leaves work for after the first frame, as the live source does with
    its slow-cadence thread (NvmlSource.start_background)."""

    def __init__(self) -> None:
        super().__init__(X2_RECORDING)
        self.started: queue.Queue[str] = queue.Queue()

    def start_background(self) -> None:
        self.started.put(threading.current_thread().name)


def test_the_source_starts_its_background_work_when_the_first_frame_is_up(pollers: list[Poller]) -> None:
    """Not at open, nor at the ticks: when the app says its first frame is on screen, on the
    poller's thread (a source is only ever called from there), once however often told."""
    source = Background()
    poller, rec = make(source, 0.2)
    pollers.append(poller)
    poller.start()
    rec.seqs(3)
    assert source.started.empty()
    poller.first_frame_drawn()
    poller.first_frame_drawn()
    assert source.started.get(timeout=WAIT) == "gputui-poller"
    rec.seqs(2)
    assert source.started.empty()


def test_interval_is_clamped() -> None:
    poller, _ = make(ReplaySource(X2_RECORDING), interval=0.01)
    assert poller.interval == MIN_INTERVAL
    assert poller.set_interval(1e6) == MAX_INTERVAL
    assert poller.interval == MAX_INTERVAL
    assert poller.set_interval(0.5) == 0.5
    assert poller.set_interval(0) == MIN_INTERVAL


def test_long_interval_then_short_one_wakes_the_thread(pollers: list[Poller]) -> None:
    poller, rec = make(ReplaySource(X2_RECORDING), interval=30.0)
    pollers.append(poller)
    poller.start()
    assert rec.next().seq == 1  # the first tick is due at once
    rec.assert_quiet()  # the next is 30 s away
    poller.set_interval(FAST)
    # without the wake-up this would take 30 s; WAIT is 10 s
    assert rec.next().seq == 2
    assert rec.next().seq == 3


def test_lengthening_the_interval_stops_the_fast_ticks(pollers: list[Poller]) -> None:
    source = ReplaySource(X2_RECORDING)
    rec = Recorder()

    def on_snapshot(snap: Snapshot) -> None:
        rec.on_snapshot(snap)
        if snap.seq == 3:
            poller.set_interval(MAX_INTERVAL)  # from the poller thread: before it schedules the next

    poller = Poller(source, FAST, on_snapshot, rec.on_info, rec.on_error)
    pollers.append(poller)
    poller.start()
    assert rec.seqs(3) == [1, 2, 3]
    rec.assert_quiet()
    assert poller.interval == MAX_INTERVAL


def test_pause_stops_ticks_and_resume_restarts_them(pollers: list[Poller]) -> None:
    source = ReplaySource(X2_RECORDING)
    rec = Recorder()

    def on_snapshot(snap: Snapshot) -> None:
        rec.on_snapshot(snap)
        if snap.seq == 3:
            poller.pause()  # on the poller thread, so no tick can be in flight

    poller = Poller(source, FAST, on_snapshot, rec.on_info, rec.on_error)
    pollers.append(poller)
    poller.start()
    assert rec.seqs(3) == [1, 2, 3]
    assert poller.paused
    rec.assert_quiet()
    assert poller.ticks == 3
    poller.resume()
    assert not poller.paused
    assert rec.seqs(2) == [4, 5]


def test_paused_from_the_start_delivers_nothing(pollers: list[Poller]) -> None:
    poller, rec = make(ReplaySource(X2_RECORDING))
    poller.pause()
    pollers.append(poller)
    poller.start()
    rec.infos.get(timeout=WAIT)  # the source was opened
    rec.assert_quiet()
    assert poller.ticks == 0


def test_step_while_paused_delivers_exactly_one(pollers: list[Poller]) -> None:
    source = ReplaySource(X2_RECORDING)
    poller, rec = make(source)
    poller.pause()
    pollers.append(poller)
    poller.start()
    rec.infos.get(timeout=WAIT)
    poller.step()
    assert rec.next().seq == 1
    rec.assert_quiet()
    poller.step()
    poller.step()
    assert rec.seqs(2) == [2, 3]
    rec.assert_quiet()
    assert poller.ticks == 3


def test_step_back_delivers_the_previous_recorded_tick(pollers: list[Poller]) -> None:
    source = ReplaySource(X2_RECORDING)
    n = len(source.ticks)
    poller, rec = make(source)
    poller.pause()
    pollers.append(poller)
    poller.start()
    rec.infos.get(timeout=WAIT)
    for _ in range(4):
        poller.step()
    assert rec.seqs(4) == [1, 2, 3, 4]
    poller.step(-1)
    assert rec.next().seq == 3
    poller.step(-1)
    poller.step(-1)
    assert rec.seqs(2) == [2, 1]
    poller.step(-1)  # before the first tick: the last one
    assert rec.next().seq == source.ticks[n - 1].seq
    poller.step(1)  # and forwards again from there
    assert rec.next().seq == 1
    rec.assert_quiet()
    assert source.loops == 1  # only the forward step from the end wrapped


def test_step_back_on_a_source_without_seek_does_nothing(pollers: list[Poller]) -> None:
    class Forward:
        """A recording played forwards only, like live data: nothing to seek."""

        live = True
        label = "forward"
        local_processes = False
        seekable = None

        def __init__(self) -> None:
            self.replay = ReplaySource(X2_RECORDING)

        def open(self) -> MachineInfo:
            return self.replay.open()

        def sample(self) -> Snapshot:
            return self.replay.sample()

        def read_topology(self) -> None:
            return None

        def notes(self) -> list[str]:
            return []

        def close(self) -> None:
            pass

    poller, rec = make(Forward())
    poller.pause()
    pollers.append(poller)
    poller.start()
    rec.infos.get(timeout=WAIT)
    poller.step()
    assert rec.next().seq == 1
    poller.step(-1)
    rec.assert_quiet()
    poller.step()
    assert rec.next().seq == 2


class ClosingReplay(ReplaySource):
    def __init__(self) -> None:
        super().__init__(X2_RECORDING)
        self.closed = threading.Event()

    def close(self) -> None:
        self.closed.set()


def test_stop_ends_the_thread_and_closes_the_source() -> None:
    source = ClosingReplay()
    poller, rec = make(source)
    poller.start()
    assert rec.next().seq == 1
    poller.stop(timeout=WAIT)
    assert not poller.alive
    assert source.closed.is_set()


def test_stop_while_paused_and_while_waiting_a_long_interval() -> None:
    for paused in (True, False):
        source = ClosingReplay()
        poller, rec = make(source, interval=MAX_INTERVAL)
        if paused:
            poller.pause()
        poller.start()
        rec.infos.get(timeout=WAIT)
        poller.stop(timeout=WAIT)  # the thread waits with no timeout / 60 s: stop must wake it
        assert not poller.alive, paused
        assert source.closed.is_set()


class FlakyReplay(ReplaySource):
    """Raises on the given calls of sample(), as a driver hiccup would."""

    def __init__(self, failing_calls: set[int]) -> None:
        super().__init__(X2_RECORDING)
        self.calls = 0
        self.failing_calls = failing_calls

    def sample(self) -> Snapshot:
        self.calls += 1
        if self.calls in self.failing_calls:
            raise RuntimeError(f"sample failed on call {self.calls}")
        return super().sample()


def test_an_exception_in_sample_is_reported_and_the_thread_goes_on(pollers: list[Poller]) -> None:
    source = FlakyReplay({2, 3})
    poller, rec = make(source)
    pollers.append(poller)
    poller.start()
    assert rec.next().seq == 1
    errors = [rec.errors.get(timeout=WAIT) for _ in range(2)]
    assert [str(e) for e in errors] == ["sample failed on call 2", "sample failed on call 3"]
    assert all(isinstance(e, RuntimeError) for e in errors)
    assert rec.seqs(2) == [2, 3]
    assert poller.alive
    assert rec.order[:5] == [
        "info",
        "snap 1",
        "error sample failed on call 2",
        "error sample failed on call 3",
        "snap 2",
    ]


def test_an_exception_in_open_is_reported_and_the_thread_ends() -> None:
    class BrokenOpen(ClosingReplay):
        def open(self) -> MachineInfo:
            raise OSError("cannot open the source")

    source = BrokenOpen()
    poller, rec = make(source)
    poller.start()
    err = rec.errors.get(timeout=WAIT)
    assert isinstance(err, OSError)
    assert str(err) == "cannot open the source"
    poller.stop(timeout=WAIT)
    assert not poller.alive
    assert rec.snapshots.empty()
    assert rec.infos.empty()
    assert poller.ticks == 0


def test_a_failing_consumer_is_reported_and_sampling_goes_on():
    import threading

    from gputui.telemetry.poller import Poller
    from gputui.telemetry.recording import ReplaySource

    errors: list[BaseException] = []
    seen: list[int] = []
    enough = threading.Event()

    def on_snapshot(snap):
        seen.append(snap.seq)
        if len(seen) >= 3:
            enough.set()
        if len(seen) == 1:
            raise RuntimeError("consumer bug")

    poller = Poller(ReplaySource(X2_RECORDING), 0.1, on_snapshot, on_error=errors.append)
    poller.start()
    try:
        assert enough.wait(10)
        assert poller.alive
        assert len(errors) == 1
        assert "consumer bug" in str(errors[0])
    finally:
        poller.stop()
