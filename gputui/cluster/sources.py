"""Where the cluster's GPUs come from: a Prometheus server's HTTP API, or the exporters
scraped directly.  Both run on a worker thread (`ClusterPoller`) and return `ClusterState`s;
nothing here blocks the UI, and every request has a deadline.
"""

from __future__ import annotations

import functools
import queue
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gputui.cluster import expfmt
from gputui.cluster.http import FetchError, HttpClient, display_url
from gputui.cluster.jobs import JOB_SERIES, HostJobs, host_jobs, merge, stale_jobs
from gputui.cluster.model import (
    GPM_BY_NAME,
    LIST_WANTED,
    PROCESS_MEMORY,
    SAMPLE_FIELDS,
    WANTED,
    ClusterGpu,
    ClusterState,
    HostState,
    LabelMap,
    build_gpus,
    gpm_value,
    host_names,
    split_jobs,
    usable,
)
from gputui.cluster.promjson import MAX_SERIES, PrometheusError, PromSeries, Result, read_result
from gputui.cluster.targets import normalize_target
from gputui.telemetry.history import HISTORY

WANTED_SET = frozenset((*WANTED, PROCESS_MEMORY, *JOB_SERIES))
IDENTITY_METRIC = "DCGM_FI_DEV_FB_USED"
"""A metric every GPU exporter has (dcgm-exporter's default set and `gputui export`)."""


def _history_series() -> dict[str, tuple[str, Callable[[float], Any]]]:
    """Prometheus metric name -> (series name, conversion from the exported unit) for the
    history quantities (what the drill-in's charts draw): the `GpuSample` fields by their
    exported names, GPM's figures by dcgm-exporter's DCGM_FI_PROF_* names."""
    fields = {m.field for m in HISTORY if m.gpm is None}
    out = {name: (attr, conv) for name, (attr, conv) in SAMPLE_FIELDS.items() if attr in fields}
    for name, gm in GPM_BY_NAME.items():
        if gm.history:
            out[name] = (gm.field, functools.partial(gpm_value, gm))
    return out


HISTORY_SERIES = _history_series()


@dataclass(frozen=True)
class History:
    times: list[float] = field(default_factory=list)
    series: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    """(GPU key, GpuSample field) -> values aligned with `times` (NaN where missing)."""
    error: str | None = None


class ClusterSource(Protocol):
    description: str
    client: HttpClient

    def fetch(self) -> ClusterState: ...

    def history(self, host: HostState, seconds: float, points: int) -> History: ...

    def details(self, host: HostState) -> tuple[ClusterGpu, ...]: ...


# --------------------------------------------------------------------------------------
# direct: scrape each exporter's /metrics
# --------------------------------------------------------------------------------------

GIVE_UP_GRACE_S = 1.0
"""A scrape still running this long after its own deadline (a name lookup that hangs: the
one step the client cannot interrupt) is given up: its target reads as down, and the
refresh goes on without it."""


class ScrapePool:
    """Daemon worker threads for the scrapes.  `run` waits for each job at most `give_up`
    seconds from when that job started, and never for a job left behind: a slow target
    cannot hold up a refresh, and quitting never waits for one (the threads are daemons;
    a `ThreadPoolExecutor`'s are joined when the interpreter exits)."""

    def __init__(self, workers: int, give_up: float, overdue: str) -> None:
        self.give_up = give_up
        self.overdue = overdue
        self.workers = workers
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._surplus = 0
        """Threads to retire: one replaced each worker stuck past its deadline."""
        for _ in range(workers):
            self._spawn()

    def _spawn(self) -> None:
        threading.Thread(target=self._work, name="gputui-scrape", daemon=True).start()

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            job()
            with self._lock:
                if self._surplus > 0:  # a stuck worker came back: one too many now
                    self._surplus -= 1
                    return

    def run(self, fn: Callable[[str], Any], items: Sequence[str]) -> list[Any]:
        """[fn(item) ...] in order; `overdue` for a job that ran past `give_up` seconds."""
        results: list[Any] = [self.overdue] * len(items)
        started: list[float | None] = [None] * len(items)
        done = [threading.Event() for _ in items]

        def job(k: int) -> None:
            started[k] = time.monotonic()
            try:
                results[k] = fn(items[k])
            except Exception as exc:  # a bug in one target's parsing: that target only
                results[k] = f"{type(exc).__name__}: {exc}"[:120]
            done[k].set()

        for k in range(len(items)):
            self._jobs.put(functools.partial(job, k))
        out: list[Any] = []
        for k in range(len(items)):
            while not done[k].is_set():
                t = started[k]
                if t is not None and time.monotonic() >= t + self.give_up:
                    break
                done[k].wait(0.05 if t is None else max(0.0, t + self.give_up - time.monotonic()))
            if done[k].is_set():
                out.append(results[k])
                continue
            out.append(self.overdue)
            with self._lock:  # its thread is stuck (in a name lookup): the next job gets another
                self._surplus += 1
            self._spawn()
        return out

    def close(self) -> None:
        with self._lock:
            alive = self.workers + self._surplus
        for _ in range(alive):
            self._jobs.put(None)


