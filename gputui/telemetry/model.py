"""Frozen dataclasses for everything gputui knows about a machine.

`None` always means "not available" (unsupported by the GPU or driver, failed, or not yet
sampled); the UI shows it as "N/A".  Units are in the field names' docstrings and never
change: bytes, bytes per second, watts, MHz, degrees Celsius, percent (0-100), seconds.
"""

from __future__ import annotations

import sys
import types
import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gputui.rules.clocks import SLOWDOWN_MASK

if TYPE_CHECKING:  # (imported where a value is made or decoded: `field_type`)
    from gputui.telemetry.nccl.model import NcclView
    from gputui.telemetry.stack_evidence import StackEvidence

# --------------------------------------------------------------------------------------
# Clock-event ("throttle") reasons, NVML's nvmlClocksEventReason* bit mask.
# --------------------------------------------------------------------------------------

#: bit -> (short name, explanation).  Order is NVML's.
CLOCK_EVENT_REASONS: dict[int, tuple[str, str]] = {
    0x001: ("idle", "nothing is running, clocks are lowered to save power"),
    0x002: ("app clocks", "clocks are limited by the applications-clocks setting"),
    0x004: ("SW power cap", "the power draw reached the power limit; clocks are lowered to stay under it"),
    0x008: (
        "HW slowdown",
        "hardware slowdown: too hot, or an external power brake (clocks cut by half or more)",
    ),
    0x010: ("sync boost", "clocks are held to those of other GPUs in a sync-boost group"),
    0x020: ("SW thermal", "the GPU or memory temperature is over its software limit"),
    0x040: ("HW thermal", "the hardware lowered clocks because the GPU is too hot"),
    0x080: ("HW power brake", "an external power brake signal (e.g. the power supply) cut the clocks"),
    0x100: ("display clocks", "clocks are limited by the display clock setting"),
    0x200: ("board limit", "clocks are limited by a board-level limit"),
    0x400: ("reliability", "clocks are limited to protect the GPU's reliability"),
}

#: Reasons that mean the GPU is running slower than it should: shown in a warning colour.
CLOCK_EVENT_SLOWDOWN_MASK = SLOWDOWN_MASK
#: Reasons that carry no news for a user (an idle GPU has low clocks; that is fine).
CLOCK_EVENT_QUIET_MASK = 0x001


def decode_clock_events(mask: int | None) -> tuple[str, ...]:
    """Names of the reasons set in an NVML clock-event bit mask, in NVML's order."""
    if not mask:
        return ()
    names = [name for bit, (name, _) in CLOCK_EVENT_REASONS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_REASONS)
    if unknown:
        names.append(f"0x{unknown:x}")
    return tuple(names)


# --------------------------------------------------------------------------------------
# Static facts: read once.
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NvmlProblem:
    """Why NVML could not be used at all: the no-GPU panel shows this."""

    code: int | None
    """NVML error code (e.g. 12 library not found, 18 driver/library mismatch); None for others."""
    error: str
    """The exact error text NVML (or the loader) gave."""
    meaning: str
    """What this usually means, in plain words."""
    advice: tuple[str, ...]
    """What to try, most likely first."""


