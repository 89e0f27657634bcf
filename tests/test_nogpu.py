"""Without NVML (really absent on this machine and on CI), gputui still starts and explains."""

from __future__ import annotations

import asyncio
import dataclasses
import re

import pytest
from conftest import H200_X2, screen_lines, wait_for

from gputui.telemetry.model import GpuSample, MachineInfo, Snapshot, Topology
from gputui.telemetry.nvml.source import NvmlSource
from gputui.telemetry.recording import ReplaySource, read_recording
from gputui.ui.app import GpuTuiApp


def run(coro):
    return asyncio.run(coro)


def nvml_really_absent() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return True
    pynvml.nvmlShutdown()
    return False


pytestmark = pytest.mark.skipif(not nvml_really_absent(), reason="this machine has an NVIDIA driver")


def test_live_without_nvml_shows_the_error_host_panel_and_opens_the_demo():
    async def go():
        app = GpuTuiApp(source=NvmlSource(), interval=1.0, watch_terminal=False)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.snapshot is not None)
            await pilot.pause()
            text = "\n".join(screen_lines(app))
            assert "No GPU telemetry: NVML is unavailable" in text
            assert "NVML Shared Library Not Found (NVML error 12)" in text
            assert "libnvidia-ml.so" in text  # what it means
            assert "--gpus all" in text  # what to try
            assert "Press d to open the bundled recording" in text
            assert "host" in text and "CPU" in text and "MEM" in text  # the host still updates
            assert app.query_one("NoGpuPanel").display
            assert not app.query_one("GpuBoard").display
            footer = screen_lines(app)[-1]
            assert "Demo" in footer and "Details" not in footer  # no GPU to show the detail of
            # one key opens the bundled recording, clearly marked as recorded
            await pilot.press("d")
            await wait_for(pilot, lambda: app.info is not None and len(app.info.devices) == 2)
            await wait_for(pilot, lambda: app.snapshot is not None)
            await pilot.pause()
            text = "\n".join(screen_lines(app))
            assert "RECORDED SESSION · bundled demo" in text
            assert "not live data" in text
            assert "0 NVIDIA H200" in text
            assert not app.query_one("NoGpuPanel").display
            assert app.check_action("demo", ()) is False  # not offered again
            # the board has the keys again (arrows, enter) without a click or a tab first
            await wait_for(pilot, lambda: app.focused is app.query_one("GpuBoard"))
            await wait_for(pilot, lambda: "Details" in screen_lines(app)[-1])  # GPUs again

    run(go())


class _LosesGpu1:
    """Replays a real recording, but from tick `at` on, GPU 1 reads as NVML reports a lost
    GPU (GpuSample(lost=True), as NvmlSource produces on NVML_ERROR_GPU_IS_LOST)."""

    live = False
    label = "lost-gpu"
    local_processes = False

    def __init__(self, at: int) -> None:
        self.inner = ReplaySource(H200_X2, loop=False)
        self.at = at
        self.header = self.inner.header
        self.ticks = self.inner.ticks

    @property
    def position(self) -> int:
        return self.inner.position

    @property
    def interval(self) -> float:
        return self.inner.interval

    @property
    def seekable(self) -> _LosesGpu1:
        return self

    def open(self) -> MachineInfo:
        return self.inner.open()

    def sample(self) -> Snapshot:
        snap = self.inner.sample()
        if snap.seq >= self.at:
            gpus = tuple(GpuSample(index=1, lost=True) if g.index == 1 else g for g in snap.gpus)
            procs = tuple(p for p in snap.processes if p.gpu_index != 1)
            snap = dataclasses.replace(snap, gpus=gpus, processes=procs)
        return snap

    def seek(self, position: int) -> None:
        self.inner.seek(position)

    def read_topology(self) -> Topology | None:
        return None

    def notes(self) -> list[str]:
        return []

    def close(self) -> None:
        pass


def test_a_lost_gpu_is_marked_and_the_others_keep_updating():
    _, ticks = read_recording(H200_X2)

    async def go():
        app = GpuTuiApp(source=_LosesGpu1(at=40), interval=60, watch_terminal=False)
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_for(pilot, lambda: app.snapshot is not None)
            for _ in range(44):
                app.poller.step(1)
            await wait_for(pilot, lambda: app.snapshot.seq == 45)
            await pilot.pause()
            text = "\n".join(screen_lines(app))
            assert "GPU LOST" in text and "fallen off the bus" in text
            gpu0_temperature = re.compile(r"TEMP [^0-9]*?(\d+)°C")  # (GPU 0's card comes first)
            assert int(gpu0_temperature.findall(text)[0]) == ticks[44].gpus[0].temperature  # still live
            app.poller.step(1)
            await wait_for(pilot, lambda: app.snapshot.seq == 46)
            await pilot.pause()
            shown = gpu0_temperature.findall("\n".join(screen_lines(app)))[0]
            assert int(shown) == ticks[45].gpus[0].temperature != ticks[44].gpus[0].temperature

    run(go())
