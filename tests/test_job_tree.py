"""A distributed job as one tree, stopped as one: a real launcher (a `torchrun` script)
with real rank processes and their workers, laid out as torchrun lays them out, put on the
ranks of a real 2x H200 recording.  Driven with real key presses."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest
from conftest import screen_lines, wait_for
from gpu_children import MARKER, alive, start_child, wait_started
from test_processes import HOLDER, RANK0, RANK1, answer, ask, pane, run, tab_on_children, table

from gputui.telemetry.host.proctree import JobTracker
from gputui.ui.processes.screens import SignalDialog

LAUNCHER = textwrap.dedent(
    """
    import pathlib, subprocess, sys, time
    marker = sys.argv[sys.argv.index("--marker") + 1]
    train = str(pathlib.Path(__file__).with_name("train.py"))
    ranks = [subprocess.Popen([sys.executable, train, "--lr", "3e-4", f"{marker}-rank{i}"]) for i in range(2)]
    print(" ".join(str(r.pid) for r in ranks), flush=True)
    time.sleep(600)
    """
)
TRAIN = textwrap.dedent(
    """
    import subprocess, sys, time
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", sys.argv[-1] + "-worker"])
    time.sleep(600)
    """
)


@pytest.fixture
def jobs_started():
    """Launchers started by a test: their whole process group is killed at the end (the
    `children` fixture kills only the launcher, which would leave its ranks running)."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for launcher in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait(timeout=10)


def start_job(tmp_path, children):
    """`python3 .../torchrun --nproc-per-node 2 train.py`: the launcher and its two ranks
    (each with a worker child), as torchrun's process tree.  Returns (launcher, [rank PIDs])."""
    script = tmp_path / "torchrun"
    script.write_text(LAUNCHER)
    (tmp_path / "train.py").write_text(TRAIN)
    launcher = subprocess.Popen(
        [sys.executable, str(script), "--nproc-per-node", "2", "--marker", MARKER, "train.py"],
        stdout=subprocess.PIPE,
        start_new_session=True,  # the launcher leads its own process group and session
    )
    children.append(launcher)
    assert launcher.stdout is not None
    ranks = [int(x) for x in launcher.stdout.readline().split()]
    for i, pid in enumerate(ranks):
        wait_started(pid, f"{MARKER}-rank{i}")
        worker = f"{MARKER}-rank{i}-worker"
        deadline = time.monotonic() + 30
        while not any(worker in c.cmdline() for c in psutil.Process(pid).children()):
            assert time.monotonic() < deadline, "the rank's worker did not start"
            time.sleep(0.01)
    return launcher, ranks


def descendants(pid: int) -> list[int]:
    return [c.pid for c in psutil.Process(pid).children(recursive=True)]


def test_the_tracker_finds_the_launcher_above_each_rank(tmp_path, children, jobs_started):
    launcher, ranks = start_job(tmp_path, jobs_started)
    from gputui.telemetry.host.processes import ProcessInspector
    from gputui.telemetry.model import GpuProcess

    procs = ProcessInspector(verify_gpu_files=False).enrich(
        [GpuProcess(0, ranks[0]), GpuProcess(1, ranks[1])]
    )
    tracker = JobTracker()
    out, launchers = tracker.annotate(procs)
    assert [p.launcher for p in out] == [launcher.pid, launcher.pid]
    assert [(lp.pid, lp.kind, lp.pgid, lp.sid) for lp in launchers] == [
        (launcher.pid, "torchrun", launcher.pid, launcher.pid)
    ]


