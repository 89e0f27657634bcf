"""The Diagnostics tab's lines (plain data): a finding, the summary and the first fix, and the
stress run's telemetry, progress, verdict table and plot."""

from __future__ import annotations

import textwrap
from typing import Any

from rich.style import Style

from gputui.diag.session import StressSession
from gputui.diag.verdicts import Diagnosis, Finding, stress_table
from gputui.telemetry.model import CLOCK_EVENT_QUIET_MASK, decode_clock_events
from gputui.ui.render import (
    GREEN,
    ORANGE,
    Line,
    S,
    bar,
    clean,
    fit,
    fmt_mhz,
    fmt_temp,
    fmt_watts,
    plot_lines,
    ratio,
)

STATUS_STYLE = {"PASS": S.ok, "WARN": S.warn, "FAIL": S.bad, "SKIP": S.dim}
TITLE_WIDTH = 30
REVERSE = Style(reverse=True)


def _wrap(text: str, width: int, indent: int) -> list[str]:
    return textwrap.wrap(clean(text), max(10, width - indent)) or [""]


def finding_lines(f: Finding, width: int) -> list[Line]:
    """One line per check; the cause, its meaning and the fix under anything not PASS."""
    title = fit(clean(f.title), TITLE_WIDTH).ljust(TITLE_WIDTH)
    summary_width = max(10, width - 8 - TITLE_WIDTH)
    out: list[Line] = [
        [
            (" ", None),
            (f"{f.status:<4}", STATUS_STYLE.get(f.status, S.text)),
            ("  ", None),
            (title, S.label),
            (" ", None),
            (fit(clean(f.summary), summary_width), S.text),
        ]
    ]
    if f.status in ("WARN", "FAIL"):
        if f.summary and len(clean(f.summary)) > summary_width:
            out += [[("       ", None), (chunk, S.text)] for chunk in _wrap(f.summary, width, 8)]
        if f.cause_title:
            text = f"{f.cause_title}: {f.meaning or ''}"
            out += [[("       ", None), (chunk, S.label)] for chunk in _wrap(text, width, 8)]
        for line in f.fix:
            for k, chunk in enumerate(_wrap(line, width, 10)):
                out.append([("       ", None), ("→ " if k == 0 else "  ", S.info), (chunk, S.value)])
    elif f.note:
        out += [[("       ", None), (chunk, S.dim)] for chunk in _wrap("note: " + f.note, width, 8)]
    return out


def summary_line(diagnosis: Diagnosis | None, running: bool, phase: str | None, elapsed: float) -> Line:
    if diagnosis is None:
        return [(" press ", S.label), ("g", S.index), (" to diagnose this environment", S.label)]
    counts = diagnosis.counts()
    parts: Line = [(" ", None)]
    if running:
        parts += [("● running ", S.info), (f"{elapsed:.1f} s", S.value)]
        if phase:
            parts += [(": ", S.label), (clean(phase) + "…", S.text)]
        parts.append(("   ", None))
    elif diagnosis.child.get("cancelled"):
        parts += [("cancelled", S.warn), ("   ", None)]
    else:
        parts += [(f" {diagnosis.status} ", STATUS_STYLE[diagnosis.status] + REVERSE)]
        parts.append(("  ", None))
    for status in ("PASS", "WARN", "FAIL", "SKIP"):
        parts += [(str(counts[status]), STATUS_STYLE[status]), (f" {status.lower()}  ", S.label)]
    if not running and diagnosis.child.get("seconds") is not None:
        parts.append((f"in {diagnosis.child['seconds']:.1f} s", S.dim))
    return parts


def primary_lines(diagnosis: Diagnosis | None, width: int) -> list[Line]:
    if diagnosis is None:
        return []
    first = diagnosis.primary()
    if first is None:
        return []
    head = f"{first.cause_title or first.title}: {first.summary}"
    out: list[Line] = [[(" First fix: ", S.title), (fit(clean(head), max(10, width - 13)), S.text)]]
    for line in first.fix[:3]:
        out.append([("   → ", S.info), (fit(clean(line), max(10, width - 5)), S.value)])
    return out


STRESS_PHASES = ("matmul", "memory", "burn")


