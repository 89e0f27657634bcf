"""Which GPUs a CUDA process started from this shell would see, and under which index.

CUDA reads two environment variables when it initialises:

- `CUDA_DEVICE_ORDER`: `FASTEST_FIRST` (the default) numbers the devices fastest first by
  an undocumented heuristic; `PCI_BUS_ID` numbers them by PCI bus id, ascending.  NVML and
  nvidia-smi (and so gputui's GPU numbers) always count in PCI bus order, so the two agree
  when `CUDA_DEVICE_ORDER=PCI_BUS_ID` is set, or when all GPUs are the same model (then
  "fastest first" is a tie that CUDA breaks by PCI bus id).
- `CUDA_VISIBLE_DEVICES`: which devices, in which order; its rules (indices read like
  strtoul, GPU-/MIG- UUID prefixes, the first bad entry ends the list, a repeated device
  empties it) live once in `gputui.rules.cuda_devices.visible_devices`, shared with the diagnosis child.
  This module maps what that rule accepts onto NVML's GPUs and MIG devices.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gputui.rules import cuda_devices
from gputui.telemetry.model import DeviceInfo, MigDevice
from gputui.telemetry.topology import bus_key


@dataclass(frozen=True)
class CudaDevice:
    """One device CUDA would enumerate."""

    cuda_index: int
    gpu_index: int
    """The GPU's NVML (nvidia-smi, gputui) index."""
    entry: str | None = None
    """The CUDA_VISIBLE_DEVICES entry that selected it (None when the variable is unset)."""
    mig: MigDevice | None = None
    """Set when the entry names a MIG device of the GPU."""


@dataclass(frozen=True)
class CudaVisibility:
    """What CUDA would see, and why."""

    visible_devices: str | None
    """CUDA_VISIBLE_DEVICES as set (None: unset)."""
    order: str
    """The order CUDA uses: FASTEST_FIRST or PCI_BUS_ID."""
    order_exact: bool
    """False when FASTEST_FIRST had to be estimated (GPUs of different models)."""
    devices: tuple[CudaDevice, ...]
    stopped_at: str | None = None
    """The entry that ended the list, if one did."""
    reason: str | None = None
    """Why the list ended there, or why it is empty."""
    notes: tuple[str, ...] = field(default=())

    def cuda_index_of(self, gpu_index: int) -> int | None:
        for d in self.devices:
            if d.gpu_index == gpu_index and d.mig is None:
                return d.cuda_index
        return None


def cuda_order(devices: Sequence[DeviceInfo], order: str) -> tuple[list[int], bool]:
    """The GPUs' NVML indices in CUDA's enumeration order, and whether that order is exact.

    PCI_BUS_ID: ascending bus id (exact).  FASTEST_FIRST: CUDA's heuristic is not documented;
    when every GPU is the same model it is a tie broken by PCI bus id (exact in practice),
    otherwise we estimate speed as CUDA cores x maximum SM clock (marked not exact)."""

    def pci(d: DeviceInfo) -> tuple[int, ...]:
        return bus_key(d.bus_id) or (1 << 32, d.index)

    by_bus = sorted(devices, key=pci)
    if order == "PCI_BUS_ID" or len({d.name for d in devices}) <= 1:
        return [d.index for d in by_bus], True

    def speed(d: DeviceInfo) -> int:
        return (d.cuda_cores or 0) * (d.max_sm_clock or 0)

    fastest = sorted(by_bus, key=speed, reverse=True)  # stable: ties stay in bus order
    return [d.index for d in fastest], False


def cuda_visibility(
    devices: Sequence[DeviceInfo],
    visible_devices: str | None,
    device_order: str | None = None,
    mig_devices: Mapping[int, Sequence[MigDevice]] | None = None,
) -> CudaVisibility:
    """What a CUDA process would see with these environment values (see the module doc).

    `mig_devices` maps a GPU's index to its MIG devices where MIG is enabled."""
    mig_devices = mig_devices or {}
    notes: list[str] = []
    order, order_note = cuda_devices.device_order(device_order)
    if order_note:
        notes.append(order_note)
    ordered, exact = cuda_order(devices, order)
    if not exact:
        notes.append(
            "GPUs of different models: CUDA numbers them fastest first by a heuristic it does not "
            "document; this order is an estimate (CUDA cores x max SM clock). Set "
            "CUDA_DEVICE_ORDER=PCI_BUS_ID to make CUDA count like nvidia-smi."
        )
    mig_gpus = [d.index for d in devices if d.mig_mode]
    if mig_gpus:
        notes.append(
            "MIG-enabled GPU(s) "
            + ", ".join(map(str, mig_gpus))
            + ": CUDA runs on their MIG devices, not the whole GPU; select one with "
            "CUDA_VISIBLE_DEVICES=MIG-<uuid> (CUDA 11-12 use one MIG device per process)."
        )
    gpu_by_uuid = {d.uuid: d.index for d in devices if d.uuid}
    mig_by_uuid: dict[str, tuple[int, MigDevice]] = {}
    for d in devices:
        for m in mig_devices.get(d.index, ()):
            if m.uuid:
                mig_by_uuid[m.uuid] = (d.index, m)
            if d.uuid and m.gpu_instance_id is not None and m.compute_instance_id is not None:
                mig_by_uuid[f"MIG-{d.uuid}/{m.gpu_instance_id}/{m.compute_instance_id}"] = (d.index, m)
    seen = cuda_devices.visible_devices(visible_devices, len(ordered), list(gpu_by_uuid), list(mig_by_uuid))
    if seen.loose:
        notes.append("; ".join(seen.loose) + ": CUDA reads the number an entry starts with")
    if seen.special:
        notes.append(seen.special)
    chosen: list[CudaDevice] = []
    for k, e in enumerate(seen.entries):
        if e.ordinal is not None:
            chosen.append(CudaDevice(k, ordered[e.ordinal], e.entry))
        elif e.uuid in gpu_by_uuid:
            chosen.append(CudaDevice(k, gpu_by_uuid[e.uuid], e.entry))
        elif e.uuid in mig_by_uuid:
            gpu, mig = mig_by_uuid[e.uuid]
            chosen.append(CudaDevice(k, gpu, e.entry, mig))
    if visible_devices is None:
        chosen = [CudaDevice(k, gpu) for k, gpu in enumerate(ordered)]
    return CudaVisibility(
        visible_devices, order, exact, tuple(chosen), seen.stopped_at, seen.reason, tuple(notes)
    )
