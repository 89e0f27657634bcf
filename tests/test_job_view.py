"""The job view (J) on a small terminal: at 80x24 every column of the ranks' table and the
whole of the verdict's reason are on screen (issue 31: the reason and the CPU and state
columns were cut).  Real key presses on the REAL H100 torchrun recording with rank 1
SIGSTOPped (tests/fixtures/h100-health; 46 ticks, so 30 s thresholds as its device run)."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace

import pytest
from conftest import FIXTURES, replay_app, run_to_tick, screen_lines, wait_for

from gputui.config import Config
from gputui.telemetry.health_config import HealthConfig
from gputui.ui.processes.job_view import COLUMNS, JobScreen, job_lines

STOPPED = FIXTURES / "h100-health" / "jobrank-stopped.jsonl.gz"
REAL = replace(Config(), health=HealthConfig(spin_seconds=30, stuck_seconds=30))


async def job_view(pilot, app) -> list[str]:
    await run_to_tick(pilot, 46)
    await pilot.press("tab", "J")
    await wait_for(pilot, lambda: isinstance(app.screen, JobScreen))
    await pilot.pause()
    return screen_lines(app)


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 50)])
def test_every_column_and_the_whole_reason_are_on_screen(size) -> None:
    async def go():
        app = replay_app(STOPPED, config=REAL)
        async with app.run_test(size=size) as pilot:
            lines = await job_view(pilot, app)
            inside = [line[1:-1] for line in lines[1:-1]]  # within the screen's border
            report = app.hub.health_report()
            (job,) = report.jobs
            assert job.verdict is not None
            # the reason, word for word, across as many lines as it needs
            said = " ".join(" ".join(inside).split())
            assert " ".join(job.verdict.why.split()) in said
            head = next(line for line in inside if re.match(r"\s*rank\s+PID\s", line))
            assert re.findall(r"in state|\S+", head) == list(COLUMNS)
            for r in job.ranks:
                row = next(line for line in inside if re.match(rf"\s+{r.rank}\s+{r.pid}\s", line))
                cells = row.split()
                assert cells[-4:-2] == [r.state, f"{r.cpu_percent:.0f}%"]  # state, CPU, then "N s"
            assert not any(line.endswith("…") for line in inside)

    asyncio.run(go())


def test_a_table_that_cannot_fit_drops_columns_from_the_right_never_cuts_one() -> None:
    """Narrower than the compact table: whole columns go (in state, tensor, util first),
    rank, PID, state and CPU stay."""
    from gputui.telemetry.health import HealthEngine
    from gputui.telemetry.recording import read_recording

    engine = HealthEngine(REAL.health)
    report = [engine.update(s) for s in read_recording(STOPPED)[1]][-1]
    (job,) = report.jobs
    for width in (40, 50, 60, 70):
        lines = ["".join(t for t, _ in line) for line in job_lines(job, report.timestamp, width)]
        head_at = next(k for k, line in enumerate(lines) if re.match(r"\s*rank\s+PID\s", line))
        table = lines[head_at : head_at + 1 + len(job.ranks)]
        assert all(len(line) <= width for line in table), (width, table)
        head = table[0].split()
        assert {"rank", "PID", "state", "CPU"} <= set(head), (width, head)