@dataclass(frozen=True, slots=True)
class SystemInfo:
    """Facts about the machine and its driver."""

    hostname: str
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    """Highest CUDA version the driver supports, e.g. "13.0"."""
    nvml_version: str | None = None
    device_count: int = 0
    nvml_problem: NvmlProblem | None = None
    """Set when NVML could not be initialised; then there are no devices."""


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """Static facts about one GPU, read once when gputui starts."""

    index: int
    name: str
    uuid: str | None = None
    bus_id: str | None = None
    """PCI bus id as NVML and nvidia-smi print it, e.g. "00000000:00:06.0"."""
    memory_total: int | None = None
    """Bytes."""
    max_sm_clock: int | None = None
    """MHz."""
    max_mem_clock: int | None = None
    """MHz."""
    max_graphics_clock: int | None = None
    """MHz."""
    power_limit: float | None = None
    """Enforced power limit at start, watts (the live value is in each GpuSample)."""
    power_default_limit: float | None = None
    power_min_limit: float | None = None
    power_max_limit: float | None = None
    compute_capability: tuple[int, int] | None = None
    cuda_cores: int | None = None
    architecture: str | None = None
    brand: str | None = None
    serial: str | None = None
    board_part_number: str | None = None
    vbios_version: str | None = None
    inforom_version: str | None = None
    memory_bus_width: int | None = None
    """Bits."""
    pcie_max_gen: int | None = None
    pcie_max_width: int | None = None
    persistence_mode: bool | None = None
    compute_mode: str | None = None
    mig_mode: bool | None = None
    ecc_mode: bool | None = None
    bar1_total: int | None = None
    """Bytes."""
    numa_node: int | None = None
    """The NUMA node the GPU is attached to (its PCIe root's node): nvidia-smi topo's "NUMA
    Affinity".  From NVML's memory affinity, else sysfs; None on machines without NUMA
    information (many VMs)."""
    cpu_affinity: str | None = None
    """CPUs nearest to this GPU as a list, e.g. "0-15,32-47"."""
    minor_number: int | None = None
    temp_slowdown: int | None = None
    """°C at which the GPU slows down."""
    temp_shutdown: int | None = None
    """°C at which the GPU shuts down."""
    temp_max_operating: int | None = None
    """°C, the maximum operating temperature (NVML's GPU_MAX threshold)."""
    fan_count: int | None = None
    gpu_numa_id: int | None = None
    """NUMA node id of the GPU's own memory, where the GPU memory is a NUMA node (coherent
    CPU-GPU systems such as Grace Hopper): nvidia-smi topo's "GPU NUMA ID"."""
    mig_mode_pending: bool | None = None
    """MIG mode after the next GPU reset (differs from `mig_mode` while a change is pending)."""


#: The Xid codes users meet most, after NVIDIA's "Xid Errors" catalogue: what each means and
#: whether an application (rather than the GPU or driver) is the likely cause.
XID_MEANINGS: dict[int, tuple[str, bool]] = {
    13: ("graphics engine exception (often an application's out-of-range access)", True),
    31: ("GPU memory page fault (an application's illegal memory access)", True),
    43: ("GPU stopped processing (an application's fault ended its context)", True),
    45: ("preemptive cleanup (a process was killed or ended while using the GPU)", True),
    48: ("double-bit ECC error", False),
    61: ("internal microcontroller breakpoint", False),
    62: ("internal microcontroller halt", False),
    63: ("ECC page retirement or row remap recorded", False),
    64: ("ECC page retirement or row remap failed", False),
    74: ("NVLink error", False),
    79: ("GPU has fallen off the bus", False),
    92: ("high single-bit ECC error rate", False),
    94: ("contained ECC error (the affected application was stopped)", False),
    95: ("uncontained ECC error (reset the GPU)", False),
    119: ("GSP firmware timeout", False),
    120: ("GSP firmware error", False),
}


def describe_xid(code: int) -> str:
    meaning = XID_MEANINGS.get(code)
    return f"Xid {code}: {meaning[0]}" if meaning else f"Xid {code} (see NVIDIA's Xid catalogue)"


#: NVML's NVLink version enum -> the NVLink generation it names.
NVLINK_VERSIONS = {1: "1.0", 2: "2.0", 3: "2.2", 4: "3.0", 5: "3.1", 6: "4.0", 7: "5.0", 8: "6.0"}


@dataclass(frozen=True, slots=True)
class NvLink:
    """One NVLink of one GPU."""

    link: int
    active: bool | None = None
    version: int | None = None
    """NVML's version enum (6 = NVLink 4.0): `NVLINK_VERSIONS` names it."""
    remote_bus_id: str | None = None
    """PCI bus id of the device at the other end.  A GPU's own bus id for a direct link; an
    NVSwitch that is not visible (e.g. in a VM) reads "FFFFFFFF:FF:FF.0"."""
    remote_type: str | None = None
    """What is at the other end: "GPU", "switch", "IBM NPU" or "unknown" (NVML's remote
    device type); None in recordings made before gputui read it."""


