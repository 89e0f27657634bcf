"""SVG snapshots of each screen, rendered from recordings of real GPUs at a fixed tick.

Update after an intended visual change with `pytest tests/test_snapshots.py --snapshot-update`
and look at the report before committing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import (
    DERIVED,
    FIXTURES,
    FROZEN,
    H100_GPM,
    H100_JOB,
    H200_X1,
    H200_X2,
    NOGPU,
    X8_240,
    X16_256,
    replay_app,
    run_to_tick,
    wait_for,
)
from gpm_support import FP32, phase_ticks

from gputui.config import Config
from gputui.telemetry.alerts import AlertConfig, ThresholdRule
from gputui.ui.app import GpuTuiApp

MIXED = DERIVED / "h200x8-mixed-topology.jsonl.gz"
MIG = DERIVED / "h200x2-mig.jsonl.gz"


def at_tick(tick: int, press: tuple[str, ...] = ()):
    async def run_before(pilot) -> None:
        await run_to_tick(pilot, tick)
        for key in press:
            await pilot.press(key)
        await pilot.pause()

    return run_before


def test_overview_2gpu_160x50(snap_compare):
    assert snap_compare(replay_app(H200_X2), terminal_size=(160, 50), run_before=at_tick(60))


def test_overview_2gpu_80x24(snap_compare):
    assert snap_compare(replay_app(H200_X2), terminal_size=(80, 24), run_before=at_tick(60))


def test_overview_1gpu_80x24(snap_compare):
    assert snap_compare(replay_app(H200_X1), terminal_size=(80, 24), run_before=at_tick(60))


def test_overview_1gpu_160x50(snap_compare):
    assert snap_compare(replay_app(H200_X1), terminal_size=(160, 50), run_before=at_tick(90))


@pytest.mark.skipif(not X8_240.exists(), reason="derived fixture missing")
def test_overview_8gpu_160x50(snap_compare):
    assert snap_compare(replay_app(X8_240), terminal_size=(160, 50), run_before=at_tick(40))


@pytest.mark.skipif(not X16_256.exists(), reason="derived fixture missing")
def test_overview_16gpu_80x24(snap_compare):
    assert snap_compare(replay_app(X16_256), terminal_size=(80, 24), run_before=at_tick(40))


def test_overview_2gpu_light_theme_120x40(snap_compare):
    """`theme = "light"`: Textual's light base and gputui's light palette, one registered theme."""
    from gputui.config import UiConfig

    app = replay_app(H200_X2, config=Config(ui=UiConfig(theme="light")))
    assert snap_compare(app, terminal_size=(120, 40), run_before=at_tick(60))


# ---- GPM activity and efficiency hints (real recordings with GPM) --------------------------

X2_GPM = FIXTURES / "h200-x2-gpm" / "recording.jsonl.gz"


def test_overview_gpm_h100_float32_160x50(snap_compare):
    """The H100 under a float32 matmul: SM busy, tensor cores idle, the TF32 hint."""
    tick = phase_ticks(FP32)[3].seq
    assert snap_compare(replay_app(H100_GPM), terminal_size=(160, 50), run_before=at_tick(tick))


def test_overview_gpm_2gpu_160x50(snap_compare):
    """bf16 training on GPU 0, float32 on GPU 1: the tensor figure and the hint differ."""
    assert snap_compare(replay_app(X2_GPM), terminal_size=(160, 50), run_before=at_tick(40))


def test_overview_gpm_2gpu_80x24(snap_compare):
    assert snap_compare(replay_app(X2_GPM), terminal_size=(80, 24), run_before=at_tick(40))


def test_detail_gpm_h100_float32_160x50(snap_compare):
    tick = phase_ticks(FP32)[3].seq
    assert snap_compare(
        replay_app(H100_GPM), terminal_size=(160, 50), run_before=at_tick(tick, press=("enter",))
    )


def test_help_screen(snap_compare):
    assert snap_compare(
        replay_app(H200_X2), terminal_size=(100, 30), run_before=at_tick(2, press=("question_mark",))
    )


def test_chart_picker_over_the_cards(snap_compare):
    """`C`: the charts ticked as they are (power off, temp on), the cards behind it."""
    keys = ("C", "down", "down", "space", "down", "space")
    assert snap_compare(replay_app(H200_X2), terminal_size=(120, 40), run_before=at_tick(60, press=keys))


def test_no_gpu_panel(snap_compare):
    async def run_before(pilot) -> None:
        await run_to_tick(pilot, 5)
        await wait_for(pilot, lambda: pilot.app.query_one("NoGpuPanel").display)
        await pilot.pause()

    assert snap_compare(replay_app(NOGPU), terminal_size=(100, 30), run_before=run_before)


# ---- the Processes tab -------------------------------------------------------------------


@pytest.mark.skipif(not X8_240.exists(), reason="derived fixture missing")
def test_processes_8gpu_160x50(snap_compare):
    assert snap_compare(replay_app(X8_240), terminal_size=(160, 50), run_before=at_tick(40, press=("2",)))


def test_processes_2gpu_80x24(snap_compare):
    assert snap_compare(replay_app(H200_X2), terminal_size=(80, 24), run_before=at_tick(60, press=("2",)))


def test_processes_tree_and_job_column_160x30(snap_compare):
    """A real H100: the torchrun-like job as a tree under its launcher (`v`), and the JOB
    column of the process in a Slurm-like cgroup."""
    assert snap_compare(
        replay_app(H100_JOB), terminal_size=(160, 30), run_before=at_tick(8, press=("2", "v"))
    )


def test_processes_grouped_by_job_scrolled_120x24(snap_compare):
    """The same, flat, grouped by job (`j`), the commands scrolled sideways (`→`)."""
    keys = ("2", "o", "right")
    assert snap_compare(replay_app(H100_JOB), terminal_size=(120, 24), run_before=at_tick(8, press=keys))


def test_processes_sorted_filtered_160x50(snap_compare):
    """Sorted by SM % (largest first), only GPU 1, searching "ddp"."""
    keys = ("2", "s", "f", "f", "slash", *"ddp", "enter")
    assert snap_compare(replay_app(X8_240), terminal_size=(160, 50), run_before=at_tick(40, press=keys))


def test_kill_dialog(snap_compare):
    """The confirmation, as `T` shows it for the idle 8 GiB holder of the real 2x H200
    recording.  A replay's PIDs are not this machine's, so `T` is disabled there; the dialog
    is opened with the recorded rows instead (tests/test_processes.py opens it with `T` on
    real child processes, whose PIDs differ on every run)."""
    from gputui.ui.processes.pane import ProcessesPane
    from gputui.ui.processes.screens import SignalDialog

    async def run_before(pilot) -> None:
        await at_tick(60, press=("2", "down", "down"))(pilot)  # GPU memory order: the holder is third
        pane = pilot.app.query_one("#processes", ProcessesPane).list
        targets, problems = pane._targets([pane.table.current])
        assert not problems
        await pilot.app.push_screen(SignalDialog(targets, "TERM"))
        await pilot.pause()

    assert snap_compare(replay_app(H200_X2), terminal_size=(120, 30), run_before=run_before)


def test_process_detail(snap_compare):
    assert snap_compare(
        replay_app(H200_X2), terminal_size=(120, 36), run_before=at_tick(60, press=("2", "enter"))
    )


HOT = Config(alerts=AlertConfig(temperature=ThresholdRule(True, 55.0, 50.0, 0.0)))
"""Temperature alerts at 55 °C: the DDP run heats both H200s to 58-65 °C."""


def test_overview_2gpu_alerts_160x50(snap_compare):
    assert snap_compare(replay_app(H200_X2, config=HOT), terminal_size=(160, 50), run_before=at_tick(60))


# ---- topology tab and GPU detail view ---------------------------------------------------------


@pytest.fixture
def no_cuda_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """The CUDA view shows this shell's variables: make them the same for every run."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    return monkeypatch


