"""The cluster view's host drill-in and host identity (issue 24, item 9 and the tests that let
dangerous bugs through): the cards show the process count and the efficiency hints the
exporter publishes, in direct mode and through a real Prometheus; a Prometheus target that
serves several hosts is split into them, each host's view asking for its own GPUs only; a
configured host label names the hosts in direct mode.

The expositions are what `gputui export` serves (its own `build_families`, with the hints
its HintEngine gives) for real recordings, served from loopback."""

from __future__ import annotations

import asyncio
import http.server
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
from cluster_support import PROMETHEUS, _Families, prometheus
from conftest import FIXTURES, H200_X1, H200_X2_V2, screen_lines, wait_for
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import CollectorRegistry

from gputui.cluster.http import HttpClient
from gputui.cluster.model import LabelMap
from gputui.cluster.sources import DirectSource, PrometheusSource
from gputui.export.prometheus import build_families
from gputui.telemetry.hints import HintEngine
from gputui.telemetry.model import MachineInfo, Snapshot, SystemInfo
from gputui.telemetry.recording import read_recording
from gputui.ui.cluster.app import ClusterApp, HostScreen

GPM = FIXTURES / "h200-x2-gpm" / "recording.jsonl.gz"
X8_240 = FIXTURES / "derived" / "h200x8-nvswitch-240procs.jsonl.gz"
needs_prometheus = pytest.mark.skipif(PROMETHEUS is None, reason="Debian's `prometheus` is not installed")


def renamed(info: MachineInfo, hostname: str) -> MachineInfo:
    system = SystemInfo(
        **{**{f: getattr(info.system, f) for f in info.system.__slots__}, "hostname": hostname}
    )
    return MachineInfo(system, info.devices, info.topology)


def families(info: MachineInfo, snap: Snapshot, hints=None, processes: bool = True):  # type: ignore[no-untyped-def]
    return build_families(info, snap, processes=processes, hints=hints)


def merged(*parts: list) -> bytes:  # type: ignore[type-arg]
    """One exposition of several hosts' families (one family per name, as one exporter of
    several hosts writes it)."""
    by_name: dict[str, object] = {}
    for fams in parts:
        for f in fams:
            have = by_name.get(f.name)
            if have is None:
                by_name[f.name] = f
            else:
                have.samples.extend(f.samples)  # type: ignore[attr-defined]
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(list(by_name.values())))  # type: ignore[arg-type]
    return generate_latest(registry)


@contextmanager
def serve(bodies: Sequence[bytes]) -> Iterator[list[str]]:
    """Each body on its own loopback port, as an exporter's /metrics."""
    servers = []
    for body in bodies:

        class Handler(http.server.BaseHTTPRequestHandler):
            payload = body

            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(self.payload)))
                self.end_headers()
                self.wfile.write(self.payload)

            def log_message(self, format: str, *args: object) -> None:
                pass

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        srv.daemon_threads = True
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
    try:
        yield [f"127.0.0.1:{s.server_address[1]}" for s in servers]
    finally:
        for s in servers:
            s.shutdown()
            s.server_close()


def gpm_host_with_hints() -> tuple[bytes, dict[int, tuple[str, ...]], dict[int, int]]:
    """The 2x H200 GPM recording at the first tick where the HintEngine gives hints: its
    exposition as `gputui export` serves it, the hints per GPU, the processes per GPU."""
    header, ticks = read_recording(GPM)
    engine = HintEngine()
    for snap in ticks:
        hints = engine.update(snap)
        if hints:
            counts = {
                d.index: sum(1 for p in snap.processes if p.gpu_index == d.index)
                for d in header.machine.devices
            }
            body = merged(families(renamed(header.machine, "gpm-node"), snap, hints))
            return body, {g: tuple(h.kind for h in hs) for g, hs in hints.items()}, counts
    raise AssertionError("the GPM recording gives no hint")


def busy_host() -> tuple[bytes, dict[int, int]]:
    """8 GPUs with 30 processes each (tick 40), exported without per-process series (as
    `gputui export --no-processes` does): only gputui_gpu_processes says how many."""
    header, ticks = read_recording(X8_240)
    snap = ticks[40]
    counts = {
        d.index: sum(1 for p in snap.processes if p.gpu_index == d.index) for d in header.machine.devices
    }
    return merged(families(renamed(header.machine, "busy-node"), snap, processes=False)), counts


def card_text(gpus, width: int = 200) -> dict[int, str]:  # type: ignore[no-untyped-def]
    from gputui.ui.cluster.app import card_of

    return {
        g.device.index: "\n".join("".join(t for t, _ in line) for line in card_of(g, width)) for g in gpus
    }


def test_direct_mode_gpus_carry_the_exported_count_and_hints():
    gpm_body, hints, gpm_counts = gpm_host_with_hints()
    busy_body, busy_counts = busy_host()
    with serve([gpm_body, busy_body]) as (gpm_target, busy_target):
        src = DirectSource([gpm_target, busy_target], HttpClient(timeout=5))
        state = src.fetch()
        src.close()
    by_name = {h.name: h for h in state.hosts}
    gpm_gpus = src.details(by_name["gpm-node"])
    assert {g.device.index: g.hints for g in gpm_gpus} == {i: hints.get(i, ()) for i in gpm_counts}
    assert {g.device.index: g.processes for g in gpm_gpus} == gpm_counts
    busy = src.details(by_name["busy-node"])
    assert {g.device.index: g.processes for g in busy} == busy_counts
    assert all(g.procs == () for g in busy)  # no per-process series: the count alone
    texts = card_text(busy)
    for index, n in busy_counts.items():
        assert f"{n} processes" in texts[index], texts[index]
    texts = card_text(gpm_gpus)
    for index, kinds in hints.items():
        assert "» " in texts[index], texts[index]  # the hint's words on the card
        assert kinds


