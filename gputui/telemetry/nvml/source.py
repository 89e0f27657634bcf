"""Live telemetry from NVML (through `query.Nvml.query`) and psutil.

`NvmlSource` reads the static facts once, samples the
cheap counters every tick, and runs the expensive queries (PCIe throughput, per-process
utilization, energy) on a slower thread of their own so they never stall a tick.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from gputui.telemetry.host.procfs import host_sampler
from gputui.telemetry.metrics import NVML_READS, NvmlRead
from gputui.telemetry.model import (
    DeviceInfo,
    GpmSample,
    GpuProcess,
    GpuSample,
    MachineInfo,
    MigDevice,
    Snapshot,
    SystemInfo,
    Topology,
)
from gputui.telemetry.nvml.gpm import GpmSampler
from gputui.telemetry.nvml.query import (
    _ALL_LINKS,
    _ARCHITECTURE_CODES,
    _ARCHITECTURES,
    _BRANDS,
    _COMPUTE_MODES,
    _FI_NVLINK_LINK_COUNT,
    _FI_NVLINK_THROUGHPUT_DATA_RX,
    _FI_NVLINK_THROUGHPUT_DATA_TX,
    _INVALID_ID,
    _TIMEOUT,
    GpuLost,
    Nvml,
    _handle_key,
    _sysfs_pci,
    _text,
    _watts,
    counter_rate,
    cpulist,
    explain_nvml_failure,
    field_int,
    single_node,
)
from gputui.telemetry.nvml.topology import read_topology

if TYPE_CHECKING:
    from gputui.telemetry.host.processes import ProcessInspector


__all__ = [  # with what callers know from here: query's names
    "GpuLost",
    "Nvml",
    "NvmlSource",
    "SlowFields",
    "counter_rate",
    "cpulist",
    "explain_nvml_failure",
    "field_int",
]

XID_EVENT = 0x8
"""nvmlEventTypeXidCriticalError: the driver reported an Xid (a critical error) for the GPU."""
EVENT_WAIT_MS = 100
"""How long one wait for an event lasts: closing the source (quitting) waits at most this for
the event thread, which must leave NVML's wait before nvmlShutdown."""
RARE_EVERY = 5
"""The slow pass reads the counters that change rarely or only count up (energy, PCIe
replays, remapped rows, retired pages) every RARE_EVERY-th pass (10 s at the default 2 s):
energy alone cost 4 ms a GPU a pass, an eighth of the live monitor's steady CPU."""
PREFETCHED_MAX_AGE_S = 1.0
"""The prefetched first sample is shown only while younger than this (else sampled anew)."""


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
class _SlowValues:
    """Latest results of the slow-cadence queries for one GPU."""

    fields: SlowFields = field(default_factory=SlowFields)
    rare: SlowFields | None = None
    """The counters read every RARE_EVERY-th pass (also in `fields`); None: not read yet."""
    proc_util: dict[int, tuple[int, int, int, int]] = field(default_factory=dict)
    last_seen_us: int = 0


@dataclass
class _NvLinkCounters:
    """NVLink throughput counters of one GPU, to turn cumulative KiB into bytes/s."""

    links: int | None = None
    """How many NVLinks the GPU has (None: not asked yet; 0: none or not readable)."""
    previous: dict[tuple[int, int], tuple[float, int]] = field(default_factory=dict)
    """(field id, scope) -> (timestamp in µs, counter in KiB) of the last reading."""


