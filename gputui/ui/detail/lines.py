"""The GPU detail view's content as lines: every static fact, memory health, clock-event
reasons with what they mean, MIG instances, processes (the history charts: charts.py).

Pure functions of the data (no Textual), tested as text.  Unknown values are "N/A".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rich.style import Style

from gputui.telemetry.facts import sm_count
from gputui.telemetry.hints import Hint
from gputui.telemetry.metrics import GPM_READS
from gputui.telemetry.model import (
    CLOCK_EVENT_QUIET_MASK,
    CLOCK_EVENT_REASONS,
    CLOCK_EVENT_SLOWDOWN_MASK,
    XID_MEANINGS,
    DeviceInfo,
    GpmSample,
    GpuProcess,
    GpuSample,
    MachineInfo,
    MigDevice,
    describe_xid,
)
from gputui.telemetry.topology import pcie_state
from gputui.ui.cards import boxed
from gputui.ui.render import (
    NA,
    Line,
    S,
    clean,
    fmt_gib,
    fmt_pct,
    fmt_rate,
    fmt_temp,
    fmt_watts,
    line_len,
    pad,
    pad_line,
)

Fact = tuple[str, str, Style | None]
"""(label, value, style of the value; None = the default)."""

LABEL_W = 15
MIN_COLUMN = 58
"""A facts box narrower than this cuts UUIDs: fewer columns instead."""


def _na(value: object, unit: str = "") -> str:
    return NA if value is None else f"{value}{unit}"


def _yes(value: bool | None, yes: str = "enabled", no: str = "disabled") -> str:
    return NA if value is None else (yes if value else no)


def _mib(value: int | None) -> str:
    return NA if value is None else f"{value / 2**20:,.0f} MiB"


def _value_style(value: str) -> Style | None:
    return S.dim if value == NA else None


def fact(label: str, value: str, style: Style | None = None) -> Fact:
    return (label, value, style if style is not None else _value_style(value))


# --------------------------------------------------------------------------------------
# static facts
# --------------------------------------------------------------------------------------


def identity_facts(dev: DeviceInfo) -> list[Fact]:
    cc = dev.compute_capability
    sms = sm_count(dev)
    sms_text = NA
    if sms is not None and dev.cuda_cores is not None:
        sms_text = f"{sms} ({dev.cuda_cores // sms} CUDA cores each)"
    arch = " · ".join(p for p in (dev.brand, dev.architecture) if p) or NA
    return [
        fact("UUID", clean(dev.uuid) if dev.uuid else NA),
        fact("Serial", clean(dev.serial) if dev.serial else NA),
        fact("Board part", clean(dev.board_part_number) if dev.board_part_number else NA),
        fact("VBIOS", clean(dev.vbios_version) if dev.vbios_version else NA),
        fact("InfoROM image", clean(dev.inforom_version) if dev.inforom_version else NA),
        fact("Brand · arch", clean(arch)),
        fact("Compute cap.", f"{cc[0]}.{cc[1]}" if cc else NA),
        fact("SMs", sms_text),
        fact("CUDA cores", NA if dev.cuda_cores is None else f"{dev.cuda_cores:,}"),
        fact("PCI bus id", clean(dev.bus_id) if dev.bus_id else NA),
        fact(
            "Minor number",
            _na(dev.minor_number, "") if dev.minor_number is None else f"/dev/nvidia{dev.minor_number}",
        ),
    ]


def driver_facts(info: MachineInfo, dev: DeviceInfo) -> list[Fact]:
    sys_ = info.system
    mig = _yes(dev.mig_mode)
    if dev.mig_mode_pending is not None and dev.mig_mode_pending != dev.mig_mode:
        mig += f" ({_yes(dev.mig_mode_pending)} after the next GPU reset)"
    return [
        fact("Driver", clean(sys_.driver_version) if sys_.driver_version else NA),
        fact("CUDA (driver)", f"up to {clean(sys_.cuda_driver_version)}" if sys_.cuda_driver_version else NA),
        fact("NVML", clean(sys_.nvml_version) if sys_.nvml_version else NA),
        fact("Persistence", _yes(dev.persistence_mode)),
        fact("Compute mode", clean(dev.compute_mode) if dev.compute_mode else NA),
        fact("MIG mode", mig),
        fact("ECC mode", _yes(dev.ecc_mode)),
    ]


def memory_facts(dev: DeviceInfo, g: GpuSample | None) -> list[Fact]:
    used = g.mem_used if g else None
    return [
        fact("Memory", fmt_gib(dev.memory_total) if dev.memory_total else NA),
        fact("  in use", fmt_gib(used, dev.memory_total) if used is not None and dev.memory_total else NA),
        fact("  reserved", fmt_gib(g.mem_reserved) if g and g.mem_reserved is not None else NA),
        fact("Bus width", _na(dev.memory_bus_width, " bits")),
        fact("BAR1", _mib(dev.bar1_total)),
    ]


def power_facts(dev: DeviceInfo, g: GpuSample | None) -> list[Fact]:
    limits = NA
    if dev.power_min_limit is not None and dev.power_max_limit is not None:
        limits = f"{dev.power_min_limit:.0f}-{dev.power_max_limit:.0f} W"
    now = g.power_limit if g and g.power_limit is not None else dev.power_limit
    return [
        fact("Power limit", fmt_watts(now)),
        fact("  default", fmt_watts(dev.power_default_limit)),
        fact("  settable", limits),
        fact("Slowdown temp", fmt_temp(dev.temp_slowdown)),
        fact("Shutdown temp", fmt_temp(dev.temp_shutdown)),
        fact("Max operating", fmt_temp(dev.temp_max_operating)),
    ]


def link_facts(dev: DeviceInfo, g: GpuSample | None) -> list[Fact]:
    state = pcie_state(dev, g)
    now = NA if state.gen is None or state.width is None else f"Gen{state.gen} x{state.width}"
    maximum = (
        NA if state.max_gen is None or state.max_width is None else f"Gen{state.max_gen} x{state.max_width}"
    )
    style = S.bad if state.downtrained else (S.dim if now == NA else None)
    if state.downtrained:
        now = f"⚠ {now} under load"
    elif state.below_max:
        now += " (idle: trained down, normal)"
    replay = g.pcie_replay_counter if g else None
    return [
        fact("PCIe link", now, style),
        fact("  maximum", maximum),
        fact("  RX / TX", f"{fmt_rate(g.pcie_rx if g else None)} / {fmt_rate(g.pcie_tx if g else None)}"),
        fact("  replays", _na(replay), S.warn if replay else None),
        fact("CPU affinity", clean(dev.cpu_affinity) if dev.cpu_affinity else NA),
        fact("NUMA node", _na(dev.numa_node)),
    ]


# --------------------------------------------------------------------------------------
# health
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Health:
    facts: list[Fact]
    verdict: str
    style: Style


def health(g: GpuSample | None) -> Health:
    """ECC counters, retired pages and remapped rows, with a one-line verdict."""
    if g is None:
        return Health([], "waiting for the first sample…", S.dim)

    def count(value: int | None, bad: Style) -> Fact:
        return ("", _na(value), S.dim if value is None else (bad if value else S.ok))

    problems: list[str] = []
    warnings: list[str] = []
    if g.ecc_volatile_uncorrected or g.ecc_aggregate_uncorrected:
        problems.append("uncorrectable ECC errors")
    if g.remapped_rows_failure:
        problems.append("a row remap failed: service the GPU")
    if g.remapped_rows_pending:
        warnings.append("a row remap is pending: reset the GPU to apply it")
    if g.retired_pages_pending:
        warnings.append("a page retirement is pending: reload the driver")
    if g.ecc_volatile_corrected or g.ecc_aggregate_corrected:
        warnings.append("corrected ECC errors")
    if g.retired_pages_dbe:
        problems.append("pages retired after double-bit errors")
    if g.xid_count and g.xid_last is not None:
        meaning = XID_MEANINGS.get(g.xid_last)
        (warnings if meaning and meaning[1] else problems).append(describe_xid(g.xid_last))
    facts: list[Fact] = []
    for label, corrected, uncorrected in (
        ("ECC volatile", g.ecc_volatile_corrected, g.ecc_volatile_uncorrected),
        ("ECC aggregate", g.ecc_aggregate_corrected, g.ecc_aggregate_uncorrected),
    ):
        c, u = count(corrected, S.warn), count(uncorrected, S.bad)
        facts.append((label, f"{c[1]} corrected · {u[1]} uncorrected", u[2] if uncorrected else c[2]))
    sbe, dbe = g.retired_pages_sbe, g.retired_pages_dbe
    pages = NA if sbe is None and dbe is None else f"{_na(sbe)} single-bit · {_na(dbe)} double-bit"
    facts.append(fact("Retired pages", pages, S.bad if dbe else (S.warn if sbe else None)))
    facts.append(
        fact(
            "  pending",
            _yes(g.retired_pages_pending, "yes", "no"),
            S.warn if g.retired_pages_pending else None,
        )
    )
    rc, ru = g.remapped_rows_corrected, g.remapped_rows_uncorrected
    rows = NA if rc is None and ru is None else f"{_na(rc)} correctable · {_na(ru)} uncorrectable"
    facts.append(fact("Remapped rows", rows, S.warn if (rc or ru) else None))
    facts.append(
        fact(
            "  pending",
            _yes(g.remapped_rows_pending, "yes", "no"),
            S.warn if g.remapped_rows_pending else None,
        )
    )
    facts.append(
        fact(
            "  failure",
            _yes(g.remapped_rows_failure, "yes", "no"),
            S.bad if g.remapped_rows_failure else None,
        )
    )
    if g.xid_count is not None:
        xid = "none" if not g.xid_count else f"{g.xid_count}, last {describe_xid(g.xid_last or 0)}"
        facts.append(fact("Xid events", xid + " (since gputui started)", S.bad if g.xid_count else None))
    if problems:
        return Health(facts, "⚠ " + "; ".join(problems + warnings), S.bad)
    if warnings:
        return Health(facts, "⚠ " + "; ".join(warnings), S.warn)
    known = any(
        v is not None for v in (g.ecc_volatile_uncorrected, g.remapped_rows_failure, g.retired_pages_dbe)
    )
    return Health(
        facts, "✓ no memory errors" if known else "not reported by this GPU", S.ok if known else S.dim
    )


# --------------------------------------------------------------------------------------
# boxes and the grid
# --------------------------------------------------------------------------------------


def fact_line(f: Fact, width: int, label_w: int = LABEL_W) -> Line:
    label, value, style = f
    return [(pad(label, label_w), S.label), (pad(value, max(0, width - label_w)), style or S.value)]


def facts_box(
    title: str, facts: Sequence[Fact], width: int, height: int | None = None, right: Line | None = None
) -> list[Line]:
    inner = width - 4
    body = [fact_line(f, inner) for f in facts]
    body += [[] for _ in range((height or 0) - len(body))]
    return boxed([(title, S.title)], right or [], body, width)


def grid(boxes: Sequence[tuple[str, Sequence[Fact], Line | None]], width: int) -> list[Line]:
    """Facts boxes side by side, as many columns as fit (each MIN_COLUMN wide at least);
    the boxes of one row get the same height."""
    cols = max(1, min(len(boxes), width // MIN_COLUMN))
    out: list[Line] = []
    base = width // cols
    for start in range(0, len(boxes), cols):
        row = boxes[start : start + cols]
        height = max(len(b[1]) for b in row)
        rendered = []
        for k, (title, facts, right) in enumerate(row):
            w = base + (width - base * cols if k == len(row) - 1 and len(row) == cols else 0)
            rendered.append(facts_box(title, facts, w, height, right))
        for y in range(height + 2):
            line: Line = []
            for box in rendered:
                line.extend(box[y])
            out.append(pad_line(line, width))
    return out


def clock_reason_lines(mask: int | None, width: int) -> list[Line]:
    """Every clock-event reason NVML knows, with what it means; the active ones marked and
    named in the first line.  Always the same number of lines (a change of height would
    repaint the screen), so explanations are cut, not wrapped, in narrow terminals."""
    inner = width - 4
    title: Line = [("Clock-event reasons", S.title)]
    if mask is None:
        body: list[Line] = [[("NVML reports no clock-event reasons for this GPU (N/A).", S.dim)]]
        return boxed(title, [], body, width)
    name_w = max(len(v[0]) for v in CLOCK_EVENT_REASONS.values()) + 2
    active = [name for bit, (name, _) in CLOCK_EVENT_REASONS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_REASONS)
    if unknown:
        active.append(f"0x{unknown:x} (a reason this gputui does not know)")
    if mask & CLOCK_EVENT_SLOWDOWN_MASK:
        summary: Line = [("⚠ slowed down: ", S.bad), (", ".join(active), S.bad)]
    elif mask & ~CLOCK_EVENT_QUIET_MASK:
        summary = [("● held back by: ", S.warn), (", ".join(active), S.warn)]
    elif mask:
        summary = [("● idle: ", S.dim), ("nothing runs, so the clocks are low (normal)", S.text)]
    else:
        summary = [("✓ none: ", S.ok), ("the clocks run as fast as the GPU allows", S.text)]
    body = [summary]
    for bit, (name, why) in CLOCK_EVENT_REASONS.items():
        on = bool(mask & bit)
        if not on:
            style, mark, text = S.dim, "○", S.dim
        elif bit & CLOCK_EVENT_SLOWDOWN_MASK:
            style, mark, text = S.bad, "⚠", S.text
        elif bit & CLOCK_EVENT_QUIET_MASK:
            style, mark, text = S.label, "●", S.text
        else:
            style, mark, text = S.warn, "●", S.text
        body.append([(f"{mark} {pad(name, name_w)}", style), (pad(why, max(0, inner - name_w - 2)), text)])
    return boxed(title, [(f"mask 0x{mask:x}", S.dim)], body, width)


HINT_LINES = 6
"""Lines the hints part of the activity box always takes (a change of height repaints)."""


def gpm_value(w: GpmSample, field: str) -> str:
    v = getattr(w, field)
    if v is None:
        return NA
    return f"{v:.1f}%" if field.endswith(("_active", "_occupancy")) else fmt_rate(v)


def activity_lines(g: GpuSample | None, hints: Sequence[Hint], width: int, live: bool = True) -> list[Line]:
    """GPM's figures over the last window (N/A with the reason where GPM gives none), per
    GPU instance under MIG, and the efficiency hints with the numbers behind them and the
    remedies.  Always the same height for the same GPU."""
    inner = width - 4
    w = g.gpm if g is not None else None
    title: Line = [("Activity (GPM)", S.title)]
    right: Line = []
    body: list[Line] = []
    cols = max(1, min(3, inner // 30))
    col_w = inner // cols
    reads = GPM_READS
    fields = [r.figure for r in reads]
    rows = math.ceil(len(fields) / cols)
    if w is None or (w.unavailable is not None and not w.mig):
        if w is None:
            why = (
                "not measured yet: the first window needs two samples on the slow cadence (2 s)"
                if live
                else "not in this recording (made before gputui read GPM)"
            )
        else:
            why = clean(w.unavailable or "")
        body.append([("N/A: ", S.warn), (why, S.text)])
        body += [[] for _ in range(rows - 1)]
    else:
        parts = [w] if not w.mig else list(w.mig)
        if w.window is not None:
            right = [(f"over {w.window:.1f} s", S.dim)]
        for part in parts:
            if part.gpu_instance_id is not None:
                body.append([(f"GPU instance {part.gpu_instance_id}", S.label)])
            if part.unavailable is not None:
                body.append([("N/A: ", S.warn), (clean(part.unavailable), S.text)])
                continue
            for r in range(rows):
                line: Line = []
                for c in range(cols):
                    k = c * rows + r
                    if k < len(fields):
                        line += [(pad(reads[k].name, 16), S.label),
                                 (pad(gpm_value(part, fields[k]), col_w - 16), S.value)]  # fmt: skip
                body.append(line)
    hint_body: list[Line] = []
    for h in hints:
        hint_body.append([("» ", S.warn), (h.short, S.warn), ("  " + h.evidence, S.text)])
        hint_body += [[("    → ", S.dim), (r, S.text)] for r in h.remedies]
    if not hint_body:
        ok = (
            "✓ no efficiency hint"
            if w is not None and w.unavailable is None
            else "no efficiency hint (no GPM)"
        )
        hint_body = [[(ok, S.ok if w is not None and w.unavailable is None else S.dim)]]
    hint_body = hint_body[:HINT_LINES]
    hint_body += [[] for _ in range(HINT_LINES - len(hint_body))]
    return boxed(title, right, [*body, [], *hint_body], width)


def process_line(p: GpuProcess, width: int, indent: str = "") -> Line:
    name = clean(p.name) if p.name else ("not visible here" if not p.visible else NA)
    sm = fmt_pct(p.sm_util)
    cmd = clean(" ".join(p.cmdline)) if p.cmdline else ""
    user = pad(clean(p.user or NA), 8)
    head = f"{indent}{p.pid:>7}  {user}  {pad(name, 14)}  {fmt_gib(p.gpu_memory):>9}  SM {sm:>4}  "
    return [(head, S.value), (pad(cmd, max(0, width - len(head))), S.label)]


def mig_lines(dev: DeviceInfo, g: GpuSample | None, procs: Sequence[GpuProcess], width: int) -> list[Line]:
    """MIG devices with their processes (per-process utilization is N/A on MIG: NVML does
    not measure it there)."""
    inner = width - 4
    migs: Sequence[MigDevice] = g.mig_devices if g else ()
    body: list[Line] = []
    if not migs:
        body.append([("MIG is enabled but no GPU instance exists yet (nvidia-smi mig -cgi …).", S.warn)])
    placed: set[int] = set()
    for m in migs:
        profile = m.profile or NA
        mem = (
            fmt_gib(m.memory_used, m.memory_total)
            if m.memory_used is not None and m.memory_total
            else fmt_gib(m.memory_total)
        )
        head = (
            f"MIG {m.index}  GI {_na(m.gpu_instance_id)} · CI {_na(m.compute_instance_id)}  "
            f"{pad(profile, 9)} {_na(m.sm_count):>4} SMs  {mem:>16}  "
        )
        body.append([(head, S.value), (pad(clean(m.uuid or NA), max(0, inner - len(head))), S.label)])
        mine = [
            p
            for p in procs
            if p.gpu_instance_id == m.gpu_instance_id and p.compute_instance_id == m.compute_instance_id
        ]
        for p in mine:
            placed.add(p.pid)
            body.append(process_line(p, inner, "  └"))
        if not mine:
            body.append([("   no processes", S.dim)])
    rest = [p for p in procs if p.pid not in placed]
    if rest and migs:
        body.append([("instance not reported:", S.dim)])
        body.extend(process_line(p, inner, "  └") for p in rest)
    return boxed([("MIG devices", S.title)], [("per-process utilization: N/A on MIG", S.dim)], body, width)


def process_lines(procs: Sequence[GpuProcess], width: int, limit: int = 12, min_rows: int = 0) -> list[Line]:
    """The GPU's processes, biggest first, at least `min_rows` rows tall (so a process that
    comes and goes does not change the view's height: a height change repaints the screen)."""
    inner = width - 4
    body: list[Line] = []
    if not procs:
        body.append([("no processes on this GPU", S.dim)])
    ordered = sorted(procs, key=lambda p: -(p.gpu_memory or 0))
    for p in ordered[:limit]:
        body.append(process_line(p, inner))
    if len(ordered) > limit:
        body.append([(f"… and {len(ordered) - limit} more (the Processes tab lists them all)", S.dim)])
    body += [[] for _ in range(min_rows - len(body))]
    header: Line = [(f"{'PID':>7}  {'USER':8}  {'NAME':14}  {'GPU MEM':>9}  {'SM %':>7}  COMMAND", S.label)]
    return boxed([("Processes", S.title)], [(f"{len(procs)}", S.dim)], [header, *body], width)


def title_line(dev: DeviceInfo, width: int, hint: str = "esc back  ←/→ other GPU") -> Line:
    left: Line = [
        (f" GPU {dev.index} ", S.index),
        (clean(dev.name), S.title),
        ("  " + clean(dev.bus_id or ""), S.dim),
    ]
    right: Line = [(hint + " ", S.label)]
    gap = width - line_len(left) - line_len(right)
    if gap < 1:
        return pad_line(left, width)
    return [*left, (" " * gap, None), *right]