@dataclass(frozen=True, slots=True)
class Topology:
    """How the GPUs are connected, read once.  Matrices are indexed [i][j] by GPU index."""

    levels: tuple[tuple[int | None, ...], ...] = ()
    """NVML common-ancestor level (0 internal, 10 single switch, 20 multiple, 30 host bridge,
    40 NUMA node, 50 system); None on the diagonal or where NVML gave nothing."""
    p2p_read: tuple[tuple[str | None, ...], ...] = ()
    """P2P status names ("OK", "not supported", ...); None on the diagonal."""
    p2p_write: tuple[tuple[str | None, ...], ...] = ()
    p2p_atomics: tuple[tuple[str | None, ...], ...] = ()
    p2p_nvlink: tuple[tuple[str | None, ...], ...] = ()
    nvlinks: tuple[tuple[NvLink, ...], ...] = ()
    """Per GPU, its NVLinks (empty where NVLink is not supported)."""


@dataclass(frozen=True, slots=True)
class MachineInfo:
    """Everything read once: the header of a recording."""

    system: SystemInfo
    devices: tuple[DeviceInfo, ...] = ()
    topology: Topology | None = None


# --------------------------------------------------------------------------------------
# Samples: one per tick.
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MigDevice:
    """One MIG device: a compute instance inside a GPU instance of a MIG-enabled GPU."""

    index: int
    """NVML's MIG device index under its GPU."""
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    uuid: str | None = None
    """"MIG-..." as CUDA_VISIBLE_DEVICES accepts it."""
    name: str | None = None
    """NVML's name, ending in the profile, e.g. "NVIDIA H200 MIG 3g.71gb"."""
    sm_count: int | None = None
    """Streaming multiprocessors of this compute instance."""
    gpu_slices: int | None = None
    """GPU instance slices (the "3g" of 3g.71gb)."""
    compute_slices: int | None = None
    memory_total: int | None = None
    """Bytes of the GPU instance's memory."""
    memory_used: int | None = None
    """Bytes."""

    @property
    def profile(self) -> str | None:
        """The profile part of the name ("3g.71gb"), where NVML's name carries one."""
        if self.name and " MIG " in self.name:
            return self.name.rsplit(" MIG ", 1)[1]
        return None


@dataclass(frozen=True, slots=True)
class GpmSample:
    """NVML GPM (GPU Performance Monitoring, Hopper and newer) over one window between two
    GPM samples taken on the slow cadence: what the SMs, tensor cores and memory really did.

    Activities are percent (0-100) of the window, as NVML reports them; throughputs are bytes
    per second.  `unavailable` says why there are no figures (then every figure is None):
    the UI shows N/A with that reason, never 0.  `gputui.telemetry.nvml.gpm` reads it."""

    unavailable: str | None = None
    """Why GPM gives nothing for this GPU: "needs a Hopper or newer GPU (this is an
    Ampere)", "not supported by the driver for this GPU (a virtual GPU?)", "no permission
    ...", "MIG is on ..."; None when the figures below were measured."""
    window: float | None = None
    """Seconds between the two GPM samples the figures come from."""
    graphics_active: float | None = None
    """Percent of time the graphics/compute engine was active (DCGM's GR_ENGINE_ACTIVE)."""
    sm_active: float | None = None
    """Percent of SM cycles with at least one warp resident, averaged over all SMs."""
    sm_occupancy: float | None = None
    """Resident warps as a percent of the SMs' theoretical maximum."""
    tensor_active: float | None = None
    """Percent of cycles any tensor-core pipe was active (HMMA, IMMA, DFMA...)."""
    tensor_hmma_active: float | None = None
    """Percent of cycles the half-precision (FP16/BF16/TF32) tensor pipe was active."""
    tensor_imma_active: float | None = None
    """Percent of cycles the integer (INT8) tensor pipe was active."""
    tensor_dfma_active: float | None = None
    """Percent of cycles the FP64 tensor pipe was active."""
    dram_active: float | None = None
    """Device memory bandwidth used, percent of the GPU's maximum."""
    fp64_active: float | None = None
    """Percent of cycles the (non-tensor) FP64 pipe was active."""
    fp32_active: float | None = None
    """Percent of cycles the (non-tensor) FP32 pipe was active."""
    fp16_active: float | None = None
    """Percent of cycles the (non-tensor) FP16 pipe was active."""
    pcie_tx: int | None = None
    """Bytes per second sent over PCIe, headers included (GPM's count)."""
    pcie_rx: int | None = None
    """Bytes per second received over PCIe."""
    nvlink_tx: int | None = None
    """Bytes per second sent over all NVLinks."""
    nvlink_rx: int | None = None
    """Bytes per second received over all NVLinks."""
    gpu_instance_id: int | None = None
    """Set on the per-instance figures of a MIG-enabled GPU (`mig`)."""
    mig: tuple[GpmSample, ...] = ()
    """With MIG on: one entry per GPU instance, from nvmlGpmMigSampleGet."""


