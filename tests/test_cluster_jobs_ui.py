"""The fleet's stuck jobs on the cluster screen, with real key presses: the job rows first
(worst first, naming the rank, host and PID), the summary's stuck-job count (absent where no
exporter judges jobs: unknown is not 0), `enter` on a job row (its nodes, ranks, verdict lines
and NCCL RAS's findings), hostile labels drawn literally, and SVG snapshots.

What is real and what is not: node-a and node-b are the two halves of the REAL 4-rank NCCL
recording tests/fixtures/h200-x4-nccl/stopped.jsonl.gz (rank 1 stopped), EMULATED as two
nodes (tests/cluster_support.py `split_recording`, the ranks given the verified Slurm job
4242), their series written by the real exporter code with the real engine's verdicts.  The
NCCL RAS series and node-c's job are HAND-WRITTEN exporter text (the ras helper's series
shape; a user's own SLURM_JOB_ID claim with hostile text), said where they are made."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest
from cluster_support import split_recording
from conftest import FIXTURES, screen_lines, wait_for
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import CollectorRegistry

from gputui.cluster import expfmt
from gputui.cluster.jobs import host_jobs, merge
from gputui.cluster.model import ClusterState, HostState, LabelMap, build_gpus, split_jobs
from gputui.export.prometheus import build_families
from gputui.telemetry.health import HealthEngine
from gputui.telemetry.health_config import HealthConfig
from gputui.telemetry.model import Job
from gputui.telemetry.recording import read_recording
from gputui.ui.cluster.app import ClusterApp
from gputui.ui.cluster.jobs import JobRow, JobScreen

STOPPED_X4 = FIXTURES / "h200-x4-nccl" / "stopped.jsonl.gz"
COMM = "0x669d2a1b3c4d5e6f"
RAS_TEXT = (  # HAND-WRITTEN: the ras helper's series, as node-a's exporter would publish them
    f'gputui_nccl_comm_ranks{{comm="{COMM}",Hostname="node-a",job="launcher:943"}} 4\n'
    f'gputui_nccl_comm_missing_ranks{{comm="{COMM}",Hostname="node-a",job="launcher:943"}} 1\n'
    f'gputui_nccl_rank_problem{{comm="{COMM}",rank="1",host="node-a",pid="1129",problem="missing",'
    f'collective="AllReduce",Hostname="node-a",job="launcher:943"}} 1\n'
)
EVIL = "\uff58\uff58 \x1b]52;c;ZXZpbA==\x07\x1b[31m"
"""Two fullwidth letters (two cells each: a column shifter), OSC 52 (the clipboard), a colour."""
NODE_C = (  # HAND-WRITTEN: a user's own SLURM_JOB_ID=4242 claim on node-c, with hostile text
    'gputui_job_stuck{job="slurm:4242:0:environment",launcher="",Hostname="node-c",verdict="culprit"} 1\n'
    'gputui_job_verdict_info{job="slurm:4242:0:environment",launcher="",Hostname="node-c",verdict="culprit",'
    'rank="0",pid="31337",gpu="0",slurm_job="",pod="",namespace="",comm="",'
    f'summary="rank 0 {EVIL} waits"}} 1\n'
    'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-c",Hostname="node-c",modelName="H200"} 0\n'
)


def _exposition(path: Path, hostname: str) -> str:
    """What `gputui export` serves for the split recording at its end ([health] 30 s)."""
    header, ticks = read_recording(path)
    engine = HealthEngine(HealthConfig(stuck_seconds=30, spin_seconds=30))
    for s in ticks:
        engine.update(s)
    registry = CollectorRegistry(auto_describe=False)

    class Fixed:
        def collect(self):  # type: ignore[no-untyped-def]
            yield from build_families(header.machine, ticks[-1], health=engine.current)

    registry.register(Fixed())  # type: ignore[arg-type]
    return generate_latest(registry).decode()


def state_of(texts: dict[str, str]) -> ClusterState:
    """A refresh of exporters that answered `texts`, as DirectSource builds it (no clock)."""
    lm = LabelMap()
    hosts = []
    for name, text in texts.items():
        samples = expfmt.parse(text).samples
        gpu_series, job_series = split_jobs((s.name, s.labels, s.value) for s in samples)
        key = f"{name}:9400"
        hosts.append(
            HostState(
                key,
                name,
                key,
                True,
                gpus=tuple(build_gpus(key, gpu_series, lm)),
                jobs=host_jobs(key, name, job_series),
            )
        )
    jobs, left_out = merge((h.key, h.jobs) for h in hosts)
    return ClusterState(hosts=tuple(hosts), source="emulated nodes", jobs=jobs, jobs_left_out=left_out)


@pytest.fixture(scope="module")
def fleet_texts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("nodes")
    job = Job("slurm", "4242", step="0")
    a = split_recording(STOPPED_X4, d / "a.jsonl.gz", (0, 1), "node-a", job=job, hold=30)
    b = split_recording(STOPPED_X4, d / "b.jsonl.gz", (2, 3), "node-b", job=job, hold=30)
    return {
        "node-a": _exposition(a, "node-a") + RAS_TEXT,
        "node-b": _exposition(b, "node-b"),
        "node-c": NODE_C,
    }


def app_with(state: ClusterState) -> ClusterApp:
    """The cluster screen without a source (`_ready` hands it `state`: no network, no clock)."""
    return ClusterApp(None, refresh=3600)


async def _ready(pilot, state: ClusterState) -> None:  # type: ignore[no-untyped-def]
    pilot.app.apply_state(state)
    await wait_for(pilot, lambda: pilot.app.states_applied >= 1, 30)
    await pilot.pause()


def test_the_real_verdicts_merge_and_the_claim_stays_apart(fleet_texts):
    state = state_of(fleet_texts)
    assert [j.title for j in state.jobs] == ["slurm 4242", "slurm 4242.0 (env) on node-c"]
    real = state.jobs[0]
    assert [n.host_name for n in real.nodes] == ["node-a", "node-b"]
    assert real.look_at() == ("1", "node-a", "1129", "1")
    assert [c.missing for c in real.comms] == [1] and real.problems[0].problem == "missing"


def test_job_rows_come_first_and_name_where_to_look(fleet_texts):
    asyncio.run(_rows(state_of(fleet_texts)))


async def _rows(state: ClusterState) -> None:
    app = app_with(state)
    async with app.run_test(size=(120, 30)) as pilot:
        await _ready(pilot, state)
        assert [type(r) for r in app.table.rows[:2]] == [JobRow, JobRow]
        lines = screen_lines(app)
        assert "stuck jobs 2" in lines[0], lines[0]
        assert "slurm 4242" in lines[2] and "rank 1 on node-a, PID 1129 (GPU 1)" in lines[2], lines[2]
        assert "2 nodes" in lines[2]
        assert "slurm 4242.0 (env) on node-c" in lines[3] and "PID 31337" in lines[3], lines[3]
        text = "\n".join(lines)
        assert "\x1b" not in text and "\x07" not in text
        assert "rank 0 ?? ?]52;c;ZXZpbA==??[31m" in lines[3], lines[3]  # one cell each, as "?"


def test_enter_on_a_job_shows_its_nodes_ranks_verdicts_and_nccl(fleet_texts):
    asyncio.run(_enter(state_of(fleet_texts)))


async def _enter(state: ClusterState) -> None:
    app = app_with(state)
    async with app.run_test(size=(120, 30)) as pilot:
        await _ready(pilot, state)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, JobScreen), 30)
        await pilot.pause()
        text = "\n".join(screen_lines(app))
        assert "look at: rank 1 on node-a, PID 1129 (GPU 1)" in text, text
        assert "culprit" in text and "rank 1  PID 1129  GPU 1" in text, text
        assert "stuck in a collective" in text  # node-b's own line
        assert f"communicator {COMM}  4 ranks, 1 missing" in text, text
        assert "rank 1 on node-a (PID 1129): missing in AllReduce" in text, text
        # a refresh with the job gone: the screen says so, it does not keep a stale verdict
        app.apply_state(dataclasses.replace(state, jobs=()))
        await pilot.pause()
        assert "this job has no verdict now" in "\n".join(screen_lines(app))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, JobScreen), 30)
        # the claimed job's screen: its hostile summary drawn literally
        app.apply_state(state)
        await pilot.pause()
        await pilot.press("home", "down", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, JobScreen), 30)
        await pilot.pause()
        text = "\n".join(screen_lines(app))
        assert "slurm 4242.0 (env) on node-c" in text and "\x1b" not in text and "\x07" not in text, text
        assert "rank 0 ?? ?]52;c;ZXZpbA==??[31m waits" in text, text


def test_the_cursor_stays_on_its_job_when_the_order_changes(fleet_texts):
    asyncio.run(_cursor(state_of(fleet_texts)))


async def _cursor(state: ClusterState) -> None:
    app = app_with(state)
    async with app.run_test(size=(120, 30)) as pilot:
        await _ready(pilot, state)
        await pilot.press("down")
        chosen = app.table.selected()
        assert isinstance(chosen, JobRow) and chosen.job.title.endswith("on node-c")
        app.apply_state(dataclasses.replace(state, jobs=tuple(reversed(state.jobs))))
        await pilot.pause()
        again = app.table.selected()
        assert isinstance(again, JobRow) and again.job.key == chosen.job.key


def test_no_exporter_judges_jobs_no_stuck_count():
    """dcgm-exporter (no job series): the summary does not claim "stuck jobs 0"."""
    text = 'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",Hostname="n"} 5\n'
    asyncio.run(_no_count(state_of({"n": text})))


async def _no_count(state: ClusterState) -> None:
    app = app_with(state)
    async with app.run_test(size=(120, 20)) as pilot:
        await _ready(pilot, state)
        assert "stuck jobs" not in screen_lines(app)[0]
        assert not any(isinstance(r, JobRow) for r in app.table.rows)


def test_cluster_jobs_120x30(snap_compare, fleet_texts):
    state = state_of(fleet_texts)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await _ready(pilot, state)

    assert snap_compare(app_with(state), terminal_size=(120, 30), run_before=run_before)


def test_cluster_job_screen_100x30(snap_compare, fleet_texts):
    state = state_of(fleet_texts)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await _ready(pilot, state)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, JobScreen), 30)
        await pilot.pause()

    assert snap_compare(app_with(state), terminal_size=(100, 30), run_before=run_before)
