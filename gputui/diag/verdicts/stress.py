"""The stress benchmark's results: its events gathered per GPU, the reference figures
(datasheet and achievable), per-GPU verdicts, and its table and Markdown."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gputui.diag.verdicts.diagnosis import _text
from gputui.rules import SLOWDOWN_MASK


def md_cell(text: str) -> str:
    """Text for one Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


# --------------------------------------------------------------------------------------
# the stress benchmark: results, reference figures, per-GPU verdicts
# --------------------------------------------------------------------------------------

#: Dense datasheet peaks (TFLOP/s; FP64 on tensor cores; FP8 with fp32 accumulate) and HBM
#: bandwidth (GB/s), by the exact name NVML and torch report.  Unknown models get no %.
DATASHEET: dict[str, dict[str, float]] = {
    "NVIDIA H200": {"fp64": 67, "fp32": 67, "tf32": 495, "fp16": 989, "bf16": 989, "fp8": 1979, "hbm": 4800},
    "NVIDIA H100 80GB HBM3": {
        "fp64": 67,
        "fp32": 67,
        "tf32": 495,
        "fp16": 989,
        "bf16": 989,
        "fp8": 1979,
        "hbm": 3350,
    },
    "NVIDIA A100-SXM4-80GB": {"fp64": 19.5, "fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312, "hbm": 2039},
    "NVIDIA A100-SXM4-40GB": {"fp64": 19.5, "fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312, "hbm": 1555},
}
#: What plain torch achieves on a healthy GPU (matmul 8192^3 TFLOP/s; d2d: 2 GiB copy_, GB/s
#: read+write), measured on the machines this project is tested on (bench/RESULTS.md).
ACHIEVABLE: dict[str, dict[str, float]] = {
    "NVIDIA H200": {"bf16": 773, "fp16": 748, "fp8": 1426, "tf32": 393, "fp32": 51, "fp64": 55, "d2d": 4270},
    "NVIDIA H100 80GB HBM3": {"bf16": 798, "d2d": 3000},
}
#: Below this fraction of the best GPU of its model in the run, or of ACHIEVABLE: WARN.
SLOW_FRACTION = 0.75
STRESS_PHASES = ("matmul", "memory", "burn", "health")


@dataclass
class StressGpu:
    index: int
    name: str = "?"
    nvml_index: int | None = None
    matmul: dict[str, dict[str, Any]] = field(default_factory=dict)
    memory: dict[str, float] = field(default_factory=dict)
    burn: dict[str, Any] | None = None
    health: dict[str, Any] | None = None
    errors: list[str] = field(default_factory=list)
    progress: dict[str, float] = field(default_factory=dict)
    """Phase -> fraction done."""
    live: dict[str, Any] = field(default_factory=dict)
    """The latest burn progress (TFLOP/s, mismatches so far)."""


class StressResults:
    """Accumulates the stress child's events."""

    def __init__(self) -> None:
        self.gpus: dict[int, StressGpu] = {}
        self.p2p: list[dict[str, Any]] = []
        self.phases_done: list[str] = []
        self.phases: dict[str, str] = {}
        self.errors: list[dict[str, Any]] = []
        self.hello: dict[str, Any] | None = None
        self.done = False
        self.seconds: float | None = None

    def gpu(self, index: Any) -> StressGpu:
        i = int(index) if isinstance(index, int) else -1
        if i not in self.gpus:
            self.gpus[i] = StressGpu(i)
        return self.gpus[i]

    def feed(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "hello":
            self.hello = event
        elif kind == "gpus":
            for g in event.get("gpus") or []:
                gpu = self.gpu(g.get("index"))
                gpu.name = str(g.get("name"))
                gpu.nvml_index = g.get("nvml_index")
        elif kind == "phase":
            name = _text(event.get("name"))
            if event.get("state") == "start":
                self.phases[name] = _text(event.get("title"), name)
            else:
                self.phases.pop(name, None)
                if name in STRESS_PHASES:
                    self.phases_done.append(name)
        elif kind == "progress":
            gpu = self.gpu(event.get("gpu"))
            gpu.progress[_text(event.get("phase"))] = float(event.get("fraction") or 0.0)
            if event.get("phase") == "burn":
                gpu.live = {k: event.get(k) for k in ("tflops", "mismatches", "nonfinite")}
        elif kind == "result":
            self._result(event)
        elif kind == "error":
            self.errors.append({"message": event.get("message"), "cause": event.get("cause")})
        elif kind == "done":
            self.done = True
            seconds = event.get("seconds")
            self.seconds = float(seconds) if isinstance(seconds, int | float) else None

    def _result(self, e: dict[str, Any]) -> None:
        phase = e.get("phase")
        if phase == "p2p":
            self.p2p.append(
                {"from": e.get("from"), "to": e.get("to"), "gbps": e.get("gbps"), "error": e.get("error")}
            )
            return
        gpu = self.gpu(e.get("gpu"))
        if e.get("error"):
            gpu.errors.append(f"{phase}: {e['error']}")
        if phase == "matmul":
            gpu.matmul[_text(e.get("precision"))] = {
                "tflops": e.get("tflops"),
                "sustained_tflops": e.get("sustained_tflops"),
                "size": e.get("size"),
                "skipped": e.get("skipped"),
            }
        elif phase == "memory" and isinstance(e.get("gbps"), int | float):
            gpu.memory[_text(e.get("kind"))] = float(e["gbps"])
        elif phase == "burn":
            gpu.burn = {k: v for k, v in e.items() if k not in ("v", "event", "phase", "gpu")}
        elif phase == "health":
            gpu.health = {k: v for k, v in e.items() if k not in ("v", "event", "phase", "gpu")}

    def current_phase(self) -> str | None:
        return next(reversed(self.phases.values()), None) if self.phases else None


def _count(value: Any) -> int:
    return int(value) if isinstance(value, int | float) else 0


def _health_deltas(health: dict[str, Any] | None) -> tuple[list[str], list[str]]:
    """(FAIL reasons, WARN reasons) from NVML before/after."""
    fail: list[str] = []
    warn: list[str] = []
    if not health or health.get("skipped"):
        return fail, warn
    before = health.get("before") or {}
    after = health.get("after") or {}
    new_ecc = _count(after.get("ecc_volatile_uncorrected")) - _count(before.get("ecc_volatile_uncorrected"))
    if new_ecc > 0:
        fail.append(f"{new_ecc} new uncorrected ECC error(s)")
    xids = health.get("xid_events") or []
    if xids:
        fail.append("Xid event(s) during the run: " + ", ".join(str(x) for x in xids))
    rows_b, rows_a = before.get("remapped_rows") or {}, after.get("remapped_rows") or {}
    if rows_a.get("failed") and not rows_b.get("failed"):
        fail.append("a row remapping failed during the run")
    new_unc_rows = _count(rows_a.get("uncorrectable")) - _count(rows_b.get("uncorrectable"))
    if new_unc_rows > 0 or (rows_a.get("pending") and not rows_b.get("pending")):
        fail.append("new remapped rows (uncorrectable memory errors)")
    replays = _count(after.get("pcie_replays")) - _count(before.get("pcie_replays"))
    if replays > 0:
        warn.append(f"{replays} PCIe replay(s) during the run (link errors)")
    new_corr = _count(after.get("ecc_volatile_corrected")) - _count(before.get("ecc_volatile_corrected"))
    if new_corr > 0:
        warn.append(f"{new_corr} corrected ECC error(s) during the run")
    return fail, warn


def stress_verdicts(
    results: StressResults, monitor: dict[int, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Per-GPU PASS/WARN/FAIL with reasons, and the stress section of the report.

    FAIL: a miscompare, NaN/Inf, a reference mismatch, new ECC errors, Xid events, a phase
    error.  WARN: throughput below 75 % of the best GPU of the same model in the run or of
    the achievable figure for the model; thermal or power-brake slowdown seen."""
    monitor = monitor or {}
    best: dict[tuple[str, str], float] = {}
    for g in results.gpus.values():
        for precision, m in g.matmul.items():
            if isinstance(m.get("tflops"), int | float):
                key = (g.name, precision)
                best[key] = max(best.get(key, 0.0), float(m["tflops"]))
        for kind, gbps in g.memory.items():
            key = (g.name, kind)
            best[key] = max(best.get(key, 0.0), gbps)
    gpus_out = []
    for g in sorted(results.gpus.values(), key=lambda x: x.index):
        fail: list[str] = list(g.errors)
        warn: list[str] = []
        burn = g.burn or {}
        if burn:
            if _count(burn.get("mismatches")):
                fail.append(f"{burn['mismatches']} miscompare(s): repeated products differed")
            if _count(burn.get("nonfinite")):
                fail.append(f"{burn['nonfinite']} NaN/Inf value(s)")
            if _count(burn.get("reference_mismatches")):
                fail.append(f"{burn['reference_mismatches']} element(s) off the float64 reference")
        h_fail, h_warn = _health_deltas(g.health)
        fail += h_fail
        warn += h_warn
        peaks = DATASHEET.get(g.name, {})
        achievable = ACHIEVABLE.get(g.name, {})
        matmul_out: dict[str, Any] = {}
        for precision, m in g.matmul.items():
            tflops = m.get("tflops")
            peak = peaks.get(precision)
            entry = {
                "tflops": tflops,
                "sustained_tflops": m.get("sustained_tflops"),
                "peak": peak,
                "percent": round(100.0 * tflops / peak, 1)
                if peak and isinstance(tflops, int | float)
                else None,
                "size": m.get("size"),
                "skipped": m.get("skipped"),
            }
            matmul_out[precision] = entry
            if isinstance(tflops, int | float):
                top = best.get((g.name, precision), 0.0)
                if top and tflops < SLOW_FRACTION * top:
                    warn.append(
                        f"{precision} {tflops:.0f} TFLOP/s is below 75 % of the best {g.name} "
                        f"here ({top:.0f})"
                    )
                ref = achievable.get(precision)
                if ref and tflops < SLOW_FRACTION * ref:
                    warn.append(f"{precision} {tflops:.0f} TFLOP/s is below 75 % of the achievable {ref:.0f}")
        for kind, gbps in g.memory.items():
            top = best.get((g.name, kind), 0.0)
            if top and gbps < SLOW_FRACTION * top:
                warn.append(f"{kind} {gbps:.0f} GB/s is below 75 % of the best {g.name} here ({top:.0f})")
            ref = achievable.get(kind)
            if ref and gbps < SLOW_FRACTION * ref:
                warn.append(f"{kind} {gbps:.0f} GB/s is below 75 % of the achievable {ref:.0f}")
        mon = monitor.get(g.nvml_index) if g.nvml_index is not None else None
        reasons = _count((g.health or {}).get("clock_event_reasons")) | _count(
            (mon or {}).get("clock_event_reasons")
        )
        if reasons & SLOWDOWN_MASK:
            from gputui.telemetry.model import decode_clock_events

            slow = list(decode_clock_events(reasons & SLOWDOWN_MASK))
            warn.append("clocks were held back during the run: " + ", ".join(slow))
        status = "FAIL" if fail else "WARN" if warn else "PASS"
        gpus_out.append(
            {
                "index": g.index,
                "nvml_index": g.nvml_index,
                "name": g.name,
                "status": status,
                "reasons": fail + warn,
                "matmul": matmul_out,
                "memory": g.memory,
                "burn": g.burn,
                "health": g.health,
                "monitor": mon,
            }
        )
    statuses = [g["status"] for g in gpus_out]
    overall = (
        "FAIL"
        if "FAIL" in statuses or results.errors or not gpus_out
        else "WARN"
        if "WARN" in statuses
        else "PASS"
    )
    return {
        "status": overall,
        "duration": (results.hello or {}).get("duration"),
        "seconds": results.seconds,
        "phases": results.phases_done,
        "errors": list(results.errors),  # a copy: the caller adds how the child ended
        "gpus": gpus_out,
        "p2p": results.p2p,
        "references": {
            name: {"datasheet": DATASHEET.get(name), "achievable": ACHIEVABLE.get(name)}
            for name in {g.name for g in results.gpus.values()}
        },
    }


def stress_table(stress: dict[str, Any]) -> list[list[str]]:
    """Rows of the per-GPU results table (header first), as text cells."""
    precisions = [
        p
        for p in ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")
        if any(isinstance((g["matmul"].get(p) or {}).get("tflops"), int | float) for g in stress["gpus"])
    ]
    header = ["GPU", "verdict", *precisions, "D2D GB/s", "H2D pinned", "burn", "max °C"]
    rows = [header]
    for g in stress["gpus"]:
        cells = [f"{g['index']} {g['name']}", g["status"]]
        for p in precisions:
            m = g["matmul"].get(p) or {}
            t = m.get("tflops")
            if isinstance(t, int | float):
                cells.append(_num(t) + (f" ({m['percent']:.0f}%)" if m.get("percent") is not None else ""))
            else:
                cells.append("—")
        mem = g.get("memory") or {}
        cells.append(_num(mem["d2d"]) if "d2d" in mem else "—")
        cells.append(f"{mem['h2d_pinned']:.1f}" if "h2d_pinned" in mem else "—")
        burn = g.get("burn") or {}
        if burn:
            errors = (
                _count(burn.get("mismatches"))
                + _count(burn.get("nonfinite"))
                + _count(burn.get("reference_mismatches"))
            )
            cells.append(
                f"{errors} errors / {burn.get('iterations')} it"
                if errors
                else f"ok / {burn.get('iterations')} it"
            )
        else:
            cells.append("—")
        mon = g.get("monitor") or {}
        cells.append(str(mon.get("max_temperature")) if mon.get("max_temperature") is not None else "—")
        rows.append(cells)
    return rows


def _num(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def stress_markdown(stress: dict[str, Any]) -> list[str]:
    """The stress results as Markdown lines."""
    lines = [f"## Stress benchmark: {stress['status']}", ""]
    rows = stress_table(stress)
    if len(rows) < 2:  # no GPU was tested: say so, not a table of nothing
        errors = [str(e.get("message")) for e in stress.get("errors") or []]
        first, rest = (errors[0], errors[1:]) if errors else ("no GPU was found", [])
        lines.append(f"No GPU was stress-tested: {first}")
        return lines + [f"\nError: {e}" for e in rest]
    lines.append("| " + " | ".join(rows[0]) + " |")
    lines.append("|" + "---|" * len(rows[0]))
    for row in rows[1:]:
        lines.append("| " + " | ".join(md_cell(c) for c in row) + " |")
    lines.append("")
    lines.append(
        "TFLOP/s per precision (% of the datasheet's dense peak where the model is known); "
        "D2D counts bytes read and written."
    )
    for g in stress["gpus"]:
        if g["reasons"]:
            lines.append("")
            lines.append(f"GPU {g['index']} {g['status']}:")
            lines += [f"- {r}" for r in g["reasons"]]
    if stress.get("p2p"):
        lines.append("")
        lines.append(
            "Peer-to-peer: "
            + ", ".join(
                f"{p['from']}→{p['to']} {p['gbps']:.0f} GB/s"
                for p in stress["p2p"]
                if isinstance(p.get("gbps"), int | float)
            )
        )
    for err in stress.get("errors") or []:
        lines.append("")
        lines.append(f"Error: {err.get('message')}")
    return lines
