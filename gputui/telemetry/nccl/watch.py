"""Who asks NCCL's RAS service, when: `RasWatch`, its own daemon thread, fed by the source.

The source calls `offer(processes, now)` at each tick (the poller's thread; it never blocks:
a lock, a few comparisons).  Only while GPU processes of a job of two ranks or more run (one
launcher, Slurm job step or pod: `gputui.telemetry.health`'s job key), and at most every
`INTERVAL_S`, it hands their PIDs to the thread, which asks each RAS address the ranks'
environment names (`client.ask`, sequentially: never more than one query in flight) and
builds an `NcclView`; the next `offer` returns it once, and the source puts it in that
tick's `Snapshot.nccl`.  When the last such job ends, one view says so ("no job of two ranks
or more"), so nobody keeps showing a stale answer.

Each rank's `NCCL_RAS_ENABLE` and `NCCL_RAS_ADDR` are read from /proc/PID/environ once per
process (PID and start time).  An unreadable environment (another user's process, without
root) means NCCL's defaults: on, localhost:28028.  NCCL also reads nccl.conf files; gputui
does not, so RAS turned off there shows as "nothing listens".
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from gputui.telemetry.health import _job_key as job_key
from gputui.telemetry.host.processes import environ_values
from gputui.telemetry.model import GpuProcess
from gputui.telemetry.nccl import client
from gputui.telemetry.nccl.model import NO_JOB, NcclView, RasAnswer, carry_since, clip, parse_json
from gputui.telemetry.nccl.text import parse_text

log = logging.getLogger(__name__)

INTERVAL_S = 10.0
"""Seconds between two rounds of questions (a round takes a few ms on a healthy job)."""
MAX_ADDRESSES = 8
"""RAS addresses asked per round (one per job, usually); the rest are named, not asked."""
OFF = "RAS is off for these ranks (NCCL_RAS_ENABLE is not 1 in their environment)"
ENV_NAMES = (b"NCCL_RAS_ENABLE", b"NCCL_RAS_ADDR")

Ident = tuple[int, float | None]
Asker = Callable[..., client.RasReply]


def job_ranks(processes: Iterable[GpuProcess]) -> tuple[Ident, ...]:
    """The GPU processes (PID, start time) of jobs with two ranks or more, by PID."""
    jobs: dict[tuple[str, ...], dict[int, float | None]] = {}
    for p in processes:
        key = job_key(p)
        if key is not None:
            jobs.setdefault(key, {})[p.pid] = p.create_time
    return tuple(sorted(i for ranks in jobs.values() if len(ranks) >= 2 for i in ranks.items()))


def read_env(pid: int, proc: str = "/proc") -> tuple[bool, str | None] | None:
    """(RAS on, NCCL_RAS_ADDR or None) from a process's environment; None when unreadable."""
    found = environ_values(pid, ENV_NAMES, proc)
    if found is None:
        return None
    env = {k.decode("ascii"): v.decode("utf-8", "replace") for k, v in found.items()}
    return client.ras_enabled(env), env.get("NCCL_RAS_ADDR") or None


def answer_of(reply: client.RasReply) -> RasAnswer:
    """A query's reply parsed (addr and PIDs are the caller's to fill)."""
    if reply.format == "json":
        answer = parse_json(reply.body)
    elif reply.format == "text":
        answer = parse_text(reply.body)
    else:
        answer = RasAnswer("", reason=reply.reason)
    return replace(answer, seconds=round(reply.seconds, 4))


