"""A one-shot reader's slow-cadence values (`gputui snapshot`), read once without the slow
thread, with GPM measured over a window: what is slow overlaps instead of queueing.

Each GPU's GPM window opens as soon as NVML is open, before the static facts; the static
facts and the slow reads (PCIe throughput blocks for its 20 ms window, twice a GPU; per-process
utilization, energy) then run inside the window, the GPUs at once (`each_gpu`), and the windows
close, the GPUs at once too.  The reader waits for the longer of the window and its reads,
never for the one after the other, nor for one GPU after another.  A GPU in MIG mode has
its GPU instances' windows opened after the reads (they name its instances)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from gputui.telemetry.model import GpmSample, MachineInfo
from gputui.telemetry.nvml.gpm import GpmSampler
from gputui.telemetry.nvml.parallel import each_gpu
from gputui.telemetry.nvml.query import _ARCHITECTURES, GpuLost
from gputui.telemetry.nvml.slow import SlowValues

if TYPE_CHECKING:
    from gputui.telemetry.nvml.source import NvmlSource

T = TypeVar("T")


def open_measured(source: NvmlSource, gpm_window: float | None) -> MachineInfo:
    """Open `source` (no slow thread) and read its slow-cadence values once; GPM over
    `gpm_window` seconds where given (None: no GPM)."""
    first: dict[int, Any] = {}
    """GPU -> its first GPM sample: None where its window opened, else why not."""
    opened: dict[int, float] = {}
    """GPU -> when its window opened (time.monotonic())."""

    def open_windows() -> None:
        if gpm_window is not None:
            _open_windows(source, first, opened)

    info = source.info if source.info is not None else source._open(before_static=open_windows)
    if source._nvml is None:
        return info
    _read(source, gpm_window, first, opened)
    return info


def _live(source: NvmlSource) -> list[tuple[int, Any]]:
    return [(i, h) for i, h in enumerate(source._handles) if i not in source._lost and h is not None]


def _open_windows(source: NvmlSource, first: dict[int, Any], opened: dict[int, float]) -> None:
    """Each GPU's first GPM sample, before anything slow (a GPU in MIG mode: after the reads,
    which read its instances)."""
    nv = source._nvml
    assert nv is not None
    if source.gpm is None:
        source.gpm = GpmSampler(nv)
    for i, h in _live(source):
        try:
            mode = nv.query("nvmlDeviceGetMigMode", h, device=i)
            if mode and mode[0]:
                continue
            code = nv.query("nvmlDeviceGetArchitecture", h, device=i)
            first[i] = source.gpm.sample(i, h, architecture=_ARCHITECTURES.get(code), arch_code=code)
        except GpuLost:
            source._lost.add(i)
            continue
        if first[i] is None:
            opened[i] = time.monotonic()


def _read(
    source: NvmlSource, gpm_window: float | None, first: dict[int, Any], opened: dict[int, float]
) -> None:
    gpus = _live(source)
    reads = each_gpu(lambda i, h: source._slow_sample(i, h, gpm=False), gpus)
    for i, h, values in _answered(source, gpus, reads):
        assert isinstance(values, SlowValues)
        if gpm_window is not None and i not in first:  # in MIG mode: its instances' windows now
            try:
                first[i] = source._gpm_sample(i, h, values.fields.get("mig_devices", ()))
            except GpuLost:
                source._lost.add(i)
                continue
            if first[i] is None:
                opened[i] = time.monotonic()
        if i in first:
            values.fields["gpm"] = first[i]  # (a window still open: None until it closes)
        with source._slow_lock:
            source._slow[i] = values
    source.slow_passes += 1
    if not opened:
        return
    window = gpm_window or 0.0
    closing = [(i, h) for i, h in gpus if i in opened and i not in source._lost]
    closed = each_gpu(_closer(source, opened, window), closing)
    for i, _, gpm in _answered(source, closing, closed):
        with source._slow_lock:
            source._slow[i].fields["gpm"] = gpm
    source.slow_passes += 1


def _answered(
    source: NvmlSource, gpus: Sequence[tuple[int, Any]], results: Sequence[T | BaseException]
) -> Iterator[tuple[int, Any, T]]:
    """(GPU, handle, result) of each GPU `each_gpu` has an answer from: a GPU that fell off
    the bus is marked lost and left out; any other failure is raised."""
    for (i, h), result in zip(gpus, results, strict=True):
        if isinstance(result, GpuLost):
            source._lost.add(i)
        elif isinstance(result, BaseException):
            raise result
        else:
            yield i, h, result


def _closer(
    source: NvmlSource, opened: dict[int, float], window: float
) -> Callable[[int, Any], GpmSample | None]:
    def close(i: int, h: Any) -> GpmSample | None:
        time.sleep(max(0.0, opened[i] + window - time.monotonic()))
        gpm: GpmSample | None = source._gpm_sample(i, h, source._slow[i].fields.get("mig_devices", ()))
        return gpm

    return close
