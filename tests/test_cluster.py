"""`gputui cluster`'s data layer: the exposition parser, dcgm-exporter's documented metric and
label set, the mapping onto gputui's model, and both sources against real processes — real
`gputui export --replay` exporters, and a real Prometheus server scraping them (skipped where
Debian's `prometheus` is not installed; .ci/run installs it)."""

from __future__ import annotations

import csv
import http.server
import math
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_support import PROMETHEUS, Fleet, exporters, exposition, host_name, prometheus
from conftest import FIXTURES, H200_X1, H200_X2_V2

from gputui.cluster import expfmt
from gputui.cluster.http import Credentials, FetchError, HttpClient, TlsOptions, check_url, display_url
from gputui.cluster.model import (
    GPM_BY_NAME,
    SAMPLE_FIELDS,
    ClusterGpu,
    ClusterState,
    LabelMap,
    build_gpus,
    gpu_flags,
    summarize,
)
from gputui.cluster.sources import DirectSource, PrometheusSource
from gputui.export.prometheus import GPU_EXPORTS
from gputui.telemetry.alert_config import IdleRule
from gputui.telemetry.model import DeviceInfo, GpuSample, Snapshot
from gputui.telemetry.recording import read_recording

MIB = 2**20
DCGM = FIXTURES / "dcgm-exporter"
MIXED = FIXTURES / "derived" / "h200x8-mixed-topology.jsonl.gz"
X8_240 = FIXTURES / "derived" / "h200x8-nvswitch-240procs.jsonl.gz"
RULE = IdleRule(True, 30.0, 0, 1024)
needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None, reason="Debian's `prometheus` package is not installed (apt-get install prometheus)"
)


def counters(name: str) -> list[tuple[str, str, str]]:
    """(field, type, help) of a dcgm-exporter counters file, comments skipped."""
    out = []
    with open(DCGM / name, newline="") as f:
        for row in csv.reader(f):
            if not row or row[0].lstrip().startswith("#"):
                continue
            out.append((row[0].strip(), row[1].strip(), row[2].strip()))
    return out


# --------------------------------------------------------------------------------------
# the exposition parser
# --------------------------------------------------------------------------------------


def test_parser_reads_dcgm_exporter_readme_lines_and_skips_garbage():
    text = (
        "# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).\n"
        "# TYPE DCGM_FI_DEV_SM_CLOCK gauge\n"
        'DCGM_FI_DEV_SM_CLOCK{gpu="0", UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",'
        'container="",namespace="",pod=""} 139\n'
        'DCGM_FI_DEV_MEMORY_TEMP{gpu="0", UUID="GPU-604ac76c"} 9223372036854775794\n'
        'x{a="q\\"uote\\\\back\\nnl"} 1.5e3 1700000000000\n'
        "garbage line\n"
        'DCGM_FI_DEV_GPU_TEMP{gpu="2" 5\n'
        'DCGM_FI_DEV_GPU_TEMP{gpu="4"}\n'
        'DCGM_FI_DEV_GPU_TEMP{gpu="5",UUID="unterminated} 5\n'
        "up 1\n"
    )
    e = expfmt.parse(text)
    assert [(s.name, s.value) for s in e.samples] == [
        ("DCGM_FI_DEV_SM_CLOCK", 139.0),
        ("DCGM_FI_DEV_MEMORY_TEMP", 9223372036854775794.0),
        ("x", 1500.0),
        ("up", 1.0),
    ]
    assert e.samples[0].labels == {
        "gpu": "0",
        "UUID": "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",
        "container": "",
        "namespace": "",
        "pod": "",
    }
    assert e.samples[2].labels["a"] == 'q"uote\\back\nnl'
    assert e.bad_lines == 4


def test_parser_bounds_the_number_of_series():
    text = "".join(f'm{{gpu="{k}"}} {k}\n' for k in range(50))
    e = expfmt.parse(text, max_series=10)
    assert len(e.samples) == 10
    assert e.truncated