@needs_prometheus
def test_prometheus_drill_in_shows_the_process_count_and_the_hint():
    asyncio.run(_prometheus_drill_in())


async def _prometheus_drill_in():
    gpm_body, hints, gpm_counts = gpm_host_with_hints()
    busy_body, busy_counts = busy_host()
    with serve([gpm_body, busy_body]) as targets, prometheus(targets) as prom:
        prom.wait_for("gputui_gpu_processes", len(gpm_counts) + len(busy_counts))
        src = PrometheusSource(prom.url, HttpClient(timeout=10), selector='job="gpu"')
        state = src.fetch()
        by_name = {h.name: h for h in state.hosts}
        details = src.details(by_name["busy-node"])
        assert {g.device.index: g.processes for g in details} == busy_counts
        gpm_details = src.details(by_name["gpm-node"])
        assert {g.device.index: g.hints for g in gpm_details} == {i: hints.get(i, ()) for i in gpm_counts}

        app = ClusterApp(src, refresh=3600)
        async with app.run_test(size=(200, 60)) as pilot:
            await wait_for(pilot, lambda: app.states_applied >= 1, timeout=60)
            rows = app.table.rows
            app.table.cursor = next(k for k, r in enumerate(rows) if r.host.name == "busy-node")
            await pilot.press("enter")
            assert isinstance(app.screen, HostScreen)
            await wait_for(pilot, lambda: bool(app.screen.gpus), timeout=30)
            await pilot.pause()
            text = "\n".join(screen_lines(app))
            assert re.search(r"(?<![0-9])0 processes", text) is None, text
            assert f"{busy_counts[0]} processes" in text, text
            await pilot.press("escape")
            app.table.cursor = next(k for k, r in enumerate(app.table.rows) if r.host.name == "gpm-node")
            await pilot.press("enter")
            await wait_for(pilot, lambda: bool(app.screen.gpus), timeout=30)
            await pilot.pause()
            text = "\n".join(screen_lines(app))
            assert "» " in text, text
            assert f"{gpm_counts[0]} process" in text


@needs_prometheus
def test_one_prometheus_target_serving_several_hosts_is_split_by_host():
    """One target (a federating or aggregating exporter) serves two hosts' GPUs under their
    Hostname labels: two hosts, each host's view and history with its own GPUs only."""
    (h1, t1), (h2, t2) = read_recording(H200_X1), read_recording(H200_X2_V2)
    body = merged(
        families(renamed(h1.machine, "node-a"), t1[0]),
        families(renamed(h2.machine, "node-b"), t2[0]),
    )
    with serve([body]) as (target,), prometheus([target]) as prom:
        prom.wait_for("DCGM_FI_DEV_GPU_TEMP", 3)
        src = PrometheusSource(prom.url, HttpClient(timeout=10))
        state = src.fetch()
        assert state.error is None
        assert sorted(h.name for h in state.hosts) == ["node-a", "node-b"]
        assert {h.instance for h in state.hosts} == {target}
        by_name = {h.name: h for h in state.hosts}
        for name, header in (("node-a", h1), ("node-b", h2)):
            want = [d.uuid for d in header.machine.devices]
            assert [g.device.uuid for g in by_name[name].gpus] == want
            assert [g.device.uuid for g in src.details(by_name[name])] == want
            hist = src.history(by_name[name], 120, 60)
            assert hist.error is None
            assert {key for key, _ in hist.series} <= {g.key for g in by_name[name].gpus}


def test_direct_mode_names_hosts_by_the_configured_host_label():
    """An exporter relabelled to `node="..."` (not dcgm-exporter's Hostname): with
    [cluster.labels] host = "node" the hosts are named by it; two targets stay apart."""
    from gputui.commands.cluster import make_source
    from gputui.config import ClusterConfig, ClusterLabels

    (h1, t1), (h2, t2) = read_recording(H200_X1), read_recording(H200_X2_V2)
    bodies = [
        merged(families(renamed(h.machine, name), t[0])).replace(b'Hostname="', b'node="')
        for (h, t), name in (((h1, t1), "node-a"), ((h2, t2), "node-b"))
    ]
    with serve(bodies) as targets:
        cfg = ClusterConfig(labels=ClusterLabels(host="node"), timeout=5.0)
        args = SimpleNamespace(targets=targets, targets_file=None, prometheus=None, selector=None)
        src = make_source(args, cfg)
        assert isinstance(src, DirectSource) and src.labels == LabelMap(host="node")
        state = src.fetch()
        src.close()
        assert sorted(h.name for h in state.hosts) == ["node-a", "node-b"]
        by_name = {h.name: h for h in state.hosts}
        assert len(by_name["node-a"].gpus) == 1 and len(by_name["node-b"].gpus) == 2
        # without the setting the label is not read: the hosts are their targets
        plain = DirectSource(targets, HttpClient(timeout=5))
        assert sorted(h.name for h in plain.fetch().hosts) == sorted(targets)
        plain.close()