class RasWatch:
    """Asks RAS on its own thread, for the ranks the source offers (see the module's doc)."""

    def __init__(
        self,
        interval: float = INTERVAL_S,
        *,
        ask: Asker = client.ask,
        env: Callable[[int], tuple[bool, str | None] | None] = read_env,
        addresses: Callable[[], tuple[str, ...]] = client.local_addresses,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval
        self._ask = ask
        self._read_env = env
        self._addresses = addresses
        self._clock = clock
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pending: tuple[Ident, ...] = ()
        self._busy = False
        self._due = 0.0
        self._done: NcclView | None = None
        self._asked = False
        """A round has been asked since the last "no job" view."""
        self._env: dict[Ident, tuple[bool, str | None] | None] = {}
        self._previous: dict[str, RasAnswer] = {}
        self.finished = threading.Event()
        """Set when a round's view is ready for the next `offer` (for those who wait for one)."""
        self.rounds = 0
        self.last_cost: float | None = None
        """Seconds the last round took."""

    # ---- the source's side (the poller's thread) ----

    def offer(self, processes: Sequence[GpuProcess], now: float) -> NcclView | None:
        """Start a round if one is due for these processes; the view of a round that ended
        since the last call (once), else None.  Never blocks."""
        ranks = job_ranks(processes)
        with self._lock:
            out, self._done = self._done, None
            if not ranks:
                if out is None and self._asked and not self._busy:
                    self._asked = False
                    out = NcclView(now, reason=NO_JOB)
                return out
            if not self._busy and self._clock() >= self._due and not self._stop.is_set():
                self._busy = self._asked = True
                self._pending = ranks
                self._due = self._clock() + self.interval
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="gputui-nccl-ras", daemon=True)
                    self._thread.start()
                self._wake.set()
        return out

    def close(self, timeout: float = 2.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    # ---- the thread ----

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stop.is_set():
                return
            with self._lock:
                ranks = self._pending
            t0 = time.perf_counter()
            started = time.time()
            try:
                view = self.round(ranks, started)
            except Exception as exc:  # a bug here must not end the questions for good
                log.debug("RAS round failed", exc_info=exc)
                view = NcclView(started, reason=f"the RAS round failed ({type(exc).__name__})")
            with self._lock:
                self.last_cost = time.perf_counter() - t0
                self.rounds += 1
                self._done = view
                self._busy = False
            self.finished.set()

    def _env_of(self, ident: Ident) -> tuple[bool, str | None] | None:
        if ident not in self._env:
            self._env[ident] = self._read_env(ident[0])
        return self._env[ident]

    def round(self, ranks: Sequence[Ident], started: float) -> NcclView:
        """One round of questions for these ranks (blocking: the thread's)."""
        local = self._addresses()
        by_addr: dict[str, list[int]] = {}
        off: list[int] = []
        for ident in ranks:
            enabled, value = self._env_of(ident) or (True, None)
            if enabled:
                by_addr.setdefault(value or client.DEFAULT_ADDR, []).append(ident[0])
            else:
                off.append(ident[0])
        for ident in [i for i in self._env if i not in set(ranks)]:
            del self._env[ident]
        answers = [RasAnswer("", pids=tuple(off), reason=OFF)] if off else []
        asked = list(by_addr.items())
        for value, pids in asked[:MAX_ADDRESSES]:
            answers.append(self._answer(value, tuple(pids), local, started))
        for value, pids in asked[MAX_ADDRESSES:]:
            why = f"more than {MAX_ADDRESSES} RAS addresses: not asked"
            answers.append(RasAnswer(clip(value), pids=tuple(pids), reason=why))
        kept = {a.addr for a in answers}
        self._previous = {k: v for k, v in self._previous.items() if k in kept}
        return NcclView(started, tuple(answers), local)

    def _answer(self, value: str, pids: tuple[int, ...], local: tuple[str, ...], started: float) -> RasAnswer:
        target = client.ras_target(value, local)
        if isinstance(target, str):
            return RasAnswer(clip(value), pids=pids, reason=target)
        answer = replace(answer_of(self._ask(target, cancel=self._stop)), addr=target.text, pids=pids)
        if answer.format is not None and answer.reason is None:
            answer = carry_since(self._previous.get(target.text), answer, started)
            self._previous[target.text] = answer
        return answer
