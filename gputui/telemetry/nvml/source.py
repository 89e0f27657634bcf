"""Live telemetry from NVML (through `query.Nvml.query`) and psutil.

`NvmlSource` reads the static facts once (`static.py`), samples the cheap counters every
tick (here), and runs the expensive queries (PCIe throughput, per-process utilization,
energy: `slow.py`) on a slower thread of their own so they never stall a tick; Xid events
are drained after each slow pass (`events.py`).

The monitor imports this module before its first frame (to fork the read-ahead's child); what
only an open NVML uses (the static facts, the topology, GPM's sampler and the Xid events, with
ctypes) is imported where NVML is opened or the slow thread starts: on the poller's thread,
after the first frame, or in the child.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeGuard

from gputui.telemetry.host.procfs import host_sampler
from gputui.telemetry.metric_types import NvmlRead
from gputui.telemetry.metrics import NVML_READS
from gputui.telemetry.model import (
    DeviceInfo,
    GpuProcess,
    GpuSample,
    MachineInfo,
    Snapshot,
    SystemInfo,
    Topology,
)
from gputui.telemetry.nvml.query import (
    _ARCHITECTURE_CODES,
    _INVALID_ID,
    GpuLost,
    Nvml,
    _text,
    counter_rate,
    cpulist,
    explain_nvml_failure,
    field_int,
    memory_info,
)
from gputui.telemetry.nvml.read_ahead import ChildRead, can_fork
from gputui.telemetry.nvml.slow import (
    RARE_EVERY,
    NvLinkCounters,
    SlowFields,
    SlowValues,
    mig_devices,
    nvlink_throughput,
    process_utilization,
)

if TYPE_CHECKING:
    from gputui.telemetry.host.processes import ProcessInspector
    from gputui.telemetry.nccl.watch import RasWatch
    from gputui.telemetry.nvml.events import XidWatch
    from gputui.telemetry.nvml.gpm import GpmSampler


__all__ = [  # with what callers know from here: query's names
    "RARE_EVERY",
    "GpuLost",
    "Nvml",
    "NvmlSource",
    "SlowFields",
    "counter_rate",
    "cpulist",
    "explain_nvml_failure",
    "field_int",
]

PREFETCHED_MAX_AGE_S = 1.0
"""The prefetched first sample is shown only while younger than this (else sampled anew)."""


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
        ras: bool | None = None,
    ) -> None:
        """`slow=False`: no slow-cadence thread (PCIe throughput, energy and per-process
        utilization stay None) — for one-shot readers that don't need them, since that
        thread's 20 ms PCIe calls hold NVML while they run.  `enrich_processes=False`:
        processes carry only what NVML says (no psutil facts).  `static`: the DeviceInfo
        facts to read besides index, name, UUID and bus id (default: all of them).  `ras`: ask
        NCCL's RAS service about the jobs of two ranks or more (gputui.telemetry.nccl.watch);
        default: with the slow thread and psutil's facts (a one-shot reader asks by itself)."""
        self.label = "live"
        self.slow_interval = slow_interval
        self._slow_enabled = slow
        self._enrich = enrich_processes
        self._static = None if static is None else frozenset(static)
        self._nvml = nvml
        self._handles: list[Any] = []
        self._devices: tuple[DeviceInfo, ...] = ()
        self._lost: set[int] = set()
        self._slow: dict[int, SlowValues] = {}
        self._slow_lock = threading.Lock()
        self._nvlink_counters: dict[int, NvLinkCounters] = {}
        self._link_rates = False
        """Read each NVLink's counters, not only the totals (see `want_link_rates`)."""
        self._no_field: set[tuple[int, int]] = set()
        """(GPU, field id) of field values the GPU answered with an error: not asked again."""
        self._xid_watch: XidWatch | None = None
        """Xid events of every GPU, drained after each slow pass (see events.py)."""
        self._mig_enabled: set[int] = set()
        """GPUs in MIG mode: NVML measures no per-process utilization there."""
        self._idle_gpus: set[int] = set()
        """GPUs that ran no process at the last tick: the slow pass does not ask NVML for
        their per-process utilization (nothing to show; 2-3 ms of CPU a GPU a pass)."""
        self._slow_thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._host = host_sampler()
        self._procs: ProcessInspector | None = None
        """psutil's view of the processes, made when first needed (psutil costs a one-shot
        reader 13-47 ms to import)."""
        self._seq = 0
        self.info: MachineInfo | None = None
        self._prefetch: threading.Thread | None = None
        self._child: ChildRead | None = None
        """The read-ahead's child (`prefetch`): its answer taken once (`take_ready`), the
        child itself ended at `open()`, `close()` or `drop_read_ahead()`."""
        self._child_facts: MachineInfo | None = None
        """The child's static facts, once taken: `open()` keeps them for the GPUs that answer
        with the same UUIDs, not reading every fact again just after the first frame."""
        self._slow_after_frame = False
        """Read ahead for the monitor: the slow thread waits for `start_background`."""
        self._first: Snapshot | None = None
        """The sample the prefetch thread took (see `prefetch`)."""
        self.slow_cost: float | None = None
        """Seconds the last full slow-cadence pass took (all GPUs)."""
        self.slow_passes = 0
        """Slow-cadence passes done (GPM needs two for its first window)."""
        self.gpm: GpmSampler | None = None
        """GPM activity (SM, tensor cores, DRAM), sampled on the slow cadence."""
        self._ras_enabled = (slow and enrich_processes) if ras is None else ras
        self.ras: RasWatch | None = None
        """NCCL RAS's questions, on their own thread (made at the first GPU process)."""

    # ---- static ----------------------------------------------------------------------

    def prefetch(self, *, in_child: bool = False) -> None:
        """Start opening NVML and taking the first sample while the UI's modules load;
        `take_ready` hands them over, and the next `open()` waits for them.  On a thread,
        or with `in_child` in a forked child (read_ahead.py: on another core, not competing
        with the imports for the GIL; where no child can be made, on a thread).  The
        read-ahead starts no slow-cadence thread: `start_background` does, once the first
        frame is drawn, so that its first pass (PCIe reads that hold NVML 20 ms each, GPM,
        energy) neither delays the first sample nor competes with the UI."""
        if self._prefetch is not None or self._child is not None or self.info is not None:
            return
        self._slow_after_frame = True
        if in_child and can_fork():
            self._child = ChildRead.start(self._read_for_child)
            if self._child is not None:
                return
        self._prefetch = threading.Thread(target=self._open_and_sample, name="gputui-nvml-open", daemon=True)
        self._prefetch.start()

    def _read_for_child(self) -> tuple[MachineInfo, Snapshot]:
        """What the read-ahead's child sends back (in the child: its own NVML session)."""
        info = self._open()
        return info, self._sample(ras=False)

    def _open_and_sample(self) -> None:
        """The prefetch thread: open, then take the first sample too (its NVML and /proc
        reads also overlap with the imports), which the first `sample()` hands out while
        it is younger than PREFETCHED_MAX_AGE_S."""
        self._open()
        try:
            self._first = self._sample(ras=False)
        except Exception:  # the poller's own first sample says what is wrong
            self._first = None

    def take_ready(self) -> tuple[MachineInfo, Snapshot] | None:
        """The static facts and the prefetched first sample, if the prefetch has finished
        and the sample is still fresh; else None (see `source.take_ready`).  Never blocks:
        the UI thread calls it at mount.  A child's reading not finished by then goes on
        beside the poller's `open()`, which reads NVML in this process and then stops it."""
        if self._child is not None:
            answer = self._child.take()  # (once: None after)
            if not _is_reading(answer):
                return None
            info: MachineInfo | None = answer[0]
            first: Snapshot | None = answer[1]
            self._child_facts = info
        else:
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

    def drop_read_ahead(self) -> None:
        """A read-ahead child still running, or not yet reaped, is stopped now, without
        waiting (the monitor ends; one the kernel has not let go ends with it)."""
        self._end_child(wait=False)

    def _end_child(self, *, wait: bool) -> None:
        """The read-ahead's child stopped (killed if it still reads) and, with `wait`,
        reaped (a thread that may wait: the poller's, the one closing the source)."""
        if self._child is not None:
            if wait:
                self._child.reap()
            else:
                self._child.stop()
            self._child = None

    def open(self) -> MachineInfo:
        if self._prefetch is not None:
            self._prefetch.join()
            self._prefetch = None
        info = self.info if self.info is not None else self._open()
        # a read-ahead child: its reading was handed out at mount, or it had not answered by
        # then and read on beside this open (without persistence mode the driver stays
        # loaded while the child holds it, not unloaded and loaded again); this process has
        # its own NVML now
        self._end_child(wait=True)
        if not self._slow_after_frame:
            self._start_slow()
        return info

    def start_background(self) -> None:
        """A source read ahead for the monitor (`prefetch`) starts its slow-cadence thread
        here, once the monitor's first frame is on screen (the poller calls this when the app
        says so, `source.start_background`), not at `open()`: its first pass (PCIe reads of
        20 ms, GPM, energy, the Xid event set, for every GPU) would otherwise run beside
        Textual's first layout and paint, on the same interpreter.  Once; after `open()`."""
        self._start_slow()

    def _open(self, before_static: Callable[[], None] | None = None) -> MachineInfo:
        """NVML, the system's facts, the GPUs' handles and static facts; `before_static`
        runs once the handles are there (a one-shot reader's GPM windows open then)."""
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
        for i in range(count):
            handle = q("nvmlDeviceGetHandleByIndex", i, device=i)
            self._handles.append(handle)
            self._slow[i] = SlowValues()
        if before_static is not None:
            before_static()
        devices = self._facts_read_ahead()
        if devices is None:
            from gputui.telemetry.nvml.static import read_device_infos

            devices = read_device_infos(self._nvml, self._handles, self._static, self._lost)
        self._devices = tuple(devices)
        self._mig_enabled = {d.index for d in devices if d.mig_mode}
        self.info = MachineInfo(system, self._devices)
        return self.info

    def _facts_read_ahead(self) -> list[DeviceInfo] | None:
        """The read-ahead child's static facts, if this process's NVML answers with the same
        GPUs at the same indices (each asked its UUID: microseconds, against the
        milliseconds some static facts cost a GPU); None: read them here."""
        known, self._child_facts = self._child_facts, None
        nv = self._nvml
        if known is None or nv is None or len(known.devices) != len(self._handles):
            return None
        for i, (h, d) in enumerate(zip(self._handles, known.devices, strict=True)):
            if h is None or d.uuid is None or d.index != i:
                return None
            try:
                uuid = _text(nv.query("nvmlDeviceGetUUID", h, device=i))
            except GpuLost:
                return None
            if uuid != d.uuid:
                return None
        return list(known.devices)

    def _start_slow(self) -> None:
        """The slow-cadence thread (PCIe, energy, per-process utilization, GPM, Xids), once,
        on an open NVML with `slow=True`."""
        if not self._slow_enabled or self._slow_thread is not None or self._nvml is None:
            return
        from gputui.telemetry.nvml.events import XidWatch
        from gputui.telemetry.nvml.gpm import GpmSampler

        self.gpm = GpmSampler(self._nvml)
        self._xid_watch = XidWatch(self._nvml, self._handles, self._lost)
        self._slow_thread = threading.Thread(target=self._slow_loop, name="gputui-nvml-slow", daemon=True)
        self._slow_thread.start()

    def want_link_rates(self) -> None:
        """From the next slow pass on, read each NVLink's counters as well as the totals:
        for what shows a link (the Topology tab, a recording). Until then a pass reads the
        two totals alone: 2 field values against 38 with an H100's 18 links."""
        self._link_rates = True

    def read_topology(self) -> Topology | None:
        """How the GPUs are linked (NVML common ancestors, P2P status, NVLinks). Static.
        Whoever reads it shows the links: their rates are read from now on."""
        self.want_link_rates()
        if self._nvml is None or not self._handles:
            return None
        from gputui.telemetry.nvml.topology import read_topology

        return read_topology(self._nvml, self._handles, self._lost)

    # ---- every tick ------------------------------------------------------------------

    def sample(self) -> Snapshot:
        return self._sample(ras=True)

    def _sample(self, *, ras: bool) -> Snapshot:
        """One tick; `ras=False` (the read-ahead's first sample): no NCCL RAS watch made or
        offered the jobs yet (its modules load with the health engine's; its answers come
        from a round on its own thread, never in time for the first frame)."""
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
        if self._enrich and (raw_procs or self._procs is not None):
            if self._procs is None:  # at the first process: no GPU process, no psutil import
                from gputui.telemetry.host.processes import ProcessInspector

                self._procs = ProcessInspector()
            processes = self._procs.enrich(raw_procs, now)
        nccl = None
        if ras and self._ras_enabled and processes:
            if self.ras is None:
                from gputui.telemetry.nccl.watch import RasWatch

                self.ras = RasWatch()
            nccl = self.ras.offer(processes, now)
        elif ras and self.ras is not None:
            nccl = self.ras.offer((), now)  # the last job has gone: its view says so once
        host = self._host.sample()
        self._seq += 1
        return Snapshot(
            seq=self._seq,
            timestamp=now,
            gpus=tuple(gpus),
            processes=tuple(processes),
            host=host,
            launchers=self._procs.launchers if self._enrich and self._procs is not None else (),
            nccl=nccl,
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
        xid = self._xid_watch.get(i) if self._xid_watch is not None else None
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
                    value = memory_info(nv, i, h)
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
            if merged:
                self._idle_gpus.discard(i)
            else:
                self._idle_gpus.add(i)
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

    def _slow_loop(self) -> None:
        """PCIe throughput (a 20 ms sampling window each way), per-process utilization and
        energy, one GPU at a time so the fast tick's calls interleave with them; then the Xid
        events the driver queued."""
        xids = self._xid_watch
        if xids is not None:
            xids.open()
        try:
            self._slow_passes(xids)
        finally:
            if xids is not None:
                xids.close()

    def _slow_passes(self, xids: XidWatch | None) -> None:
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
            if xids is not None:
                xids.poll()
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

    def _gpm_sample(self, i: int, h: Any, mig: Any) -> Any:
        """GPU i's next GPM sample (None: its first window just opened); `mig` its MIG
        devices when it is in MIG mode."""
        assert self.gpm is not None
        dev = self._devices[i] if i < len(self._devices) else None
        arch = dev.architecture if dev else None
        return self.gpm.sample(
            i,
            h,
            architecture=arch,
            arch_code=_ARCHITECTURE_CODES.get(arch or ""),
            mig_instances=(
                tuple(sorted({m.gpu_instance_id for m in mig or () if m.gpu_instance_id is not None}))
                if i in self._mig_enabled
                else None
            ),
        )

    def _slow_sample(self, i: int, h: Any, *, gpm: bool = True) -> SlowValues:
        nv = self._nvml
        assert nv is not None

        def q(fn: str, *args: Any) -> Any:
            return nv.query(fn, h, *args, device=i)

        with self._slow_lock:
            prev = self._slow.get(i) or SlowValues()
            idle = i in self._idle_gpus
        now_us = int(time.time() * 1e6)
        if idle:  # no process at the last tick: nothing to read; unknown (not 0) until read
            util: dict[int, tuple[int, int, int, int]] = {}
            seen_us = 0
        else:
            since = prev.last_seen_us or now_us - int(self.slow_interval * 1e6)
            samples = q("nvmlDeviceGetProcessUtilization", since) or ()
            util = process_utilization(samples, since)
            seen_us = now_us
        counters = self._nvlink_counters.setdefault(i, NvLinkCounters())
        nvl_rx, nvl_tx, link_rx, link_tx = nvlink_throughput(nv, i, h, counters, per_link=self._link_rates)
        fields = SlowFields(**self._reads(i, h, NVML_READS["slow"]))  # type: ignore[typeddict-item]
        rare_pass = self.slow_passes % RARE_EVERY == 0
        # MIG mode changes only while no process uses the GPU, and asking costs up to 1.8 ms:
        # a GPU not in MIG mode is asked on the rare passes; one in it has its instances
        # (created and destroyed at any time) read every pass
        found = mig_devices(nv, i, h) if rare_pass or i in self._mig_enabled else None
        if found is None:
            self._mig_enabled.discard(i)
        else:
            self._mig_enabled.add(i)
        mig = found or ()
        fields.update(
            {
                "nvlink_rx": nvl_rx,
                "nvlink_tx": nvl_tx,
                "nvlink_link_rx": link_rx,
                "nvlink_link_tx": link_tx,
                "mig_devices": mig,
            }
        )
        rare = prev.rare
        if rare is None or rare_pass:
            rare = SlowFields(**self._reads(i, h, NVML_READS["rare"]))  # type: ignore[typeddict-item]
        fields.update(rare)  # (between their passes, the last values stand)
        if gpm and self.gpm is not None:
            fields["gpm"] = self._gpm_sample(i, h, mig)
        return SlowValues(fields=fields, rare=rare, proc_util=util, last_seen_us=seen_us)

    def notes(self) -> list[str]:
        return self._nvml.notes if self._nvml else []

    def close(self) -> None:
        self._stop.set()
        self._end_child(wait=True)
        if self.ras is not None:
            self.ras.close()
        if self._slow_thread is not None:
            self._slow_thread.join(timeout=2)
        if self.gpm is not None and (self._slow_thread is None or not self._slow_thread.is_alive()):
            self.gpm.close()
        if self._nvml is not None:
            self._nvml.shutdown()


def _is_reading(answer: object) -> TypeGuard[tuple[MachineInfo, Snapshot]]:
    """The read-ahead child's answer has the shape it sends: (MachineInfo, Snapshot)."""
    return (
        isinstance(answer, tuple)
        and len(answer) == 2
        and isinstance(answer[0], MachineInfo)
        and isinstance(answer[1], Snapshot)
    )
