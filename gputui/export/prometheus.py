"""Prometheus /metrics from the poller's latest snapshot (`gputui export`).

A custom `prometheus_client` Collector reads the Hub (under its lock, a pointer copy): a scrape
never calls NVML, so a scrape storm cannot slow or skew the GPUs' sampling.  The metric
families of one snapshot are built once and reused by every scrape until the next tick.

Names, help texts, units and labels follow NVIDIA's dcgm-exporter where it has the quantity
(`DCGM_FI_DEV_*`, labels gpu, UUID, pci_bus_id, device, modelName, Hostname,
DCGM_FI_DRIVER_VERSION), so DCGM Grafana dashboards work unchanged.  dcgm-exporter declares
its cumulative fields (energy, ECC, PCIe) as counters without a `_total` suffix; the official
client would rename a counter to NAME_total, so those are exposed untyped under exactly
dcgm-exporter's names.  gputui's own metrics (`gputui_*`) use Prometheus base units
(bytes, seconds, ratios 0-1).
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import resource
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client.exposition import ThreadingWSGIServer, choose_encoder, gzip_accepted
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from gputui import __version__
from gputui.export.nccl_prometheus import nccl_families
from gputui.telemetry.health_config import STUCK_VERDICTS
from gputui.telemetry.health_report import HealthReport, JobHealth, JobVerdict
from gputui.telemetry.hints import Hint
from gputui.telemetry.host.jobs import exporter_labels, trusted
from gputui.telemetry.metric_types import Export
from gputui.telemetry.metrics import FB_TOTAL, GPU_LOST, GPU_METRICS, GPU_PROCESSES
from gputui.telemetry.model import DeviceInfo, GpuProcess, GpuSample, Job, MachineInfo, Snapshot
from gputui.telemetry.nccl.model import NcclView
from gputui.telemetry.process_metrics import PROCESS_METRICS, ProcessMetric
from gputui.untrusted import escaped

if TYPE_CHECKING:
    from gputui.telemetry.hub import Hub
    from gputui.telemetry.poller import Poller

DCGM_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION")
PROCESS_LABELS = (
    "gpu", "UUID", "Hostname", "pid", "process_name", "user", "type",
    "pod", "namespace", "container", "slurm_job", "slurm_job_env",
)  # fmt: skip


#: Per-GPU families: the registry's quantities that have a /metrics name, dcgm-exporter's
#: first where it has them (gputui/telemetry/metrics.py); GPM's under DCGM's DCP names, the
#: _ACTIVE ones as ratios 0-1, no series where GPM is unavailable (never a 0).
GPU_EXPORTS: tuple[tuple[Callable[[GpuSample], Any], Export], ...] = tuple(
    (m.value, m.prometheus) for m in GPU_METRICS if m.prometheus is not None
)
#: Per-process families.
PROCESS_EXPORTS: tuple[tuple[ProcessMetric, Export], ...] = tuple(
    (m, m.prometheus) for m in PROCESS_METRICS if m.prometheus is not None
)


def label_value(text: str) -> str:
    """The one rule for every label value gputui exports: the untrusted-text filter
    (gputui/untrusted.py: ESC, C1 controls such as CSI, DEL, bidirectional and invisible
    characters become escapes like `\\x1b`), then the Prometheus text format's own escaping
    of backslash, quote and newline, which prometheus_client adds as it writes the
    exposition (so `\\x1b` travels as `\\\\x1b` and a scraper reads back `\\x1b`)."""
    return escaped(text)


class _Family(Metric):
    """A metric family whose every sample's label values pass `label_value`: no caller can
    add a raw one (job fields, process names, host and GPU names are all untrusted)."""

    def add_sample(self, name: str, labels: Mapping[str, str], value: float, *args: Any, **kw: Any) -> None:
        super().add_sample(name, {k: label_value(v) for k, v in labels.items()}, value, *args, **kw)


def _labels(info: MachineInfo, d: DeviceInfo) -> dict[str, str]:
    return {
        "gpu": str(d.index),
        "UUID": d.uuid or "",
        "pci_bus_id": d.bus_id or "",
        # the /dev/nvidiaN file (dcgm-exporter's meaning): the minor number, which need not
        # be the index; empty where unknown, never the index passed off as one
        "device": f"nvidia{d.minor_number}" if d.minor_number is not None else "",
        "modelName": d.name,
        "Hostname": info.system.hostname,
        "DCGM_FI_DRIVER_VERSION": info.system.driver_version or "",
    }


def _family(name: str, doc: str, typ: str) -> Metric:
    return _Family(name, doc, typ)


def build_families(
    info: MachineInfo,
    snap: Snapshot,
    *,
    processes: bool = True,
    alerts: Sequence[Any] = (),
    hints: Mapping[int, Sequence[Hint]] | None = None,
    health: HealthReport | None = None,
    nccl: NcclView | None = None,
) -> list[Metric]:
    """Every metric family for one snapshot (scrape-independent); `nccl`: RAS's latest view."""
    devices = {d.index: d for d in info.devices}
    gpus = [(devices[g.index], g) for g in snap.gpus if g.index in devices]
    labels = {d.index: _labels(info, d) for d in info.devices}
    out: list[Metric] = []
    for read, e in GPU_EXPORTS:
        fam = _family(e.name, e.help, e.type)
        for d, g in gpus:
            v = None if g.lost else read(g)
            if v is not None:
                fam.add_sample(e.name, labels[d.index], e.convert(v))
        if fam.samples:
            out.append(fam)
    total = _family(FB_TOTAL.name, FB_TOTAL.help, FB_TOTAL.type)
    for d in info.devices:
        if d.memory_total is not None:
            total.add_sample(total.name, labels[d.index], float(FB_TOTAL.convert(d.memory_total)))
    out.append(total)

    lost = _family(GPU_LOST.name, GPU_LOST.help, GPU_LOST.type)
    nprocs = _family(GPU_PROCESSES.name, GPU_PROCESSES.help, GPU_PROCESSES.type)
    counts: dict[int, int] = {}
    for p in snap.processes:
        counts[p.gpu_index] = counts.get(p.gpu_index, 0) + 1
    for d, g in gpus:
        lost.add_sample(lost.name, labels[d.index], 1.0 if g.lost else 0.0)
        nprocs.add_sample(nprocs.name, labels[d.index], float(counts.get(d.index, 0)))
    out += [lost, nprocs]

    if processes:
        out += _process_families(info, snap, devices)
    host = snap.host
    if host is not None:
        hostname = {"Hostname": info.system.hostname}
        for name, doc, value in (
            ("gputui_host_cpu_utilization_ratio", "CPU busy, all cores, 0-1.", _ratio(host.cpu_percent)),
            ("gputui_host_memory_total_bytes", "Host memory.", host.mem_total),
            ("gputui_host_memory_used_bytes", "Host memory used (total minus available).", host.mem_used),
            ("gputui_host_memory_available_bytes", "Host memory available.", host.mem_available),
            ("gputui_host_swap_total_bytes", "Swap space.", host.swap_total),
            ("gputui_host_swap_used_bytes", "Swap used.", host.swap_used),
            ("gputui_host_load1", "Load average over 1 minute.", host.load_avg[0] if host.load_avg else None),
            (
                "gputui_host_load5",
                "Load average over 5 minutes.",
                host.load_avg[1] if host.load_avg else None,
            ),
            (
                "gputui_host_load15",
                "Load average over 15 minutes.",
                host.load_avg[2] if host.load_avg else None,
            ),
            ("gputui_host_uptime_seconds", "Seconds since the host booted.", host.uptime),
        ):
            if value is not None:
                fam = _family(name, doc, "gauge")
                fam.add_sample(name, hostname, float(value))
                out.append(fam)
    active = _family("gputui_alert_active", "1 for each alert firing now (see gputui's [alerts]).", "gauge")
    for a in alerts:
        dev = devices.get(a.gpu)
        active.add_sample(
            active.name,
            {
                "alert": a.kind,
                "gpu": str(a.gpu),
                "UUID": (dev.uuid or "") if dev else "",
                "Hostname": info.system.hostname,
                "pid": "" if a.pid is None else str(a.pid),
            },
            1.0,
        )
    out.append(active)
    hinted = _family(
        "gputui_gpu_efficiency_hint",
        "1 for each efficiency hint now (see gputui's [hints]): fp32_no_tensor, "
        "tiny_kernels, dram_bound, idle_memory, input_bound.",
        "gauge",
    )
    for gpu, gpu_hints in sorted((hints or {}).items()):
        if gpu in labels:
            for h in gpu_hints:
                hinted.add_sample(hinted.name, {**labels[gpu], "hint": h.kind}, 1.0)
    out.append(hinted)
    if health is not None:
        out += _health_families(info, gpus, labels, health, snap.processes)
    out += nccl_families(_family, info.system.hostname, nccl, health)
    ts = _family(
        "gputui_snapshot_timestamp_seconds", "When the latest sample was taken (Unix time).", "gauge"
    )
    ts.add_sample(ts.name, {}, snap.timestamp)
    out.append(ts)
    return out


