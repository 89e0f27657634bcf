"""A one-shot `gputui snapshot --json` on four GPUs (issue 33 item 3: no slower than
`nvitop -1` plus the GPM window).  What is slow in one snapshot overlaps instead of queueing
GPU after GPU: the GPM window opens first, and the static facts and the slow-cadence reads
(PCIe throughput blocks ~21 ms a call, two a GPU; per-process utilization, energy) all run
inside it, the GPUs' reads at once; the figures stay each GPU's own.

Live runs go through the real NvmlSource and the command's own selection, on ScriptedNvmlLib
(a stand-in for pynvml, not a GPU) answering with tick 30 of the real 4x H100 recording
tests/fixtures/h100-x4-matrix/1-healthy-stopped (four busy GPUs, a GPM window on each): each
GPU's device values, PCIe throughput and energy from it, and nvmlGpmMetricsGet's figures
from that GPU's own recorded window.  The check on real GPUs is `bench/device.sh all OUT`
(its snapshot rows)."""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import pynvml
import pytest
from conftest import FIXTURES
from test_gpm import gpm_lib, raw_values
from test_nvml import RecordedNvml

from gputui.cli import _parse
from gputui.commands import snapshot as cmd
from gputui.export import snapshot as fmt
from gputui.telemetry.nvml.query import Nvml
from gputui.telemetry.recording import read_recording

X4 = FIXTURES / "h100-x4-matrix" / "1-healthy-stopped" / "recording.jsonl.gz"
TICK = 30
BARRIER_TIMEOUT_S = 20.0
"""How long a GPU's first PCIe read waits for the other GPUs' (a deadlock breaker for the
sequential case, not a bound on speed: there the reads fail and the test says so)."""


class Recorded4:
    """The 4x H100 tick as NVML answers, with the order of the calls that matter kept:
    ("gpm", i) a GPM sample, ("static", i) a static fact (max clocks), ("pcie", i) a PCIe
    throughput read."""

    def __init__(self, *, overlap: bool) -> None:
        header, ticks = read_recording(X4)
        self.tick = ticks[TICK]
        self.gpus = len(self.tick.gpus)
        scripted = RecordedNvml(header, [self.tick], lost_gpu=-1, lost_from=99)
        self.lib = lib = scripted.lib
        self.events: list[tuple[str, int]] = []
        self._barrier = threading.Barrier(self.gpus) if overlap else None
        self._waited: set[int] = set()
        self._owner: dict[int | None, int] = {}
        gpm = gpm_lib({})
        for name in dir(gpm):
            if name.startswith("nvmlGpm"):
                setattr(lib, name, getattr(gpm, name))
        lib.nvmlDeviceGetArchitecture = lambda h: 9  # type: ignore[attr-defined]  # Hopper
        lib.nvmlGpmSampleAlloc = lambda: ctypes.pointer(ctypes.c_int(0))  # type: ignore[attr-defined]
        lib.nvmlGpmSampleGet = self._sample_get  # type: ignore[attr-defined]
        lib.nvmlGpmMetricsGet = self._metrics_get  # type: ignore[attr-defined]
        lib.nvmlDeviceGetPcieThroughput = self._pcie  # type: ignore[attr-defined]
        lib.nvmlDeviceGetMaxClockInfo = self._max_clock  # type: ignore[attr-defined]
        lib.nvmlDeviceGetTotalEnergyConsumption = lambda h: self._gpu(h).energy  # type: ignore[attr-defined]

    def _gpu(self, handle: str) -> Any:
        return self.tick.gpus[RecordedNvml._index(handle)]

    def _sample_get(self, handle: str, sample: Any) -> Any:
        i = RecordedNvml._index(handle)
        self._owner[ctypes.cast(sample, ctypes.c_void_p).value] = i
        self.events.append(("gpm", i))
        return sample

    def _metrics_get(self, get: Any) -> Any:
        window = self.tick.gpus[self._owner[get.sample2]].gpm
        values = raw_values(window)
        for k in range(get.numMetrics):
            get.metrics[k].value = values[get.metrics[k].metricId]
        return get

    def _max_clock(self, handle: str, kind: int) -> int:
        self.events.append(("static", RecordedNvml._index(handle)))
        return 1980

    def _pcie(self, handle: str, counter: int) -> Any:
        i = RecordedNvml._index(handle)
        if self._barrier is not None and i not in self._waited:
            self._waited.add(i)
            try:  # every GPU's first read waits here for the others' to be under way
                self._barrier.wait(BARRIER_TIMEOUT_S)
            except threading.BrokenBarrierError:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT) from None
        self.events.append(("pcie", i))
        g = self._gpu(handle)
        value = g.pcie_rx if counter == self.lib.NVML_PCIE_UTIL_RX_BYTES else g.pcie_tx
        return value // 1024  # KB/s, as NVML says it


