"""Issue 26 in the TUI: the job verdict on the Overview's process list, the spinning GPU on
its card, the job view (J), the stacks screen (P), and `g` on a process.

Recordings: the REAL H100 recordings of tests/fixtures/h100-health (a torchrun job of 3
ranks with rank 1 SIGSTOPped; one kernel spinning).  They are 45 s long, so the [health]
thresholds are 30 s (REAL).  Stacks and `g` on a live process use ReplayOntoChildren (the
real recording's rows put on real child processes the test starts: tests/gpu_children.py).
"""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import sys
from dataclasses import replace

import pytest
from conftest import FIXTURES, FROZEN, replay_app, run_to_tick, screen_lines, wait_for
from gpu_children import ReplayOntoChildren, start_child
from stacks_support import WAIT_LINE, py_spy_children, require_py_spy, start_waiter, wait_state, write_child

from gputui.config import Config
from gputui.telemetry.health import HealthConfig
from gputui.ui.app import GpuTuiApp
from gputui.ui.processes.job_view import JobScreen
from gputui.ui.processes.stacks_view import StacksScreen

HEALTH = FIXTURES / "h100-health"
STOPPED = HEALTH / "jobrank-stopped.jsonl.gz"
SPIN = HEALTH / "spin.jsonl.gz"
LAST = 46
"""Ticks in each recording."""
REAL = replace(Config(), health=HealthConfig(spin_seconds=30, stuck_seconds=30))
VERDICT = "stuck: rank 1 (PID 1200, GPU 0) is the one the others wait for"
SPIN_PID = 705
"""The spinning process of spin.jsonl.gz (listed from tick 12 on: the load starts 5 s in)."""


def run(coro) -> None:
    asyncio.run(coro)


def text(app) -> str:
    return "\n".join(screen_lines(app))


def notes(app) -> str:
    return "\n".join(str(n.message) for n in app._notifications)


async def into_list(pilot) -> None:
    await pilot.press("tab")  # from the cards into the Overview's process list
    await pilot.pause()


# ---- 1 + 2: the verdict on the Overview, the alert with [health], the spinning card --------


def test_the_overview_names_the_stopped_rank_and_the_alert_uses_the_health_config() -> None:
    async def go():
        app = replay_app(STOPPED, config=REAL)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, LAST)
            await wait_for(pilot, lambda: VERDICT in text(app))
            line = next(s for s in screen_lines(app) if VERDICT in s)
            assert "job of launcher PID 1013" in line and "J: job view" in line
            # the job_stuck alert read [health] stuck_seconds = 30 (the default 120 never fires here)
            (alert,) = [a for a in app.hub.active_alerts().values() if a.kind == "job_stuck"]
            assert alert.threshold == 30 and alert.pid == 1200  # the alert says the threshold it used
            assert app.hub.health_report() is not None

    run(go())


def test_with_the_default_thresholds_the_45_s_recording_gives_no_verdict() -> None:
    async def go():
        app = replay_app(STOPPED)  # stuck_seconds 120: the ranks waited ~35 s
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, LAST)
            assert "the others wait for" not in text(app)
            assert not any(a.kind == "job_stuck" for a in app.hub.active_alerts().values())

    run(go())


def test_the_verdict_comes_only_once_the_ranks_have_waited_the_threshold() -> None:
    async def go():
        app = replay_app(STOPPED, config=REAL)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 30)
            assert "the others wait for" not in text(app)

    run(go())


def test_the_spinning_gpu_card_says_waiting_in_a_collective_not_tiny_kernels() -> None:
    async def go():
        app = replay_app(SPIN, config=REAL)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, LAST)
            await wait_for(pilot, lambda: "waiting in a collective for" in text(app))
            assert "tiny kernels" not in text(app)

    run(go())


# ---- 3: the job view --------------------------------------------------------------------


def test_J_on_a_rank_opens_the_job_view_with_every_rank_the_verdict_and_the_energy() -> None:
    async def go():
        app = replay_app(STOPPED, config=REAL)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, LAST)
            await into_list(pilot)
            await pilot.press("J")
            await wait_for(pilot, lambda: isinstance(app.screen, JobScreen))
            await pilot.pause()
            lines = screen_lines(app)
            shown = "\n".join(lines)
            assert VERDICT in shown and "Wh on GPU 0" in shown
            rows = {pid: next(s for s in lines if f" {pid} " in s) for pid in (1199, 1200, 1201)}
            assert " T " in rows[1200] and " S " in rows[1199] and " S " in rows[1201]
            for head in ("rank", "PID", "GPU", "util", "SM", "tensor", "memory", "power", "state", "CPU"):
                assert head in shown
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, JobScreen))

    run(go())