def test_dcgm_blank_values_read_as_not_available():
    samples = [
        ("DCGM_FI_DEV_GPU_TEMP", {"gpu": "0", "UUID": "GPU-a"}, 9223372036854775794.0),
        ("DCGM_FI_DEV_POWER_USAGE", {"gpu": "0", "UUID": "GPU-a"}, float(2**47)),
        ("DCGM_FI_DEV_GPU_UTIL", {"gpu": "0", "UUID": "GPU-a"}, float("nan")),
        ("DCGM_FI_DEV_SM_CLOCK", {"gpu": "0", "UUID": "GPU-a"}, 1980.0),
    ]
    (g,) = build_gpus("h", samples, LabelMap())
    assert g.sample.temperature is None
    assert g.sample.power_draw is None
    assert g.sample.gpu_util is None
    assert g.sample.sm_clock == 1980


# --------------------------------------------------------------------------------------
# dcgm-exporter's documented metric and label set
# --------------------------------------------------------------------------------------

#: In dcgm-exporter's counters files, not drawn by the cluster view (and why).
NOT_SHOWN = {
    "DCGM_FI_DEV_MEMORY_TEMP": "HBM temperature: gputui's model has the GPU temperature only",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": "a counter of all lanes: gputui shows NVLink bytes/s",
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS": "vGPU licensing",
    "DCGM_FI_DRIVER_VERSION": "a label, read as the host's driver",
}


@pytest.mark.parametrize("name", ["default-counters.csv", "dcp-metrics-included.csv"])
def test_every_documented_dcgm_exporter_counter_is_read_or_known(name):
    fields = [f for f, _, _ in counters(name)]
    assert len(fields) >= 20  # the file really was read
    read = set(SAMPLE_FIELDS) | set(GPM_BY_NAME)
    unknown = [f for f in fields if f not in read and f not in NOT_SHOWN]
    assert unknown == []


def dcgm_exposition(snap: Snapshot, devices: tuple[DeviceInfo, ...], hostname: str) -> str:
    """An exposition of every metric of dcgm-exporter's default-counters.csv plus the DCP
    file's profiling metrics, with dcgm-exporter's labels, valued from a real recording."""
    by_field = {e.name: (read, e) for read, e in GPU_EXPORTS}
    lines = []
    metrics = counters("default-counters.csv") + [
        c for c in counters("dcp-metrics-included.csv") if c[0].startswith("DCGM_FI_PROF_")
    ]
    for k, g in enumerate(snap.gpus):
        d = devices[g.index]
        labels = (
            f'gpu="{d.index}",UUID="{d.uuid}",pci_bus_id="{d.bus_id}",device="nvidia{d.index}",'
            f'modelName="{d.name}",Hostname="{hostname}",DCGM_FI_DRIVER_VERSION="580.95.05",'
            f'container="trainer",namespace="team-a",pod="llm-{k}"'
        )
        for fname, _typ, _help in metrics:
            if fname.startswith("DCGM_FI_PROF_"):  # (the recording has no GPM: made up from util)
                value = repr(round(0.01 * (g.gpu_util or 0), 4))
            elif fname in by_field:
                read, e = by_field[fname]
                v = read(g)
                v = None if v is None else e.convert(v)
                value = "9223372036854775794" if v is None else repr(float(v))  # DCGM's blank
            elif fname == "DCGM_FI_DEV_XID_ERRORS":
                value = "0"
            else:
                value = "9223372036854775794"
            lines.append(f"{fname}{{{labels}}} {value}")
    return "\n".join(lines) + "\n"