def _health_families(
    info: MachineInfo,
    gpus: Sequence[tuple[DeviceInfo, GpuSample]],
    labels: Mapping[int, dict[str, str]],
    health: HealthReport,
    processes: Sequence[GpuProcess] = (),
) -> list[Metric]:
    """Job health (docs/job-health.md): a job's verdict, a GPU spinning, a job's energy.  The
    job label is its key ("launcher:1013", "slurm:4242:0"): untrusted (a Slurm id, a pod
    name), like every label value it goes through `label_value`."""
    spinning = _family(
        "gputui_gpu_spinning",
        "1 while the GPU has shown the spinning signature (one kernel polling, as NCCL waiting "
        "for a peer; GR engine busy, SMs and DRAM idle, idle power) for [health] spin_seconds.",
        "gauge",
    )
    seconds = _family(
        "gputui_gpu_spinning_seconds", "How long the GPU has shown the spinning signature.", "gauge"
    )
    for d, g in gpus:
        if g.lost:
            continue
        h = health.gpus.get(d.index)
        spinning.add_sample(spinning.name, labels[d.index], 1.0 if h is not None and h.waiting else 0.0)
        if h is not None:
            seconds.add_sample(seconds.name, labels[d.index], h.seconds)
    stuck = _family(
        "gputui_job_stuck",
        "1 when the job's verdict is stuck in a collective, the rank the others wait for, or a "
        "rank that exited while the others wait (label verdict); 0 otherwise.",
        "gauge",
    )
    energy = _family(
        "gputui_job_energy_joules",
        "Energy of the GPUs the job holds alone since gputui first saw it (NVML's counter, read "
        "every 10 s); no series while every GPU of the job is shared.",
        "gauge",
    )
    verdicts = _family(
        VERDICT_INFO,
        "1 for each job with a verdict (label verdict; summary: its one line), naming the rank, PID "
        "and GPU to look at first (empty when it names none) and the job's identity across nodes: "
        "slurm_job, pod and namespace only as root's cgroup says them (`gputui cluster` merges by them).",
        "gauge",
    )
    host = info.system.hostname
    jobs_of = {p.pid: p.job for p in processes}
    for job in health.jobs:
        job_labels = {
            "job": ":".join(job.key),
            "launcher": "" if job.launcher is None else str(job.launcher),
            "Hostname": host,
        }
        v = job.verdict
        is_stuck = v is not None and v.kind in STUCK_VERDICTS
        verdict = v.kind if v is not None else ""
        stuck.add_sample(stuck.name, {**job_labels, "verdict": verdict}, 1.0 if is_stuck else 0.0)
        if v is not None:
            verdicts.add_sample(verdicts.name, {**job_labels, **_verdict_labels(job, v, jobs_of)}, 1.0)
        if job.energy is not None and job.energy.joules is not None:
            energy.add_sample(energy.name, job_labels, job.energy.joules)
    return [spinning, seconds, stuck, energy, verdicts]


