"""Which GPUs a CUDA process started from this shell would see, and under which index.

CUDA reads two environment variables when it initialises:

- `CUDA_DEVICE_ORDER`: `FASTEST_FIRST` (the default) numbers the devices fastest first by
  an undocumented heuristic; `PCI_BUS_ID` numbers them by PCI bus id, ascending.  NVML and
  nvidia-smi (and so gputui's GPU numbers) always count in PCI bus order, so the two agree
  when `CUDA_DEVICE_ORDER=PCI_BUS_ID` is set, or when all GPUs are the same model (then
  "fastest first" is a tie that CUDA breaks by PCI bus id).
- `CUDA_VISIBLE_DEVICES`: a comma-separated list of devices, which CUDA then numbers 0, 1, ...
  in the order listed.  Unset: every device.  Empty: none.  The rules below are CUDA's as
  documented (CUDA C Programming Guide, "CUDA Environment Variables") and as PyTorch
  reproduces them for `torch.cuda.device_count()` without initialising CUDA
  (`torch/cuda/__init__.py`, `_parse_visible_devices`; its tests pin each rule):

  * Integer entries are indices in CUDA's own order (above), read like C's strtoul: leading
    blanks and a sign are allowed and anything after the digits is ignored ("1gpu2" is 1,
    "+3" is 3, "-0" is 0).  A negative number, an entry with no digits, or an index beyond
    the device count ends the list: the entries before it stay visible ("0,2,-1,1" is 0, 2).
  * A list starting with "GPU-" holds GPU UUIDs, any unique prefix of one ("GPU-7ef0");
    an unknown or ambiguous prefix, or an entry that does not start with "GPU-", ends it.
  * A list starting with "MIG-" holds MIG device UUIDs (also the older
    "MIG-GPU-<uuid>/<GI>/<CI>" form), matched the same way.
  * The same device twice makes the whole list empty: no device is visible.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from gputui.telemetry.model import DeviceInfo, MigDevice
from gputui.telemetry.topology import bus_key

ORDERS = ("FASTEST_FIRST", "PCI_BUS_ID")
DEFAULT_ORDER = "FASTEST_FIRST"

_ORDINAL = re.compile(r"\s*([+-]?)(\d+)")
T = TypeVar("T")


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


def _ordinal(entry: str) -> int | None:
    """strtoul as CUDA applies it: the number an entry starts with; None when it has none
    or is negative."""
    m = _ORDINAL.match(entry)
    if m is None:
        return None
    value = int(m.group(2))
    if m.group(1) == "-" and value != 0:
        return None
    return value


def _match_prefix(entry: str, candidates: Sequence[tuple[str, T]]) -> tuple[T | None, str | None]:
    hits = [obj for uuid, obj in candidates if uuid.startswith(entry)]
    if not hits:
        return None, "matches no device"
    if len(hits) > 1:
        return None, f"matches {len(hits)} devices (ambiguous prefix)"
    return hits[0], None


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
    order = device_order or DEFAULT_ORDER
    if order not in ORDERS:
        notes.append(
            f"CUDA_DEVICE_ORDER={device_order!r} is neither of the values CUDA documents "
            f"({', '.join(ORDERS)}): assuming its default, {DEFAULT_ORDER}"
        )
        order = DEFAULT_ORDER
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

    def done(
        chosen: list[CudaDevice], stopped: str | None = None, reason: str | None = None
    ) -> CudaVisibility:
        return CudaVisibility(visible_devices, order, exact, tuple(chosen), stopped, reason, tuple(notes))

    if visible_devices is None:
        return done([CudaDevice(k, gpu) for k, gpu in enumerate(ordered)])
    if not visible_devices.strip():
        return done([], None, "CUDA_VISIBLE_DEVICES is set but empty: no device is visible")
    chosen: list[CudaDevice] = []
    seen: set[tuple[int, int | None]] = set()
    if visible_devices.startswith("GPU-"):
        mode = "gpu"
    elif visible_devices.startswith("MIG-"):
        mode = "mig"
    else:
        mode = "ordinal"
    gpu_uuids = [(d.uuid, d.index) for d in devices if d.uuid]
    mig_uuids: list[tuple[str, tuple[int, MigDevice]]] = []
    for d in devices:
        for m in mig_devices.get(d.index, ()):
            if m.uuid:
                mig_uuids.append((m.uuid, (d.index, m)))
            if d.uuid and m.gpu_instance_id is not None and m.compute_instance_id is not None:
                legacy = f"MIG-{d.uuid}/{m.gpu_instance_id}/{m.compute_instance_id}"
                mig_uuids.append((legacy, (d.index, m)))
    for entry in visible_devices.split(","):
        gpu: int
        mig: MigDevice | None = None
        if mode == "ordinal":
            ordinal = _ordinal(entry)
            if ordinal is None:
                why = "is negative" if entry.strip().startswith("-") else "is not a device index"
                return done(chosen, entry, f"{entry.strip()!r} {why}: the list ends there")
            if ordinal >= len(ordered):
                return done(
                    chosen,
                    entry,
                    f"index {ordinal} is beyond the {len(ordered)} GPU(s): the list ends there",
                )
            gpu = ordered[ordinal]
        elif mode == "gpu":
            if not entry.startswith("GPU-"):
                return done(chosen, entry, f"{entry!r} is not a GPU UUID (the list started with one)")
            found_gpu, problem = _match_prefix(entry, gpu_uuids)
            if found_gpu is None:
                return done(chosen, entry, f"{entry!r} {problem}: the list ends there")
            gpu = found_gpu
        else:
            if not entry.startswith("MIG-"):
                return done(chosen, entry, f"{entry!r} is not a MIG device UUID (the list started with one)")
            found_mig, problem = _match_prefix(entry, mig_uuids)
            if found_mig is None:
                return done(chosen, entry, f"{entry!r} {problem}: the list ends there")
            gpu, mig = found_mig
        key = (gpu, mig.index if mig is not None else None)
        if key in seen:
            return done(
                [], entry, f"{entry.strip()!r} names a device already listed: CUDA then sees no device"
            )
        seen.add(key)
        chosen.append(CudaDevice(len(chosen), gpu, entry, mig))
    return done(chosen)