def stress_lines(session: StressSession, width: int, elapsed: float) -> list[Line]:
    """Live per-GPU telemetry (sampled by the monitor), a progress bar per phase, and at the
    end the verdict table."""
    results = session.results
    running = session.running
    out: list[Line] = []
    head: Line = [(" Stress ", S.title)]
    if running:
        phase = results.current_phase()
        head += [("● running ", S.info), (f"{elapsed:.0f} s", S.value)]
        if phase:
            head += [(": ", S.label), (clean(phase) + "…", S.text)]
    else:
        report = session.report()
        status = "cancelled" if report.get("cancelled") else report["status"]
        head.append((f" {status} ", STATUS_STYLE.get(status, S.warn) + REVERSE))
    out.append(head)
    latest = session.monitor.snapshot()[0] if session.monitor is not None else {}
    for g in sorted(results.gpus.values(), key=lambda x: x.index):
        line: Line = [(f" {g.index} ", S.index), (fit(clean(g.name), 22).ljust(22), S.text)]
        sample = latest.get(g.nvml_index) if g.nvml_index is not None else None
        if sample is not None:
            power = ratio(sample.power_draw, sample.power_limit)
            reasons = decode_clock_events((sample.clock_event_reasons or 0) & ~CLOCK_EVENT_QUIET_MASK)
            line += [
                (f" {fmt_temp(sample.temperature):>5} ", S.value),
                *bar(power, 10, ORANGE),
                (f" {fmt_watts(sample.power_draw, sample.power_limit):>10} ", S.value),
                (f" SM {fmt_mhz(sample.sm_clock):>9} ", S.value),
                (" " + ", ".join(reasons) if reasons else "", S.warn),
            ]
        else:
            line.append((" (no telemetry for this device)", S.dim))
        out.append(line)
        bars: Line = [("    ", None)]
        for phase in STRESS_PHASES:
            frac = g.progress.get(phase)
            bars += [
                (f"{phase} ", S.label),
                *bar(frac or 0.0, 8, GREEN),
                (f" {100 * (frac or 0):3.0f}%  ", S.dim),
            ]
        live = g.live
        if live.get("tflops") is not None:
            errors = int(live.get("mismatches") or 0) + int(live.get("nonfinite") or 0)
            bars += [
                (f"{live['tflops']:g} TFLOP/s ", S.value),
                (f"{errors} errors", S.bad if errors else S.ok),
            ]
        out.append(bars)
    if not running and results.gpus:
        report = session.report()
        rows = stress_table(report)
        widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
        for n, row in enumerate(rows):
            cells: Line = [(" ", None)]
            for k, cell in enumerate(row):
                style = S.label if n == 0 else STATUS_STYLE.get(cell, S.text) if k == 1 else S.value
                cells += [(clean(cell).ljust(widths[k]), style), ("  ", None)]
            out.append(cells)
        for g in report["gpus"]:
            for reason in g["reasons"]:
                out.append(
                    [(f"   GPU {g['index']}: ", S.label), (fit(clean(reason), max(10, width - 12)), S.text)]
                )
        out += stress_error_lines(report, width)
        if any(g["matmul"] for g in report["gpus"]):
            out += stress_plot(report, width)  # the figure; the table above has the % of peak
    elif not running:
        out += stress_error_lines(session.report(), width)  # no GPU got as far as a result
    out.append([("─" * width, S.border)])
    return out


def stress_error_lines(report: dict[str, Any], width: int) -> list[Line]:
    """Why the run failed, as the CLI says it (the child's errors, a crash, a timeout)."""
    return [
        [(" error: ", S.bad), (fit(clean(str(err.get("message"))), max(10, width - 8)), S.text)]
        for err in report.get("errors") or []
    ]


PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")


def stress_plot(report: dict[str, Any], width: int) -> list[Line]:
    """A plotext bar chart of matmul TFLOP/s per precision, one bar per GPU."""
    gpus = report["gpus"]
    labels = [
        p
        for p in PRECISIONS
        if any(isinstance((g["matmul"].get(p) or {}).get("tflops"), int | float) for g in gpus)
    ]
    if not labels:
        return []
    series = [[float((g["matmul"].get(p) or {}).get("tflops") or 0.0) for p in labels] for g in gpus]

    def build(plt: Any) -> None:
        if len(series) == 1:
            plt.bar(labels, series[0], color="green")
        else:
            plt.multiple_bar(labels, series, labels=[f"GPU {g['index']}" for g in gpus])
        plt.title("matmul TFLOP/s")

    return plot_lines(build, min(width - 2, 100), 14)