def one_at_a_time(pieces: Iterable[bytes], lock: threading.Lock) -> Iterator[bytes]:
    """`pieces`, with `lock` held while the consumer works on each one and released while the
    next is awaited.  Many scrape threads then wait on the network together but parse one at
    a time: the UI thread competes for the interpreter with one parser, not 32 (with all 32
    parsing at once a key press waited up to 2 s behind them on 64 exporters)."""
    it = iter(pieces)
    lock.acquire()
    try:
        while True:
            lock.release()
            try:
                piece = next(it, None)
            finally:
                lock.acquire()
            if piece is None:
                return
            yield piece
    finally:
        lock.release()


class DirectSource:
    """Scrapes every target in parallel, each with the client's timeout; a target that fails
    is a host shown down (with the error and the GPUs it had)."""

    def __init__(
        self,
        targets: Sequence[str],
        client: HttpClient,
        labels: LabelMap | None = None,
        history_points: int = 720,
        max_series: int = expfmt.MAX_SERIES,
    ) -> None:
        self.targets = [normalize_target(t) for t in targets]
        self.max_series = max_series
        """Series kept of one exporter's answer: the rest is not read (the refresh says so)."""
        self.client = client
        self.labels = labels or LabelMap()
        self.description = f"{len(self.targets)} exporter{'s' if len(self.targets) != 1 else ''} (direct)"
        self._pool = ScrapePool(
            min(32, max(1, len(self.targets))),
            give_up=client.timeout + GIVE_UP_GRACE_S,
            overdue=f"no complete answer within {client.timeout:g} s",
        )
        self._last: dict[str, HostState] = {}
        self._history: dict[str, deque[tuple[float, ClusterGpu]]] = {}
        self._history_points = history_points
        self._lock = threading.Lock()
        self._parsing = threading.Lock()
        """Held while a scrape parses a piece of its answer (see `one_at_a_time`)."""

    def _scrape(self, target: str) -> expfmt.Exposition | str:
        """The target's samples (parsed as they arrive, up to `max_series`), or why not (one
        short line).  The scrapes wait on the network in parallel and parse one at a time."""
        try:
            with self.client.stream(target, accept="text/plain;version=0.0.4") as pieces:
                mine = one_at_a_time(pieces, self._parsing)
                return expfmt.parse_lines(expfmt.lines_of(mine), self.max_series, WANTED_SET)
        except FetchError as exc:
            return exc.reason  # the row names the host; the URL is its instance

    def fetch(self) -> ClusterState:
        t0 = time.monotonic()
        req0, bytes0 = self.client.requests, self.client.bytes_received
        results = list(zip(self.targets, self._pool.run(self._scrape, self.targets), strict=True))
        now = time.time()
        lm = self.labels
        raw: list[tuple[str, str, str, list[expfmt.Sample] | str]] = []
        cut = 0
        for target, exp in results:
            instance = urllib.parse.urlsplit(target).netloc
            hostname = ""
            got: list[expfmt.Sample] | str = exp if isinstance(exp, str) else exp.samples
            if not isinstance(got, str):
                cut += exp.truncated
                hostname = next((s.labels[lm.host] for s in got if s.labels.get(lm.host)), "")
            elif target in self._last:
                hostname = self._last[target].name.split(" (")[0]
            raw.append((target, hostname or instance, instance, got))
        names = host_names((t, h, i) for t, h, i, _ in raw)
        hosts: list[HostState] = []
        for target, _hostname, instance, got in raw:
            if isinstance(got, str):
                last = self._last.get(target)
                hosts.append(
                    HostState(
                        key=target,
                        name=names[target],
                        instance=instance,
                        up=False,
                        error=got,
                        gpus=last.gpus if last else (),
                        driver=last.driver if last else "",
                        stale=last is not None,
                        jobs=stale_jobs(last.jobs) if last else HostJobs(),
                    )
                )
                continue
            gpu_series, job_series = split_jobs((s.name, s.labels, s.value) for s in got)
            gpus = build_gpus(target, gpu_series, lm)
            driver = next((s.labels[lm.driver] for s in got if s.labels.get(lm.driver)), "")
            jobs = host_jobs(target, names[target], job_series, lm.cluster)
            host = HostState(target, names[target], instance, True, None, tuple(gpus), driver, jobs=jobs)
            self._last[target] = host
            with self._lock:
                for g in gpus:
                    ring = self._history.get(g.key)
                    if ring is None:
                        ring = self._history[g.key] = deque(maxlen=self._history_points)
                    ring.append((now, g))
            hosts.append(host)
        fleet, left_out = merge((h.key, h.jobs) for h in hosts)
        return ClusterState(
            hosts=tuple(hosts),
            fetched_at=now,
            duration=time.monotonic() - t0,
            source=self.description,
            queries=self.client.requests - req0,
            bytes=self.client.bytes_received - bytes0,
            jobs=fleet,
            jobs_left_out=left_out + sum(h.jobs.dropped for h in hosts),
            note=(
                f"{cut} exporter{'s' if cut != 1 else ''} sent more than {self.max_series:,} series: "
                "the rest was not read"
                if cut
                else None
            ),
        )

    def history(self, host: HostState, seconds: float, points: int) -> History:
        """The samples this session has scraped (direct mode keeps no other history)."""
        cutoff = time.time() - seconds
        with self._lock:
            rings = {g.key: [e for e in self._history.get(g.key, ()) if e[0] >= cutoff] for g in host.gpus}
        times = sorted({t for ring in rings.values() for t, _ in ring})
        pos = {t: i for i, t in enumerate(times)}
        series: dict[tuple[str, str], list[float]] = {}
        for key, ring in rings.items():
            for m in HISTORY:
                values = [float("nan")] * len(times)
                for t, g in ring:
                    v = m.value(g.sample)
                    if v is not None:
                        values[pos[t]] = float(v)
                series[(key, m.field)] = values
        return History(times, series)

    def details(self, host: HostState) -> tuple[ClusterGpu, ...]:
        """Every field of a host's GPUs: a scrape has them all already."""
        return host.gpus

    def close(self) -> None:
        self._pool.close()


