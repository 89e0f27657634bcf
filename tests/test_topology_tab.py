"""The Topology tab, card selection and the GPU detail view, driven with real key presses
against replays of the real recordings (and the derived 8-GPU and MIG files, labelled)."""

from __future__ import annotations

import asyncio
import re
import threading
from pathlib import Path

import pytest
from conftest import DERIVED, H200_X1, H200_X2, NOGPU, replay_app, run_to_tick, screen_lines, wait_for

from gputui.telemetry.model import MachineInfo, Topology
from gputui.telemetry.recording import ReplaySource, read_recording
from gputui.telemetry.topology import link_matrix
from gputui.ui.app import GpuTuiApp
from gputui.ui.detail import screen as detail_module
from gputui.ui.detail.screen import DetailCharts, GpuDetailScreen
from gputui.ui.overview.widgets import GpuBoard
from gputui.ui.topology.pane import TopologyPane, TopologyView

MIXED = DERIVED / "h200x8-mixed-topology.jsonl.gz"
MIG = DERIVED / "h200x2-mig.jsonl.gz"


def run(coro):
    return asyncio.run(coro)


@pytest.fixture(autouse=True)
def _no_cuda_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)


def screen_text(app) -> str:
    return "\n".join(screen_lines(app))


# ---- the tab -------------------------------------------------------------------------------


def test_tab_key_shows_the_matrix_of_the_recorded_machine() -> None:
    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(120, 40)) as pilot:
            await run_to_tick(pilot, 60)
            assert "NV18" not in screen_text(app)
            await pilot.press("3")
            await wait_for(pilot, lambda: "NV18" in screen_text(app))
            text = screen_text(app)
            assert re.search(r"GPU0\s+X\s+NV18\s+0-31", text)
            assert re.search(r"GPU1\s+NV18\s+X\s+0-31", text)
            assert "the number of NVLinks" in text  # the legend in words
            assert "✓ read, write and atomics work between every pair" in text
            assert "Gen5 x16 = max" in text
            assert "v4.0 18→NVSwitch" in text
            assert isinstance(app.focused, TopologyView)
            await pilot.press("1")
            await pilot.pause()
            assert isinstance(app.focused, GpuBoard)

    run(go())


def test_mixed_eight_gpus_are_legible_at_120x40() -> None:
    """Derived 8-GPU machine (invented topology): the whole matrix fits in 120 columns, on
    screen at once, and reads back as the classifier's matrix."""
    header, _ = read_recording(MIXED)
    expected = link_matrix(header.machine)

    async def go():
        app = replay_app(MIXED)
        async with app.run_test(size=(120, 40)) as pilot:
            await run_to_tick(pilot, 60)
            await pilot.press("3")
            await wait_for(pilot, lambda: "NV4" in screen_text(app))
            lines = screen_lines(app)
            head = next(k for k, line in enumerate(lines) if re.match(r"\s+GPU0\s+GPU1", line))
            assert lines[head].split()[:8] == [f"GPU{i}" for i in range(8)]
            assert "CPU affinity" in lines[head]
            for i in range(8):
                cells = lines[head + 1 + i].lstrip("▶ ").split()
                assert cells[0] == f"GPU{i}"
                assert cells[1:9] == expected[i]
                assert cells[9] == ("0-63" if i < 4 else "64-127")  # CPU affinity
                assert cells[10] == ("0" if i < 4 else "1")  # NUMA node
            text = "\n".join(lines)
            for cls, words in (("NV#", "NVLinks"), ("PIX", "one PCIe switch"), ("SYS", "across CPU sockets")):
                assert re.search(rf"{re.escape(cls)}\s+.*{words}", text), cls
            assert "P2P not possible between 16 pairs" in text
            # nothing is cut: every line fits the terminal and the matrix rows end in affinity
            assert all(len(line) <= 120 for line in lines)

    run(go())


def test_select_a_gpu_and_open_its_details_from_the_tab() -> None:
    async def go():
        app = replay_app(MIXED)
        async with app.run_test(size=(120, 40)) as pilot:
            await run_to_tick(pilot, 30)
            await pilot.press("3")
            await pilot.pause()
            pane = app.query_one(TopologyPane)
            await pilot.press("down", "down", "j")
            assert pane.selected == 3
            await pilot.press("up", "k")
            assert pane.selected == 1
            links = app.query_one("TopologyLinks")
            await wait_for(pilot, lambda: any("NVLinks of GPU1" in line for line in links.plain_lines()))
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, GpuDetailScreen))
            assert app.screen.index == 1
            assert "GPU 1 NVIDIA H200" in screen_text(app)
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, GpuDetailScreen))
            assert isinstance(app.focused, TopologyView)

    run(go())


