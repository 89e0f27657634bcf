"""The first frame is drawn once, complete: the Overview plans its cards for the room they
will have before the first layout (not for none, then again), and a relayout that changes
nothing repaints nothing.  (How fast it comes is a benchmark: bench/RESULTS.md.)"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from conftest import H200_X2, X8_240, replay_app, run_to_tick, screen_lines, wait_for
from textual import events
from textual.app import App, ComposeResult

from gputui.ui.overview.pane import OverviewPane
from gputui.ui.render import Line, S
from gputui.ui.widgets.lines import LineWidget


@pytest.mark.parametrize("size", [(80, 24), (160, 50), (220, 60)])
@pytest.mark.parametrize("path", [H200_X2, X8_240], ids=["2gpu", "8gpu"])
def test_the_pane_size_expected_before_the_first_layout_is_the_real_one(path, size):
    async def go():
        app = replay_app(path)
        async with app.run_test(size=size) as pilot:
            await run_to_tick(pilot, 2)
            pane = app.query_one(OverviewPane)
            await wait_for(pilot, lambda: pane.size.height > 0)
            return pane._expected_size(), tuple(pane.size)

    expected, real = asyncio.run(go())
    assert expected == real


class Fixed(LineWidget):
    def __init__(self) -> None:
        super().__init__()
        self.text = "GPU 0  99%"

    def build(self, width: int, height: int) -> list[Line]:
        return [[(self.text, S.value)], [("second line", S.label)]]


class One(App[None]):
    def compose(self) -> ComposeResult:
        yield Fixed()


def test_a_relayout_that_changes_nothing_sends_nothing():
    async def go():
        app = One()
        async with app.run_test(size=(40, 5)) as pilot:
            widget = app.query_one(Fixed)
            await wait_for(pilot, lambda: widget.size.height == 2)
            sent = widget.cells_sent
            widget.relayout()  # same lines, same width
            await pilot.pause()
            unchanged = widget.cells_sent - sent
            widget.text = "GPU 0  98%"
            widget.relayout()
            await pilot.pause()
            return unchanged, widget.cells_sent - sent, widget.plain_lines()

    unchanged, changed, lines = asyncio.run(go())
    assert unchanged == 0
    assert changed > 0 and lines[0].startswith("GPU 0  98%")


def test_the_no_gpu_explanation_still_scrolls_on_a_small_terminal():
    """The cards' container scrolls only when the cards need it; the no-GPU explanation,
    longer than an 80x24 terminal has room for, must still scroll to its last line."""
    from conftest import NOGPU

    async def go():
        app = replay_app(NOGPU)
        async with app.run_test(size=(80, 24)) as pilot:
            await run_to_tick(pilot, 3)
            await wait_for(pilot, lambda: app.query_one("NoGpuPanel").display)
            await pilot.pause()
            gpus = app.query_one("#gpus")
            needs_scrolling = gpus.virtual_size.height > gpus.size.height
            last = app.query_one("NoGpuPanel").plain_lines()[-1].strip()  # its bottom border
            assert last not in "\n".join(screen_lines(app)[gpus.region.y : gpus.region.bottom])
            for _ in range(5):  # the mouse wheel, as a user scrolls it
                await pilot.hover("#gpus")
                gpus.post_message(events.MouseScrollDown(gpus, 1, 1, 0, 0, 0, False, False, False))
                await pilot.pause()
            shown = "\n".join(screen_lines(app)[gpus.region.y : gpus.region.bottom])
            return needs_scrolling, gpus.show_vertical_scrollbar, last, shown

    needs_scrolling, bar, last, shown = asyncio.run(go())
    assert needs_scrolling  # (else this test proves nothing at this size)
    assert bar  # the user sees there is more
    assert last in shown  # and the wheel brings it into view


def test_nvml_starts_opening_before_the_config_and_the_app_load(monkeypatch, tmp_path):
    """The live monitor's NVML open (tens to hundreds of ms of C calls) overlaps with
    reading the config, the saved state and importing the app: it starts first, in a
    forked child (on another core, not competing with them for the GIL)."""
    import gputui.config
    from gputui import cli
    from gputui.telemetry.nvml.source import NvmlSource
    from gputui.ui import app as app_module

    order: list[str] = []
    real_load = gputui.config.load
    monkeypatch.setattr(NvmlSource, "prefetch", lambda self, **kw: order.append(f"nvml {kw}"))
    monkeypatch.setattr(gputui.config, "load", lambda *a: (order.append("config"), real_load(*a))[1])
    monkeypatch.setattr(app_module.GpuTuiApp, "run", lambda self, *a, **k: order.append("app"))
    monkeypatch.setenv("GPUTUI_ALLOW_NOTTY", "1")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert cli.main(["--no-remember"]) == 0
    assert order == ["nvml {'in_child': True}", "config", "app"]


def test_start_up_is_made_without_the_cyclic_gc_and_frozen_before_the_app_runs(monkeypatch, tmp_path):
    """What start-up makes lives as long as the monitor: it is made with the cyclic GC off
    and frozen (no collection walks it again) before the app runs, with the GC on; the GC is
    on again however the start ends."""
    import gc

    import gputui.config
    from gputui import cli
    from gputui.ui import app as app_module

    seen: list[object] = []
    gc.unfreeze()  # (a start earlier in this process froze what it had made)
    real_load = gputui.config.load
    monkeypatch.setattr(gputui.config, "load", lambda *a: (seen.append(gc.isenabled()), real_load(*a))[1])
    monkeypatch.setattr(
        app_module.GpuTuiApp,
        "run",
        lambda self, *a, **k: seen.append((gc.isenabled(), gc.get_freeze_count(), self.freeze_start_up)),
    )
    monkeypatch.setenv("GPUTUI_ALLOW_NOTTY", "1")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    try:
        assert cli.main(["--demo", "--no-remember"]) == 0
    finally:
        gc.unfreeze()
    assert seen[0] is False  # the config read with the GC off
    enabled, count, freeze_after_open = seen[1]
    assert enabled and count > 0
    assert freeze_after_open is True  # (what the source's open makes: frozen too)
    assert gc.isenabled()
    # a start that ends early (a recording that is not there) leaves it on too
    assert cli.main(["--replay", str(tmp_path / "missing.jsonl.gz"), "--no-remember"]) == 2
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_what_the_sources_open_makes_is_frozen_with_start_up_when_start_up_was_frozen():
    """The live source read ahead in a child opens NVML here after the first frame (pynvml,
    psutil, the process inspector: long-lived): an app whose start-up was frozen collects
    and freezes again once its source has opened, on the poller's thread; one made
    without (a test's, an embedding's) never touches the collector."""
    import gc

    from gputui.telemetry.recording import ReplaySource
    from gputui.ui.app import GpuTuiApp

    async def run(freeze: bool) -> tuple[int, int]:
        gc.unfreeze()
        source = ReplaySource(H200_X2)
        app = GpuTuiApp(source=source, interval=0.1, freeze_start_up=freeze, watch_terminal=False)
        async with app.run_test(size=(120, 40)) as pilot:
            before = gc.get_freeze_count()
            while app.poller is None or app.poller.ticks < 2:
                await pilot.pause(0.05)
            return before, gc.get_freeze_count()

    try:
        assert asyncio.run(run(False))[1] == 0
        before, after = asyncio.run(run(True))
        assert before == 0 and after > 0
    finally:
        gc.unfreeze()


class ReadAhead:
    """A live-like source whose static facts and first snapshot were read ahead (as
    NvmlSource's prefetch does while Textual loads), over a real recording: `take_ready`
    hands them over at once; the poller thread's own `open` is slow, as NVML's can be."""

    live = True
    label = "live"
    local_processes = False
    seekable = None

    def __init__(self, path) -> None:  # type: ignore[no-untyped-def]
        from gputui.telemetry.recording import ReplaySource

        self.replay = ReplaySource(path)
        self.pending = (self.replay.open(), self.replay.sample())
        self.opens = 0

    def take_ready(self):  # type: ignore[no-untyped-def]
        pending, self.pending = self.pending, None
        return pending

    def open(self):  # type: ignore[no-untyped-def]
        import time

        self.opens += 1
        time.sleep(0.5)
        return self.replay.open()

    def sample(self):  # type: ignore[no-untyped-def]
        return self.replay.sample()

    def read_topology(self):  # type: ignore[no-untyped-def]
        return None

    def notes(self) -> list[str]:
        return []

    def close(self) -> None:
        pass


def test_a_first_snapshot_read_ahead_is_in_the_first_frame():
    """When NVML's open and first sample finished while the UI loaded, the app takes them at
    mount: the first frame is drawn with the GPUs and their processes, not empty and then
    again; and the poller does not take a second sample at once (its first tick is one
    interval later)."""
    from gputui.ui.app import GpuTuiApp

    async def go():
        source = ReadAhead(H200_X2)
        app = GpuTuiApp(source=source, interval=5.0, watch_terminal=False)
        async with app.run_test(size=(160, 50)) as pilot:
            at_mount = app.snapshot, app.info
            first = app.snapshot
            await asyncio.sleep(0.8)  # the poller has opened (0.5 s) but its tick is not due
            await pilot.pause()
            return at_mount, first is app.snapshot, app.poller.ticks, source.opens

    (snapshot, info), same, ticks, opens = asyncio.run(go())
    assert snapshot is not None and info is not None and len(info.devices) == 2
    assert same and ticks == 0  # no second sample right away
    assert opens == 1


def test_the_footer_is_right_in_the_first_frame():
    """The board has the focus before the first paint (Textual's auto-focus, at the screen's
    resume), but Textual tells the footer the bindings changed only after that paint.  The
    footer reads them as it draws: its first paint already has the board's keys (enter for
    the detail, `c` for the layout), and the late signal repaints nothing."""
    from gputui.ui.app import GpuTuiApp
    from gputui.ui.widgets.footer import KeyFooter

    async def go():
        app = GpuTuiApp(source=ReadAhead(H200_X2), interval=5.0, watch_terminal=False)
        async with app.run_test(size=(160, 50)) as pilot:
            footer = app.query_one(KeyFooter)
            await pilot.pause()
            await asyncio.sleep(0.2)
            await pilot.pause()
            return footer.plain_lines(), footer.cells_sent, footer.size.width

    lines, sent, width = asyncio.run(go())
    assert "Details" in lines[0] and "Layout" in lines[0]
    assert sent == width  # drawn once, whole


def test_the_live_slow_reads_start_once_the_first_frame_is_up(x2_recording):
    """The live source's slow-cadence thread (PCIe throughput's 20 ms reads, GPM, energy,
    the Xid event set: work on the interpreter the first layout and paint need, scaling
    with the GPUs) starts after the first frame is on screen, once, started by the poller's
    thread when the app says the frame is up; the first frame has the read-ahead's data."""
    from test_nvml import RecordedNvml

    from gputui.telemetry.nvml.source import Nvml, NvmlSource
    from gputui.ui import app as app_module
    from gputui.ui.app import GpuTuiApp

    header, ticks = x2_recording
    scripted = RecordedNvml(header, ticks[55:60], lost_gpu=-1, lost_from=99)
    frame: dict[str, bool] = {}
    started: list[tuple[bool, str]] = []

    class Source(NvmlSource):
        def _start_slow(self) -> None:
            started.append(("drawn" in frame, threading.current_thread().name))
            super()._start_slow()

    class Probe(GpuTuiApp):
        CSS_PATH = str(Path(app_module.__file__).with_name(GpuTuiApp.CSS_PATH))

        def on_mount(self) -> None:  # (before the app's own)
            self.call_after_refresh(lambda: frame.setdefault("drawn", self.snapshot is not None))

    source = Source(slow_interval=60.0, nvml=Nvml(lib=scripted.lib))
    source.prefetch()
    assert source._prefetch is not None
    source._prefetch.join()  # (read ahead: the frame is drawn with its data)

    async def go():
        app = Probe(source=source, interval=5.0, watch_terminal=False)
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_for(pilot, lambda: source._slow_thread is not None)
            return source._slow_thread

    slow = asyncio.run(go())
    assert frame == {"drawn": True}  # the first frame had the GPUs
    assert started == [(True, "gputui-poller")]  # after it, on the poller's thread, once
    assert slow is not None and source._slow_thread is slow