@dataclass(frozen=True, slots=True)
class GpuSample:
    """What one GPU did at one tick."""

    index: int
    lost: bool = False
    """NVML says the GPU fell off the bus ("GPU is lost"); every other field is then None."""
    gpu_util: int | None = None
    """Percent of time a kernel ran over the last sample period."""
    mem_util: int | None = None
    """Percent of time device memory was read or written."""
    mem_used: int | None = None
    """Bytes."""
    mem_free: int | None = None
    """Bytes."""
    mem_reserved: int | None = None
    """Bytes the driver reserves (not counted in mem_used); None on drivers without
    NVML's v2 memory info, where mem_used includes it."""
    temperature: int | None = None
    """GPU core °C."""
    memory_temperature: int | None = None
    """Memory (HBM) °C, where the GPU reports it (NVML field value 82, as nvidia-smi's
    temperature.memory)."""
    power_draw: float | None = None
    """Watts."""
    power_limit: float | None = None
    """Enforced power limit now, watts."""
    sm_clock: int | None = None
    """MHz."""
    mem_clock: int | None = None
    """MHz."""
    graphics_clock: int | None = None
    """MHz."""
    pstate: int | None = None
    """Performance state, 0 (max) to 15 (min)."""
    fan_speed: int | None = None
    """Percent of maximum, where the board has fans NVML can read."""
    clock_event_reasons: int | None = None
    """NVML bit mask; `decode_clock_events` gives the names."""
    pcie_gen: int | None = None
    """Current PCIe link generation (drops at idle to save power)."""
    pcie_width: int | None = None
    """Current PCIe link width (lanes)."""
    pcie_rx: int | None = None
    """Bytes per second received over PCIe (slow cadence: NVML samples a 20 ms window)."""
    pcie_tx: int | None = None
    """Bytes per second sent over PCIe (slow cadence)."""
    encoder_util: int | None = None
    decoder_util: int | None = None
    energy: int | None = None
    """Total energy since the driver loaded, millijoules (slow cadence)."""
    ecc_volatile_corrected: int | None = None
    ecc_volatile_uncorrected: int | None = None
    ecc_aggregate_corrected: int | None = None
    ecc_aggregate_uncorrected: int | None = None
    # --- slow cadence (every few seconds): link counters and memory health ---
    pcie_replay_counter: int | None = None
    """PCIe replays since the driver loaded (link-level retransmissions: a rising count
    means a marginal link, cable or riser)."""
    nvlink_rx: int | None = None
    """Bytes per second received over all NVLinks (payload data, NVML's throughput
    counters); None where the GPU has no NVLink or before the second slow pass."""
    nvlink_tx: int | None = None
    """Bytes per second sent over all NVLinks."""
    nvlink_link_rx: tuple[int | None, ...] = ()
    """Per NVLink, indexed by link number: bytes per second received."""
    nvlink_link_tx: tuple[int | None, ...] = ()
    """Per NVLink, indexed by link number: bytes per second sent."""
    remapped_rows_corrected: int | None = None
    """Memory rows remapped after correctable errors (Ampere and newer; HBM repair)."""
    remapped_rows_uncorrected: int | None = None
    """Memory rows remapped after uncorrectable errors."""
    remapped_rows_pending: bool | None = None
    """A row remap waits for the next GPU reset: until then the bad row is in use."""
    remapped_rows_failure: bool | None = None
    """A remap failed (no spare rows left): the GPU should be serviced."""
    retired_pages_sbe: int | None = None
    """Pages retired after single-bit ECC errors (pre-Ampere page retirement)."""
    retired_pages_dbe: int | None = None
    """Pages retired after double-bit ECC errors."""
    retired_pages_pending: bool | None = None
    """A page retirement waits for the next driver reload."""
    xid_count: int | None = None
    """Xid events (the driver's critical-error reports) NVML delivered for this GPU since
    gputui began watching; None where nobody watches (a one-shot reader, no event support)."""
    xid_last: int | None = None
    """The code of the last of them (`XID_MEANINGS`)."""
    mig_devices: tuple[MigDevice, ...] = ()
    """With MIG enabled: the MIG devices (GPU instance + compute instance) on this GPU."""
    gpm: GpmSample | None = None
    """GPM activity over the last slow-cadence window (SM, tensor cores, DRAM...); None
    before the first window, for a one-shot reader, or in a recording made before gputui
    read GPM.  Where GPM cannot be read, a GpmSample whose `unavailable` says why."""
    video_clock: int | None = None
    """Video (encoder/decoder) clock, MHz."""

    @property
    def clock_events(self) -> tuple[str, ...]:
        """Decoded clock-event reason names."""
        return decode_clock_events(self.clock_event_reasons)

    @property
    def activity(self) -> GpmSample | None:
        """GPM's figures for the whole GPU when they were measured; None when not (before
        the first window, an older recording), when GPM is unavailable (`gpm.unavailable`
        says why; under MIG, per GPU instance only) or the GPU is lost."""
        w = self.gpm
        return None if self.lost or w is None or w.unavailable is not None else w