VERDICT_INFO = "gputui_job_verdict_info"
MAX_SUMMARY = 240
"""A verdict's one line is cut to this many characters in its label."""


def _verdict_labels(job: JobHealth, v: JobVerdict, jobs_of: Mapping[int, Job | None]) -> dict[str, str]:
    """A verdict's labels beyond the job's: what it is, the first rank it names, and the job's
    identity across nodes.  The identity is published only where root's cgroup names it
    (`jobs.trusted`): a Slurm id from a process's own environment, a user's lookalike cgroup
    path or rootless container is never the real job's (its `job` label says what it is)."""
    named = next((r for r in (*job.ranks, *job.exited) if r.pid in v.pids), None)
    ids = [j for j in (jobs_of.get(r.pid) for r in job.ranks) if j is not None and trusted(j)]
    slurm = {j.array or j.id for j in ids if j.kind == "slurm"}
    pods = {(j.name or j.id, j.namespace or "") for j in ids if j.kind == "pod"}
    pod, namespace = next(iter(pods)) if len(pods) == 1 else ("", "")
    summary = v.short if len(v.short) <= MAX_SUMMARY else v.short[: MAX_SUMMARY - 1] + "…"
    return {
        "verdict": v.kind,
        "rank": "" if named is None or named.rank is None else str(named.rank),
        "pid": "" if named is None else str(named.pid),
        "gpu": "" if named is None else str(named.gpu),
        "slurm_job": next(iter(slurm)) if len(slurm) == 1 else "",  # ranks that disagree: none
        "pod": pod,
        "namespace": namespace,
        "comm": "",  # NCCL RAS's communicator of these ranks: the ras view fills it
        "summary": summary,
    }