def test_J_on_a_process_of_no_job_says_so() -> None:
    async def go():
        app = replay_app(SPIN, config=REAL)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, LAST)
            await into_list(pilot)
            await pilot.press("J")
            await wait_for(pilot, lambda: "is not a rank of a job" in notes(app))
            assert not isinstance(app.screen, JobScreen)

    run(go())


# ---- 4: stacks ------------------------------------------------------------------------


def test_P_in_a_replay_reads_no_stack_and_says_why() -> None:
    async def go():
        app = replay_app(STOPPED, config=REAL, readonly=True)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, LAST)
            await into_list(pilot)
            await pilot.press("P")
            await wait_for(pilot, lambda: "another machine's processes" in notes(app))
            assert not isinstance(app.screen, StacksScreen)
            await pilot.press("J")  # the job view's P: every rank, refused the same way
            await wait_for(pilot, lambda: isinstance(app.screen, JobScreen))
            await pilot.press("P")
            await pilot.pause()
            assert not isinstance(app.screen, StacksScreen)

    run(go())


@pytest.fixture(scope="module")
def script(tmp_path_factory):
    return write_child(tmp_path_factory.mktemp("tuistacks"))


@pytest.fixture(scope="module")
def can_dump(script):
    require_py_spy(script)


def live_app(mapping: dict[int, int], **kw) -> GpuTuiApp:
    return GpuTuiApp(
        source=ReplayOntoChildren(SPIN, mapping), interval=FROZEN, watch_terminal=False, config=REAL, **kw
    )


def test_P_on_a_live_process_shows_its_stack_and_w_saves_a_private_file(
    can_dump, script, children, tmp_path, monkeypatch
) -> None:
    kid = start_waiter(script, children)
    monkeypatch.chdir(tmp_path)

    async def go():
        app = live_app({SPIN_PID: kid.pid}, readonly=True)  # read-only sessions read stacks
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 12)
            await into_list(pilot)
            await pilot.press("P")
            await wait_for(pilot, lambda: isinstance(app.screen, StacksScreen))
            screen = app.screen
            assert "dumping 1 process…" in text(app) or screen.done
            await wait_for(pilot, lambda: screen.done, timeout=60)
            await pilot.pause()
            shown = text(app)
            assert "wait_here" in shown and f":{WAIT_LINE}" in shown
            await pilot.press("w")
            await wait_for(pilot, lambda: screen.saved is not None)
            saved = screen.saved
            assert saved.parent == tmp_path and saved.name.startswith("gputui-stacks-")
            assert stat.S_IMODE(saved.stat().st_mode) == 0o600
            assert "wait_here" in saved.read_text()
            assert str(saved) in notes(app)
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, StacksScreen))

    run(go())


def test_stacks_say_plainly_why_one_is_missing(can_dump, script, children, monkeypatch) -> None:
    kid = start_waiter(script, children)
    os.kill(kid.pid, signal.SIGSTOP)
    wait_state(kid.pid, "T")

    async def go():
        app = live_app({SPIN_PID: kid.pid})
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 12)
            await into_list(pilot)
            await pilot.press("P")
            await wait_for(pilot, lambda: isinstance(app.screen, StacksScreen) and app.screen.done, 60)
            await pilot.pause()
            assert "stopped" in text(app)
            await pilot.press("escape")
            monkeypatch.setattr(StacksScreen, "py_spy", None)  # a machine without py-spy
            os.kill(kid.pid, signal.SIGCONT)
            await pilot.press("P")
            await wait_for(pilot, lambda: isinstance(app.screen, StacksScreen) and app.screen.done, 60)
            await pilot.pause()
            assert "py-spy is not installed" in text(app) and "install py-spy" in text(app)

    run(go())


def test_esc_while_dumping_cancels_and_leaves_no_py_spy_child(can_dump, script, children) -> None:
    kids = [start_waiter(script, children) for _ in range(4)]

    async def go():
        app = live_app({SPIN_PID: kids[0].pid})
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 12)
            screen = StacksScreen([(k.pid, None) for k in kids], "four children")
            await app.push_screen(screen)
            await pilot.press("escape")  # at once: the dumps are running
            await wait_for(pilot, lambda: not isinstance(app.screen, StacksScreen))
            bg = screen.background
            assert bg is not None
            await wait_for(pilot, lambda: not bg.thread.is_alive(), timeout=30)
            assert py_spy_children() == []

    run(go())


