"""Real processes for the cluster tests and benchmark: `gputui export --replay` exporters on free
loopback ports, a real Prometheus server (Debian's `prometheus`) scraping them, and a fleet of
exporters that serves one real recording's expositions under many host names.

Everything listens on 127.0.0.1 only; every process is stopped by the fixture that started it.
"""

from __future__ import annotations

import contextlib
import gzip
import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from gputui.export.prometheus import build_families
from gputui.telemetry.model import MachineInfo, Snapshot, SystemInfo
from gputui.telemetry.recording import read_recording

PROMETHEUS = shutil.which("prometheus")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Exporter:
    recording: Path
    proc: subprocess.Popen[str]
    port: int

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def start_exporter(recording: Path, interval: float = 3600.0, config: Path | None = None) -> Exporter:
    """`gputui export --replay RECORDING` on a port the kernel picks.  With the default interval
    it serves the recording's first tick for the whole test."""
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "gputui", "export", "--replay", str(recording),
            "--listen", "127.0.0.1:0", "--interval", str(interval),
            *(("--config", str(config)) if config is not None else ()),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    line = proc.stderr.readline()
    m = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", line)
    if m is None:
        proc.kill()
        raise RuntimeError(f"gputui export did not start: {line!r}{proc.stderr.read()}")
    return Exporter(recording, proc, int(m.group(1)))


@contextlib.contextmanager
def exporters(
    recordings: Sequence[Path], interval: float = 3600.0, config: Path | None = None
) -> Iterator[list[Exporter]]:
    started: list[Exporter] = []
    try:
        for r in recordings:
            started.append(start_exporter(r, interval, config))
        yield started
    finally:
        for e in started:
            e.stop()


@dataclass
class Prometheus:
    proc: subprocess.Popen[bytes]
    port: int
    workdir: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def query(self, promql: str) -> list[dict[str, object]]:
        q = urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{q}", timeout=5) as resp:
            return list(json.load(resp)["data"]["result"])

    def wait_for(self, promql: str, count: int, timeout: float = 90.0) -> None:
        """Until `promql` returns `count` series (first scrapes take a scrape interval or two)."""
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError, KeyError):
                got = self.query(promql)
                last = got
                if len(got) == count:
                    return
            time.sleep(0.5)
        raise AssertionError(f"Prometheus: {promql} never had {count} series (last: {last!r:.300})")


@contextlib.contextmanager
def prometheus(targets: Sequence[str], scrape_interval: str = "1s") -> Iterator[Prometheus]:
    """A real Prometheus server on a free loopback port scraping `targets` (job "gpu")."""
    assert PROMETHEUS is not None
    workdir = Path(tempfile.mkdtemp(prefix="gputui-prom-"))
    config = workdir / "prometheus.yml"
    config.write_text(
        "global:\n"
        f"  scrape_interval: {scrape_interval}\n"
        f"  scrape_timeout: {scrape_interval}\n"
        "scrape_configs:\n"
        "  - job_name: gpu\n"
        "    static_configs:\n"
        f"      - targets: [{', '.join(json.dumps(t) for t in targets)}]\n"
    )
    port = free_port()
    proc = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--web.console.templates=/dev/null",
            "--web.console.libraries=/dev/null",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(workdir / "log.txt", "wb"),  # noqa: SIM115 - closed with the process
    )
    server = Prometheus(proc, port, workdir)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{server.url}/-/ready", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        "prometheus did not start: " + (workdir / "log.txt").read_text()[-2000:]
                    ) from None
                time.sleep(0.3)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


# --------------------------------------------------------------------------------------
# a fleet: one real recording's expositions under many host names
# --------------------------------------------------------------------------------------


class _Families(Collector):
    def __init__(self, families: list[object]) -> None:
        self.families = families

    def collect(self):  # type: ignore[no-untyped-def]
        yield from self.families


def exposition(info: MachineInfo, snap: Snapshot, hostname: str, processes: bool = True) -> bytes:
    """What `gputui export` serves for `snap`, as if the machine were called `hostname`."""
    renamed = MachineInfo(
        SystemInfo(**{**{f: getattr(info.system, f) for f in info.system.__slots__}, "hostname": hostname}),
        info.devices,
        info.topology,
    )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(build_families(renamed, snap, processes=processes)))  # type: ignore[arg-type]
    return generate_latest(registry)


