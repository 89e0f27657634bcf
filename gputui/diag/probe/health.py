"""The health layer (NVML): persistence, ECC, retired pages / remapped rows, slowdown now, and
the PCIe link under load against its maximum."""

from __future__ import annotations

import time

from . import clocks
from .protocol import check
from .registry import declare


@declare("health", "health", "GPU health (NVML)", needs=("nvml",))
def health(p):
    for i in range(len(p.nvml.handles)):
        t0 = time.monotonic()
        h = p.nvml.health(i)
        if i in p.link_under_load:
            h["pcie_under_load"] = p.link_under_load[i]
        status, cause, parts = judge_health(h)
        name = p.nvml_devices[i].get("name") if i < len(p.nvml_devices) else None
        check(
            "health.%d" % i,
            "health",
            "GPU %d health" % i,
            status,
            "; ".join(parts)
            if parts
            else "%s: no ECC errors, no pending row remaps, no slowdown" % (name or "GPU"),
            h,
            cause=cause,
            t0=t0,
        )


def judge_health(h):
    """PASS/WARN/FAIL from one GPU's NVML health facts."""
    status, cause, parts = "PASS", None, []

    def worse(new_status, new_cause, text):
        nonlocal status, cause
        order = {"PASS": 0, "WARN": 1, "FAIL": 2}
        if order[new_status] > order[status]:
            status, cause = new_status, new_cause
        parts.append(text)

    rows = h.get("remapped_rows") or {}
    if rows.get("failed"):
        worse("FAIL", "row-remap-failed", "a row remapping FAILED: this GPU's memory needs service")
    if h.get("ecc_volatile_uncorrected"):
        worse(
            "FAIL",
            "ecc-uncorrected",
            "%d uncorrected ECC errors since the driver loaded" % h["ecc_volatile_uncorrected"],
        )
    if rows.get("pending") or h.get("retired_pages_pending"):
        worse(
            "WARN",
            "reset-pending",
            "a memory row remap / page retirement is pending: reset the GPU to apply it",
        )
    if h.get("ecc_aggregate_uncorrected") and not h.get("ecc_volatile_uncorrected"):
        worse(
            "WARN",
            "ecc-history",
            "%d uncorrected ECC errors in this GPU's lifetime" % h["ecc_aggregate_uncorrected"],
        )
    reasons = h.get("clock_event_reasons") or 0
    slow = clocks.slowdown_names(reasons)
    if slow:
        worse("WARN", "slowdown", "clocks held back now: {}".format(", ".join(slow)))
    if h.get("persistence_mode") == 0:
        worse("WARN", "persistence-off", "persistence mode is off: each CUDA start re-initialises the GPU")
    load = h.get("pcie_under_load") or {}
    max_gen, max_width = h.get("pcie_max_gen"), h.get("pcie_max_width")
    gen = load.get("gen") if load.get("gen") is not None else None
    width = load.get("width") if load.get("width") is not None else h.get("pcie_width")
    if max_width and width and width < max_width:
        worse("WARN", "pcie-downgraded", "PCIe link x%d, below its x%d" % (width, max_width))
    if max_gen and gen and gen < max_gen:
        worse("WARN", "pcie-downgraded", "PCIe Gen%d under load, below its Gen%d" % (gen, max_gen))
    return status, cause, parts