def _ratio(percent: float | None) -> float | None:
    return None if percent is None else percent / 100.0


def _process_families(info: MachineInfo, snap: Snapshot, devices: dict[int, DeviceInfo]) -> list[Metric]:
    families = [(_family(e.name, e.help, e.type), m.attr, e) for m, e in PROCESS_EXPORTS]
    for p in snap.processes:
        d = devices.get(p.gpu_index)
        labels = {
            "gpu": str(p.gpu_index),
            "UUID": (d.uuid or "") if d else "",
            "Hostname": info.system.hostname,
            "pid": str(p.pid),
            "process_name": p.name or "",  # any local user's process name: untrusted
            "user": p.user or "",
            "type": p.type,
            **exporter_labels(p.job),
        }
        for fam, attr, e in families:
            value = getattr(p, attr)  # the process's own field (a start time, not an age)
            if value is not None:
                fam.add_sample(fam.name, labels, e.convert(value))
    return [fam for fam, _, _ in families]


class GpuCollector(Collector):
    """Yields the metrics of the Hub's latest snapshot; never touches NVML."""

    def __init__(self, hub: Hub, poller: Poller | None = None, *, processes: bool = True) -> None:
        self.hub = hub
        self.poller = poller
        self.processes = processes
        self._cache: tuple[Snapshot | None, list[Metric]] = (None, [])
        """(snapshot, its families): one tuple, replaced whole, so threads read a matching pair."""

    def collect(self) -> Iterator[Metric]:
        hub = self.hub
        with hub.lock:
            snap, info = hub.latest, hub.info
        alerts = list(hub.active_alerts().values())
        hints = hub.hints_by_gpu()
        health = hub.health_report()
        nccl = hub.nccl_view()
        up = _family("gputui_up", "1 when gputui has a sample of the GPUs to serve.", "gauge")
        up.add_sample("gputui_up", {}, 0.0 if snap is None or info is None else 1.0)
        yield up
        build = _family("gputui_build_info", "gputui's version.", "gauge")
        build.add_sample("gputui_build_info", {"version": __version__}, 1.0)
        yield build
        if self.poller is not None:
            ticks = _family("gputui_poller_ticks", "Samples taken since gputui started.", "counter")
            ticks.add_sample("gputui_poller_ticks_total", {}, float(self.poller.ticks))
            yield ticks
            if self.poller.last_cost is not None:
                cost = _family("gputui_sample_duration_seconds", "How long the last sample took.", "gauge")
                cost.add_sample(cost.name, {}, self.poller.last_cost)
                yield cost
        if snap is None or info is None:
            return
        cached_for, families = self._cache
        if cached_for is not snap:
            # two scrapes may build the same snapshot at once: harmless, both are equal
            families = build_families(
                info, snap, processes=self.processes, alerts=alerts, hints=hints, health=health, nccl=nccl
            )
            self._cache = (snap, families)
        yield from families