def host_name(k: int) -> str:
    return f"gpu-node-{k + 1:02d}"


@dataclass
class Fleet:
    """`hosts` exporters in one process, each on its own loopback port, host k serving the
    recording's tick (k * 7 + the seconds since start) so the hosts differ and move."""

    recording: Path
    hosts: int
    processes: bool = True
    servers: list[http.server.ThreadingHTTPServer] = field(default_factory=list)
    requests: list[int] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    frozen: bool = False
    """Serve a fixed tick per host (tests)."""
    extra: dict[int, bytes] = field(default_factory=dict)
    """More exposition text for host k (job series: bench/bench_cluster.py --jobs)."""

    def __post_init__(self) -> None:
        self.header, self.ticks = read_recording(self.recording)
        self._cache: dict[tuple[int, int], bytes] = {}
        self._lock = threading.Lock()

    def tick_of(self, k: int) -> int:
        moved = 0 if self.frozen else int(time.monotonic() - self.started)
        return (k * 7 + moved) % len(self.ticks)

    def body(self, k: int) -> bytes:
        t = self.tick_of(k)
        with self._lock:
            hit = self._cache.get((k, t))
        if hit is None:
            hit = exposition(self.header.machine, self.ticks[t], host_name(k), self.processes)
            hit += self.extra.get(k, b"")
            with self._lock:
                if len(self._cache) > 8 * self.hosts:
                    self._cache.clear()
                self._cache[(k, t)] = hit
        return hit

    def gzipped(self, k: int, body: bytes) -> bytes:
        import gzip

        from gputui.export.prometheus import GZIP_LEVEL

        key = (-1 - k, self.tick_of(k))
        with self._lock:
            hit = self._cache.get(key)
        if hit is None:
            hit = gzip.compress(body, compresslevel=GZIP_LEVEL, mtime=0)
            with self._lock:
                self._cache[key] = hit
        return hit

    def start(self) -> list[str]:
        fleet = self
        for k in range(self.hosts):
            self.requests.append(0)

            class Handler(http.server.BaseHTTPRequestHandler):
                index = k

                def do_GET(self) -> None:
                    body = fleet.body(self.index)
                    fleet.requests[self.index] += 1
                    self.send_response(200)
                    if "gzip" in (self.headers.get("Accept-Encoding") or ""):  # as gputui export does
                        body = fleet.gzipped(self.index, body)
                        self.send_header("Content-Encoding", "gzip")
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

                def log_message(self, format: str, *args: object) -> None:
                    pass

            srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
            srv.daemon_threads = True
            threading.Thread(target=srv.serve_forever, daemon=True).start()
            self.servers.append(srv)
        return [f"127.0.0.1:{s.server_address[1]}" for s in self.servers]

    def stop(self) -> None:
        for s in self.servers:
            s.shutdown()
            s.server_close()


def env_with_path() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


# --------------------------------------------------------------------------------------
# a fixed cluster state from a recording (screens: snapshots and key presses)
# --------------------------------------------------------------------------------------


