"""The static facts of each GPU (DeviceInfo), read once when the source opens: all of them,
or index, name, UUID and bus id plus the ones a one-shot reader names."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from gputui.telemetry.model import DeviceInfo
from gputui.telemetry.nvml.parallel import each_gpu
from gputui.telemetry.nvml.query import (
    _ARCHITECTURES,
    _BRANDS,
    _COMPUTE_MODES,
    GpuLost,
    Nvml,
    _sysfs_pci,
    _text,
    _watts,
    cpulist,
    memory_info,
    single_node,
)


def read_device_infos(
    nv: Nvml, handles: Sequence[Any], want: frozenset[str] | None, lost: set[int]
) -> list[DeviceInfo]:
    """Every GPU's static facts, the GPUs in parallel (some of these calls take a millisecond
    or more each, max clocks say), so 8 GPUs read in about the time of one."""
    results = each_gpu(lambda i, h: device_info(nv, i, h, want, lost), list(enumerate(handles)))
    for r in results:
        if isinstance(r, BaseException):
            raise r
    unknown = [DeviceInfo(index=i, name="unknown GPU") for i in range(len(results))]
    return [r if isinstance(r, DeviceInfo) else unknown[i] for i, r in enumerate(results)]


def device_info(nv: Nvml, i: int, h: Any, want: frozenset[str] | None, lost: set[int]) -> DeviceInfo:
    """One GPU's static facts: all of them, or (`static=` given) index, name, UUID, bus
    id and the ones named — some of these calls cost milliseconds each (memory
    affinity 12 ms, max clocks 2 ms on an H200), a lot for a one-shot reader."""
    if h is None:
        return DeviceInfo(index=i, name="unknown GPU")

    def q(fn: str, *args: Any) -> Any:
        try:
            return nv.query(fn, h, *args, device=i)
        except GpuLost:
            lost.add(i)
            return None

    def once(fn: Callable[[], Any]) -> Callable[[], Any]:
        """A reading shared by several facts, made when the first of them asks."""
        memo: list[Any] = []

        def get() -> Any:
            if not memo:
                memo.append(fn())
            return memo[0]

        return get

    def memory_total() -> int | None:
        try:
            return getattr(memory_info(nv, i, h), "total", None)
        except GpuLost:
            lost.add(i)
            return None

    def ecc_mode() -> bool | None:
        ecc = q("nvmlDeviceGetCurrentEccMode")
        if ecc is None:
            pair = q("nvmlDeviceGetEccMode")
            ecc = pair[0] if pair else None
        return bool(ecc) if ecc is not None else None

    def numa_node() -> int | None:
        scope = getattr(lib, "NVML_AFFINITY_SCOPE_NODE", 0)
        numa = single_node(q("nvmlDeviceGetMemoryAffinity", 1, scope))
        if numa is None:
            sys_numa = _sysfs_pci(bus_id, "numa_node")
            numa = int(sys_numa) if sys_numa and sys_numa.lstrip("-").isdigit() else None
            if numa is not None and numa < 0:
                numa = None
        return numa

    def cpu_affinity() -> str | None:
        ncpu = os.cpu_count() or 64
        return cpulist(q("nvmlDeviceGetCpuAffinity", (ncpu + 63) // 64)) or _sysfs_pci(
            bus_id, "local_cpulist"
        )

    def coded(fn: str, table: dict[int, str], unknown: str | None = None) -> Callable[[], str | None]:
        def get() -> str | None:
            v = q(fn)
            return None if v is None else table.get(v, unknown.format(v) if unknown else None)

        return get

    def flag(get: Callable[[], Any], pos: int | None = None) -> Callable[[], bool | None]:
        def read() -> bool | None:
            v = get()
            if v is None:
                return None
            return bool(v if pos is None else v[pos])

        return read

    def limit(pos: int) -> Callable[[], float | None]:
        return lambda: _watts(constraints()[pos]) if constraints() else None

    def threshold(which: str) -> Callable[[], Any]:
        return lambda: q("nvmlDeviceGetTemperatureThreshold", getattr(lib, which))

    lib = nv.lib
    pci = q("nvmlDeviceGetPciInfo_v3") or q("nvmlDeviceGetPciInfo")
    bus_id = _text(getattr(pci, "busId", None))
    constraints = once(lambda: q("nvmlDeviceGetPowerManagementLimitConstraints"))
    mig = once(lambda: q("nvmlDeviceGetMigMode"))
    cc = once(lambda: q("nvmlDeviceGetCudaComputeCapability"))
    readers: dict[str, Callable[[], Any]] = {
        "memory_total": memory_total,
        "max_sm_clock": lambda: q("nvmlDeviceGetMaxClockInfo", lib.NVML_CLOCK_SM),
        "max_mem_clock": lambda: q("nvmlDeviceGetMaxClockInfo", lib.NVML_CLOCK_MEM),
        "max_graphics_clock": lambda: q("nvmlDeviceGetMaxClockInfo", lib.NVML_CLOCK_GRAPHICS),
        "power_limit": lambda: _watts(q("nvmlDeviceGetEnforcedPowerLimit")),
        "power_default_limit": lambda: _watts(q("nvmlDeviceGetPowerManagementDefaultLimit")),
        "power_min_limit": limit(0),
        "power_max_limit": limit(1),
        "compute_capability": lambda: (int(cc()[0]), int(cc()[1])) if cc() else None,
        "cuda_cores": lambda: q("nvmlDeviceGetNumGpuCores"),
        "architecture": coded("nvmlDeviceGetArchitecture", _ARCHITECTURES, "arch {}"),
        "brand": coded("nvmlDeviceGetBrand", _BRANDS),
        "serial": lambda: _text(q("nvmlDeviceGetSerial")),
        "board_part_number": lambda: _text(q("nvmlDeviceGetBoardPartNumber")),
        "vbios_version": lambda: _text(q("nvmlDeviceGetVbiosVersion")),
        "inforom_version": lambda: _text(q("nvmlDeviceGetInforomImageVersion")),
        "memory_bus_width": lambda: q("nvmlDeviceGetMemoryBusWidth"),
        "pcie_max_gen": lambda: q("nvmlDeviceGetMaxPcieLinkGeneration"),
        "pcie_max_width": lambda: q("nvmlDeviceGetMaxPcieLinkWidth"),
        "persistence_mode": flag(lambda: q("nvmlDeviceGetPersistenceMode")),
        "compute_mode": coded("nvmlDeviceGetComputeMode", _COMPUTE_MODES),
        "mig_mode": flag(mig, 0),
        "mig_mode_pending": flag(mig, 1),
        "ecc_mode": ecc_mode,
        "bar1_total": lambda: getattr(q("nvmlDeviceGetBAR1MemoryInfo"), "bar1Total", None),
        "numa_node": numa_node,
        "cpu_affinity": cpu_affinity,
        "minor_number": lambda: q("nvmlDeviceGetMinorNumber"),
        "temp_slowdown": threshold("NVML_TEMPERATURE_THRESHOLD_SLOWDOWN"),
        "temp_shutdown": threshold("NVML_TEMPERATURE_THRESHOLD_SHUTDOWN"),
        "temp_max_operating": threshold("NVML_TEMPERATURE_THRESHOLD_GPU_MAX"),
        "fan_count": lambda: q("nvmlDeviceGetNumFans"),
        "gpu_numa_id": lambda: q("nvmlDeviceGetNumaNodeId"),
    }
    return DeviceInfo(
        index=i,
        name=_text(q("nvmlDeviceGetName")) or "unknown GPU",
        uuid=_text(q("nvmlDeviceGetUUID")),
        bus_id=bus_id,
        **{k: read() for k, read in readers.items() if want is None or k in want},
    )
