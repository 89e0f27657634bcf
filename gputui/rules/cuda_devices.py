"""`CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER` as CUDA reads them (`visible_devices`,
`device_order`): one reading, shared by the monitor (`gputui.telemetry.cuda_visible`) and the
diagnosis child (its visibility checks).

Standard library only, Python 3.8+, no gputui imports: the diagnosis children load this file by
its path (`gputui/diag/probe/__init__.py`); gputui imports it as `gputui.rules.cuda_devices`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

#: The values of CUDA_DEVICE_ORDER that CUDA documents; anything else means the default.
DEVICE_ORDERS = ("FASTEST_FIRST", "PCI_BUS_ID")
DEFAULT_DEVICE_ORDER = "FASTEST_FIRST"

_ORDINAL = re.compile(r"[ \t\n\r\f\v]*([+-]?)(\d+)")

#: Values people put in CUDA_VISIBLE_DEVICES that CUDA reads as "no device", with why.
SPECIAL_VALUES = {
    "nodevfiles": "Slurm sets CUDA_VISIBLE_DEVICES=NoDevFiles when the job step was given no GPU "
    "(ask for one: --gpus=1 or --gres=gpu:1)",
    "-1": "-1 is the usual way to hide every GPU on purpose (CUDA sees none)",
    "all": "'all' is an NVIDIA_VISIBLE_DEVICES value (the container runtime's); CUDA reads it as "
    "no device index, so it sees no GPU",
    "none": "'none' is an NVIDIA_VISIBLE_DEVICES value; CUDA reads it as no device index",
    "void": "'void' is an NVIDIA_VISIBLE_DEVICES value; CUDA reads it as no device index",
    "cpu": "'cpu' is not a CUDA device: CUDA sees no GPU",
}


@dataclass(frozen=True)
class VisibleEntry:
    """One CUDA_VISIBLE_DEVICES entry CUDA accepted."""

    entry: str
    """As written in the variable."""
    ordinal: int | None = None
    """For an index: the position in CUDA's device order (see CUDA_DEVICE_ORDER)."""
    uuid: str | None = None
    """For a UUID entry: the full UUID it matched (None when the devices are unknown)."""


@dataclass(frozen=True)
class VisibleDevices:
    """What CUDA makes of CUDA_VISIBLE_DEVICES (see `visible_devices`)."""

    value: str | None
    form: str
    """unset, empty, index, gpu-uuid or mig-uuid (what the first entry decides)."""
    entries: tuple[VisibleEntry, ...] = ()
    """The devices CUDA enumerates, in CUDA's order (0, 1, ...)."""
    stopped_at: str | None = None
    """The entry that ended the list (the ones after it are ignored)."""
    ignored: tuple[str, ...] = ()
    """Entries after `stopped_at`: CUDA never reads them."""
    reason: str | None = None
    """Why the list ended early or is empty, in words."""
    repeated: bool = False
    """A device was named twice: CUDA then sees no device at all."""
    checked: bool = True
    """False when the devices were unknown: only the form of each entry was checked."""
    special: str | None = None
    """A value CUDA treats specially or people misuse (NoDevFiles, -1, all...), explained."""

    @property
    def loose(self) -> tuple[str, ...]:
        """Index entries that are not plain numbers ("0 1", "1gpu2", "+3"), each explained: CUDA
        reads the number an entry starts with and ignores the rest."""
        return tuple(
            f"{e.entry.strip()!r} is read as {e.ordinal}"
            for e in self.entries
            if e.ordinal is not None and not e.entry.strip().isdigit()
        )

    @property
    def unset(self) -> bool:
        return self.value is None

    @property
    def hides_everything(self) -> bool:
        return self.value is not None and not self.entries


def _strtoul(entry: str) -> int | None:
    """An index entry as CUDA reads it (like C's strtoul): leading blanks and a sign allowed,
    anything after the digits ignored ("1gpu2" is 1, "+3" is 3, "-0" is 0).  None when it
    has no digits or is negative."""
    m = _ORDINAL.match(entry)
    if m is None:
        return None
    value = int(m.group(2))
    if m.group(1) == "-" and value != 0:
        return None
    return value


def _prefix_match(entry: str, uuids: Sequence[str]) -> tuple[str | None, str | None]:
    hits = [u for u in uuids if u.startswith(entry)]
    if not hits:
        return None, "matches no device"
    if len(set(hits)) > 1:
        return None, f"matches {len(set(hits))} devices (ambiguous prefix)"
    return hits[0], None