# --------------------------------------------------------------------------------------
# serving: prometheus_client's exposition, rendered once per snapshot and format
# --------------------------------------------------------------------------------------

GZIP_LEVEL = 6
"""prometheus_client gzips at level 9: 3x the time for ~5 % fewer bytes on this text."""


METRICS_PATH = "/metrics"
"""The one path served; anything else is 404, any method but GET and HEAD is 405."""


def _refuse(
    start_response: Callable[..., Any], status: str, text: str, *extra: tuple[str, str]
) -> list[bytes]:
    body = text.encode()
    start_response(
        status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body))), *extra]
    )
    return [body]


def metrics_app(registry: CollectorRegistry, hub: Hub) -> Callable[..., list[bytes]]:
    """A WSGI app serving `registry` like prometheus_client's `make_wsgi_app` (content
    negotiation, gzip, `name[]` filters), keeping each rendering until the next snapshot: a
    second scraper, or a storm, costs a dictionary lookup instead of a rendering.  It
    answers only a GET or HEAD of /metrics (HEAD: the headers of the GET, no body)."""
    cache: dict[tuple[str, bool], tuple[Snapshot | None, bytes]] = {}

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if environ.get("PATH_INFO") != METRICS_PATH:
            return _refuse(start_response, "404 Not Found", f"Not found: gputui serves {METRICS_PATH}\n")
        method = environ.get("REQUEST_METHOD", "GET")
        if method not in ("GET", "HEAD"):
            return _refuse(
                start_response, "405 Method Not Allowed", "Only GET and HEAD\n", ("Allow", "GET, HEAD")
            )
        encoder, content_type = choose_encoder(environ.get("HTTP_ACCEPT", ""))
        gz = gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING", ""))
        params = parse_qs(environ.get("QUERY_STRING", ""))
        headers = [("Content-Type", content_type)]
        if gz:
            headers.append(("Content-Encoding", "gzip"))
        key = (content_type, gz)
        snap = hub.latest
        hit = cache.get(key)
        if "name[]" not in params and hit is not None and snap is not None and hit[0] is snap:
            body = hit[1]
        else:
            source = _Only(registry, params["name[]"]) if "name[]" in params else registry
            body = encoder(source)
            if gz:
                body = gzip.compress(body, compresslevel=GZIP_LEVEL, mtime=0)
            if "name[]" not in params:
                cache[key] = (snap, body)
        headers.append(("Content-Length", str(len(body))))
        start_response("200 OK", headers)
        return [b"" if method == "HEAD" else body]

    return app


