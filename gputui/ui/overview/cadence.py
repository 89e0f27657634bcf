"""What the Overview redraws each tick, and what it leaves still: a terminal is sent the cells
that change, so a figure that jitters below what a reader takes from it, or a chart that
scrolls every tick, costs bytes every second for nothing (issue 33: at 4 GPUs the cards' power
figures and bars, and their charts, were most of gputui's bytes).

- The cards' history charts move at their own cadence: a column is CHART_STEP_S of data (at
  1 Hz the mean of two ticks; one tick where ticks are that far apart), drawn once complete.
  The figure beside each chart is the latest sample's.
- The power and clock readings of the cards (the figure and its bar) move when the value
  moves by HOLD_FRACTION of the bar's scale, to the sample's value; below that the last
  shown value stays.  The PCIe throughput figures likewise, within PCIE_QUIET.  What is
  shown is never further than that from the latest sample; the detail view, the Processes
  tab, the exports and recordings have every sample as it is."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import replace
from typing import Any

from gputui.telemetry.history import History
from gputui.telemetry.model import DeviceInfo, GpuSample, MachineInfo, Snapshot

CHART_STEP_S = 2.0
"""Seconds of data a column of the cards' charts holds (a chart of 58 columns: two minutes)."""
HOLD_FRACTION = 0.01
"""A card's power or clock reading moves when the sample is this share of its bar's scale
away from what is shown (7 W of a 700 W limit, 20 MHz of a 1,980 MHz clock): about one
eighth-cell of its bar, the finest step the bar draws."""

PCIE_QUIET = 1_000_000
"""Bytes/s: a card's PCIe RX or TX figure moves when the sample is this far from what is
shown.  A GPU without work reads 0.4-0.7 MB/s each way (the driver's own traffic in NVML's
20 ms sample), a new figure every slow pass; 1 MB/s is 0.002 % of a Gen5 x16 link, and any
real transfer moves the figure at once."""


def chart_ticks(history: History) -> int:
    """Ticks a chart column holds: CHART_STEP_S over the time between samples."""
    spacing = history.spacing()
    if not spacing or spacing <= 0:
        return 1
    return max(1, round(CHART_STEP_S / spacing))


def _steps(dev: DeviceInfo | None, g: GpuSample) -> dict[str, float | None]:
    """The readings held, with how far the sample must move from what is shown to move it
    (None: not held, the sample is shown as it is)."""

    def share(scale: float | None) -> float | None:
        return HOLD_FRACTION * scale if scale else None

    return {
        "power_draw": share(g.power_limit or (dev.power_limit if dev else None)),
        "sm_clock": share(dev.max_sm_clock if dev else None),
        "mem_clock": share(dev.max_mem_clock if dev else None),
        "pcie_rx": PCIE_QUIET,
        "pcie_tx": PCIE_QUIET,
    }


class Held:
    """The readings last shown on the cards, per GPU (one per board).  They follow every
    tick the hub publishes, in order (`observe`, the hub's listener), not only the ticks the
    screen had time to show (a lagging UI drops stale ones), so what a tick shows is the
    same however fast the screen keeps up."""

    def __init__(self) -> None:
        self._shown: dict[tuple[int, str], Any] = {}
        self._info: MachineInfo | None = None
        self._done: deque[tuple[tuple[int, float], tuple[GpuSample, ...]]] = deque(maxlen=8)
        """The latest ticks observed ((seq, timestamp): the hub may hand on a copy that
        carries the ranks' stacks), each with its GPUs' readings as held."""
        self._lock = threading.Lock()

    def observe(self, info: MachineInfo | None, snap: Snapshot) -> None:
        """A tick published (any thread; the hub's listener): its readings held."""
        with self._lock:
            if info is not self._info:  # another machine, or the demo: nothing shown holds
                self._info = info
                self._shown.clear()
            self._done.append(((snap.seq, snap.timestamp), self.apply(info, snap).gpus))

    def shown(self, info: MachineInfo | None, snap: Snapshot) -> Snapshot:
        """`snap` as the cards show it: as observed; a tick never published (newer than any
        observed) is held now; an older one that has left the ticks kept (a lagging screen
        drawing a stale tick) is held against what is shown without moving it, so that what
        later ticks show never depends on which ticks the screen drew."""
        key = (snap.seq, snap.timestamp)
        with self._lock:
            for seen, gpus in reversed(self._done):
                if seen == key:
                    return replace(snap, gpus=gpus)
            stale = bool(self._done) and key < self._done[-1][0] and info is self._info
            if stale:
                return self.apply(info, snap, follow=False)
        self.observe(info, snap)
        return self.shown(info, snap)

    def apply(self, info: MachineInfo | None, snap: Snapshot, *, follow: bool = True) -> Snapshot:
        """`snap` with the held readings in place of the sampled ones where the sample is
        within its step (`_steps`) of what was shown; the shown values follow (unless
        not `follow`: a stale tick)."""
        devices = {d.index: d for d in info.devices} if info else {}
        gpus = []
        for g in snap.gpus:
            changed: dict[str, Any] = {}
            for field, step in _steps(devices.get(g.index), g).items():
                key, value = (g.index, field), getattr(g, field)
                shown = self._shown.get(key)
                if value is None or not step:
                    if follow:
                        self._shown.pop(key, None)
                elif shown is not None and abs(value - shown) < step:
                    if shown != value:
                        changed[field] = shown
                elif follow:
                    self._shown[key] = value
            gpus.append(replace(g, **changed) if changed else g)
        return replace(snap, gpus=tuple(gpus))