def test_cuda_view_shows_what_cuda_would_number(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-e203cfca,0")

    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(120, 40)) as pilot:
            await run_to_tick(pilot, 10)
            await pilot.press("3")
            await pilot.pause()
            assert "CUDA_VISIBLE_DEVICES=" not in screen_text(app)
            await pilot.press("a")
            await wait_for(pilot, lambda: "CUDA_VISIBLE_DEVICES=" in screen_text(app))
            text = screen_text(app)
            assert "CUDA_VISIBLE_DEVICES='GPU-e203cfca,0'" in text
            assert "cuda:0 = GPU 1" in text
            # a UUID list ends at the index: only GPU 1
            assert "'0' is not a GPU UUID" in text
            assert re.search(r"GPU0\s+—", text)
            assert re.search(r"GPU1\s+cuda:0", text)
            await pilot.press("a")
            await wait_for(pilot, lambda: "CUDA_VISIBLE_DEVICES=" not in screen_text(app))

    run(go())


class LiveLikeSource(ReplaySource):
    """A recording that, like NvmlSource, has no topology in its MachineInfo and reads it
    on request, noting the thread it was read on."""

    live = True

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.read_on: list[str] = []
        self.release = threading.Event()

    def open(self) -> MachineInfo:
        m = self.header.machine
        return MachineInfo(m.system, m.devices, None)

    def read_topology(self) -> Topology | None:
        self.read_on.append(threading.current_thread().name)
        self.release.wait(10)
        return self.header.machine.topology


def test_live_topology_is_read_once_off_the_ui_thread() -> None:
    async def go():
        source = LiveLikeSource(H200_X2)
        app = GpuTuiApp(source=source, interval=3600.0, watch_terminal=False)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.snapshot is not None)
            assert source.read_on == []  # not read until the tab is shown
            await pilot.press("3")
            await wait_for(pilot, lambda: "reading the topology from NVML" in screen_text(app))
            source.release.set()
            await wait_for(pilot, lambda: "NV18" in screen_text(app))
            assert len(source.read_on) == 1
            assert source.read_on[0] != threading.main_thread().name
            await pilot.press("1", "3", "1", "3")
            app.poller.step(1)
            await pilot.pause(0.1)
            assert len(source.read_on) == 1  # once

    run(go())


# ---- card selection on the overview --------------------------------------------------------


def test_arrow_keys_select_a_card_and_enter_opens_it() -> None:
    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 60)
            board = app.query_one(GpuBoard)
            assert board.selected is None
            await pilot.press("right")  # the first key selects the first GPU
            assert board.selected == 0
            await pilot.press("right")
            assert board.selected == 1
            await pilot.press("right")  # the edge: stays
            assert board.selected == 1
            await pilot.press("h")
            assert board.selected == 0
            await pilot.press("down")  # two cards side by side: no card below
            assert board.selected == 0
            await pilot.press("l", "enter")
            await wait_for(pilot, lambda: isinstance(app.screen, GpuDetailScreen))
            assert app.screen.index == 1
            text = screen_text(app)
            assert "GPU 1 NVIDIA H200" in text
            assert "GPU-e203cfca-3052-f0b7-8cb2-1efea8fe0c7e" in text
            assert "RECORDED SESSION" in text  # the banner stays on every screen
            await pilot.press("right")  # the next GPU (wraps)
            assert app.screen.index == 0
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, GpuDetailScreen))
            assert isinstance(app.focused, GpuBoard)

    run(go())


def test_compact_layout_moves_one_row_per_key() -> None:
    async def go():
        app = replay_app(DERIVED / "h200x16-nvswitch-256procs.jsonl.gz")
        async with app.run_test(size=(80, 24)) as pilot:
            await run_to_tick(pilot, 5)
            board = app.query_one(GpuBoard)
            assert board.plan is not None
            assert board.plan.compact
            await pilot.press("down")
            for _ in range(12):
                await pilot.press("j")
            assert board.selected == 12
            await pilot.pause()
            # the selected row scrolled into view
            assert re.search(r"^12 ", "\n".join(screen_lines(app)), re.M)
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, GpuDetailScreen))
            assert app.screen.index == 12

    run(go())


def test_enter_without_gpus_does_nothing() -> None:
    async def go():
        app = replay_app(NOGPU)
        async with app.run_test(size=(100, 30)) as pilot:
            await run_to_tick(pilot, 3)
            await pilot.press("enter", "down", "3")
            await pilot.pause()
            assert not isinstance(app.screen, GpuDetailScreen)
            assert "No GPUs" in screen_text(app)

    run(go())