def test_topology_2gpu_160x50(snap_compare, no_cuda_env):
    assert snap_compare(replay_app(H200_X2), terminal_size=(160, 50), run_before=at_tick(60, press=("3",)))


def test_topology_8gpu_mixed_120x40(snap_compare, no_cuda_env):
    assert snap_compare(replay_app(MIXED), terminal_size=(120, 40), run_before=at_tick(60, press=("3",)))


def test_topology_cuda_view_80x24(snap_compare, no_cuda_env):
    no_cuda_env.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    no_cuda_env.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    assert snap_compare(replay_app(H200_X2), terminal_size=(80, 24), run_before=at_tick(60, press=("3", "a")))


def test_detail_2gpu_160x50(snap_compare):
    assert snap_compare(
        replay_app(H200_X2), terminal_size=(160, 50), run_before=at_tick(100, press=("enter",))
    )


def test_detail_2gpu_charts_160x50(snap_compare):
    press = ("right", "right", "enter", "end")
    assert snap_compare(replay_app(H200_X2), terminal_size=(160, 50), run_before=at_tick(100, press=press))


def test_detail_1gpu_120x40(snap_compare):
    assert snap_compare(
        replay_app(H200_X1), terminal_size=(120, 40), run_before=at_tick(90, press=("enter",))
    )


def test_detail_mig_160x50(snap_compare):
    press = ("right", "right", "enter", "pagedown")
    assert snap_compare(replay_app(MIG), terminal_size=(160, 50), run_before=at_tick(20, press=press))


def test_overview_selected_card_160x50(snap_compare):
    assert snap_compare(
        replay_app(H200_X2), terminal_size=(160, 50), run_before=at_tick(60, press=("right", "right"))
    )


# ---- the Diagnostics tab -----------------------------------------------------------------


