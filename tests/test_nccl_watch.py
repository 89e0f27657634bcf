"""Who asks RAS, when (gputui/telemetry/nccl/watch.py) and where the answers land (the Hub): only
for jobs of two ranks or more, at most one query in flight, never blocking the source's thread,
a round's view handed out once, "no job" said once when the last job ends."""

from __future__ import annotations

import threading

from ras_support import FakeRas, first

from gputui.telemetry.hub import Hub
from gputui.telemetry.model import GpuProcess, Snapshot
from gputui.telemetry.nccl.client import RasReply, RasTarget
from gputui.telemetry.nccl.findings import findings
from gputui.telemetry.nccl.model import NO_JOB, NcclView, RasAnswer
from gputui.telemetry.nccl.watch import MAX_ADDRESSES, OFF, RasWatch, job_ranks, read_env

REAL_JSON = first("3-mismatch-slow-gpu", "localhost:28028", "json", '"AllReduce": 150').body


def rank(pid: int, launcher: int | None = 10, gpu: int = 0) -> GpuProcess:
    return GpuProcess(gpu_index=gpu, pid=pid, launcher=launcher, create_time=float(pid))


JOB = (rank(2226, gpu=0), rank(2227, gpu=1))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Asker:
    """Stands in for client.ask: records targets; blocks until `release` while `hold`."""

    def __init__(self, body: str = REAL_JSON, hold: bool = False) -> None:
        self.body = body
        self.targets: list[RasTarget] = []
        self.hold = hold
        self.entered = threading.Event()
        self.release = threading.Event()
        self.in_flight = 0
        self.most_in_flight = 0

    def __call__(self, target: RasTarget, **kw: object) -> RasReply:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        self.targets.append(target)
        self.entered.set()
        if self.hold:
            self.release.wait(30)
        self.in_flight -= 1
        return RasReply("json", self.body, None, 0.001)


def watch(asker: Asker, env=None, clock: Clock | None = None) -> RasWatch:
    return RasWatch(
        ask=asker,
        env=env or (lambda pid: (True, None)),
        addresses=lambda: ("192.0.2.2",),
        clock=clock or Clock(),
    )


def wait_view(w: RasWatch, procs=JOB, now: float = 1.0) -> NcclView:
    """Offer until the round (on the watch's thread) hands its view back, waiting for the
    round's end between offers (its view is stored before `finished` is set)."""
    for _ in range(100):
        view = w.offer(procs, now)
        if view is not None:
            return view
        assert w.finished.wait(30)
        w.finished.clear()
    raise AssertionError("no view")


def test_job_ranks_are_those_of_jobs_of_two_ranks_or_more():
    assert job_ranks(JOB) == ((2226, 2226.0), (2227, 2227.0))
    assert job_ranks([rank(1)]) == ()  # one rank: no collective to ask about
    assert job_ranks([rank(1, launcher=None), rank(2, launcher=None)]) == ()  # no job known
    assert job_ranks([rank(1, launcher=5), rank(2, launcher=6)]) == ()
    assert job_ranks([rank(1, gpu=0), rank(1, gpu=1)]) == ()  # one process on two GPUs


def test_a_round_asks_the_default_address_and_maps_the_answer():
    asker = Asker()
    w = watch(asker)
    view = wait_view(w)
    w.close()
    assert [t.text for t in asker.targets] == ["localhost:28028"]
    (a,) = view.answers
    assert (a.addr, a.pids, a.format, a.reason) == ("localhost:28028", (2226, 2227), "json", None)
    assert view.local_hosts == ("192.0.2.2",)
    (f,) = findings(view, {2226, 2227})
    assert f.detail == "rank 1 (PID 2227) is one AllReduce behind (150; rank 0: 151)"
    assert a.communicators[0].counts_since == view.asked_at


def test_no_job_no_question_and_no_view():
    asker = Asker()
    w = watch(asker)
    for _ in range(5):
        assert w.offer([rank(1)], 1.0) is None
        assert w.offer([], 1.0) is None
    w.close()
    assert asker.targets == []