def one_shot(argv: list[str], nvml: Recorded4) -> tuple[dict[str, Any], Any]:
    """What `gputui snapshot ARGV` prints live, one-shot, on `nvml`, and the source."""
    args = _parse(["snapshot", *argv])
    sel = cmd.select(args)
    source = cmd.open_live(sel, bool(args.processes), nvml=Nvml(lib=nvml.lib), one_shot=True)
    try:
        info = cmd.open_one_shot(source, sel, args.gpm_window)
        assert info.system.nvml_problem is None
        doc = fmt.document(info, source.sample(), sel.gpu_fields, sel.proc_fields, processes=args.processes)
    finally:
        source.close()
    return doc, source


def test_the_gpus_slow_reads_run_at_once_and_keep_each_gpus_figures() -> None:
    """Each GPU's first PCIe read waits until all four are under way: read one GPU after the
    other, the first would wait alone and every read fail.  The figures are each GPU's own:
    PCIe, energy and GPM from its own recorded values."""
    nvml = Recorded4(overlap=True)
    doc, source = one_shot(["--json"], nvml)
    assert source._slow_thread is None  # one-shot: no slow thread
    for i, gpu in enumerate(doc["gpus"]):
        rec = nvml.tick.gpus[i]
        assert gpu["pcie.throughput.rx"] == rec.pcie_rx // 1024, i
        assert gpu["pcie.throughput.tx"] == rec.pcie_tx // 1024, i
        assert gpu["energy.consumption"] == rec.energy, i
        assert gpu["gpm.unavailable"] is None, i
        assert gpu["gpm.sm_active"] == pytest.approx(rec.gpm.sm_active, abs=0.01), i
        assert gpu["gpm.tensor_active"] == pytest.approx(rec.gpm.tensor_active, abs=0.01), i
    assert len({g["gpm.sm_active"] for g in doc["gpus"]}) > 1  # (the GPUs' windows differ)


@pytest.mark.parametrize("window", [0.05, 0.3])
def test_the_window_opens_first_and_closes_after_every_slow_read(window: float) -> None:
    """Every GPU's GPM window opens before any static fact or slow read of any GPU and
    closes after the last of them, and is at least as long as asked: the snapshot waits
    for the longer of the reads and the window, never for the one after the other."""
    nvml = Recorded4(overlap=True)
    _, source = one_shot(["--json", "--gpm-window", str(window)], nvml)
    ev = nvml.events
    opens = [ev.index(("gpm", i)) for i in range(nvml.gpus)]
    closes = [len(ev) - 1 - ev[::-1].index(("gpm", i)) for i in range(nvml.gpus)]
    reads = [k for k, (what, _) in enumerate(ev) if what in ("static", "pcie")]
    assert {what for what, _ in ev} == {"gpm", "static", "pcie"}
    assert max(opens) < min(reads) and max(reads) < min(closes)
    for i in range(nvml.gpus):
        assert source._slow[i].fields["gpm"].window >= window


def test_the_csv_default_reads_nothing_slow_and_opens_no_window() -> None:
    nvml = Recorded4(overlap=False)
    args = _parse(["snapshot"])
    sel = cmd.select(args)
    source = cmd.open_live(sel, False, nvml=Nvml(lib=nvml.lib), one_shot=True)
    try:
        cmd.open_one_shot(source, sel, args.gpm_window)
    finally:
        source.close()
    assert not [e for e in nvml.events if e[0] in ("gpm", "pcie")]
    assert source.slow_passes == 0