class _Only(Collector):
    """`?name[]=X`: only the families named (prometheus_client's restricted registry needs
    collectors that describe themselves up front; this one cannot before its first tick)."""

    def __init__(self, registry: CollectorRegistry, names: Sequence[str]) -> None:
        self.registry = registry
        self.names = set(names)

    def collect(self) -> Iterator[Metric]:
        for m in self.registry.collect():
            if m.name in self.names or any(s.name in self.names for s in m.samples[:1]):
                yield m


IDLE_TIMEOUT_S = 10.0
"""A client that sends nothing (or stops reading) for this long is disconnected.  A
Prometheus scrape takes milliseconds; its own scrape timeout is 10 s by default."""
MAX_CONNECTIONS = 64
"""Connections held at once (a thread each).  A new connection beyond it takes the place of
the oldest one that has not finished sending its request, so a flood of half-open
connections can never stop a scrape; with every slot busy answering, it is closed."""


class _Discard:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


class _Handler(WSGIRequestHandler):
    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(getattr(self.server, "idle_timeout", IDLE_TIMEOUT_S))  # each read/write

    def handle(self) -> None:
        try:
            super().handle()
        except OSError:  # timed out, reset, or dropped for a newer connection: nothing to say
            self.close_connection = True

    def parse_request(self) -> bool:
        ok = super().parse_request()
        if ok:
            mark = getattr(self.server, "mark_busy", None)
            if mark is not None:
                mark(self.request)
        return ok

    def get_stderr(self) -> Any:
        """wsgiref prints a traceback for a client that vanished mid-answer: nothing to say."""
        return _Discard()

    def log_message(self, format: str, *args: Any) -> None:
        """No access log on stderr."""


class MetricsServer(ThreadingWSGIServer):
    """prometheus_client's threaded WSGI server with a cap on connections, idle timeouts,
    and no busy loop when the process runs out of descriptors."""

    idle_timeout = IDLE_TIMEOUT_S
    max_connections = MAX_CONNECTIONS
    request_queue_size = 128
    """The listen backlog (socketserver's default is 5: a burst of connections beyond it has
    its SYNs dropped and retried a second later)."""

    def server_activate(self) -> None:
        super().server_activate()
        self._lock = threading.Lock()
        self._conns: dict[socket.socket, bool] = {}
        """Open connections, oldest first -> busy (its request was read; being answered)."""
        try:  # stay well inside the descriptor limit, whatever it is
            soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            if soft != resource.RLIM_INFINITY:
                self.max_connections = max(4, min(self.max_connections, (soft - 32) // 2))
        except (OSError, ValueError):
            pass

    def open_connections(self) -> int:
        with self._lock:
            return len(self._conns)

    def mark_busy(self, request: socket.socket) -> None:
        with self._lock:
            if request in self._conns:
                self._conns[request] = True

    def get_request(self) -> tuple[socket.socket, Any]:
        try:
            return super().get_request()
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                time.sleep(0.05)  # the pending connection stays queued: no spinning on it
            raise

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            if len(self._conns) >= self.max_connections:
                idle = next((c for c, busy in self._conns.items() if not busy), None)
                if idle is None:
                    self._conns[request] = True  # closed just below, through shutdown_request
                    refuse = True
                else:
                    del self._conns[idle]
                    with contextlib.suppress(OSError):
                        idle.shutdown(socket.SHUT_RDWR)  # its handler reads EOF and ends
                    refuse = False
            else:
                refuse = False
            if not refuse:
                self._conns[request] = False
        if refuse:
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._lock:
            self._conns.pop(request, None)
        super().shutdown_request(request)


def serve(host: str, port: int, app: Callable[..., list[bytes]]) -> MetricsServer:
    """Start a threaded HTTP server for `app` on host:port (IPv4 or IPv6) in a daemon thread."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]

    class Server(MetricsServer):
        address_family = family

    httpd = make_server(host, port, app, Server, handler_class=_Handler)
    threading.Thread(target=httpd.serve_forever, name="gputui-metrics", daemon=True).start()
    return httpd