class NvmlSource:
    """Live telemetry from NVML and psutil.

    `open()` never raises for NVML problems: when NVML cannot be used the source still
    samples the host, and `MachineInfo.system.nvml_problem` says why there are no GPUs.
    """

    live = True
    local_processes = True
    seekable: None = None
    """Live data: nothing to seek."""

    def __init__(
        self,
        slow_interval: float = 2.0,
        nvml: Nvml | None = None,
        *,
        slow: bool = True,
        enrich_processes: bool = True,
        static: Iterable[str] | None = None,
    ) -> None:
        """`slow=False`: no slow-cadence thread (PCIe throughput, energy and per-process
        utilization stay None) — for one-shot readers that don't need them, since that
        thread's 20 ms PCIe calls hold NVML while they run.  `enrich_processes=False`:
        processes carry only what NVML says (no psutil facts).  `static`: the DeviceInfo
        facts to read besides index, name, UUID and bus id (default: all of them)."""
        self.label = "live"
        self.slow_interval = slow_interval
        self._slow_enabled = slow
        self._enrich = enrich_processes
        self._static = None if static is None else frozenset(static)
        self._nvml = nvml
        self._handles: list[Any] = []
        self._devices: tuple[DeviceInfo, ...] = ()
        self._lost: set[int] = set()
        self._slow: dict[int, _SlowValues] = {}
        self._slow_lock = threading.Lock()
        self._nvlink_counters: dict[int, _NvLinkCounters] = {}
        self._no_field: set[tuple[int, int]] = set()
        """(GPU, field id) of field values the GPU answered with an error: not asked again."""
        self._xids: dict[int, tuple[int, int | None]] = {}
        """GPU -> (Xid events seen, the last code), for the GPUs whose events are watched."""
        self._event_thread: threading.Thread | None = None
        self._mig_enabled: set[int] = set()
        """GPUs in MIG mode: NVML measures no per-process utilization there."""
        self._slow_thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._host = host_sampler()
        self._procs: ProcessInspector | None = None
        """psutil's view of the processes, made when first needed (psutil costs a one-shot
        reader 13-47 ms to import)."""
        self._seq = 0
        self.info: MachineInfo | None = None
        self._prefetch: threading.Thread | None = None
        self._first: Snapshot | None = None
        """The sample the prefetch thread took (see `prefetch`)."""
        self.slow_cost: float | None = None
        """Seconds the last full slow-cadence pass took (all GPUs)."""
        self.slow_passes = 0
        """Slow-cadence passes done (GPM needs two for its first window)."""
        self.gpm: GpmSampler | None = None
        """GPM activity (SM, tensor cores, DRAM), sampled on the slow cadence."""

    # ---- static ----------------------------------------------------------------------

    def prefetch(self) -> None:
        """Start opening NVML and taking the first sample on a thread, e.g. while the UI's
        modules load (nvmlInit and the static queries are C calls that release the GIL);
        `take_ready` hands them over, and the next `open()` waits for them."""
        if self._prefetch is not None or self.info is not None:
            return
        self._prefetch = threading.Thread(target=self._open_and_sample, name="gputui-nvml-open", daemon=True)
        self._prefetch.start()

    def _open_and_sample(self) -> None:
        """The prefetch thread: open, then take the first sample too (its NVML and /proc
        reads also overlap with the imports), which the first `sample()` hands out while
        it is younger than PREFETCHED_MAX_AGE_S."""
        self._open()
        try:
            self._first = self.sample()
        except Exception:  # the poller's own first sample says what is wrong
            self._first = None

    def take_ready(self) -> tuple[MachineInfo, Snapshot] | None:
        """The static facts and the prefetched first sample, if the prefetch has finished
        and the sample is still fresh; else None (see `source.take_ready`).  Never blocks:
        the UI thread calls it at mount."""
        thread = self._prefetch
        if thread is None or thread.is_alive():
            return None
        thread.join()  # (finished: returns at once)
        self._prefetch = None
        info, first, self._first = self.info, self._first, None
        if info is None or first is None or time.time() - first.timestamp >= PREFETCHED_MAX_AGE_S:
            return None
        self._seq = max(self._seq, first.seq)  # (this process's own samples follow it)
        return info, first

    def open(self) -> MachineInfo:
        if self._prefetch is not None:
            self._prefetch.join()
            self._prefetch = None
        if self.info is not None:
            return self.info
        return self._open()

    def _open(self) -> MachineInfo:
        hostname = os.uname().nodename  # (no `socket` import just for this)
        try:
            if self._nvml is None:
                self._nvml = Nvml()
            self._nvml.init()
        except Exception as exc:  # ImportError or any NVMLError subclass
            self._nvml = None
            self.info = MachineInfo(SystemInfo(hostname, nvml_problem=explain_nvml_failure(exc)))
            return self.info
        q = self._nvml.query
        cuda = q("nvmlSystemGetCudaDriverVersion")
        count = q("nvmlDeviceGetCount") or 0
        system = SystemInfo(
            hostname=hostname,
            driver_version=_text(q("nvmlSystemGetDriverVersion")),
            cuda_driver_version=f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
            nvml_version=_text(q("nvmlSystemGetNVMLVersion")),
            device_count=count,
        )
        devices = []
        for i in range(count):
            handle = q("nvmlDeviceGetHandleByIndex", i, device=i)
            self._handles.append(handle)
            self._slow[i] = _SlowValues()
        devices = self._read_device_infos()
        self._devices = tuple(devices)
        self._mig_enabled = {d.index for d in devices if d.mig_mode}
        self.info = MachineInfo(system, self._devices)
        if self._slow_enabled:
            self.gpm = GpmSampler(self._nvml)
            self._slow_thread = threading.Thread(target=self._slow_loop, name="gputui-nvml-slow", daemon=True)
            self._slow_thread.start()
            self._event_thread = threading.Thread(
                target=self._event_loop, name="gputui-nvml-events", daemon=True
            )
            self._event_thread.start()
        return self.info

    def _read_device_infos(self) -> list[DeviceInfo]:
        """Every GPU's static facts, the GPUs in parallel: NVML releases the GIL, and some of
        these calls take a millisecond or more each (max clocks), so 8 GPUs read in about the
        time of one."""
        handles = list(self._handles)
        if len(handles) < 2:
            return [self._device_info(i, h) for i, h in enumerate(handles)]
        results: list[DeviceInfo | None] = [None] * len(handles)

        def read(i: int) -> None:
            results[i] = self._device_info(i, handles[i])

        threads = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(len(handles))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return [
            r if r is not None else DeviceInfo(index=i, name="unknown GPU") for i, r in enumerate(results)
        ]

    def _device_info(self, i: int, h: Any) -> DeviceInfo:
        """One GPU's static facts: all of them, or (`static=` given) index, name, UUID, bus
        id and the ones named — some of these calls cost milliseconds each (memory
        affinity 12 ms, max clocks 2 ms on an H200), a lot for a one-shot reader."""
        nv = self._nvml
        assert nv is not None
        if h is None:
            return DeviceInfo(index=i, name="unknown GPU")
        want = self._static

        def q(fn: str, *args: Any) -> Any:
            try:
                return nv.query(fn, h, *args, device=i)
            except GpuLost:
                self._lost.add(i)
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
                return getattr(self._memory_info(i, h), "total", None)
            except GpuLost:
                self._lost.add(i)
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

    def read_topology(self) -> Topology | None:
        """How the GPUs are linked (NVML common ancestors, P2P status, NVLinks). Static."""
        if self._nvml is None or not self._handles:
            return None
        return read_topology(self._nvml, self._handles, self._lost)

    # ---- every tick ------------------------------------------------------------------

    def sample(self) -> Snapshot:
        first, self._first = self._first, None
        if first is not None and time.time() - first.timestamp < PREFETCHED_MAX_AGE_S:
            return first
        t0 = time.perf_counter()
        now = time.time()
        gpus: list[GpuSample] = []
        raw_procs: list[GpuProcess] = []
        for i, h in enumerate(self._handles):
            if i in self._lost or h is None:
                gpus.append(GpuSample(index=i, lost=True))
                continue
            try:
                gpus.append(self._gpu_sample(i, h))
                raw_procs.extend(self._gpu_processes(i, h))
            except GpuLost:
                self._lost.add(i)
                gpus.append(GpuSample(index=i, lost=True))
        processes = raw_procs
        if self._enrich:
            if self._procs is None:
                from gputui.telemetry.host.processes import ProcessInspector

                self._procs = ProcessInspector()
            processes = self._procs.enrich(raw_procs, now)
        host = self._host.sample()
        self._seq += 1
        return Snapshot(
            seq=self._seq,
            timestamp=now,
            gpus=tuple(gpus),
            processes=tuple(processes),
            host=host,
            launchers=self._procs.launchers if self._enrich and self._procs is not None else (),
            sample_cost=time.perf_counter() - t0,
        )

    def _gpu_sample(self, i: int, h: Any) -> GpuSample:
        nv = self._nvml
        assert nv is not None

        def q(fn: str, *args: Any) -> Any:
            return nv.query(fn, h, *args, device=i)

        values = self._reads(i, h, NVML_READS["tick"])
        with self._slow_lock:
            slow = self._slow.get(i)
            slow_fields = SlowFields(**slow.fields) if slow else SlowFields()
            xid = self._xids.get(i)
        if xid is not None:
            slow_fields["xid_count"], slow_fields["xid_last"] = xid
        return GpuSample(index=i, **values, **slow_fields)

    def _reads(self, i: int, h: Any, reads: Iterable[tuple[str, NvmlRead]]) -> dict[str, Any]:
        """field -> value for the registry's reads of one cadence (metrics.NVML_READS); each
        NVML call once, whatever number of fields read a part of it."""
        nv = self._nvml
        assert nv is not None
        lib = nv.lib
        calls: dict[tuple[str, tuple[Any, ...]], Any] = {}
        out: dict[str, Any] = {}
        for name, r in reads:
            if r.field_id is not None:
                out[name] = self._field_value(i, h, r.field_id)
                continue
            args = tuple(getattr(lib, a) if isinstance(a, str) else a for a in r.args)
            key = (r.fn, args)
            if key not in calls:
                if r.fn == "nvmlDeviceGetMemoryInfo":
                    value = self._memory_info(i, h)
                else:
                    value = nv.query(r.fn, h, *args, device=i)
                    if value is None and r.fallback:
                        value = nv.query(r.fallback, h, *args, device=i)
                calls[key] = value
            value = calls[key]
            if value is not None and r.part is not None:
                value = value[r.part] if isinstance(r.part, int) else getattr(value, r.part, None)
            out[name] = value if value is None or r.convert is None else r.convert(value)
        return out

    def _field_value(self, i: int, h: Any, field_id: int) -> int | None:
        """One integer of nvmlDeviceGetFieldValues; a field the GPU reports an error for is
        not asked again (the call itself remembers Not Supported in `Nvml.query`)."""
        nv = self._nvml
        assert nv is not None
        if (i, field_id) in self._no_field:
            return None
        values = nv.query("nvmlDeviceGetFieldValues", h, [field_id], device=i)
        value = field_int(values[0]) if values else None
        if value is None and values:
            self._no_field.add((i, field_id))
        return value

    def _memory_info(self, i: int, h: Any) -> Any:
        """Memory info v2 (used excludes driver-reserved memory, as nvidia-smi shows it);
        v1 on drivers without it, where "used" includes the reserved part."""
        nv = self._nvml
        assert nv is not None
        v2 = getattr(nv.lib, "nvmlMemory_v2", None)
        if v2 is not None:
            mem = nv.query("nvmlDeviceGetMemoryInfo", h, v2, device=i)
            if mem is not None:
                return mem
        return nv.query("nvmlDeviceGetMemoryInfo", h, device=i)

    def _gpu_processes(self, i: int, h: Any) -> list[GpuProcess]:
        nv = self._nvml
        assert nv is not None
        merged: dict[int, dict[str, Any]] = {}
        for fn, kind in (
            ("nvmlDeviceGetComputeRunningProcesses", "C"),
            ("nvmlDeviceGetGraphicsRunningProcesses", "G"),
            ("nvmlDeviceGetMPSComputeRunningProcesses", "M"),
        ):
            for p in nv.query(fn, h, device=i) or ():
                entry = merged.setdefault(p.pid, {"kinds": [], "mem": None, "gi": None, "ci": None})
                if kind not in entry["kinds"]:
                    entry["kinds"].append(kind)
                mem = getattr(p, "usedGpuMemory", None)
                if mem is not None:
                    entry["mem"] = max(entry["mem"] or 0, mem)
                gi = getattr(p, "gpuInstanceId", _INVALID_ID)
                ci = getattr(p, "computeInstanceId", _INVALID_ID)
                entry["gi"] = None if gi in (None, _INVALID_ID) else gi
                entry["ci"] = None if ci in (None, _INVALID_ID) else ci
        with self._slow_lock:
            slow = self._slow.get(i)
            util = dict(slow.proc_util) if slow else {}
        out = []
        for pid, e in merged.items():
            kinds = e["kinds"]
            kind = "C+G" if "G" in kinds and len(kinds) > 1 else kinds[0]
            # before the first slow pass there is no sample window yet: unknown, not 0; and
            # on a MIG-enabled GPU NVML measures no per-process utilization at all
            sampled = slow is not None and slow.last_seen_us > 0 and i not in self._mig_enabled
            sm, mu, enc, dec = util.get(pid, (0, 0, 0, 0)) if sampled else (None,) * 4
            out.append(
                GpuProcess(
                    gpu_index=i,
                    pid=pid,
                    type=kind,
                    gpu_memory=e["mem"],
                    sm_util=sm,
                    mem_util=mu,
                    enc_util=enc,
                    dec_util=dec,
                    gpu_instance_id=e["gi"],
                    compute_instance_id=e["ci"],
                )
            )
        return out

    # ---- slow cadence ----------------------------------------------------------------

    def _event_loop(self) -> None:
        """Wait for Xid events (the driver's critical-error reports) of every GPU and count
        them.  Runs alongside the slow thread; where the driver or a GPU has no event support
        that GPU's count stays None (not watched) rather than 0."""
        nv = self._nvml
        if nv is None:
            return
        lib = nv.lib
        names = ("nvmlEventSetCreate", "nvmlDeviceRegisterEvents", "nvmlEventSetWait_v2", "nvmlEventSetFree")
        create, register, wait, free = (getattr(lib, n, None) for n in names)
        if create is None or register is None or wait is None or free is None:
            nv.note("nvmlEventSetWait_v2", "no NVML events in these nvidia-ml-py bindings: Xids not watched")
            return
        try:
            event_set = create()
        except lib.NVMLError as exc:
            nv.note("nvmlEventSetCreate", str(exc))
            return
        try:
            watched: dict[object, int] = {}
            for i, h in enumerate(self._handles):
                if h is None or i in self._lost:
                    continue
                try:
                    register(h, XID_EVENT, event_set)
                except lib.NVMLError:
                    continue  # no Xid events for this GPU (not supported, no permission)
                watched[_handle_key(h)] = i
                with self._slow_lock:
                    self._xids[i] = (0, None)
            while watched and not self._stop.is_set():
                try:
                    data = wait(event_set, EVENT_WAIT_MS)
                except lib.NVMLError as exc:
                    if exc.value == _TIMEOUT:
                        continue
                    nv.note("nvmlEventSetWait_v2", str(exc))
                    return
                gpu = watched.get(_handle_key(data.device))
                if gpu is not None and int(data.eventType) & XID_EVENT:
                    with self._slow_lock:
                        self._xids[gpu] = (self._xids[gpu][0] + 1, int(data.eventData))
        except Exception as exc:  # never a traceback from a thread onto the TUI's terminal
            nv.note("nvmlEventSetWait_v2", f"the Xid watch stopped: {exc!r}")
        finally:
            with contextlib.suppress(Exception):
                free(event_set)
            if not self._stop.is_set():  # stopped by an error: "none seen" is no longer known
                with self._slow_lock:
                    self._xids = {i: v for i, v in self._xids.items() if v[0]}

    def _slow_loop(self) -> None:
        """PCIe throughput (a 20 ms sampling window each way), per-process utilization and
        energy, one GPU at a time so the fast tick's calls interleave with them."""
        while not self._stop.is_set():
            t0 = time.perf_counter()
            for i, h in enumerate(self._handles):
                if self._stop.is_set():
                    return
                if i in self._lost or h is None:
                    continue
                try:
                    values = self._slow_sample(i, h)
                except GpuLost:
                    self._lost.add(i)
                    continue
                with self._slow_lock:
                    self._slow[i] = values
            self.slow_cost = time.perf_counter() - t0
            self.slow_passes += 1
            self._stop.wait(max(0.05, self.slow_interval - self.slow_cost))

    def gpm_window_pending(self) -> bool:
        """After a slow pass: whether a GPU awaits its first GPM window (GPM took a sample
        there and gave no reason why not; the next pass closes the window)."""
        with self._slow_lock:
            return any(
                "gpm" in v.fields and v.fields["gpm"] is None
                for i, v in self._slow.items()
                if i not in self._lost
            )

    def _slow_sample(self, i: int, h: Any) -> _SlowValues:
        nv = self._nvml
        assert nv is not None

        def q(fn: str, *args: Any) -> Any:
            return nv.query(fn, h, *args, device=i)

        with self._slow_lock:
            prev = self._slow.get(i) or _SlowValues()
        now_us = int(time.time() * 1e6)
        since = prev.last_seen_us or now_us - int(self.slow_interval * 1e6)
        samples = q("nvmlDeviceGetProcessUtilization", since) or ()
        util: dict[int, tuple[int, int, int, int]] = {}
        latest: dict[int, int] = {}
        for s in samples:
            ts = int(getattr(s, "timeStamp", 0))
            if ts < since or ts < latest.get(s.pid, -1):
                continue
            latest[s.pid] = ts
            util[s.pid] = tuple(  # type: ignore[assignment]
                min(100, max(0, int(getattr(s, a, 0) or 0)))
                for a in ("smUtil", "memUtil", "encUtil", "decUtil")
            )
        nvl_rx, nvl_tx, link_rx, link_tx = self._nvlink_throughput(i, h)
        fields = SlowFields(**self._reads(i, h, NVML_READS["slow"]))  # type: ignore[typeddict-item]
        fields.update(
            {
                "nvlink_rx": nvl_rx,
                "nvlink_tx": nvl_tx,
                "nvlink_link_rx": link_rx,
                "nvlink_link_tx": link_tx,
                "mig_devices": (mig := self._mig_devices(i, h)),
            }
        )
        rare = prev.rare
        if rare is None or self.slow_passes % RARE_EVERY == 0:
            rare = SlowFields(**self._reads(i, h, NVML_READS["rare"]))  # type: ignore[typeddict-item]
        fields.update(rare)  # (between their passes, the last values stand)
        if self.gpm is not None:
            dev = self._devices[i] if i < len(self._devices) else None
            arch = dev.architecture if dev else None
            fields["gpm"] = self.gpm.sample(
                i,
                h,
                architecture=arch,
                arch_code=_ARCHITECTURE_CODES.get(arch or ""),
                mig_instances=(
                    tuple(sorted({m.gpu_instance_id for m in mig if m.gpu_instance_id is not None}))
                    if i in self._mig_enabled
                    else None
                ),
            )
        return _SlowValues(fields=fields, rare=rare, proc_util=util, last_seen_us=now_us)

    def _nvlink_throughput(
        self, i: int, h: Any
    ) -> tuple[int | None, int | None, tuple[int | None, ...], tuple[int | None, ...]]:
        """NVLink data throughput, all links and per link, in bytes/s: NVML's cumulative
        KiB counters (field values, scope = link or all links) differenced between passes."""
        nv = self._nvml
        assert nv is not None
        lib = nv.lib
        counters = self._nvlink_counters.setdefault(i, _NvLinkCounters())
        tx_id = getattr(lib, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", _FI_NVLINK_THROUGHPUT_DATA_TX)
        rx_id = getattr(lib, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX", _FI_NVLINK_THROUGHPUT_DATA_RX)
        if counters.links is None:
            count_id = getattr(lib, "NVML_FI_DEV_NVLINK_LINK_COUNT", _FI_NVLINK_LINK_COUNT)
            values = nv.query("nvmlDeviceGetFieldValues", h, [count_id], device=i)
            counters.links = field_int(values[0]) or 0 if values else 0
        if not counters.links:
            return None, None, (), ()
        wanted = [(tx_id, _ALL_LINKS), (rx_id, _ALL_LINKS)]
        for link in range(counters.links):
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
        links = range(counters.links)
        return (
            rates.get((rx_id, _ALL_LINKS)),
            rates.get((tx_id, _ALL_LINKS)),
            tuple(rates.get((rx_id, k)) for k in links),
            tuple(rates.get((tx_id, k)) for k in links),
        )

    def _mig_devices(self, i: int, h: Any) -> tuple[MigDevice, ...]:
        """The MIG devices of a GPU in MIG mode (re-read every slow pass: an administrator
        can create or destroy instances while gputui runs)."""
        nv = self._nvml
        assert nv is not None
        mode = nv.query("nvmlDeviceGetMigMode", h, device=i)
        if not mode or not mode[0]:
            self._mig_enabled.discard(i)
            return ()
        self._mig_enabled.add(i)
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

    def notes(self) -> list[str]:
        return self._nvml.notes if self._nvml else []

    def close(self) -> None:
        self._stop.set()
        if self._slow_thread is not None:
            self._slow_thread.join(timeout=2)
        if self._event_thread is not None:
            self._event_thread.join(timeout=2)  # it wakes every EVENT_WAIT_MS
        if self.gpm is not None and (self._slow_thread is None or not self._slow_thread.is_alive()):
            self.gpm.close()
        if self._nvml is not None:
            self._nvml.shutdown()
