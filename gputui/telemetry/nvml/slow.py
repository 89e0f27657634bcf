"""The slow-cadence reads (PCIe and NVLink throughput, energy, per-process utilization, row
remapping, retired pages, MIG devices): what they produce for one GPU, and the pieces that are
not a registry read (NVLink counters differenced between passes, MIG devices, per-process
utilization).  `NvmlSource` runs them on a thread of its own so they never stall a tick."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypedDict

from gputui.telemetry.model import GpmSample, MigDevice
from gputui.telemetry.nvml.query import (
    _ALL_LINKS,
    _FI_NVLINK_LINK_COUNT,
    _FI_NVLINK_THROUGHPUT_DATA_RX,
    _FI_NVLINK_THROUGHPUT_DATA_TX,
    Nvml,
    _text,
    counter_rate,
    field_int,
)

RARE_EVERY = 5
"""The slow pass reads the counters that change rarely or only count up (energy, PCIe
replays, remapped rows, retired pages) every RARE_EVERY-th pass (10 s at the default 2 s):
energy alone cost 4 ms a GPU a pass, an eighth of the live monitor's steady CPU."""


class SlowFields(TypedDict, total=False):
    """GpuSample fields measured on the slow cadence (PCIe and NVLink throughput, energy,
    replay counter, row remapping, retired pages, MIG devices) and the Xid watch: typed, so
    a misspelt or mistyped field is an error for mypy, not a TypeError at run time."""

    pcie_rx: int | None
    pcie_tx: int | None
    energy: int | None
    pcie_replay_counter: int | None
    nvlink_rx: int | None
    nvlink_tx: int | None
    nvlink_link_rx: tuple[int | None, ...]
    nvlink_link_tx: tuple[int | None, ...]
    remapped_rows_corrected: int | None
    remapped_rows_uncorrected: int | None
    remapped_rows_pending: bool | None
    remapped_rows_failure: bool | None
    retired_pages_sbe: int | None
    retired_pages_dbe: int | None
    retired_pages_pending: bool | None
    mig_devices: tuple[MigDevice, ...]
    xid_count: int | None
    xid_last: int | None
    gpm: GpmSample | None


@dataclass
class SlowValues:
    """Latest results of the slow-cadence queries for one GPU."""

    fields: SlowFields = field(default_factory=SlowFields)
    rare: SlowFields | None = None
    """The counters read every RARE_EVERY-th pass (also in `fields`); None: not read yet."""
    proc_util: dict[int, tuple[int, int, int, int]] = field(default_factory=dict)
    last_seen_us: int = 0


@dataclass
class NvLinkCounters:
    """NVLink throughput counters of one GPU, to turn cumulative KiB into bytes/s."""

    links: int | None = None
    """How many NVLinks the GPU has (None: not asked yet; 0: none or not readable)."""
    previous: dict[tuple[int, int], tuple[float, int]] = field(default_factory=dict)
    """(field id, scope) -> (timestamp in µs, counter in KiB) of the last reading."""


def process_utilization(samples: Iterable[Any], since: int) -> dict[int, tuple[int, int, int, int]]:
    """pid -> (SM, memory, encoder, decoder) % from nvmlDeviceGetProcessUtilization's samples:
    each process's latest sample since `since` (µs), clamped to 0-100."""
    util: dict[int, tuple[int, int, int, int]] = {}
    latest: dict[int, int] = {}
    for s in samples:
        ts = int(getattr(s, "timeStamp", 0))
        if ts < since or ts < latest.get(s.pid, -1):
            continue
        latest[s.pid] = ts
        util[s.pid] = tuple(  # type: ignore[assignment]
            min(100, max(0, int(getattr(s, a, 0) or 0))) for a in ("smUtil", "memUtil", "encUtil", "decUtil")
        )
    return util