# ---- 5: g ---------------------------------------------------------------------------------


async def select(pilot, pid: int) -> None:
    await into_list(pilot)
    t = pilot.app.query_one("#overview").processes.table
    while t.current is None or t.current.proc.pid != pid:
        before = t.cursor
        await pilot.press("down")
        assert t.cursor != before, f"PID {pid} is not in the list"


def test_g_on_a_live_process_diagnoses_its_interpreter_with_its_environment(children) -> None:
    kid = start_child("diagpid", env={**os.environ, "CUDA_VISIBLE_DEVICES": "bogus-26"})
    children.append(kid)

    async def go():
        app = live_app({SPIN_PID: kid.pid})
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 12)
            await select(pilot, kid.pid)
            await pilot.press("g")
            pane = app.query_one("#diagnostics")
            await wait_for(pilot, lambda: getattr(pane, "target", None) is not None)
            assert pane.target.pid == kid.pid
            assert pane.target.env["CUDA_VISIBLE_DEVICES"] == "bogus-26"
            assert pane.python == sys.executable  # the path it runs by (the test's venv), not the exe
            assert os.readlink(f"/proc/{kid.pid}/exe") == os.path.realpath(sys.executable)
            await wait_for(pilot, lambda: f"interpreter: PID {kid.pid}'s" in text(app))
            assert f"/proc/{kid.pid}/exe" in text(app)  # (a venv's python: tests/test_diag_venv.py)
            assert "CUDA_VISIBLE_DEVICES" in text(app)

    run(go())


def test_g_in_a_serve_session_never_diagnoses_the_selected_process(children) -> None:
    kid = start_child("servepid")
    children.append(kid)

    async def go():
        app = live_app({SPIN_PID: kid.pid}, serve_session=True, diag_python=sys.executable)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 12)
            await select(pilot, kid.pid)
            await pilot.press("g")
            pane = app.query_one("#diagnostics")
            await wait_for(pilot, lambda: getattr(pane, "target", None) is not None)
            assert pane.target.pid is None and pane.target.env is None
            assert pane.python == sys.executable
            await wait_for(pilot, lambda: "gputui serve's --python" in text(app))

    run(go())


def test_g_on_a_process_of_a_replay_says_it_is_another_machines_and_uses_the_default() -> None:
    async def go():
        app = replay_app(SPIN, config=REAL)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 12)
            await select(pilot, SPIN_PID)
            await pilot.press("g")
            pane = app.query_one("#diagnostics")
            await wait_for(pilot, lambda: getattr(pane, "target", None) is not None)
            assert pane.target.pid is None
            assert f"PID {SPIN_PID} is in a recording" in notes(app)
            assert "python3 on PATH" in pane.target.why or "gputui's own" in pane.target.why
            await wait_for(pilot, lambda: "interpreter:" in text(app))

    run(go())


# ---- issue 32: where the ranks were, in the TUI (the real 4x H100 deadlock) ----------------------


def test_the_mismatch_is_told_on_the_overview_and_the_job_view_says_where_each_rank_was(tmp_path) -> None:
    """The real deadlock of the 4x H100 matrix (rank 0 all_reduce, rank 1 recv) with the
    stacks captured beside it put in the recording at their tick (derived): replayed, the
    Overview says both wait, where; J lists where each rank was.  A replay reads no stack."""
    from matrix_support import slot, with_stacks

    from gputui.telemetry.recording import RecordingWriter, read_recording

    s = slot("3-mismatch-slow-gpu")
    path = tmp_path / "mismatch-stacks.jsonl.gz"
    header = read_recording(s.path / "recording.jsonl.gz")[0]
    with RecordingWriter(path, header.machine, header.interval, note=header.note) as w:
        for t in with_stacks(s):
            w.write(t)
    said = "stuck: mismatched collectives: rank 0 waits in synchronize (scenario.py:128), rank 1 in recv"

    async def go():
        app = replay_app(path, config=REAL)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 50)
            assert app.hub.stacks is None  # a replay's snapshots carry their own
            await wait_for(pilot, lambda: said in text(app))
            await into_list(pilot)  # the first row: rank 0 of job a (GPU 0)
            await pilot.press("J")
            await wait_for(pilot, lambda: isinstance(app.screen, JobScreen))
            await pilot.pause()
            shown = text(app)
            assert "where the ranks were" in shown
            assert "rank 1 (PID 2227, GPU 1): collective: recv (scenario.py:124)" in shown
            assert "rank 0 (PID 2226, GPU 0): gpu sync: synchronize (scenario.py:128)" in shown

    run(go())