class RecordedCluster:
    """A ClusterSource over one real recording shown as `hosts` hosts (host k at tick
    k * 7 + `tick`): `fetch()` parses the expositions `gputui export` would serve, and
    `history()` gives the recorded ticks before it.  Host names in `down` are reported down
    (their GPUs as last seen).  No clock: states carry fetched_at 0, for stable pictures."""

    def __init__(self, recording: Path, hosts: int, tick: int = 0, down: Sequence[int] = ()) -> None:
        from gputui.cluster.http import HttpClient

        self.header, self.ticks = read_recording(recording)
        self.hosts = hosts
        self.tick = tick
        self.down = set(down)
        self.description = f"recorded: {recording.name} as {hosts} hosts"
        self.client = HttpClient()
        self.fetches = 0

    def tick_of(self, k: int) -> int:
        return (k * 7 + self.tick) % len(self.ticks)

    def fetch(self):  # type: ignore[no-untyped-def]
        from gputui.cluster import expfmt
        from gputui.cluster.model import ClusterState, HostState, LabelMap, build_gpus

        self.fetches += 1
        out = []
        for k in range(self.hosts):
            key = f"{host_name(k)}:9400"
            text = exposition(self.header.machine, self.ticks[self.tick_of(k)], host_name(k)).decode()
            samples = expfmt.parse(text).samples
            gpus = build_gpus(key, ((s.name, s.labels, s.value) for s in samples), LabelMap())
            up = k not in self.down
            out.append(
                HostState(
                    key=key,
                    name=host_name(k),
                    instance=key,
                    up=up,
                    error=None if up else f"http://{key}/metrics: Connection refused",
                    gpus=tuple(gpus),
                    driver=self.header.machine.system.driver_version or "",
                    stale=not up,
                )
            )
        return ClusterState(hosts=tuple(out), source=self.description, queries=self.hosts)

    def details(self, host):  # type: ignore[no-untyped-def]
        return host.gpus

    def history(self, host, seconds, points):  # type: ignore[no-untyped-def]
        from gputui.cluster.sources import History
        from gputui.telemetry.history import HISTORY

        k = int(host.name.rsplit("-", 1)[1]) - 1
        end = self.tick_of(k)
        ticks = self.ticks[max(0, end - points + 1) : end + 1]
        times = [t.timestamp for t in ticks]
        series = {}
        for g in host.gpus:
            for m in HISTORY:
                vals = []
                for t in ticks:
                    s = next((x for x in t.gpus if x.index == g.device.index), None)
                    v = None if s is None else m.value(s)
                    vals.append(float("nan") if v is None else float(v))
                series[(g.key, m.field)] = vals
        return History(times, series)

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------------------
# a raw TCP server: answers no HTTP library would write (hostile exporters, tests only)
# --------------------------------------------------------------------------------------

Behaviour = Callable[[socket.socket], "bool | None"]
"""What a RawServer does with a connection once it has read the request: it returns False
when the client hung up before it had said everything (the client gave up on it)."""