# --------------------------------------------------------------------------------------
# Prometheus HTTP API
# --------------------------------------------------------------------------------------


def promql_string(text: str) -> str:
    """A PromQL double-quoted string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def regex_escape(text: str) -> str:
    """Escape RE2 metacharacters (for a `=~` matcher)."""
    return "".join("\\" + c if c in r"\.+*?()|[]{}^$" else c for c in text)


def _instant(r: PromSeries) -> float | None:
    """An instant vector's number, or None."""
    v = r.value
    return _float(v[1]) if isinstance(v, list) and len(v) == 2 else None


def _float(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


class PrometheusSource:
    """Current values by instant queries, history by range queries.

    One refresh asks two queries: the series the list needs (`{__name__=~"..."}`, LIST_WANTED)
    and `up`; a third only when some target is down (its GPUs as last seen, `last_over_time`
    over `lookback`).  A host's view asks for every series of that host (`details`)."""

    def __init__(
        self,
        url: str,
        client: HttpClient,
        labels: LabelMap | None = None,
        selector: str = "",
        lookback: str = "1h",
        max_series: int = MAX_SERIES,
    ) -> None:
        self.url = url.rstrip("/")
        self.max_series = max_series
        """Series read of one answer: the rest is not downloaded (the refresh says so)."""
        self.client = client
        self.labels = labels or LabelMap()
        self.selector = selector.strip().strip("{}").strip()
        self.lookback = lookback
        self.description = f"Prometheus {display_url(self.url)}"
        self._last: ClusterState | None = None

    def _matchers(self, *extra: str) -> str:
        parts = [p for p in (*extra, self.selector) if p]
        return "{" + ",".join(parts) + "}"

    def _read(self, path: str, params: Mapping[str, str], kind: str) -> Result:
        """An API answer read as it arrives, at most `max_series` series of it."""
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        with self.client.stream(url, accept="application/json") as pieces:
            return read_result(pieces, kind, self.max_series)

    def query(self, promql: str, at: float | None = None) -> Result:
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return self._read("/api/v1/query", params, "vector")

    def query_range(self, promql: str, start: float, end: float, step: float) -> Result:
        params = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        return self._read("/api/v1/query_range", params, "matrix")

    def wanted_query(self, *extra: str, metrics: Sequence[str] = LIST_WANTED) -> str:
        names = "|".join(regex_escape(n) for n in metrics)
        return self._matchers(f"__name__=~{promql_string(names)}", *extra)

    def _host_matchers(self, host: HostState) -> list[str]:
        inst, _, hostname = host.key.partition("\0")
        out = [f"instance={promql_string(inst)}"]
        if hostname:
            out.append(f"{self.labels.host}={promql_string(hostname)}")
        return out

    def details(self, host: HostState) -> tuple[ClusterGpu, ...]:
        """Every series of one host's GPUs (for its cards); the list's GPUs when that fails."""
        try:
            result = self.query(self.wanted_query(*self._host_matchers(host), metrics=WANTED))
        except (FetchError, PrometheusError):
            return host.gpus
        series = [(r.name, r.labels, f) for r in result.series if (f := _instant(r)) is not None]
        return tuple(build_gpus(host.key, series, self.labels)) or host.gpus

    def fetch(self) -> ClusterState:
        t0 = time.monotonic()
        req0, bytes0 = self.client.requests, self.client.bytes_received
        now = time.time()
        try:
            values = self.query(self.wanted_query(metrics=(*LIST_WANTED, *JOB_SERIES)), now)
            ups = self.query("up" + self._matchers(), now)
            hosts = self._hosts(values.series, ups.series, now)
        except (FetchError, PrometheusError) as exc:
            last = self._last
            return ClusterState(
                hosts=last.hosts if last else (),
                fetched_at=last.fetched_at if last else 0.0,
                duration=time.monotonic() - t0,
                source=self.description,
                # the source names the server: the reason alone, never cut off by a long URL
                error=exc.reason if isinstance(exc, FetchError) else str(exc),
                queries=self.client.requests - req0,
                bytes=self.client.bytes_received - bytes0,
            )
        fleet, left_out = merge((h.key, h.jobs) for h in hosts)
        state = ClusterState(
            hosts=hosts,
            fetched_at=now,
            duration=time.monotonic() - t0,
            source=self.description,
            queries=self.client.requests - req0,
            bytes=self.client.bytes_received - bytes0,
            jobs=fleet,
            jobs_left_out=left_out + sum(h.jobs.dropped for h in hosts),
            note=self._cut_note(values, ups),
        )
        self._last = state
        return state

    def _cut_note(self, *results: Result) -> str | None:
        if not any(r.truncated for r in results):
            return None
        return (
            f"Prometheus answered more than {self.max_series:,} series: the first {self.max_series:,} "
            "are shown (narrow it with --selector)"
        )

    def _hosts(self, values: list[PromSeries], ups: list[PromSeries], now: float) -> tuple[HostState, ...]:
        lm = self.labels
        up_by_instance: dict[str, bool] = {}
        for r in ups:
            if (f := _instant(r)) is not None:
                inst = r.labels.get("instance", "")
                up_by_instance[inst] = up_by_instance.get(inst, False) or f == 1.0
        groups: dict[tuple[str, str], list[tuple[str, Mapping[str, str], float]]] = {}
        for r in values:
            f = _instant(r)
            if f is None:
                continue
            where = (r.labels.get("instance", ""), r.labels.get(lm.host, ""))
            groups.setdefault(where, []).append((r.name, r.labels, f))
        down = sorted(i for i, ok in up_by_instance.items() if not ok)
        stale: dict[tuple[str, str], list[tuple[str, Mapping[str, str], float]]] = {}
        if down:
            pattern = "|".join(regex_escape(i) for i in down)
            # the GPUs the down exporters had, as last seen (one series per GPU; a range
            # function drops the metric name, so ask for one metric only)
            q = (
                f"last_over_time({IDENTITY_METRIC}"
                + self._matchers(f"instance=~{promql_string(pattern)}")
                + f"[{self.lookback}])"
            )
            for r in self.query(q, now).series:
                if _instant(r) is None:
                    continue
                where = (r.labels.get("instance", ""), r.labels.get(lm.host, ""))
                if where not in groups:
                    stale.setdefault(where, []).append(("", r.labels, float("nan")))
        keys = sorted(set(groups) | set(stale))
        names = host_names((f"{i}\0{h}", h or i, i) for i, h in keys)
        hosts: list[HostState] = []
        for inst, hostname in keys:
            key = f"{inst}\0{hostname}"
            series, job_series = split_jobs(groups.get((inst, hostname)) or stale.get((inst, hostname), []))
            gpus = build_gpus(key, series, lm)
            up = up_by_instance.get(inst, True) if (inst, hostname) in groups else False
            driver = next((lab[lm.driver] for _, lab, _ in series if lab.get(lm.driver)), "")
            hosts.append(
                HostState(
                    key=key,
                    name=names[key],
                    instance=inst,
                    up=up,
                    error=None if up else "exporter down (Prometheus up == 0)",
                    gpus=tuple(gpus),
                    driver=driver,
                    stale=not up,
                    jobs=host_jobs(key, names[key], job_series, lm.cluster),
                )
            )
        return tuple(hosts)

    def history(self, host: HostState, seconds: float, points: int) -> History:
        """Range queries for one host's GPUs: one query for every charted metric."""
        end = time.time()
        start = end - seconds
        step = max(1.0, round(seconds / max(1, points), 3))
        wanted = HISTORY_SERIES
        names = "|".join(regex_escape(n) for n in wanted)
        matchers = [f"__name__=~{promql_string(names)}", *self._host_matchers(host)]
        try:
            result = self.query_range(self._matchers(*matchers), start, end, step)
        except (FetchError, PrometheusError) as exc:
            return History(error=str(exc))
        n = int((end - start) // step) + 1
        times = [start + k * step for k in range(n)]
        series: dict[tuple[str, str], list[float]] = {}
        by_ident = {gpu_key_of(g): g.key for g in host.gpus}
        for r in result.series:
            labels = r.labels
            attr, conv = wanted.get(r.name, (None, float))
            ident = by_ident.get(labels.get(self.labels.uuid) or labels.get(self.labels.gpu, ""))
            vals = r.value
            if attr is None or ident is None or not isinstance(vals, list):
                continue
            out = series.setdefault((ident, attr), [float("nan")] * n)
            for pair in vals:
                if not (isinstance(pair, list) and len(pair) == 2):
                    continue
                t, v = _float(pair[0]), _float(pair[1])
                if t is None or v is None or not usable(v):
                    continue
                k = round((t - start) / step)
                if 0 <= k < n:
                    out[k] = float(conv(v))
        return History(times, series)

    def close(self) -> None:
        pass


def gpu_key_of(g: ClusterGpu) -> str:
    return g.device.uuid or str(g.device.index)


# --------------------------------------------------------------------------------------
# the worker thread
# --------------------------------------------------------------------------------------


class ClusterPoller:
    """Calls `source.fetch()` every `interval` seconds on its own thread and hands each state
    to `deliver`; a refresh never overlaps the previous one.  `refresh_now()` wakes it."""

    def __init__(
        self, source: ClusterSource, interval: float, deliver: Callable[[ClusterState], None]
    ) -> None:
        self.source = source
        self.interval = interval
        self.deliver = deliver
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.busy_since: float | None = None
        """monotonic time the running refresh began (the UI shows a slow one)."""
        self._thread = threading.Thread(target=self._run, name="gputui-cluster", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def refresh_now(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            self.busy_since = t0
            try:
                state = self.source.fetch()
            except Exception as exc:  # a bug must not kill the thread silently
                state = ClusterState(source=self.source.description, error=f"{type(exc).__name__}: {exc}")
            self.busy_since = None
            if self._stop.is_set():
                return
            self.deliver(state)
            self._wake.wait(max(0.0, self.interval - (time.monotonic() - t0)))
            self._wake.clear()