# ---- the detail view ---------------------------------------------------------------------------


def test_detail_follows_ticks_and_rebuilds_charts_on_a_slow_cadence(monkeypatch: pytest.MonkeyPatch) -> None:
    async def go():
        app = replay_app(H200_X1)
        async with app.run_test(size=(120, 40)) as pilot:
            await run_to_tick(pilot, 50)
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, GpuDetailScreen))
            charts = app.screen.query_one(DetailCharts)
            assert charts.builds >= 1
            builds = charts.builds
            monkeypatch.setattr(detail_module, "CHART_PERIOD", 3600.0)
            for tick in (51, 52, 53):
                app.poller.step(1)
                await wait_for(pilot, lambda t=tick: f"{t}/151" in screen_text(app))
            assert charts.builds == builds  # the facts followed, the charts did not
            monkeypatch.setattr(detail_module, "CHART_PERIOD", 0.0)
            app.poller.step(1)
            await wait_for(pilot, lambda: charts.builds > builds)

    run(go())


def test_a_tab_key_in_the_detail_view_goes_to_that_tab() -> None:
    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(120, 40)) as pilot:
            await run_to_tick(pilot, 10)
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, GpuDetailScreen))
            await pilot.press("3")
            await wait_for(pilot, lambda: not isinstance(app.screen, GpuDetailScreen))
            assert app.current_pane().PANE_ID == "topology"

    run(go())


def test_mig_gpu_detail_shows_instances_and_na_utilization() -> None:
    async def go():
        app = replay_app(MIG)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 20)
            await pilot.press("right", "right", "enter")
            await wait_for(pilot, lambda: isinstance(app.screen, GpuDetailScreen))
            facts = app.screen.query_one("DetailFacts")
            text = "\n".join(facts.plain_lines())
            assert re.search(r"MIG mode\s+enabled", text)
            assert "3g.71gb" in text
            assert "per-process utilization: N/A on MIG" in text
            assert "SM  N/A" in text

    run(go())


def test_detail_of_every_recording_never_crashes() -> None:
    async def go(path: Path):
        app = replay_app(path)
        async with app.run_test(size=(100, 30)) as pilot:
            await run_to_tick(pilot, 3)
            n = len(app.info.devices)
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, GpuDetailScreen))
            for _ in range(n):
                await pilot.press("right")
                await pilot.pause()
            await pilot.press("end")
            await pilot.pause()
            assert app.screen.index == 0

    for path in (H200_X1, DERIVED / "h200x8-nvswitch-240procs.jsonl.gz"):
        run(go(path))


def test_every_field_missing_reads_na_on_every_screen(tmp_path: Path) -> None:
    """The real 1-GPU recording with every optional field removed (devices, samples,
    processes, topology): what an old driver or an odd GPU gives.  Nothing crashes, and
    the screens say N/A."""
    import dataclasses

    from gputui.telemetry.model import DeviceInfo, GpuProcess, GpuSample
    from gputui.telemetry.recording import RecordingWriter

    def blank(obj, keep):
        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.name in keep}
        return type(obj)(**fields)

    header, ticks = read_recording(H200_X1)
    dev = blank(header.machine.devices[0], {"index", "name"})
    machine = dataclasses.replace(header.machine, devices=(dev,), topology=None)
    path = tmp_path / "blank.jsonl"
    with RecordingWriter(
        path, machine, header.interval, note="the real 1-GPU recording, fields removed"
    ) as w:
        for snap in ticks[:20]:
            gpus = tuple(blank(g, {"index"}) for g in snap.gpus)
            procs = tuple(blank(p, {"gpu_index", "pid"}) for p in snap.processes)
            w.write(dataclasses.replace(snap, gpus=gpus, processes=procs))
    assert isinstance(dev, DeviceInfo)
    assert GpuSample(index=0) == read_recording(path)[1][0].gpus[0]
    assert all(isinstance(p, GpuProcess) for p in read_recording(path)[1][0].processes)

    async def go():
        app = replay_app(path)
        async with app.run_test(size=(120, 40)) as pilot:
            await run_to_tick(pilot, 10)
            await pilot.press("3")
            await pilot.pause()
            text = screen_text(app)
            assert re.search(r"GPU0\s+X\s+N/A", text)
            assert "NVML gave no topology" in text
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, GpuDetailScreen))
            facts = "\n".join(app.screen.query_one("DetailFacts").plain_lines())
            assert re.search(r"UUID\s+N/A", facts)
            assert re.search(r"SMs\s+N/A", facts)
            assert "NVML reports no clock-event reasons" in facts
            assert "not reported by this GPU" in facts
            await pilot.press("end")
            await pilot.pause()
            charts = "\n".join(app.screen.query_one(DetailCharts).plain_lines())
            assert "N/A: no samples" in charts
            await pilot.press("escape", "1")
            await pilot.pause()
            assert "N/A" in screen_text(app)

    run(go())