def nvlink_throughput(
    nv: Nvml, i: int, h: Any, counters: NvLinkCounters, *, per_link: bool = True
) -> tuple[int | None, int | None, tuple[int | None, ...], tuple[int | None, ...]]:
    """NVLink data throughput, all links and per link, in bytes/s: NVML's cumulative
    KiB counters (field values, scope = link or all links) differenced between passes.
    `per_link=False`: the two totals alone (NVML reads field values one by one, ~170 µs
    each: 18 links each way cost 6.6 ms of CPU a pass on an H100); the links come back ()."""
    lib = nv.lib
    tx_id = getattr(lib, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", _FI_NVLINK_THROUGHPUT_DATA_TX)
    rx_id = getattr(lib, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX", _FI_NVLINK_THROUGHPUT_DATA_RX)
    if counters.links is None:
        count_id = getattr(lib, "NVML_FI_DEV_NVLINK_LINK_COUNT", _FI_NVLINK_LINK_COUNT)
        values = nv.query("nvmlDeviceGetFieldValues", h, [count_id], device=i)
        counters.links = field_int(values[0]) or 0 if values else 0
    if not counters.links:
        return None, None, (), ()
    wanted = [(tx_id, _ALL_LINKS), (rx_id, _ALL_LINKS)]
    for link in range(counters.links if per_link else 0):
        wanted += [(tx_id, link), (rx_id, link)]
    values = nv.query("nvmlDeviceGetFieldValues", h, wanted, device=i)
    if values is None:
        return None, None, (), ()
    now_us = time.time() * 1e6
    rates: dict[tuple[int, int], int | None] = {}
    for (fid, scope), v in zip(wanted, values, strict=False):
        value = field_int(v)
        if value is None:
            counters.previous.pop((fid, scope), None)
            rates[(fid, scope)] = None
            continue
        reading = (float(getattr(v, "timestamp", 0) or now_us), value)
        rates[(fid, scope)] = counter_rate(counters.previous.get((fid, scope)), reading)
        counters.previous[(fid, scope)] = reading
    links = range(counters.links if per_link else 0)
    return (
        rates.get((rx_id, _ALL_LINKS)),
        rates.get((tx_id, _ALL_LINKS)),
        tuple(rates.get((rx_id, k)) for k in links),
        tuple(rates.get((tx_id, k)) for k in links),
    )


def mig_devices(nv: Nvml, i: int, h: Any) -> tuple[MigDevice, ...] | None:
    """The MIG devices of a GPU in MIG mode (read every slow pass of a GPU in MIG mode: an
    administrator can create or destroy instances while gputui runs; a GPU not in it is
    asked on the rare passes); None: the GPU is not in MIG mode."""
    mode = nv.query("nvmlDeviceGetMigMode", h, device=i)
    if not mode or not mode[0]:
        return None
    out: list[MigDevice] = []
    for idx in range(nv.query("nvmlDeviceGetMaxMigDeviceCount", h, device=i) or 0):
        mig = nv.query("nvmlDeviceGetMigDeviceHandleByIndex", h, idx, device=i)
        if mig is None:
            continue  # an empty slot: NVML says "not found"

        def mq(fn: str, *args: Any, mig: Any = mig, idx: int = idx) -> Any:
            return nv.query(fn, mig, *args, device=i, scope=("mig", idx))

        attrs = mq("nvmlDeviceGetAttributes")
        mem = mq("nvmlDeviceGetMemoryInfo")
        memory_mb = getattr(attrs, "memorySizeMB", None)
        out.append(
            MigDevice(
                index=idx,
                gpu_instance_id=mq("nvmlDeviceGetGpuInstanceId"),
                compute_instance_id=mq("nvmlDeviceGetComputeInstanceId"),
                uuid=_text(mq("nvmlDeviceGetUUID")),
                name=_text(mq("nvmlDeviceGetName")),
                sm_count=getattr(attrs, "multiprocessorCount", None),
                gpu_slices=getattr(attrs, "gpuInstanceSliceCount", None),
                compute_slices=getattr(attrs, "computeInstanceSliceCount", None),
                memory_total=getattr(mem, "total", None)
                or (memory_mb * 2**20 if memory_mb is not None else None),
                memory_used=getattr(mem, "used", None),
            )
        )
    return tuple(out)
