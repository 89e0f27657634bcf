"""The Prometheus exporter: a real HTTP server on loopback fed by a recording of real GPUs,
scraped with a real client, parsed with prometheus_client's own parsers."""

from __future__ import annotations

import contextlib
import dataclasses
import re
import select
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import FROZEN, H200_X2, H200_X2_V2, X8_240, gputui
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_families
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from gputui.export.address import is_loopback, parse_listen
from gputui.export.prometheus import DCGM_LABELS, GpuCollector, build_families, metrics_app, serve
from gputui.telemetry.alert_config import AlertConfig, ThresholdRule
from gputui.telemetry.alerts import AlertEngine
from gputui.telemetry.hints import HintEngine
from gputui.telemetry.hub import Hub
from gputui.telemetry.poller import Poller
from gputui.telemetry.recording import ReplaySource, read_recording

MIB = 2**20


class Exporter:
    """gputui's exporter wiring (as `gputui export` does it), in this process."""

    def __init__(self, path, interval: float, alerts: AlertConfig | None = None) -> None:
        self.source = ReplaySource(path)
        self.hub = Hub(capacity=4, alerts=AlertEngine(alerts) if alerts else None, hints=HintEngine())
        self.tick_times: list[float] = []
        self.published = threading.Event()

        def on_snapshot(snap) -> None:
            self.hub.publish(snap)
            self.tick_times.append(time.monotonic())
            self.published.set()

        self.poller = Poller(self.source, interval, on_snapshot, self.hub.set_info)
        registry = CollectorRegistry(auto_describe=False)
        self.collector = GpuCollector(self.hub, self.poller)
        registry.register(self.collector)
        self.server = serve("127.0.0.1", 0, metrics_app(registry, self.hub))
        self.url = f"http://127.0.0.1:{self.server.server_port}/metrics"
        self.poller.start()

    def step_to(self, tick: int) -> None:
        """Frozen replay: sample recorded tick `tick` (1-based) next, and wait for it."""
        assert self.published.wait(10)
        self.poller.pause()
        self.source.seek(tick - 2)
        self.published.clear()
        self.poller.step(1)
        assert self.published.wait(10)
        deadline = time.monotonic() + 10
        while self.hub.latest is not self.source.ticks[tick - 1]:
            assert time.monotonic() < deadline
            time.sleep(0.01)

    def scrape(self, accept: str | None = None) -> str:
        req = urllib.request.Request(self.url, headers={"Accept": accept} if accept else {})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.read().decode()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.poller.stop()


@contextlib.contextmanager
def exporter(path=H200_X2, interval: float = FROZEN, alerts: AlertConfig | None = None) -> Iterator[Exporter]:
    e = Exporter(path, interval, alerts)
    try:
        yield e
    finally:
        e.close()


def samples(text: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s)
    return out


def by_gpu(ss: list) -> dict[int, float]:
    return {int(s.labels["gpu"]): s.value for s in ss}