@dataclass(frozen=True, slots=True)
class Job:
    """What a process belongs to, as its cgroup (and, where readable, its environment)
    says: a Slurm job step, a Kubernetes pod, a container, a systemd unit or a login
    session.  Every text field is untrusted (it comes from paths and files the job's owner
    may name).  None = not known; nothing is guessed (see `gputui.telemetry.host.jobs`)."""

    kind: str
    """"slurm", "pod", "docker", "containerd", "cri-o", "podman", "unit" or "session"."""
    id: str
    """Slurm job id (or SLUID); pod UID; full container id; unit name; session number."""
    step: str | None = None
    """Slurm step: "0", "batch", "extern", "interactive"."""
    array: str | None = None
    """Slurm array task as Slurm writes it: "48200_3" (array job id _ task id)."""
    name: str | None = None
    """The pod's or container's name, where the runtime's metadata is readable."""
    namespace: str | None = None
    """The pod's namespace, where readable."""
    container: str | None = None
    """In a pod: the container's name where readable."""
    container_id: str | None = None
    """In a pod: the container's id (from the cgroup path)."""
    runtime: str | None = None
    """In a pod: "containerd", "cri-o" or "docker"."""
    qos: str | None = None
    """In a pod: "guaranteed", "burstable" or "besteffort"."""
    source: str = "cgroup"
    """How the id is known: "cgroup" (root's cgroup directories name it), "rootless" (a
    container in its user's own cgroup subtree: see `owner`), "unverified" (a cgroup path
    anyone could have named so) or "environment" (the process's own claim)."""
    owner: str | None = None
    """A rootless container's user (their name on the recording machine, else their uid)."""