# ---- many GPUs -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def many_gpus(tmp_path_factory) -> Path:
    """A DERIVED recording of 64 GPUs (`bench/derive.py scale`, from the real 2x H200 one;
    its header says so), made here rather than kept in the repository.  (The 256-GPU case was a
    one-off benchmark, `git show b7dc59b:bench/bench_topology_scale.py`; 64 are enough for the worker.)"""
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("derived") / "h200x64-derived.jsonl.gz"
    script = Path(__file__).resolve().parents[1] / "bench" / "derive.py"
    args = ["scale", "--gpus", "64", "--processes", "64", "--ticks", "4", "--out", str(out)]
    subprocess.run([sys.executable, str(script), *args], check=True, capture_output=True, timeout=300)
    return out


def test_many_gpus_matrices_worked_out_off_the_ui_thread_and_q_answers(many_gpus, monkeypatch) -> None:
    """256 GPUs froze the UI for over a minute on opening the tab (the matrix is quadratic,
    and each pair rescanned every GPU).  The quadratic work runs on a worker thread; the UI
    thread only draws the cells that fit; `q` quits while the worker runs."""
    from gputui.telemetry import topology as topo
    from gputui.ui.topology import lines as topology_lines

    on_ui: list[str] = []
    main = threading.main_thread()
    for module, name in ((topology_lines, "link_matrix"), (topology_lines, "p2p_problems")):
        real = getattr(module, name)

        def spy(*a, _real=real, _name=name, **kw):
            if threading.current_thread() is main:
                on_ui.append(_name)
            return _real(*a, **kw)

        monkeypatch.setattr(module, name, spy)
    assert ReplaySource(many_gpus).header.derived  # labelled derived

    async def go():
        app = replay_app(many_gpus)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 2)
            await pilot.press("3")
            pane = app.query_one(TopologyPane)
            static = app.query_one("#topology-static")
            await wait_for(pilot, lambda: not static.preparing, timeout=300)
            await wait_for(pilot, lambda: re.search(r"GPU0\s+X\s+N18\s+N18", screen_text(app)), timeout=30)
            info = pane.info
            assert info is not None and len(info.devices) == 64
            # the matrix drawn is the one the (unchanged) rule gives, for the cells shown
            classes = topo.link_matrix(info, pane.topology)
            assert classes[0][1] == classes[1][0] == "NV18"
            await pilot.press("down")
            await wait_for(pilot, lambda: "▶GPU1" in screen_text(app).replace(" ", ""))
        return app

    run(go())
    assert on_ui == []

    # `q` while the worker is busy (held busy here until the app has quit)
    from gputui.ui.topology import pane as topology_ui

    release = threading.Event()
    monkeypatch.setattr(topology_ui, "warm", lambda info, topology: release.wait(60))

    async def quit_while_preparing():
        app = replay_app(many_gpus)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 2)
            await pilot.press("3")
            static = app.query_one("#topology-static")
            await wait_for(pilot, lambda: "working out the links of 64 GPUs" in screen_text(app))
            assert static.preparing
            await pilot.press("q")
            assert app.return_code == 0  # answered while the worker is still busy
            assert not release.is_set()
            release.set()  # (Textual waits for its workers before it returns)
        return app

    try:
        app = run(quit_while_preparing())
    finally:
        release.set()
    assert app.return_code == 0


def test_a_prepare_that_ends_after_the_tab_is_gone_is_ignored(many_gpus, monkeypatch) -> None:
    """The worker can finish after the app has begun to quit (seen on a real H100: the
    tab's widgets were gone and its thread died with NoMatches).  Its result must then be
    dropped quietly, never raised from the thread."""
    from gputui.ui.topology import pane as topology_ui

    release = threading.Event()
    monkeypatch.setattr(topology_ui, "warm", lambda info, topology: release.wait(60))
    panes: list[TopologyPane] = []

    async def go():
        app = replay_app(many_gpus)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 2)
            await pilot.press("3")
            await wait_for(pilot, lambda: "working out the links of 64 GPUs" in screen_text(app))
            panes.append(app.query_one(TopologyPane))
            await pilot.press("q")
        return app

    try:
        run(go())
    finally:
        release.set()
    pane = panes[0]
    pane._prepared_now(pane.info, pane.topology)  # the worker's late call: no exception