def test_one_query_at_a_time_and_the_source_never_waits():
    asker = Asker(hold=True)
    clock = Clock()
    w = watch(asker, clock=clock)
    assert w.offer(JOB, 1.0) is None
    assert asker.entered.wait(10)
    clock.now = 1000.0  # long past due: still no second round while one is in flight
    for _ in range(50):
        assert w.offer(JOB, 1.0) is None  # returns at once although the query is blocked
    assert len(asker.targets) == 1
    asker.release.set()
    view = wait_view(w)
    w.close()
    assert asker.most_in_flight == 1 and view.answers[0].reason is None


def test_the_next_round_waits_for_the_interval():
    asker = Asker()
    clock = Clock()
    w = watch(asker, clock=clock)
    wait_view(w)
    for _ in range(20):
        assert w.offer(JOB, 2.0) is None
    assert len(asker.targets) == 1
    clock.now = w.interval  # due again
    wait_view(w)
    w.close()
    assert len(asker.targets) == 2


def test_when_the_last_job_ends_one_view_says_so():
    asker = Asker()
    w = watch(asker)
    wait_view(w)
    view = w.offer([], 50.0)
    assert view == NcclView(50.0, reason=NO_JOB)
    assert w.offer([], 51.0) is None
    w.close()


def test_ranks_with_ras_off_are_named_and_not_asked():
    asker = Asker()
    env = {2226: (False, None), 2227: (False, "localhost:28029")}
    w = watch(asker, env=env.get)
    view = wait_view(w)
    w.close()
    assert asker.targets == []
    assert view.answers == (RasAnswer("", pids=(2226, 2227), reason=OFF),)


def test_each_jobs_address_is_asked_and_a_foreign_one_refused():
    asker = Asker()
    env = {1: (True, "localhost:28029"), 2: (True, "localhost:28029"), 3: (True, "10.9.9.9:28028"), 4: None}
    procs = [rank(1), rank(2), rank(3, launcher=11), rank(4, launcher=11)]
    w = watch(asker, env=env.get)
    view = wait_view(w, procs)
    w.close()
    assert sorted(t.text for t in asker.targets) == ["localhost:28028", "localhost:28029"]
    by_addr = {a.addr: a for a in view.answers}
    assert by_addr["localhost:28029"].pids == (1, 2)
    assert by_addr["localhost:28028"].pids == (4,)  # environment unreadable: NCCL's default
    assert by_addr["10.9.9.9:28028"].reason == (
        "NCCL_RAS_ADDR=10.9.9.9:28028 is not a loopback or local address: not contacted"
    )


def test_addresses_beyond_the_cap_are_named_not_asked():
    asker = Asker()
    n = MAX_ADDRESSES + 3
    env = {p: (True, f"localhost:{30000 + p}") for p in range(n)}
    procs = [rank(p, launcher=100 + p // 1) for p in range(n)] + [
        rank(p + 1000, launcher=100 + p) for p in range(n)
    ]
    env.update({p + 1000: (True, f"localhost:{30000 + p}") for p in range(n)})
    w = watch(asker, env=env.get)
    view = wait_view(w, procs)
    w.close()
    assert len(asker.targets) == MAX_ADDRESSES
    skipped = [a for a in view.answers if a.reason is not None]
    assert len(skipped) == 3 and skipped[0].reason == f"more than {MAX_ADDRESSES} RAS addresses: not asked"


def test_a_real_socket_round_against_a_fake_service():
    with FakeRas(REAL_JSON.encode()) as ras:
        w = RasWatch(env=lambda pid: (True, ras.addr), addresses=lambda: ())
        view = wait_view(w)
        w.close()
    (a,) = view.answers
    assert (a.addr, a.format, a.reason) == (ras.addr, "json", None)
    assert view.local_hosts == ()  # unknown: comms are matched by PID alone
    assert len(findings(view, {2227})) == 1


def test_a_silent_service_gives_a_reason_not_silence():
    with FakeRas(mode="silent") as ras:
        from functools import partial

        from gputui.telemetry.nccl.client import ask

        w = RasWatch(ask=partial(ask, deadline=0.3), env=lambda pid: (True, ras.addr), addresses=lambda: ())
        view = wait_view(w)
        w.close()
    assert view.answers[0].reason == "no answer within 0.3 s (a process of the job stopped?)"


def test_read_env(tmp_path):
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "environ").write_bytes(b"A=1\0NCCL_RAS_ENABLE=0\0NCCL_RAS_ADDR=localhost:1\0")
    (tmp_path / "8").mkdir()
    (tmp_path / "8" / "environ").write_bytes(b"NCCL_RAS_ADDR=\xff\xfe:1\0")
    assert read_env(7, str(tmp_path)) == (False, "localhost:1")
    assert read_env(8, str(tmp_path)) == (True, "\ufffd\ufffd:1")
    assert read_env(9, str(tmp_path)) is None