def test_dcgm_exporter_default_set_maps_onto_the_model():
    header, ticks = read_recording(MIXED)
    snap = next(s for s in ticks if any((g.gpu_util or 0) > 0 for g in s.gpus))
    text = dcgm_exposition(snap, header.machine.devices, "node-7")
    e = expfmt.parse(text)
    assert e.bad_lines == 0
    gpus = build_gpus("node-7", ((s.name, s.labels, s.value) for s in e.samples), LabelMap())
    assert len(gpus) == len(snap.gpus)
    for got, rec in zip(gpus, snap.gpus, strict=True):
        dev = header.machine.devices[rec.index]
        assert got.device.index == rec.index
        assert got.device.uuid == dev.uuid
        assert got.device.name == dev.name
        assert got.sample.gpu_util == rec.gpu_util
        assert got.sample.temperature == rec.temperature
        assert got.sample.power_draw == rec.power_draw
        assert got.sample.sm_clock == rec.sm_clock
        assert got.sample.mem_used == (rec.mem_used // MIB) * MIB
        # dcgm-exporter has no total by default: used + free
        assert got.device.memory_total == (rec.mem_used // MIB + rec.mem_free // MIB) * MIB
        assert got.workload == f"team-a/llm-{rec.index} (trainer)"
        assert got.sample.gpm is not None  # DCP ratios 0-1 read as GPM percent
        assert got.sample.gpm.tensor_active == pytest.approx(round(0.01 * (rec.gpu_util or 0), 4) * 100)
        assert got.sample.xid_last is None  # XID_ERRORS 0: none
        assert got.sample.ecc_volatile_uncorrected is None  # not in the default set
    assert {g.device.name for g in gpus} == {d.name for d in header.machine.devices}


def test_every_exported_gpu_metric_maps_back():
    """Every per-GPU family `gputui export` writes is read back by the cluster view: a
    GpuSample field, or (DCGM_FI_PROF_*) a GPM figure."""
    exported = {e.name for _, e in GPU_EXPORTS}
    assert exported - set(SAMPLE_FIELDS) - set(GPM_BY_NAME) == set()
    assert {n for n in exported if n.startswith("DCGM_FI_PROF_")} == set(GPM_BY_NAME)


def expected(rec: GpuSample, dev: DeviceInfo) -> dict[str, object]:
    """What the cluster view must read for a recorded sample after `gputui export`: the same
    values, in dcgm-exporter's units (memory floored to MiB, PCIe to KB)."""
    return {
        "gpu_util": rec.gpu_util,
        "mem_util": rec.mem_util,
        "temperature": rec.temperature,
        "power_draw": rec.power_draw,
        "power_limit": rec.power_limit,
        "sm_clock": rec.sm_clock,
        "mem_clock": rec.mem_clock,
        "pstate": rec.pstate,
        "energy": rec.energy,
        "clock_event_reasons": rec.clock_event_reasons,
        "pcie_gen": rec.pcie_gen,
        "pcie_width": rec.pcie_width,
        "mem_used": None if rec.mem_used is None else rec.mem_used // MIB * MIB,
        "mem_free": None if rec.mem_free is None else rec.mem_free // MIB * MIB,
        "pcie_rx": None if rec.pcie_rx is None else rec.pcie_rx // 1024 * 1024,
        "ecc_volatile_uncorrected": rec.ecc_volatile_uncorrected,
        "remapped_rows_failure": rec.remapped_rows_failure,
        "xid_count": rec.xid_count,
        "memory_total": None if dev.memory_total is None else dev.memory_total // MIB * MIB,
        "name": dev.name,
        "uuid": dev.uuid,
    }


def observed(g: ClusterGpu) -> dict[str, object]:
    out: dict[str, object] = {
        k: getattr(g.sample, k) for k in expected(GpuSample(0), DeviceInfo(0, "")) if hasattr(g.sample, k)
    }
    out["memory_total"] = g.device.memory_total
    out["name"] = g.device.name
    out["uuid"] = g.device.uuid
    return out


#: What the list of every GPU reads from Prometheus (LIST_WANTED), in `expected`'s terms.
LIST_FIELDS = (
    "gpu_util",
    "temperature",
    "power_draw",
    "clock_event_reasons",
    "mem_used",
    "mem_free",
    "ecc_volatile_uncorrected",
    "remapped_rows_failure",
    "xid_count",
    "memory_total",
    "name",
    "uuid",
)


def check_host(
    gpus: tuple[ClusterGpu, ...],
    header_devices: tuple[DeviceInfo, ...],
    snap: Snapshot,
    fields: tuple[str, ...] | None = None,
) -> None:
    assert len(gpus) == len(snap.gpus)
    for got, rec in zip(gpus, snap.gpus, strict=True):
        want, have = expected(rec, header_devices[rec.index]), observed(got)
        if fields is not None:
            want = {k: want[k] for k in fields}
            have = {k: have[k] for k in fields}
        assert have == want
        if fields is None:
            assert got.processes == sum(1 for p in snap.processes if p.gpu_index == rec.index)


def test_gputui_export_exposition_round_trips_every_tick_value_by_value():
    header, ticks = read_recording(X8_240)
    for snap in ticks[::10]:
        text = exposition(header.machine, snap, "n1").decode()
        e = expfmt.parse(text)
        assert e.bad_lines == 0
        gpus = build_gpus("n1", ((s.name, s.labels, s.value) for s in e.samples), LabelMap())
        check_host(tuple(gpus), header.machine.devices, snap)
        # per-process series come back as processes
        got = sorted((p.gpu_index, p.pid, p.gpu_memory) for g in gpus for p in g.procs)
        want = sorted((p.gpu_index, p.pid, p.gpu_memory) for p in snap.processes if p.gpu_memory is not None)
        assert got == want


def test_gpm_figures_round_trip_from_a_real_gpm_recording():
    """GPM (H200s, recorded with NVML GPM) through `gputui export`'s DCGM_FI_PROF_* series."""
    header, ticks = read_recording(FIXTURES / "h200-x2-gpm" / "recording.jsonl.gz")
    checked = 0
    for snap in ticks:
        e = expfmt.parse(exposition(header.machine, snap, "n1").decode())
        gpus = build_gpus("n1", ((s.name, s.labels, s.value) for s in e.samples), LabelMap())
        for got, rec in zip(gpus, snap.gpus, strict=True):
            w = rec.activity
            if w is None or w.unavailable is not None:
                continue
            assert got.sample.gpm is not None
            for m in GPM_BY_NAME.values():
                assert m.gpm is not None
                figure = m.gpm.figure
                want = getattr(w, figure)
                have = getattr(got.sample.gpm, figure)
                assert (have is None) == (want is None), figure
                if want is not None:
                    assert have == pytest.approx(want, abs=1e-9 if m.unit == "%" else 1), figure
            checked += 1
    assert checked > 10


# --------------------------------------------------------------------------------------
# states and the summary
# --------------------------------------------------------------------------------------


def test_flags_follow_the_idle_rule_and_health():
    busy = ClusterGpu("h", DeviceInfo(0, "H200"), GpuSample(0, gpu_util=5, mem_used=40 * 2**30))
    held = ClusterGpu("h", DeviceInfo(1, "H200"), GpuSample(1, gpu_util=0, mem_used=2 * 2**30))
    idle = ClusterGpu("h", DeviceInfo(2, "H200"), GpuSample(2, gpu_util=0, mem_used=500 * MIB))
    xid = ClusterGpu("h", DeviceInfo(3, "H200"), GpuSample(3, gpu_util=0, mem_used=0, xid_last=79))
    ecc = ClusterGpu("h", DeviceInfo(4, "H200"), GpuSample(4, gpu_util=90, ecc_volatile_uncorrected=2))
    hot = ClusterGpu("h", DeviceInfo(5, "H200"), GpuSample(5, gpu_util=90, clock_event_reasons=0x40))
    assert gpu_flags(busy, True, RULE) == {"busy"}
    assert gpu_flags(held, True, RULE) == {"held_idle"}
    assert gpu_flags(idle, True, RULE) == {"idle"}
    assert gpu_flags(xid, True, RULE) == {"idle", "xid", "unhealthy"}
    assert gpu_flags(ecc, True, RULE) == {"busy", "ecc", "unhealthy"}
    assert gpu_flags(hot, True, RULE) == {"busy", "throttled"}
    assert gpu_flags(busy, False, RULE) == {"down", "unhealthy"}


# --------------------------------------------------------------------------------------
# HTTP: deadlines, size bounds, credentials
# --------------------------------------------------------------------------------------


class _Server:
    """A loopback HTTP server whose behaviour a test sets (never an exporter stand-in)."""

    def __init__(self, handler: type[http.server.BaseHTTPRequestHandler]) -> None:
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.headers: list[dict[str, str]] = []
        self.httpd.seen = self.headers  # type: ignore[attr-defined]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[type[_Server]]:
    made: list[_Server] = []

    class Factory(_Server):
        def __init__(self, handler: type[http.server.BaseHTTPRequestHandler]) -> None:
            super().__init__(handler)
            made.append(self)

    yield Factory
    for s in made:
        s.close()


SECRET = "s3cr3t-T0KEN-do-not-show"


class _Protected(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.seen.append(dict(self.headers))  # type: ignore[attr-defined]
        if self.path.startswith("/redirect"):
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.2:1/elsewhere")
            self.end_headers()
            return
        ok = self.headers.get("Authorization") == f"Bearer {SECRET}"
        self.send_response(200 if ok else 401)
        self.end_headers()
        self.wfile.write(b'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-x"} 7\n' if ok else b"no")

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_credentials_are_sent_but_never_shown(server):
    s = server(_Protected)
    good = HttpClient(timeout=5, credentials=Credentials(f"Bearer {SECRET}"))
    assert b"GPU_UTIL" in good.get(s.url + "/metrics")
    assert s.headers[-1]["Authorization"] == f"Bearer {SECRET}"
    bad = HttpClient(timeout=5, credentials=Credentials("Bearer wrong-" + SECRET))
    with pytest.raises(FetchError) as exc:
        bad.get(s.url + "/metrics")
    assert "401" in str(exc.value)
    assert SECRET not in str(exc.value)
    assert SECRET not in repr(good) and SECRET not in str(good.credentials)
    # a redirect is not followed: the header must not travel to another host
    with pytest.raises(FetchError, match="redirect"):
        good.get(s.url + "/redirect")
    basic = Credentials.basic("alice", SECRET)
    assert SECRET not in repr(basic) and SECRET not in str(basic)


def test_direct_mode_error_messages_carry_no_credentials(server):
    s = server(_Protected)
    src = DirectSource([s.url], HttpClient(timeout=5, credentials=Credentials("Bearer x-" + SECRET)))
    state = src.fetch()
    (host,) = state.hosts
    assert not host.up
    assert host.error is not None and "401" in host.error
    assert SECRET not in repr(state)


def test_urls_with_credentials_are_refused_and_never_echoed():
    problem = check_url(f"http://alice:{SECRET}@prom:9090")
    assert problem is not None and SECRET not in problem and "config file" in problem
    assert SECRET not in display_url(f"https://alice:{SECRET}@[::1]:9090/x")
    assert check_url("ftp://x") is not None
    assert check_url("http://prom:9090") is None


class _Slow(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        for _ in range(40):  # drips for 4 s, under any per-read timeout
            self.wfile.write(b"# x\n")
            self.wfile.flush()
            time.sleep(0.1)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_a_dripping_server_is_cut_at_the_deadline(server):
    s = server(_Slow)
    client = HttpClient(timeout=0.5)
    # one deadline for the whole answer, however steadily the bytes come
    with pytest.raises(FetchError, match=r"no complete answer within 0\.5 s"):
        client.get(s.url)


class _Big(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        for _ in range(64):
            self.wfile.write(b"#" * 65535 + b"\n")

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_answers_are_bounded_in_size(server):
    s = server(_Big)
    with pytest.raises(FetchError, match=r"larger than 1 MiB"):
        HttpClient(timeout=10, max_body=2**20).get(s.url)
    assert len(HttpClient(timeout=10, max_body=8 * 2**20).get(s.url)) == 64 * 65536


# --------------------------------------------------------------------------------------
# direct mode against real `gputui export --replay` processes
# --------------------------------------------------------------------------------------

RECORDINGS = (H200_X2_V2, H200_X1, MIXED)


def test_direct_mode_reads_real_exporters_and_shows_a_stopped_one_down():
    recs = {p: read_recording(p) for p in RECORDINGS}
    with exporters(RECORDINGS) as exps:
        src = DirectSource([e.target for e in exps], HttpClient(timeout=5))
        state = src.fetch()
        assert state.queries == 3
        assert all(h.up for h in state.hosts)
        by_target = {h.instance: h for h in state.hosts}
        for e in exps:
            header, ticks = recs[e.recording]
            host = by_target[e.target]
            check_host(host.gpus, header.machine.devices, ticks[0])
            assert host.driver == header.machine.system.driver_version
        # two recordings share the host name "vm": the target tells them apart
        names = sorted(h.name for h in state.hosts)
        assert len(set(names)) == 3
        assert any(n.startswith("vm (127.0.0.1:") for n in names)

        exps[0].stop()
        state = src.fetch()
        by_target = {h.instance: h for h in state.hosts}
        down = by_target[exps[0].target]
        assert not down.up
        assert down.error is not None and "refused" in down.error.lower()
        assert down.stale and len(down.gpus) == 2  # the GPUs it had, marked down
        assert all(by_target[e.target].up for e in exps[1:])
        assert summarize(state, RULE).hosts_down == 1
        assert {f for g in down.gpus for f in gpu_flags(g, down.up, RULE)} == {"down", "unhealthy"}
        src.close()


def test_direct_mode_history_carries_the_gpm_figures_the_drill_in_charts():
    """The drill-in's GPM charts (Activity, Pipes) draw from the scrapes' DCGM_FI_PROF_*
    series: a real `gputui export` replaying the 2x H200 GPM recording (bf16 vs float32
    training), scraped a few times; every GPM value in the history is one the GPU recorded."""
    from cluster_support import start_exporter

    _header, ticks = read_recording(FIXTURES / "h200-x2-gpm" / "recording.jsonl.gz")
    recorded: dict[tuple[int, str], set[float]] = {}
    for t in ticks:
        for g in t.gpus:
            for m in ("fp32_active", "sm_occupancy", "tensor_active"):
                v = None if g.activity is None else getattr(g.activity, m)
                if v is not None:
                    recorded.setdefault((g.index, m), set()).add(v)
    exp = start_exporter(FIXTURES / "h200-x2-gpm" / "recording.jsonl.gz", interval=0.1)
    src = DirectSource([exp.target], HttpClient(timeout=10))
    try:
        seen: dict[str, list[float]] = {}
        for _ in range(150):
            state = src.fetch()
            host = state.hosts[0]
            hist = src.history(host, 3600, 600)
            seen = {
                f"{g.device.index}:{m}": [v for v in hist.series[(g.key, m)] if not math.isnan(v)]
                for g in host.gpus
                for m in ("fp32_active", "sm_occupancy", "tensor_active")
            }
            # until the float32 training is in (from the recording's 24th tick, 2.4 s in)
            if all(len(v) >= 3 for v in seen.values()) and max(seen["1:fp32_active"], default=0) > 30:
                break
            time.sleep(0.2)
    finally:
        src.close()
        exp.stop()
    assert seen and all(len(v) >= 3 for v in seen.values()), seen
    for key, values in seen.items():
        gpu, metric = key.split(":")
        for v in values:  # (through the exposition's ratio and back: equal to 1e-6)
            assert any(abs(v - r) < 1e-6 for r in recorded[(int(gpu), metric)]), (key, v)
    assert max(seen["1:fp32_active"]) > 30  # GPU 1 trained in float32: its FP32 pipe busy


def test_direct_mode_scrapes_in_parallel(server):
    """Six exporters that each answer only once all six requests are in flight: a serial
    scraper would leave the first waiting alone until its barrier breaks (then it is down)."""
    barrier = threading.Barrier(6, timeout=20)

    class AllAtOnce(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                self.send_response(503)
                self.end_headers()
                return
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",Hostname="n"} 1\n')

        def log_message(self, format: str, *args: object) -> None:
            pass

    servers = [server(AllAtOnce) for _ in range(6)]
    src = DirectSource([s.url for s in servers], HttpClient(timeout=30))
    state = src.fetch()
    assert [h.up for h in state.hosts] == [True] * 6, [h.error for h in state.hosts]
    src.close()


# --------------------------------------------------------------------------------------
# a real Prometheus server
# --------------------------------------------------------------------------------------


@needs_prometheus
def test_prometheus_source_matches_the_recordings_and_sees_an_exporter_go_down():
    recs = {p: read_recording(p) for p in RECORDINGS}
    fleet = Fleet(X8_240, hosts=2, frozen=True)
    fleet_targets = fleet.start()
    try:
        with exporters(RECORDINGS) as exps, prometheus([e.target for e in exps] + fleet_targets) as prom:
            n_gpus = sum(len(recs[p][0].machine.devices) for p in RECORDINGS) + 16
            prom.wait_for("DCGM_FI_DEV_GPU_TEMP", n_gpus)
            src = PrometheusSource(prom.url, HttpClient(timeout=10), selector='job="gpu"')
            state = src.fetch()
            assert state.error is None
            assert state.queries == 2  # the values, and `up`
            by_instance = {h.instance: h for h in state.hosts}
            assert len(by_instance) == 5
            for e in exps:
                header, ticks = recs[e.recording]
                check_host(by_instance[e.target].gpus, header.machine.devices, ticks[0], LIST_FIELDS)
                # a host's view: every field, by a query for that host
                check_host(src.details(by_instance[e.target]), header.machine.devices, ticks[0])
            for k, target in enumerate(fleet_targets):
                host = by_instance[target]
                assert host.name == host_name(k)
                snap = fleet.ticks[fleet.tick_of(k)]
                check_host(host.gpus, fleet.header.machine.devices, snap, LIST_FIELDS)
                check_host(src.details(host), fleet.header.machine.devices, snap)

            # range queries for the drill-in's charts
            hist = src.history(by_instance[fleet_targets[1]], 120, 60)
            assert hist.error is None and hist.times
            snap = fleet.ticks[fleet.tick_of(1)]
            gpu = by_instance[fleet_targets[1]].gpus[3]
            util = [v for v in hist.series[(gpu.key, "gpu_util")] if not math.isnan(v)]
            assert util and set(util) == {float(snap.gpus[3].gpu_util or 0)}

            exps[1].stop()
            prom.wait_for('up{job="gpu"} == 0', 1)
            state = src.fetch()
            assert state.queries == 3  # + the GPUs the down exporter had
            down = next(h for h in state.hosts if h.instance == exps[1].target)
            assert not down.up and "up == 0" in (down.error or "")
            assert [g.device.uuid for g in down.gpus] == [d.uuid for d in recs[H200_X1][0].machine.devices]
            assert summarize(state, RULE).hosts_down == 1
    finally:
        fleet.stop()


@needs_prometheus
def test_prometheus_unreachable_keeps_the_last_state_and_says_why():
    with exporters((H200_X1,)) as exps, prometheus([exps[0].target]) as prom:
        prom.wait_for("DCGM_FI_DEV_GPU_TEMP", 1)
        src = PrometheusSource(prom.url, HttpClient(timeout=3))
        good = src.fetch()
        assert good.error is None and len(good.gpus) == 1
        prom.proc.terminate()
        prom.proc.wait(20)
        bad = src.fetch()
        assert bad.error is not None and "refused" in bad.error.lower()
        assert bad.hosts == good.hosts and bad.fetched_at == good.fetched_at


def test_state_is_frozen_data():
    state = ClusterState()
    with pytest.raises(AttributeError):
        state.error = "x"  # type: ignore[misc]


def test_fleet_exposition_is_real_recording_data():
    header, ticks = read_recording(X8_240)
    text = exposition(header.machine, ticks[5], "gpu-node-03").decode()
    assert 'Hostname="gpu-node-03"' in text
    assert Path(X8_240).exists()


# --------------------------------------------------------------------------------------
# the [cluster] config section and the command line
# --------------------------------------------------------------------------------------


def test_cluster_config_is_validated_with_line_numbers_and_secrets_never_echoed():
    from gputui.config import parse

    text = (
        "[cluster]\n"
        "refresh = 0.2\n"
        f"basic_auth_password = 98765{SECRET[:0]}\n"
        'prometheus = "http://alice:hunter2@prom:9090"\n'
        "[cluster.labels]\n"
        "hots = 'x'\n"
    )
    _, errors = parse(text, "c.toml")
    joined = "\n".join(errors)
    assert "c.toml:2: cluster.refresh: must be at least 1" in joined
    assert "c.toml:3: cluster.basic_auth_password" in joined and "98765" not in joined
    assert "c.toml:4: cluster.prometheus" in joined and "hunter2" not in joined
    assert "c.toml:6: cluster.labels.hots: unknown key" in joined and "'host'" in joined
    good, errors = parse('[cluster]\nrefresh = 10\n[cluster.labels]\nhost = "instance_name"\n')
    assert errors == []
    assert good.cluster.refresh == 10.0 and good.cluster.labels.host == "instance_name"


def test_command_line_picks_the_source_and_reads_secrets_from_files(tmp_path):
    import argparse

    from gputui.commands.cluster import make_source
    from gputui.config import ClusterConfig

    def args(**kw: object) -> argparse.Namespace:
        base = {"targets": [], "prometheus": None, "targets_file": None, "selector": None}
        return argparse.Namespace(**{**base, **kw})

    nodes = tmp_path / "nodes.txt"
    nodes.write_text("# GPU nodes\nn1:9400\n\nhttps://n2:9400/metrics  # TLS\n")
    src = make_source(args(targets_file=str(nodes)), ClusterConfig())
    assert isinstance(src, DirectSource)
    assert src.targets == ["http://n1:9400/metrics", "https://n2:9400/metrics"]
    with pytest.raises(ValueError, match="not both"):
        make_source(args(targets=["n1:9400"], prometheus="http://p:9090"), ClusterConfig())
    with pytest.raises(ValueError, match="nothing to show"):
        make_source(args(), ClusterConfig())
    secret = tmp_path / "token"
    secret.write_text(f"Bearer {SECRET}\n")
    src = make_source(args(), ClusterConfig(prometheus="http://p:9090", auth_header_file=str(secret)))
    assert isinstance(src, PrometheusSource)
    assert src.client.credentials.header == f"Bearer {SECRET}"
    assert SECRET not in repr(src.client)
    with pytest.raises(ValueError, match="either an auth header or basic auth"):
        make_source(args(), ClusterConfig(prometheus="http://p:9090", auth_header="x", basic_auth_user="u"))


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed (to make a test CA)")
def test_tls_verifies_against_the_configured_ca(tmp_path, server):
    """A real HTTPS server on loopback with a certificate from a CA made for the test."""
    import ssl
    import subprocess

    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip

    class Metrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",Hostname="tls-node"} 42\n')

        def log_message(self, format: str, *args: object) -> None:
            pass

    s = server(Metrics)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    s.httpd.socket = ctx.wrap_socket(s.httpd.socket, server_side=True)
    url = s.url.replace("http://", "https://") + "/metrics"
    with pytest.raises(FetchError, match=r"TLS|certificate|CERTIFICATE"):
        HttpClient(timeout=5).get(url)  # the system's CAs do not know it
    body = HttpClient(timeout=5, tls=TlsOptions(ca_file=str(cert))).get(url)
    assert b"tls-node" in body
    assert b"tls-node" in HttpClient(timeout=5, tls=TlsOptions(insecure=True)).get(url)
    state = DirectSource([url], HttpClient(timeout=5, tls=TlsOptions(ca_file=str(cert)))).fetch()
    assert state.hosts[0].up and state.hosts[0].gpus[0].sample.gpu_util == 42


def test_the_drill_in_history_reads_every_gpm_figure_into_its_own_series():
    """Each DCGM_FI_PROF_* series feeds the history series of that GPM figure, GPM's PCIe
    bytes included (not NVML's PCIe throughput series of the same field name)."""
    from gputui.cluster.sources import HISTORY_SERIES
    from gputui.telemetry.history import HISTORY
    from gputui.telemetry.metrics import GPM_METRICS

    series = {m.gpm.figure: m.field for m in HISTORY if m.gpm is not None}
    assert len(series) == len(GPM_METRICS) == 15
    for m in GPM_METRICS:
        assert m.gpm is not None and m.prometheus is not None
        assert HISTORY_SERIES[m.prometheus.name][0] == series[m.gpm.figure], m.prometheus.name
