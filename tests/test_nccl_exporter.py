"""NCCL RAS's exporter series (gputui/export/nccl_prometheus.py), scraped through the exporter's
collector from a Hub fed the real h100-x4-matrix runs (their captured RAS answers merged in,
labelled derived), the problem series' cap, and hostile hosts in labels."""

from __future__ import annotations

from dataclasses import replace

from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry
from ras_support import with_ras

from gputui.export.nccl_prometheus import MAX_PROBLEM_SERIES
from gputui.export.prometheus import GpuCollector
from gputui.telemetry.health import HealthEngine
from gputui.telemetry.hub import Hub
from gputui.telemetry.nccl.model import NcclComm, NcclRank, NcclView, RasAnswer
from gputui.telemetry.recording import read_recording


def hub_at(path, seconds: float) -> Hub:
    header, ticks = read_recording(path)
    hub = Hub(health=HealthEngine())
    hub.set_info(header.machine)
    for s in ticks:
        if s.timestamp - ticks[0].timestamp > seconds:
            break
        hub.publish(s)
    return hub


def scrape(hub: Hub) -> dict[str, list]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GpuCollector(hub))
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s)
    return out


def test_the_deadlock_is_a_problem_series_of_job_a(tmp_path):
    hub = hub_at(with_ras("3-mismatch-slow-gpu", tmp_path / "r.jsonl.gz"), 40)
    got = scrape(hub)
    ranks = {(s.labels["comm"], s.labels["job"]): s.value for s in got["gputui_nccl_comm_ranks"]}
    assert ranks == {
        ("0xa253901d5e78fc46", "launcher:2010"): 2.0,
        ("0x1e731bfa1320a766", "launcher:2012"): 2.0,
    }
    assert {s.value for s in got["gputui_nccl_comm_missing_ranks"]} == {0.0}
    (p,) = got["gputui_nccl_rank_problem"]
    assert p.labels == {
        "comm": "0xa253901d5e78fc46",
        "rank": "1",
        "host": "192.0.2.2",
        "pid": "2227",
        "problem": "behind",
        "collective": "AllReduce",
        "Hostname": "vm",
        "job": "launcher:2010",
    }
    assert [s.value for s in got["gputui_nccl_rank_problems_dropped"]] == [0.0]


def test_no_series_before_ras_was_asked(tmp_path):
    from ras_support import MATRIX

    got = scrape(hub_at(MATRIX / "3-mismatch-slow-gpu" / "recording.jsonl.gz", 40))
    assert not any(name.startswith("gputui_nccl_") for name in got)


def test_problem_series_are_capped_and_the_rest_counted(tmp_path):
    hub = hub_at(with_ras("3-mismatch-slow-gpu", tmp_path / "r.jsonl.gz"), 3)
    comms = tuple(
        NcclComm(f"0x{c + 1:x}", missing_ranks=tuple(NcclRank(k, "10.0.0.9", 100 + k) for k in range(40)))
        for c in range(5)
    )
    view = NcclView(1.0, (RasAnswer("localhost:28028", communicators=comms),))
    hub.publish(replace(hub.latest, seq=hub.latest.seq + 1, timestamp=hub.latest.timestamp + 1, nccl=view))
    hub.health = None  # no jobs to map to: job ""
    got = scrape(hub)
    assert len(got["gputui_nccl_rank_problem"]) == MAX_PROBLEM_SERIES
    assert {s.labels["job"] for s in got["gputui_nccl_rank_problem"]} == {""}
    (d,) = got["gputui_nccl_rank_problems_dropped"]
    assert d.value == 5 * 32 - MAX_PROBLEM_SERIES  # 32 findings a communicator at most


def test_a_hostile_host_reaches_the_labels_escaped(tmp_path):
    hub = hub_at(with_ras("3-mismatch-slow-gpu", tmp_path / "r.jsonl.gz"), 3)
    evil = '\x1b]0;owned\x07"} fake_metric 1\n'
    comm = NcclComm("0xabc", missing_ranks=(NcclRank(3, evil, 4),))
    view = NcclView(1.0, (RasAnswer("localhost:28028", communicators=(comm,)),))
    hub.health = None
    hub.publish(replace(hub.latest, seq=hub.latest.seq + 1, timestamp=hub.latest.timestamp + 1, nccl=view))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GpuCollector(hub))
    text = generate_latest(registry).decode()
    families = list(text_string_to_metric_families(text))
    assert "\x1b" not in text and "fake_metric" not in {f.name for f in families}
    (p,) = [s for fam in families for s in fam.samples if s.name.endswith("problem")]
    assert p.labels["host"] == '\\x1b]0;owned\\x07"} fake_metric 1\\x0a'