# --------------------------------------------------------------------------------------
# the Hub keeps the latest view between the ticks that carry one
# --------------------------------------------------------------------------------------


def test_the_hub_keeps_the_latest_view():
    hub = Hub()
    v1 = NcclView(1.0)
    hub.publish(Snapshot(seq=1, timestamp=1.0, nccl=v1))
    hub.publish(Snapshot(seq=2, timestamp=2.0))
    assert hub.nccl_view() is v1
    v2 = NcclView(3.0, reason=NO_JOB)
    hub.publish(Snapshot(seq=3, timestamp=3.0, nccl=v2))
    assert hub.nccl_view() is v2
    hub.publish(Snapshot(seq=1, timestamp=1.0))  # a replay went back: not that tick's view
    assert hub.nccl_view() is None
    hub.publish(Snapshot(seq=4, timestamp=4.0, nccl=v1))
    hub.reset()
    assert hub.nccl_view() is None


# --------------------------------------------------------------------------------------
# NvmlSource: the view rides on the tick after the round
# --------------------------------------------------------------------------------------


class Inspector:
    """Stands in for psutil's ProcessInspector: the processes as given (the job above)."""

    launchers = ()

    def __init__(self) -> None:
        self.procs: list[GpuProcess] = list(JOB)

    def enrich(self, raw, now):
        return list(self.procs)


def test_the_source_puts_the_view_on_one_tick_and_none_on_the_others():
    from gputui.telemetry.nvml.source import NvmlSource

    source = NvmlSource(slow=False, ras=True)
    source.info = object()  # opened: no NVML here, no GPU handles
    source._procs = Inspector()
    asker = Asker()
    source.ras = watch(asker)
    first = source.sample()
    assert first.nccl is None  # the round has only begun
    assert source.ras.finished.wait(30)
    snaps = [source.sample() for _ in range(3)]
    assert snaps[0].nccl is not None and snaps[0].nccl.answers[0].pids == (2226, 2227)
    assert [s.nccl for s in snaps[1:]] == [None, None]
    source._procs.procs = []  # the job ended: one view says so
    ended = source.sample()
    assert ended.nccl == NcclView(ended.timestamp, reason=NO_JOB)
    assert source.sample().nccl is None
    source.close()
    assert len(asker.targets) == 1


def test_a_one_shot_reader_starts_no_ras_thread():
    from gputui.telemetry.nvml.source import NvmlSource

    assert NvmlSource(slow=False)._ras_enabled is False
    assert NvmlSource()._ras_enabled is True
    assert NvmlSource(enrich_processes=False)._ras_enabled is False


def test_a_failing_round_says_so_and_the_next_one_runs():
    asker = Asker()
    clock = Clock()
    calls = []

    def env(pid):
        calls.append(pid)
        if len(calls) == 1:
            raise RuntimeError("a bug")
        return (True, None)

    w = watch(asker, env=env, clock=clock)
    failed = wait_view(w)
    assert failed.reason == "the RAS round failed (RuntimeError)"
    from gputui.telemetry.nccl.findings import job_nccl

    assert job_nccl(failed, {2226}).reason == "the RAS round failed (RuntimeError)"
    clock.now = w.interval
    assert wait_view(w).answers[0].reason is None
    w.close()