def recorded_diagnosis(events_file: Path, tick: int):
    """The Diagnostics tab showing a real diagnosis recorded by bench/record_diag.py: its
    events go through the same Diagnosis and the same messages as a live run's do."""

    async def run_before(pilot) -> None:
        from gputui.diag.verdicts import Diagnosis
        from gputui.ui.diagnostics.pane import DiagnosisDone, FindingArrived

        await run_to_tick(pilot, tick)
        await pilot.press("4")
        pane = await pilot.app.load_pane("diagnostics")
        lines = [json.loads(line) for line in events_file.read_text().splitlines()]
        pane.python, pane.python_label = lines[0]["executable"], "a recorded run"
        pane._generation += 1
        pane.diagnosis = diagnosis = Diagnosis(python=pane.python)
        for event in lines[:-1]:
            finding = diagnosis.feed(event)
            if finding is not None:
                pane.post_message(FindingArrived(finding, pane._generation))
        diagnosis.finish(lines[-1]["child"])
        pane.post_message(DiagnosisDone(diagnosis, pane._generation))
        await wait_for(
            pilot, lambda: len(pilot.app.query_one("FindingsView").findings) == len(diagnosis.findings)
        )
        await pilot.pause()

    return run_before


def test_diagnostics_h200_160x50(snap_compare):
    """Every check passing on a real H200 (torch 2.11+cu130)."""
    events = H200_X1.parent / "diag-events.jsonl"
    assert snap_compare(
        replay_app(H200_X1), terminal_size=(160, 50), run_before=recorded_diagnosis(events, 30)
    )


def test_diagnostics_cpu_torch_120x40(snap_compare):
    """A machine without a driver and a CPU build of torch: what fails, and the first fix."""
    events = NOGPU.parent / "diag-events-cpu-torch.jsonl"
    assert snap_compare(replay_app(NOGPU), terminal_size=(120, 40), run_before=recorded_diagnosis(events, 5))


def demo_job_app() -> GpuTuiApp:
    """`gputui --demo-job` as a new user starts it: no config file (the defaults), the real
    stuck NCCL job judged with its header's own waits, which the banner names."""
    from gputui.cli import DEMO_JOB_RECORDING, DEMO_JOB_START, open_tui_replay
    from gputui.config import LoadedConfig

    opened = open_tui_replay(DEMO_JOB_RECORDING, DEMO_JOB_START, LoadedConfig(Config(), None))
    assert opened is not None
    source, config, note = opened
    return GpuTuiApp(source=source, interval=FROZEN, watch_terminal=False, config=config, judged_with=note)


def test_overview_stuck_job_160x50(snap_compare):
    """The real torchrun job on two H200s with rank 1 SIGSTOPped: the job's line names it,
    GPU 0's card says it waits in a collective (the README's picture; `gputui --demo-job`)."""
    from gputui.cli import DEMO_JOB_START

    assert snap_compare(demo_job_app(), terminal_size=(160, 50), run_before=at_tick(DEMO_JOB_START))


def test_overview_stuck_job_80x24(snap_compare):
    """The same at 80x24: the verdict line keeps who and what whole (rank, PID, GPU, "the
    one the others wait for"); the job's label gives way first."""
    from gputui.cli import DEMO_JOB_START

    assert snap_compare(demo_job_app(), terminal_size=(80, 24), run_before=at_tick(DEMO_JOB_START))


def test_job_view_stuck_job_160x50(snap_compare):
    """J on a rank of that job: the ranks side by side, the verdict, the energy."""
    from gputui.cli import DEMO_JOB_START

    app = demo_job_app()
    assert snap_compare(app, terminal_size=(160, 50), run_before=at_tick(DEMO_JOB_START, ("tab", "J")))


def test_job_view_nccl_deadlock_160x50(snap_compare, tmp_path):
    """J on job a of the real deadlock on 4 H100s (rank 0 in all_reduce, rank 1 in recv), its
    captured RAS answers merged in (derived): NCCL's own view, rank 1 one AllReduce behind."""
    from ras_support import with_ras

    app = replay_app(with_ras("3-mismatch-slow-gpu", tmp_path / "mismatch-ras.jsonl.gz"))
    assert snap_compare(app, terminal_size=(160, 50), run_before=at_tick(45, ("tab", "J")))


def test_job_view_stuck_job_80x24(snap_compare):
    """The same at 80x24: the verdict's whole reason (wrapped) and every column of the ranks."""
    from gputui.cli import DEMO_JOB_START

    app = demo_job_app()
    assert snap_compare(app, terminal_size=(80, 24), run_before=at_tick(DEMO_JOB_START, ("tab", "J")))


def test_overview_input_bound_h100_160x50(snap_compare):
    """A real DataLoader-bound loop on an H100: 4 workers at 100 % CPU, the GPU at 20 %."""
    app = replay_app(FIXTURES / "h100-input-bound" / "input-bound.jsonl.gz")
    assert snap_compare(app, terminal_size=(160, 50), run_before=at_tick(61))