def test_a_whole_job_is_one_tree_and_one_confirmed_signal_stops_all_of_it(tmp_path, children, jobs_started):
    launcher, ranks = start_job(tmp_path, jobs_started)
    bystander = start_child("holder")  # another process on a GPU: must not be touched
    children.append(bystander)
    job_pids = {launcher.pid, *descendants(launcher.pid)}
    assert len(job_pids) == 5  # launcher, 2 ranks, 2 workers

    async def go():
        mapping = {HOLDER: bystander.pid, RANK0: ranks[0], RANK1: ranks[1]}
        async with tab_on_children(mapping, size=(160, 40)) as (app, pilot):
            await pilot.press("v")
            await pilot.pause()
            rows = table(app).rows
            assert [r.key for r in rows if r.launcher is not None] == [(-1, launcher.pid)]
            tree = [r for r in rows if r.key[1] in (launcher.pid, *ranks)]
            assert [r.key[1] for r in tree] == [
                launcher.pid,
                *sorted(ranks, key=lambda p: rows.index(next(r for r in rows if r.key[1] == p))),
            ]
            screen = "\n".join(screen_lines(app))
            assert "tree" in screen and "torchrun --nproc-per-node 2" in screen
            assert "├─ " in screen and "└─ " in screen and "train.py --lr 3e-4" in screen, screen
            # the launcher's row sums its ranks' GPUs and GPU memory
            top = next(r for r in rows if r.launcher is not None)
            assert top.gpus == (0, 1)
            assert top.proc.gpu_memory == sum(r.proc.gpu_memory or 0 for r in rows if r.key[1] in ranks)
            # T on the launcher's row: one confirmation listing every PID, user and GPU
            await pilot.press("home")
            assert table(app).current is top
            await ask(pilot, "T")
            dialog = app.screen
            assert isinstance(dialog, SignalDialog) and dialog.job is not None
            assert {t.identity.pid for t in dialog.targets} == job_pids
            assert all(t.identity.user for t in dialog.targets)
            gpus = {t.identity.pid: t.gpus for t in dialog.targets}
            assert sorted(gpus[ranks[0]] + gpus[ranks[1]]) == [0, 1] and gpus[launcher.pid] == []
            shown = "\n".join(screen_lines(app))
            for pid in job_pids:
                assert str(pid) in shown
            await answer(pilot, "y")
            assert launcher.wait(timeout=30) == -signal.SIGTERM
            for pid in job_pids:
                await wait_for(pilot, lambda pid=pid: not alive(pid), timeout=30)
            assert alive(bystander.pid)  # nothing else touched
            p = pane(app)
            await wait_for(
                pilot, lambda: all(w.exited_after is not None for w in p.watches.values()), timeout=30
            )
            summary = "\n".join(screen_lines(app))
            assert "5 exited" in summary and "still running" not in summary, summary

    run(go())


# ---- on the real H100 recording: sideways scrolling, the job filter, grouping ------------


def test_commands_scroll_sideways_and_back():
    from conftest import H100_JOB, replay_app, run_to_tick

    async def go():
        app = replay_app(H100_JOB)
        async with app.run_test(size=(100, 24)) as pilot:
            await run_to_tick(pilot, 8)
            await pilot.press("2")
            await pilot.pause()

            def line_of(pid: int) -> str:
                return next(ln for ln in screen_lines(app) if f" {pid} " in ln)

            assert "train.py --lr 3e-4 --rank 0" in line_of(456)
            await pilot.press("right")
            await pilot.pause()
            scrolled = line_of(456)
            assert "train.py" not in scrolled and "…--lr 3e-4 --rank 0" in scrolled, scrolled
            await pilot.press(*["right"] * 20)
            await pilot.pause()
            end = screen_lines(app)
            assert "--device 0 (python3)" in line_of(459)  # it stops where the longest line ends
            await pilot.press("right")
            await pilot.pause()
            assert screen_lines(app) == end
            await pilot.press(*["left"] * 30)
            await pilot.pause()
            assert "train.py --lr 3e-4 --rank 0" in line_of(456)

    run(go())


def test_job_filter_and_group_by_job():
    from conftest import H100_JOB, replay_app, run_to_tick

    async def go():
        app = replay_app(H100_JOB)
        async with app.run_test(size=(160, 24)) as pilot:
            await run_to_tick(pilot, 8)
            await pilot.press("2", "O")
            await pilot.pause()
            assert [r.key[1] for r in table(app).rows] == [460]
            assert "job slurm 48213.0" in "\n".join(screen_lines(app))
            await pilot.press("O")  # the only job: then all again
            await pilot.pause()
            assert len(table(app).rows) == 5
            await pilot.press("o")
            await pilot.pause()
            assert table(app).rows[0].key[1] == 460  # the rows with a job come first
            assert "grouped by job" in "\n".join(screen_lines(app))

    run(go())
