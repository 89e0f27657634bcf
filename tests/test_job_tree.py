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

from gputui.telemetry.proctree import JobTracker
from gputui.ui.processes import SignalDialog

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
    from gputui.telemetry.host import ProcessInspector
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
