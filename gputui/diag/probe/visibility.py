"""The visibility layer: which GPUs CUDA will see here (CUDA_VISIBLE_DEVICES, its special
forms, NVIDIA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, containers).  The CUDA_VISIBLE_DEVICES rule
itself is gputui/rules/cuda_devices.py's, shared with the monitor."""

from __future__ import annotations

import os
import time

from . import cuda_devices
from .protocol import check
from .registry import declare


def _nvml_visible(seen, devices, nvml_ok):
    """NVML indices of what CUDA accepted (an index counts in NVML order here; a MIG device
    is -1: valid, but not one of NVML's GPU indices)."""
    by_uuid = {d.get("uuid"): d["index"] for d in devices if d.get("uuid")}
    out = []
    for e in seen.entries:
        if e.ordinal is not None:
            out.append(e.ordinal)
        elif e.uuid in by_uuid:
            out.append(by_uuid[e.uuid])
        else:
            out.append(-1 if nvml_ok else e.entry)
    return out


def mig_uuids(p):
    """The MIG device UUIDs CUDA could match (None: unknown, so only the form is checked)."""
    if not p.nvml.ok or any(d.get("mig") for d in p.nvml_devices):
        return None  # MIG devices are not enumerated here: a MIG- entry is taken at its word
    return []  # no GPU in MIG mode: no MIG device exists


@declare("visibility.env", "visibility", "GPU visibility (CUDA_VISIBLE_DEVICES, containers)")
def visibility(p):
    t0 = time.monotonic()
    env = os.environ
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    nvd = env.get("NVIDIA_VISIBLE_DEVICES")
    order = env.get("CUDA_DEVICE_ORDER")
    n = len(p.nvml_devices)
    ev = {
        "CUDA_VISIBLE_DEVICES": cvd,
        "NVIDIA_VISIBLE_DEVICES": nvd,
        "CUDA_DEVICE_ORDER": order,
        "in_container": p.in_container,
        "container_evidence": p.container_evidence,
        "nvml_device_count": n if p.nvml.ok else None,
    }
    status, cause, notes, summary = "PASS", None, [], ""
    visible = list(range(n))
    if cvd is not None:
        seen = cuda_devices.visible_devices(
            cvd,
            n if p.nvml.ok else None,
            [d["uuid"] for d in p.nvml_devices if d.get("uuid")] if p.nvml.ok else None,
            mig_uuids(p),
        )
        visible = _nvml_visible(seen, p.nvml_devices, p.nvml.ok)
        ev.update(
            {
                "form": seen.form,
                "visible": visible,
                "invalid_entry": seen.stopped_at.strip() if seen.stopped_at is not None else None,
                "ignored_entries": [e.strip() for e in seen.ignored],
                "repeated": seen.repeated,
                "read_loosely": list(seen.loose),
                "special": seen.special,
                "checked_against_gpus": seen.checked,
            }
        )
        if seen.form == "empty":
            status, cause = "FAIL", "cvd-empty"
            summary = "CUDA_VISIBLE_DEVICES is set to nothing: CUDA sees no GPU"
        elif seen.repeated:
            status, cause = "FAIL", "cvd-invalid"
            summary = "CUDA_VISIBLE_DEVICES=%s: %s" % (cvd, seen.reason)
        elif seen.stopped_at is not None and not visible:
            status, cause = "FAIL", "cvd-invalid"
            summary = "CUDA_VISIBLE_DEVICES=%s: %r is not a GPU here, so CUDA sees none" % (
                cvd,
                seen.stopped_at.strip(),
            )
        elif seen.stopped_at is not None:
            status, cause = "WARN", "cvd-invalid"
            summary = "CUDA_VISIBLE_DEVICES=%s: %r is not a GPU here; CUDA stops there and sees only %s" % (
                cvd,
                seen.stopped_at.strip(),
                visible,
            )
        elif not p.nvml.ok:
            summary = "CUDA_VISIBLE_DEVICES=%s (not checked against the GPUs: no driver)" % cvd
        elif not seen.checked:
            summary = (
                "CUDA_VISIBLE_DEVICES=%s (MIG devices are not listed here: only the form was checked)" % cvd
            )
        elif len(visible) < n:
            summary = "CUDA_VISIBLE_DEVICES=%s shows %d of the %d GPUs" % (cvd, len(visible), n)
            notes.append("the others are hidden from CUDA on purpose, it seems")
        else:
            summary = "CUDA_VISIBLE_DEVICES=%s" % cvd
        if seen.loose:
            notes.append(
                "; ".join(seen.loose) + ": CUDA reads the number an entry starts with and ignores "
                "the rest (separate GPUs with commas)"
            )
            if status == "PASS":
                status, cause = "WARN", "cvd-loose"
        if seen.special:
            notes.append(seen.special)
            if status != "PASS" and cvd.strip().lower() == "nodevfiles":
                cause = "cvd-slurm-no-gpu"
    else:
        summary = "CUDA_VISIBLE_DEVICES is not set: CUDA sees every GPU" + (" (%d)" % n if n else "")
    if nvd is not None and nvd.strip().lower() in ("", "void", "none"):
        if status == "PASS":
            status, cause = "FAIL" if not n else "WARN", "nvd-none"
        summary += "; NVIDIA_VISIBLE_DEVICES=%r asks the container runtime for no GPU" % nvd
    _order, order_note = cuda_devices.device_order(order)
    if order_note:
        notes.append(order_note)
    elif order is not None:
        notes.append(
            "CUDA_DEVICE_ORDER=%s: CUDA numbers the GPUs %s"
            % (order, "like nvidia-smi (by PCI bus)" if order == "PCI_BUS_ID" else "fastest first")
        )
    if nvd is not None and nvd.strip().lower() not in ("", "void", "none"):
        notes.append(
            "NVIDIA_VISIBLE_DEVICES=%s: the container runtime's choice when the container started; "
            "inside it, CUDA_VISIBLE_DEVICES decides" % nvd
        )
    if p.nvml.ok and n > 1 and order != "PCI_BUS_ID":
        names = {d.get("name") for d in p.nvml_devices}
        if len(names) > 1:
            if status == "PASS":
                status, cause = "WARN", "device-order"
            notes.append(
                "GPUs of different models and CUDA_DEVICE_ORDER is not PCI_BUS_ID: CUDA numbers "
                "the fastest first, so CUDA's device 0 may not be nvidia-smi's GPU 0"
            )
    if p.in_container:
        notes.append("in a container ({})".format("; ".join(p.container_evidence)))
    p.expected_visible = len(visible) if p.nvml.ok else None
    p.visible_nvml = [v for v in visible if isinstance(v, int) and v >= 0] if p.nvml.ok else None
    check(
        "visibility.env",
        "visibility",
        "GPU visibility (CUDA_VISIBLE_DEVICES, containers)",
        status,
        summary,
        ev,
        cause=cause,
        note="; ".join(notes) or None,
        t0=t0,
    )
    return True