@dataclass(frozen=True, slots=True)
class LauncherProcess:
    """A process that started GPU processes of a distributed job (torchrun, mpirun, srun,
    deepspeed, accelerate) and holds no GPU itself: the root of a tree in the Processes tab."""

    pid: int
    create_time: float
    """Seconds since the epoch (with the PID, its identity for signalling)."""
    kind: str
    """"torchrun", "mpirun", "srun", "deepspeed" or "accelerate"."""
    name: str | None = None
    user: str | None = None
    cmdline: tuple[str, ...] | None = None
    launcher: int | None = None
    """PID of its own nearest launcher ancestor (deepspeed -> its per-node launcher)."""
    pgid: int | None = None
    """Process group id: equal to `pid` when the launcher leads its own group."""
    sid: int | None = None
    """Session id."""
    job: Job | None = None


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """One process on one GPU (merged over compute and graphics)."""

    gpu_index: int
    pid: int
    """As NVML reports it: the host's PID namespace."""
    type: str = "C"
    """"C" compute, "G" graphics, "C+G" both, "M" MPS compute."""
    gpu_memory: int | None = None
    """Bytes; None where the driver does not report it (e.g. some VMs and MIG setups)."""
    sm_util: int | None = None
    """Percent; from NVML's sampled per-process utilization (0 when no sample in the window)."""
    mem_util: int | None = None
    enc_util: int | None = None
    dec_util: int | None = None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    # host-side facts (psutil); None where the process is not visible or not readable
    visible: bool = True
    """False when no such PID exists in gputui's PID namespace (containers)."""
    name: str | None = None
    user: str | None = None
    cmdline: tuple[str, ...] | None = None
    cpu_percent: float | None = None
    """Percent of one core."""
    rss: int | None = None
    """Host resident memory, bytes."""
    create_time: float | None = None
    """Seconds since the epoch; together with the PID it identifies the process."""
    job: Job | None = None
    """The Slurm job, pod, container, unit or session it belongs to; None when unknown."""
    launcher: int | None = None
    """PID of its nearest ancestor that is a launcher (in `Snapshot.launchers`)."""
    state: str | None = None
    """The kernel's scheduling state at the tick, the letter of /proc/PID/stat: "R"
    running, "S" sleeping (waiting for an event: a futex, a socket), "D" uninterruptible
    (usually I/O or a driver call), "T" stopped (SIGSTOP), "t" stopped by a tracer, "Z"
    zombie (exited, not yet reaped).  None where unreadable, or in recordings made before
    gputui read it (format version 2 and older).  How long a process has been in its state
    is tracked across ticks by `gputui.telemetry.health`."""
    rank: int | None = None
    """The distributed rank its environment gives (`gputui.telemetry.host.rank`: RANK, else
    OMPI_COMM_WORLD_RANK ...), read once when the process is first seen; None where the
    environment is not readable (another user's process, without root) or says none."""
    worker_cpu: tuple[float, ...] | None = None
    """CPU of each of its child processes (and their children: workers a forkserver
    started), percent of one core over the last window (a few seconds, read on a slower
    cadence than the tick), highest first: the DataLoader workers of a training rank.
    () = it has no children; None where its children could not be read, before the first
    window, or in recordings made before gputui read it (format version 4 and older).  A
    child first seen in this window has no figure yet; a reused PID is a new child
    (`gputui.telemetry.host.workers`)."""


@dataclass(frozen=True, slots=True)
class HostSample:
    """The host's CPU, memory and load at one tick."""

    cpu_percent: float | None = None
    per_cpu: tuple[float, ...] = ()
    mem_total: int | None = None
    mem_used: int | None = None
    mem_available: int | None = None
    swap_total: int | None = None
    swap_used: int | None = None
    load_avg: tuple[float, float, float] | None = None
    uptime: float | None = None
    """Seconds since boot."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything sampled at one tick: what the poller hands to the UI."""

    seq: int
    timestamp: float
    """Seconds since the epoch when the tick was sampled."""
    gpus: tuple[GpuSample, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    host: HostSample | None = None
    launchers: tuple[LauncherProcess, ...] = ()
    """The launchers of the GPU processes (their `launcher` PIDs), and theirs."""
    stacks: StackEvidence | None = None
    """Where the ranks of a suspected job are, read from their Python stacks since the previous
    tick (gputui.telemetry.stack_evidence); None when none was read (a replay judges on
    what was recorded, as the live run did)."""
    nccl: NcclView | None = None
    """NCCL RAS's answers (gputui.telemetry.nccl), on the tick after a round of questions
    ended (every ~10 s while a job of two ranks or more runs); None on the other ticks (the
    Hub keeps the latest).  Where RAS was off or did not answer, the view's answers say why:
    None never means "no problem"."""
    sample_cost: float | None = field(default=None, compare=False)
    """Seconds the source took to produce this snapshot (not recorded)."""


def field_type(cls: type, name: str) -> Any:
    """The type of field `name` of a dataclass a snapshot holds, resolved alone (annotations
    are strings here) when a value of it is first decoded (`codec`): a type named for type
    checking only (the NCCL RAS view's, the stack evidence's) is imported then, not for the
    first frame (a snapshot carries one only where a job of two ranks or more runs)."""
    one = types.SimpleNamespace(__annotations__={name: cls.__annotations__[name]})
    names = vars(sys.modules[cls.__module__])
    try:
        return typing.get_type_hints(one, names)[name]
    except NameError:
        from gputui.telemetry.nccl.model import NcclView
        from gputui.telemetry.stack_evidence import StackEvidence

        late = {"NcclView": NcclView, "StackEvidence": StackEvidence}
        return typing.get_type_hints(one, {**names, **late})[name]