def visible_devices(
    value: str | None,
    count: int | None = None,
    gpu_uuids: Sequence[str] | None = None,
    mig_uuids: Sequence[str] | None = None,
) -> VisibleDevices:
    """CUDA_VISIBLE_DEVICES as CUDA reads it (CUDA Programming Guide, "CUDA Environment
    Variables"; PyTorch reproduces the same rules in `torch.cuda._parse_visible_devices` and
    pins them in its tests):

    - unset: every device; set but empty (or blank): none.
    - The first entry decides the form.  "GPU-..." starts a list of GPU UUIDs, "MIG-..." a
      list of MIG device UUIDs (also the older "MIG-GPU-<uuid>/<GI>/<CI>"); each may be any
      unique prefix.  Otherwise the entries are indices in CUDA's device order, read like
      strtoul ("1gpu2" is 1, " +3" is 3, "-0" is 0).
    - The first entry that is not of the list's form, has no digits, is negative, is an
      index beyond the device count, or is an unknown or ambiguous UUID prefix ends the list:
      the entries before it stay visible ("0,2,-1,1" is 0, 2).
    - The same device named twice makes the whole list empty: no device is visible.

    `count` is the number of devices CUDA enumerates and `gpu_uuids` / `mig_uuids` their
    UUIDs (MIG ones in both forms); None for unknown (no driver): then only the form of each
    entry is checked (`checked` False)."""
    if value is None:
        return VisibleDevices(None, "unset", reason=None)
    special = SPECIAL_VALUES.get(value.strip().lower())
    parts = value.split(",")
    if not value.strip():
        return VisibleDevices(
            value, "empty", reason="CUDA_VISIBLE_DEVICES is set but empty: no device is visible"
        )
    if value.startswith("GPU-"):
        form, prefix, known = "gpu-uuid", "GPU-", gpu_uuids
    elif value.startswith("MIG-"):
        form, prefix, known = "mig-uuid", "MIG-", mig_uuids
    else:
        form, prefix, known = "index", "", None
    checked = (count is not None) if form == "index" else (known is not None)
    chosen: list[VisibleEntry] = []
    seen: list[object] = []

    def stop(k: int, why: str) -> VisibleDevices:
        return VisibleDevices(
            value,
            form,
            tuple(chosen),
            parts[k],
            tuple(parts[k + 1 :]),
            f"{parts[k].strip()!r} {why}: CUDA ignores it and everything after it",
            checked=checked,
            special=special,
        )

    for k, entry in enumerate(parts):
        item: VisibleEntry
        key: object
        if form == "index":
            ordinal = _strtoul(entry)
            if ordinal is None:
                return stop(k, "is negative" if entry.strip().startswith("-") else "is not a device index")
            if count is not None and ordinal >= count:
                return stop(k, f"is beyond the {count} device(s) CUDA can see")
            item, key = VisibleEntry(entry, ordinal=ordinal), ordinal
        else:
            if not entry.startswith(prefix):
                return stop(k, "is not a {} UUID (the list started with one)".format(prefix.rstrip("-")))
            uuid = None
            if known is not None:
                uuid, problem = _prefix_match(entry, known)
                if uuid is None:
                    return stop(k, problem or "matches no device")
            item, key = VisibleEntry(entry, uuid=uuid), (uuid if uuid is not None else entry)
        if key in seen:
            return VisibleDevices(
                value,
                form,
                (),
                entry,
                tuple(parts[k + 1 :]),
                f"{entry.strip()!r} names a device already listed: CUDA then sees no device at all",
                repeated=True,
                checked=checked,
                special=special,
            )
        seen.append(key)
        chosen.append(item)
    return VisibleDevices(value, form, tuple(chosen), checked=checked, special=special)


def device_order(value: str | None) -> tuple[str, str | None]:
    """The order CUDA uses for CUDA_DEVICE_ORDER=`value`, and a note when the value is not
    one CUDA documents (CUDA then uses its default)."""
    if not value or value in DEVICE_ORDERS:
        return value or DEFAULT_DEVICE_ORDER, None
    return DEFAULT_DEVICE_ORDER, (
        f"CUDA_DEVICE_ORDER={value!r} is neither of the values CUDA documents "
        f"({', '.join(DEVICE_ORDERS)}): CUDA uses its default, {DEFAULT_DEVICE_ORDER}"
    )