def test_scrape_equals_the_recorded_tick(x2_recording):
    header, ticks = x2_recording
    with exporter() as e:
        e.step_to(50)
        text = e.scrape()
    got = samples(text)
    tick = ticks[49]
    g = {x.index: x for x in tick.gpus}
    assert by_gpu(got["DCGM_FI_DEV_GPU_UTIL"]) == {i: float(g[i].gpu_util) for i in g}
    assert by_gpu(got["DCGM_FI_DEV_FB_USED"]) == {i: float(g[i].mem_used // MIB) for i in g}
    assert by_gpu(got["DCGM_FI_DEV_FB_FREE"]) == {i: float(g[i].mem_free // MIB) for i in g}
    assert by_gpu(got["DCGM_FI_DEV_FB_RESERVED"]) == {i: float(g[i].mem_reserved // MIB) for i in g}
    assert by_gpu(got["DCGM_FI_DEV_POWER_USAGE"]) == {i: g[i].power_draw for i in g}
    assert by_gpu(got["DCGM_FI_DEV_GPU_TEMP"]) == {i: float(g[i].temperature) for i in g}
    assert by_gpu(got["DCGM_FI_DEV_SM_CLOCK"]) == {i: float(g[i].sm_clock) for i in g}
    assert by_gpu(got["DCGM_FI_DEV_MEM_CLOCK"]) == {i: float(g[i].mem_clock) for i in g}
    assert by_gpu(got["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"]) == {i: float(g[i].energy) for i in g}
    assert by_gpu(got["DCGM_FI_DEV_PCIE_RX_THROUGHPUT"]) == {i: float(g[i].pcie_rx // 1024) for i in g}
    assert by_gpu(got["DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"]) == {
        i: float(g[i].clock_event_reasons) for i in g
    }
    assert by_gpu(got["DCGM_FI_DEV_FB_TOTAL"]) == {
        d.index: float(d.memory_total // MIB) for d in header.machine.devices
    }
    assert "DCGM_FI_DEV_FAN_SPEED" not in got  # an H200 has no fan NVML can read: no series, not 0
    # labels as dcgm-exporter sets them
    s = got["DCGM_FI_DEV_GPU_UTIL"][1]
    d = header.machine.devices[1]
    assert s.labels == {
        "gpu": "1",
        "UUID": d.uuid,
        "pci_bus_id": d.bus_id,
        "device": f"nvidia{d.minor_number}",
        "modelName": "NVIDIA H200",
        "Hostname": "vm",
        "DCGM_FI_DRIVER_VERSION": "580.159.04",
    }
    assert set(s.labels) == set(DCGM_LABELS)
    # gputui's own: processes and host
    procs = {int(x.labels["pid"]): x for x in got["gputui_process_gpu_memory_bytes"]}
    assert {pid: x.value for pid, x in procs.items()} == {p.pid: float(p.gpu_memory) for p in tick.processes}
    holder = procs[567].labels
    assert (holder["gpu"], holder["process_name"], holder["user"], holder["type"]) == (
        "1",
        "python3",
        "root",
        "C",
    )
    sm = {int(x.labels["pid"]): x.value for x in got["gputui_process_sm_utilization_ratio"]}
    assert sm == {p.pid: p.sm_util / 100 for p in tick.processes}
    assert got["gputui_host_memory_total_bytes"][0].value == tick.host.mem_total
    assert got["gputui_host_load1"][0].value == tick.host.load_avg[0]
    assert got["gputui_snapshot_timestamp_seconds"][0].value == tick.timestamp
    assert got["gputui_up"][0].value == 1.0
    assert by_gpu(got["gputui_gpu_processes"]) == {0: 1.0, 1: 2.0}


def test_help_and_types_are_dcgm_exporters():
    with exporter() as e:
        e.step_to(50)
        text = e.scrape()
    assert "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n" in text
    assert "# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).\n" in text
    assert "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n" in text
    # a cumulative DCGM field keeps its exact name (no _total) in both exposition formats
    assert "\nDCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{" in text
    assert "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total" not in text


def test_openmetrics_negotiation_keeps_the_dcgm_names():
    with exporter() as e:
        e.step_to(50)
        text = e.scrape(accept="application/openmetrics-text; version=1.0.0")
    assert text.endswith("# EOF\n")
    names = {fam.name for fam in om_families(text)}
    assert {
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    } <= names


def test_each_tick_is_served_and_active_alerts_are_exported(x2_recording):
    _, ticks = x2_recording
    hot = AlertConfig(temperature=ThresholdRule(True, 55.0, 50.0, 0.0))
    with exporter(alerts=hot) as e:
        e.step_to(10)
        first = samples(e.scrape())
        e.step_to(60)
        second = samples(e.scrape())
    assert by_gpu(first["DCGM_FI_DEV_GPU_UTIL"]) == {g.index: float(g.gpu_util) for g in ticks[9].gpus}
    assert by_gpu(second["DCGM_FI_DEV_GPU_UTIL"]) == {g.index: float(g.gpu_util) for g in ticks[59].gpus}
    assert "gputui_alert_active" not in first
    assert sorted((s.labels["alert"], s.labels["gpu"]) for s in second["gputui_alert_active"]) == [
        ("temperature", "0"),
        ("temperature", "1"),
    ]


def test_scrapes_stuck_in_rendering_do_not_hold_up_the_sampling(monkeypatch):
    """Scrapes never stand in the sampling's way: with 20 concurrent scrapes of an 8-GPU,
    240-process recording held *inside* their rendering, the poller still samples and
    publishes.  Deterministic (no wall-clock bounds): the scrapes are parked on an Event."""
    import gputui.export.prometheus as prom

    release = threading.Event()
    inside = threading.Semaphore(0)
    real_build = prom.build_families

    def parked_build(*args, **kwargs):
        inside.release()
        assert release.wait(30)
        return real_build(*args, **kwargs)

    with exporter(X8_240) as e:
        e.step_to(5)
        monkeypatch.setattr(prom, "build_families", parked_build)
        with ThreadPoolExecutor(max_workers=20) as pool:
            futures = [pool.submit(e.scrape) for _ in range(20)]
            assert inside.acquire(timeout=30)  # at least one scrape is inside the renderer
            before = e.poller.ticks
            e.step_to(6)  # waits (10 s at most) for the tick to be published
            e.step_to(7)
            assert e.poller.ticks >= before + 2
            assert e.hub.latest is e.source.ticks[6]
            release.set()
            bodies = [f.result(timeout=60) for f in futures]
    assert all("DCGM_FI_DEV_GPU_UTIL" in b for b in bodies)


def test_scrapes_never_call_the_source():
    """A scrape reads the Hub only: the recording's sample() is not called by scraping."""
    with exporter() as e:
        e.step_to(20)
        ticks_before = e.poller.ticks
        position = e.source.position
        for _ in range(20):
            e.scrape()
        assert e.poller.ticks == ticks_before
        assert e.source.position == position


# ---- the command: bind policy, a real server process --------------------------------------


def test_refuses_a_non_loopback_address_without_the_flag():
    for addr in ("0.0.0.0:9400", ":9400", "10.1.2.3:9400", "[::]:9400"):
        r = gputui("export", "--replay", str(H200_X2), "--listen", addr)
        assert r.returncode == 2, addr
        assert f"refusing to listen on {addr}" in r.stderr
        assert "--allow-remote" in r.stderr
    r = gputui("export", "--replay", str(H200_X2), "--listen", "127.0.0.1")
    assert r.returncode == 2
    assert "expected HOST:PORT" in r.stderr


def test_loopback_policy():
    assert is_loopback("127.0.0.1")
    assert is_loopback("127.8.9.10")
    assert is_loopback("::1")
    assert is_loopback("localhost")
    assert not is_loopback("0.0.0.0")
    assert not is_loopback("::")
    assert not is_loopback("192.168.1.5")
    assert not is_loopback("no-such-host.invalid")
    assert parse_listen("[::1]:9400") == ("::1", 9400)
    assert parse_listen(":9400") == ("0.0.0.0", 9400)
    with pytest.raises(ValueError, match="in brackets"):
        parse_listen("::1:9400")
    with pytest.raises(ValueError, match="0-65535"):
        parse_listen("127.0.0.1:70000")


def _serve(*args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputui", "export", "--replay", str(H200_X2), *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    ready, _, _ = select.select([proc.stderr], [], [], 30)
    assert ready, "the exporter did not start"
    line = proc.stderr.readline()
    assert "serving http://" in line, line
    return proc, line.split("serving ", 1)[1].strip()


def test_the_command_serves_and_stops_on_sigterm():
    proc, url = _serve("--listen", "127.0.0.1:0", "--interval", "0.1")
    try:
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url, timeout=10) as resp:
            text = resp.read().decode()
        names = {fam.name for fam in text_string_to_metric_families(text)}
        assert {"DCGM_FI_DEV_GPU_UTIL", "gputui_process_gpu_memory_bytes", "gputui_host_load1"} <= names
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0


def test_allow_remote_binds_every_address():
    proc, url = _serve("--listen", "0.0.0.0:0", "--allow-remote", "--no-processes")
    try:
        port = url.rsplit(":", 1)[1].split("/")[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        assert "gputui_process_gpu_memory_bytes" not in text
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0


def test_without_nvml_export_exits_2():
    from diag_support import driver_present

    if driver_present():
        pytest.skip("a GPU driver is installed here: NVML is available")
    r = gputui("export", "--listen", "127.0.0.1:0")
    assert r.returncode == 2
    assert "gputui export: NVML unavailable" in r.stderr


def test_one_rendering_per_snapshot_and_format_gzip_and_name_filter():
    import gzip as gz

    with exporter() as e:
        e.step_to(30)
        calls = []
        original = e.collector.collect

        def counting():
            calls.append(1)
            return original()

        e.collector.collect = counting
        plain = [e.scrape() for _ in range(5)]
        assert len(set(plain)) == 1
        assert len(calls) == 1  # four scrapes served from the cache
        req = urllib.request.Request(e.url, headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.headers["Content-Encoding"] == "gzip"
            assert gz.decompress(resp.read()).decode() == plain[0]
        with urllib.request.urlopen(e.url + "?name[]=DCGM_FI_DEV_GPU_UTIL", timeout=10) as resp:
            names = {f.name for f in text_string_to_metric_families(resp.read().decode())}
        assert names == {"DCGM_FI_DEV_GPU_UTIL"}
        e.step_to(31)
        assert e.scrape() != plain[0]  # a new tick is rendered anew


def test_link_and_memory_health_metrics_from_a_real_ddp_run():
    """dcgm-exporter's PCIe-replay and remapped-row metrics and gputui's NVLink throughput,
    from the 2x H200 recorded under data-parallel training (NVLink ~33 GB/s each way)."""
    _, ticks = read_recording(H200_X2_V2)
    with exporter(H200_X2_V2) as e:
        e.step_to(61)
        got = samples(e.scrape())
    g = {x.index: x for x in ticks[60].gpus}
    assert all(x.nvlink_rx and x.nvlink_rx > 10e9 for x in g.values())  # the recording is what we think
    assert by_gpu(got["gputui_gpu_nvlink_receive_bytes_per_second"]) == {i: float(g[i].nvlink_rx) for i in g}
    assert by_gpu(got["gputui_gpu_nvlink_transmit_bytes_per_second"]) == {i: float(g[i].nvlink_tx) for i in g}
    assert by_gpu(got["DCGM_FI_DEV_PCIE_REPLAY_COUNTER"]) == {i: float(g[i].pcie_replay_counter) for i in g}
    assert by_gpu(got["DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"]) == {0: 0.0, 1: 0.0}
    assert by_gpu(got["DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"]) == {0: 0.0, 1: 0.0}
    assert by_gpu(got["DCGM_FI_DEV_ROW_REMAP_FAILURE"]) == {0: 0.0, 1: 0.0}
    assert by_gpu(got["gputui_gpu_row_remap_pending"]) == {0: 0.0, 1: 0.0}
    assert "DCGM_FI_DEV_RETIRED_SBE" not in got  # Hopper retires no pages (remaps rows): no series
    assert set(got["DCGM_FI_DEV_PCIE_REPLAY_COUNTER"][0].labels) == set(DCGM_LABELS)


def test_health_metrics_are_absent_before_the_slow_pass_not_zero():
    """The first recorded tick precedes NVML's first slow-cadence pass: no series, not 0."""
    with exporter(H200_X2_V2) as e:
        e.step_to(1)
        got = samples(e.scrape())
    assert "DCGM_FI_DEV_GPU_UTIL" in got
    for name in ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "gputui_gpu_nvlink_receive_bytes_per_second"):
        assert name not in got


def test_xid_errors_as_dcgm_exporter_reports_them():
    """DCGM_FI_DEV_XID_ERRORS: the last Xid, 0 while none came; no series where nobody
    watched (recordings made before the event watch, one-shot readers)."""
    from prometheus_client.exposition import generate_latest

    header, ticks = read_recording(H200_X2_V2)
    snap = ticks[60]
    g0, g1 = snap.gpus
    watched = dataclasses.replace(
        snap,
        gpus=(dataclasses.replace(g0, xid_count=2, xid_last=31), dataclasses.replace(g1, xid_count=0)),
    )

    def scrape(s):
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Fixed(header.machine, s))
        return samples(generate_latest(registry).decode())

    got = scrape(watched)
    assert by_gpu(got["DCGM_FI_DEV_XID_ERRORS"]) == {0: 31.0, 1: 0.0}
    assert by_gpu(got["gputui_gpu_xid_events"]) == {0: 2.0, 1: 0.0}
    assert "DCGM_FI_DEV_XID_ERRORS" not in scrape(snap)


class _Fixed:
    """A collector of one snapshot's families (build_families, as each scrape uses it)."""

    def __init__(self, info, snap) -> None:
        self.info, self.snap = info, snap

    def collect(self):
        return build_families(self.info, self.snap)


# ---- what the server answers, and how it holds up against idle and half-open clients ------


def _request(port: int, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_only_a_get_or_head_of_the_metrics_path_is_answered():
    with exporter() as e:
        e.step_to(20)
        port = e.server.server_port
        status, headers, body = _request(port, "GET", "/metrics")
        assert status == 200 and b"DCGM_FI_DEV_GPU_UTIL" in body
        status, head_headers, head_body = _request(port, "HEAD", "/metrics")
        assert status == 200 and head_body == b""
        assert head_headers["content-length"] == str(len(body))
        assert head_headers["content-type"] == headers["content-type"]
        for path in ("/", "/favicon.ico", "/metricsX", "/metrics/x", "/../etc/passwd"):
            status, _, body = _request(port, "GET", path)
            assert status == 404, path
            assert b"DCGM" not in body
        for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
            status, headers, body = _request(port, method, "/metrics")
            assert status == 405, method
            assert headers["allow"] == "GET, HEAD"
            assert b"DCGM" not in body


def _half_open(port: int, n: int) -> list:
    import socket

    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(b"GET /metr")  # a request line that never ends
        socks.append(s)
    return socks


def test_an_idle_client_is_disconnected():
    with exporter() as e:
        e.server.idle_timeout = 0.5  # the handler reads it per connection
        (s,) = _half_open(e.server.server_port, 1)
        try:
            s.settimeout(30)  # generous: the server must close it long before
            assert s.recv(100) == b""  # closed by the server, nothing answered
        finally:
            s.close()


def test_half_open_connections_are_capped_and_scrapes_still_answered():
    """More half-open clients than the cap: the oldest idle one is dropped for each new
    connection, so a scrape is answered at once and the server holds at most the cap."""
    with exporter() as e:
        e.step_to(20)
        cap = e.server.max_connections
        socks = _half_open(e.server.server_port, cap + 40)
        try:
            assert "DCGM_FI_DEV_GPU_UTIL" in e.scrape()
            assert e.server.open_connections() <= cap
            # the oldest were dropped: their reads end
            socks[0].settimeout(30)
            assert socks[0].recv(100) == b""
        finally:
            for s in socks:
                s.close()


def test_a_flood_at_the_descriptor_limit_leaves_scrapes_working_without_spinning():
    """The exporter as a process with a soft limit of 256 descriptors, and 600 half-open
    connections: scrapes keep being answered, and the process does not spin on accept()."""
    import resource
    import socket

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1024:
        pytest.skip(f"this test opens 600 sockets; the hard descriptor limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1024), hard))

    # the limit set inside the child (preexec_fn is unsafe with threads)
    start = (
        "import resource, runpy, sys\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, int(sys.argv.pop(1))))\n"
        "runpy.run_module('gputui', run_name='__main__', alter_sys=True)\n"
    )
    args = ("export", "--replay", str(H200_X2), "--listen", "127.0.0.1:0")
    proc = subprocess.Popen(
        [sys.executable, "-c", start, str(hard), *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    socks: list[socket.socket] = []
    try:
        ready, _, _ = select.select([proc.stderr], [], [], 30)
        assert ready
        url = proc.stderr.readline().split("serving ", 1)[1].strip()
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        limits = Path(f"/proc/{proc.pid}/limits").read_text()
        assert re.search(r"Max open files\s+256\s", limits), limits
        socks = _half_open(port, 600)
        with urllib.request.urlopen(url, timeout=30) as resp:
            assert b"DCGM_FI_DEV_GPU_UTIL" in resp.read()
        # CPU time, not wall time: a busy machine gives the process less, never more
        import psutil

        cpu = psutil.Process(proc.pid).cpu_times()
        before = cpu.user + cpu.system
        time.sleep(2.0)
        cpu = psutil.Process(proc.pid).cpu_times()
        assert cpu.user + cpu.system - before < 0.5  # spinning on accept() took ~88 % of a core
        with urllib.request.urlopen(url, timeout=30) as resp:
            assert b"DCGM_FI_DEV_GPU_UTIL" in resp.read()
    finally:
        for s in socks:
            s.close()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    assert "Traceback" not in err, err


def test_gpm_under_dcgm_exporters_names_and_units():
    """The H100 recorded under known loads: the float32 matmul phase, served as
    dcgm-exporter's DCP metrics (ratios 0-1 for _ACTIVE, bytes/s for PCIe and NVLink)."""
    from conftest import H100_GPM
    from gpm_support import FP32, phase_ticks

    tick = phase_ticks(FP32)[3]
    w = tick.gpus[0].gpm
    assert w is not None and w.fp32_active and w.fp32_active > 70  # the recording is what we think
    with exporter(H100_GPM) as e:
        e.step_to(tick.seq)
        got = samples(e.scrape())
    one = {name: by_gpu(got[name])[0] for name in got if name.startswith("DCGM_FI_PROF_")}
    assert one["DCGM_FI_PROF_PIPE_FP32_ACTIVE"] == pytest.approx(w.fp32_active / 100)
    assert one["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"] == pytest.approx(w.tensor_active / 100)  # type: ignore[operator]
    assert one["DCGM_FI_PROF_SM_ACTIVE"] == pytest.approx(w.sm_active / 100)  # type: ignore[operator]
    assert one["DCGM_FI_PROF_SM_OCCUPANCY"] == pytest.approx(w.sm_occupancy / 100)  # type: ignore[operator]
    assert one["DCGM_FI_PROF_DRAM_ACTIVE"] == pytest.approx(w.dram_active / 100)  # type: ignore[operator]
    assert one["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] == pytest.approx(w.graphics_active / 100)  # type: ignore[operator]
    assert one["DCGM_FI_PROF_PCIE_RX_BYTES"] == float(w.pcie_rx)  # type: ignore[arg-type]
    assert one["DCGM_FI_PROF_NVLINK_TX_BYTES"] == float(w.nvlink_tx)  # type: ignore[arg-type]
    others = ("PIPE_FP64_ACTIVE", "PIPE_FP16_ACTIVE", "PCIE_TX_BYTES", "NVLINK_RX_BYTES")
    for name in others:
        assert "DCGM_FI_PROF_" + name in one
    assert set(got["DCGM_FI_PROF_SM_ACTIVE"][0].labels) == set(DCGM_LABELS)
    (hint,) = got["gputui_gpu_efficiency_hint"]
    assert (hint.labels["hint"], hint.labels["gpu"], hint.value) == ("fp32_no_tensor", "0", 1.0)


def test_gpm_absent_where_not_measured_not_zero():
    """A recording without GPM (version 1) and the first tick (before the first window)."""
    from conftest import H100_GPM

    for path, tick in ((H200_X2, 50), (H100_GPM, 1)):
        with exporter(path) as e:
            e.step_to(tick)
            got = samples(e.scrape())
        assert "DCGM_FI_DEV_GPU_UTIL" in got
        assert not [name for name in got if name.startswith("DCGM_FI_PROF_")], path
