"""Whether GPM figures can be true (`invalid_reason`, `checked`): applied where GPM figures
enter gputui (NVML's `GpmSampler`, recordings, cluster scrapes).  Plain Python, apart from
the NVML sampler (gputui/telemetry/nvml/gpm.py, ctypes), so that reading a recording does not
load it."""

from __future__ import annotations

import math
from dataclasses import replace

from gputui.telemetry.metrics import GPM_READS
from gputui.telemetry.model import GpmSample


def invalid_reason(w: GpmSample) -> str | None:
    """Why `w`'s own figures cannot be true, or None: an activity outside 0-100 %, a byte
    rate below 0 or not finite.  (A MIG sample's instances are checked by `checked`.)"""
    bad = []
    for m in GPM_READS:
        v = getattr(w, m.figure)
        if v is None:
            continue
        # NaN fails both comparisons: invalid too
        ok = 0.0 <= v <= 100.0 if m.unit == "%" else (math.isfinite(v) and v >= 0)
        if not ok:
            bad.append(f"{m.name} {v:g} {m.unit}")
    if not bad:
        return None
    return f"GPM gave impossible figures ({', '.join(bad)}; activity is 0-100 %, rates 0 or more)"


def checked(w: GpmSample) -> GpmSample:
    """`w`, or where a figure cannot be true (`invalid_reason`) a sample without figures
    whose `unavailable` says which: every reader (the cards, the detail view, the hints,
    `gputui snapshot`, the exporter) then shows N/A with the reason.  Applied where GPM
    figures enter gputui: NVML (`GpmSampler`), recordings and cluster scrapes."""
    if w.mig:
        parts = tuple(checked(p) for p in w.mig)
        if any(a is not b for a, b in zip(parts, w.mig, strict=True)):
            w = replace(w, mig=parts)
    reason = invalid_reason(w)
    if reason is None:
        return w
    return GpmSample(unavailable=reason, gpu_instance_id=w.gpu_instance_id, mig=w.mig)