class RawServer:
    """A loopback TCP server: reads one request's head, then hands the socket to `behaviour`."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.requests = 0
        self.completed = 0
        """Connections the behaviour finished: it said everything it had to say."""
        self.cut = threading.Semaphore(0)
        """Released once for each connection the client closed before the behaviour was done."""
        self._stop = False
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(10)
            got = b""
            with contextlib.suppress(OSError):
                while b"\r\n\r\n" not in got and len(got) < 65536:
                    more = conn.recv(4096)
                    if not more:
                        return
                    got += more
            self.requests += 1
            if self.behaviour(conn) is False:
                self.cut.release()
            else:
                self.completed += 1

    def close(self) -> None:
        self._stop = True
        with contextlib.suppress(OSError):
            self.sock.close()

    def wait_cut(self, timeout: float = 60.0) -> bool:
        """Whether a client hung up on a connection before the behaviour was done (waits
        for the server's thread to notice: the event, not a time)."""
        return self.cut.acquire(timeout=timeout)


def drip(data: bytes, every: float) -> Behaviour:
    """Send `data` a byte at a time, `every` seconds apart; False if the client hangs up."""

    def run(conn: socket.socket) -> bool:
        for k in range(len(data)):
            try:
                conn.sendall(data[k : k + 1])
            except OSError:
                return False
            time.sleep(every)
        return True

    return run


def silent(conn: socket.socket) -> bool:
    """Say nothing until the client hangs up (then False); True if it waits 10 minutes."""
    conn.settimeout(600)
    try:
        while conn.recv(4096):
            pass
    except TimeoutError:
        return True
    except OSError:
        pass
    return False


@contextlib.contextmanager
def raw_server_factory() -> Iterator[Callable[[Behaviour], RawServer]]:
    """Make RawServers; every one is closed at the end."""
    made: list[RawServer] = []

    def make(behaviour: Behaviour) -> RawServer:
        s = RawServer(behaviour)
        made.append(s)
        return s

    try:
        yield make
    finally:
        for s in made:
            s.close()


# --------------------------------------------------------------------------------------
# two nodes emulated from one real multi-GPU recording
# --------------------------------------------------------------------------------------


def split_recording(
    source: Path,
    out: Path,
    gpus: Sequence[int],
    hostname: str,
    *,
    job: object | None = None,
    hold: int = 0,
) -> Path:
    """EMULATED NODE: the GPUs `gpus` of the real recording `source` (renumbered 0.. as a
    node numbers its own), their processes and the launchers, as a machine named
    `hostname`; `job` (a `Job`) given to every rank where the real run had none (torchrun
    ran outside Slurm); the last tick held `hold` more ticks (timestamps advancing: a
    stopped rank stays stopped).  The header says all this (`derived`, `note`)."""
    import dataclasses

    from gputui.telemetry.recording import RecordingWriter

    header, ticks = read_recording(source)
    machine = header.machine
    renumber = {old: new for new, old in enumerate(gpus)}
    devices = tuple(
        dataclasses.replace(d, index=renumber[d.index]) for d in machine.devices if d.index in renumber
    )
    system = dataclasses.replace(machine.system, hostname=hostname, device_count=len(devices))
    node = MachineInfo(system, devices, None)

    def one(s: Snapshot, seq: int, ts: float) -> Snapshot:
        procs = tuple(
            dataclasses.replace(p, gpu_index=renumber[p.gpu_index], job=job or p.job)  # type: ignore[arg-type]
            for p in s.processes
            if p.gpu_index in renumber
        )
        samples = tuple(
            dataclasses.replace(g, index=renumber[g.index]) for g in s.gpus if g.index in renumber
        )
        return dataclasses.replace(s, seq=seq, timestamp=ts, gpus=samples, processes=procs)

    how = (
        f"GPUs {list(gpus)} of {source.name} renumbered from 0 as host {hostname!r}; "
        f"job {job!r} given to every rank; the last tick held {hold} more ticks"
    )
    with RecordingWriter(
        out,
        node,
        header.interval,
        derived={"from": str(source.name), "how": how, "generator": "tests/cluster_support.py"},
        note="DERIVED (not a real machine): an emulated node, " + how,
    ) as w:
        for s in ticks:
            w.write(one(s, s.seq, s.timestamp))
        last = ticks[-1]
        for k in range(1, hold + 1):
            w.write(one(last, last.seq + k, last.timestamp + k * header.interval))
    return out


# --------------------------------------------------------------------------------------
# a Prometheus API stand-in answering with many series (caps tests and benchmark)
# --------------------------------------------------------------------------------------


def series_json(n: int, hosts: int = 64) -> list[bytes]:
    """HAND-WRITTEN: `n` dcgm-exporter-like series over `hosts` hosts of 8 GPUs."""
    out = []
    names = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP")
    for k in range(n):
        gpu = k // len(names)
        host = gpu // 8 % hosts
        metric = {
            "__name__": names[k % len(names)],
            "Hostname": f"gpu-node-{host:05d}",
            "UUID": f"GPU-{gpu:08d}-0000-4000-8000-000000000000",
            "gpu": str(gpu % 8),
            "instance": f"10.0.{host // 256}.{host % 256}:9400",
            "job": "dcgm",
            "modelName": "NVIDIA H200",
        }
        out.append(json.dumps({"metric": metric, "value": [1764300000.123, str(k % 100)]}).encode())
    return out


def vector(items: list[bytes], status: str = "success") -> bytes:
    return (
        b'{"status":"%s","data":{"resultType":"vector","result":[' % status.encode()
        + b",".join(items)
        + b"]}}"
    )


class FakePrometheus:
    """Answers /api/v1/query: `up` with one series per host, anything else with `body`."""

    def __init__(self, body: bytes, hosts: int = 64, gzipped: bool = False) -> None:
        up = [
            json.dumps(
                {
                    "metric": {"__name__": "up", "instance": f"10.0.{h // 256}.{h % 256}:9400"},
                    "value": [0, "1"],
                }
            ).encode()
            for h in range(hosts)
        ]
        answers = {"up": vector(up), "": body}
        if gzipped:
            answers = {k: gzip.compress(v, compresslevel=1, mtime=0) for k, v in answers.items()}
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = answers["up" if "query=up" in self.path else ""]
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if gzipped:
                    self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(OSError):  # a client that stops reading at its cap
                    for k in range(0, len(body), 65536):
                        self.wfile.write(body[k : k + 65536])
                fake.sent.append(len(body))

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.sent: list[int] = []
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
