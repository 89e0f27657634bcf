"""Issue 32's done-when for the cluster view: one job's verdict gathered from two exporters.

EMULATED: two nodes.  The real 4-rank NCCL job of tests/fixtures/h200-x4-nccl/stopped.jsonl.gz
(4 H200s, torchrun, rank 1 SIGSTOPped 8 s in) is split in two halves
(`cluster_support.split_recording`, said in each file's header): GPUs 0-1 with ranks 0 and 1
as host "node-a", GPUs 2-3 with ranks 2 and 3 as host "node-b", each renumbered from GPU 0,
the last tick held 600 more ticks (the stopped rank stays stopped).  The real run was outside
Slurm: the test gives every rank the verified Slurm job 4242 (as Slurm's cgroup plugin would
name it on a real cluster) so the halves have the identity two nodes of one Slurm job have.
Two real `gputui export --replay` processes on loopback serve the halves ([health]
stuck_seconds 30), each judging its own two ranks with the real engine: node-a names rank 1
(stopped), node-b sees its ranks waiting.  What was not run: two machines, Slurm, NCCL RAS
across nodes.

`gputui cluster` reads both — scraping them directly, and through a real Prometheus server
(Debian's `prometheus`) — and shows one job, slurm 4242, on two nodes, naming rank 1 on
node-a, PID 1129; `enter` on its row shows both nodes' verdict lines."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_support import PROMETHEUS, exporters, prometheus, split_recording
from conftest import FIXTURES

from gputui.cluster.http import HttpClient
from gputui.cluster.jobs import RANKED, FleetJob
from gputui.cluster.model import ClusterState
from gputui.cluster.sources import DirectSource, PrometheusSource
from gputui.telemetry.model import Job

STOPPED_X4 = FIXTURES / "h200-x4-nccl" / "stopped.jsonl.gz"
SLURM = Job("slurm", "4242", step="0")
"""DERIVED: the job the test gives the ranks (the real run was torchrun outside Slurm)."""
WAIT_S = 180.0
"""How long a test waits for the replays to reach the verdict (an event, not a bound)."""


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    d = tmp_path_factory.mktemp("two-nodes")
    halves = [
        split_recording(STOPPED_X4, d / "node-a.jsonl.gz", (0, 1), "node-a", job=SLURM, hold=600),
        split_recording(STOPPED_X4, d / "node-b.jsonl.gz", (2, 3), "node-b", job=SLURM, hold=600),
    ]
    config = d / "config.toml"
    config.write_text("[health]\nstuck_seconds = 30\nspin_seconds = 30\n")
    with exporters(halves, interval=0.05, config=config) as started:
        yield [e.target for e in started]


def wait_for_job(fetch, want: int = 2) -> tuple[ClusterState, FleetJob]:  # type: ignore[no-untyped-def]
    """Refresh until a job shows on `want` nodes with a named rank (the replays reach the
    verdict ~2 s in, 30 s of recording later)."""
    deadline = time.monotonic() + WAIT_S
    state = None
    while time.monotonic() < deadline:
        state = fetch()
        for job in state.jobs:
            if len(job.nodes) == want and job.severity == RANKED:
                return state, job
        time.sleep(0.2)
    raise AssertionError(f"no job on {want} nodes: {state!r:.2000}")


def check_the_job(job: FleetJob) -> None:
    assert job.title == "slurm 4242"
    assert [n.host_name for n in job.nodes] == ["node-a", "node-b"]
    a, b = job.nodes
    assert (a.verdict, a.rank, a.pid, a.gpu, a.stuck) == ("culprit", "1", "1129", "1", True)
    assert a.summary == "rank 1 (PID 1129, GPU 1) is the one the others wait for"
    assert (b.verdict, b.pid, b.stuck) == ("stuck", "", True)
    assert job.look_at() == ("1", "node-a", "1129", "1")


def test_direct_mode_shows_one_jobs_verdict_from_two_exporters(two_nodes):
    src = DirectSource(two_nodes, HttpClient(timeout=5))
    try:
        state, job = wait_for_job(src.fetch)
    finally:
        src.close()
    check_the_job(job)
    assert len(state.jobs) == 1  # the halves are one job, not two
    assert [g.device.index for h in state.hosts for g in h.gpus] == [0, 1, 0, 1]  # no GPU from a verdict


@pytest.mark.skipif(PROMETHEUS is None, reason="Debian's `prometheus` is not installed")
def test_prometheus_mode_shows_the_same_job(two_nodes):
    with prometheus(two_nodes) as prom:
        prom.wait_for("gputui_job_stuck", 2)
        src = PrometheusSource(prom.url, HttpClient(timeout=5))
        _, job = wait_for_job(src.fetch)
    check_the_job(job)


def test_the_cluster_screen_shows_the_job_first_and_enter_shows_its_nodes(two_nodes):
    asyncio.run(_screen(two_nodes))


async def _screen(targets: list[str]) -> None:
    from conftest import screen_lines, wait_for

    from gputui.ui.cluster.app import ClusterApp, JobScreen

    src = DirectSource(targets, HttpClient(timeout=5))
    app = ClusterApp(src, refresh=1.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: any(len(j.nodes) == 2 and j.severity == RANKED for j in app.state.jobs)
                       if app.state else False, WAIT_S)  # fmt: skip
        await pilot.pause()
        text = "\n".join(screen_lines(app))
        assert "stuck jobs 1" in text, text
        row = next(line for line in text.splitlines() if "slurm 4242" in line)
        assert "rank 1" in row and "node-a" in row and "PID 1129" in row, row
        # the job row is first and has the cursor: enter opens the job
        await pilot.press("home", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, JobScreen), 30)
        await pilot.pause()
        job = "\n".join(screen_lines(app))
        assert "slurm 4242" in job and "node-a" in job and "node-b" in job, job
        assert "rank 1 (PID 1129, GPU 1) is the one the others wait for" in job, job
        assert "stuck in a collective" in job, job
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, JobScreen), 30)
    src.close()


def test_the_emulated_nodes_say_what_they_are(tmp_path: Path):
    from gputui.telemetry.recording import read_recording

    out = split_recording(STOPPED_X4, tmp_path / "n.jsonl.gz", (2, 3), "node-b", job=SLURM, hold=2)
    header, ticks = read_recording(out)
    assert header.derived is not None and (header.note or "").startswith("DERIVED (not a real machine)")
    assert [d.index for d in header.machine.devices] == [0, 1]
    assert {p.pid for p in ticks[40].processes} == {1130, 1131}
    assert len(ticks) == 78 and ticks[-1].timestamp - ticks[-3].timestamp == 2 * header.interval
