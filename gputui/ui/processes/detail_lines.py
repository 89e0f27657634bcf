"""The process detail view as lines: the process's facts, its GPU history, and its
environment (GPU-related variables first, secrets hidden).  Plain data, as lines.py."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.style import Style

from gputui.telemetry.host.jobs import job_facts
from gputui.ui.processes.lines import PS, RowNote, fmt_elapsed, fmt_mem, fmt_pct_cell
from gputui.ui.processes.rows import NOT_VISIBLE, ProcessRow, command_text
from gputui.ui.render import Line, S, pad, pad_line, sparkline_rows
from gputui.untrusted import literal

if TYPE_CHECKING:
    from gputui.telemetry.host.processes import ProcessDetail


@dataclass
class DetailData:
    """Everything the detail view draws, gathered by the widget."""

    row: ProcessRow | None
    """The process's row at the latest tick (None once it has left the GPU)."""
    gpu_index: int
    pid: int
    facts: ProcessDetail | None = None
    """Read off the UI thread; None until then (and always in a replay)."""
    memory: list[float] = field(default_factory=list)
    sm: list[float] = field(default_factory=list)
    show_all_env: bool = False
    note: RowNote | None = None
    live: bool = True


#: Environment variables shown first (and, unless all are asked for, the only ones).
ENV_PREFIXES = (
    "CUDA_",
    "NVIDIA_",
    "NCCL_",
    "TORCH",
    "PYTORCH_",
    "OMP_",
    "MKL_",
    "HF_",
    "TRANSFORMERS_",
    "JAX_",
    "XLA_",
    "TF_",
    "SLURM_",
    "CONDA_",
    "VIRTUAL_ENV",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "PATH",
    "PYTHONPATH",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "GPU_DEVICE_ORDINAL",
    "HIP_VISIBLE_DEVICES",
)
_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "API_KEY", "ACCESS_KEY", "PRIVATE")


def is_gpu_env(name: str) -> bool:
    return name.startswith(ENV_PREFIXES) or name in ENV_PREFIXES


def looks_secret(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in _SECRET_WORDS)


def detail_lines(d: DetailData, width: int) -> list[Line]:
    """The detail view of one process, as lines (wrapped, escaped)."""
    out: list[Line] = []
    label_w = 13

    def kv(label: str, value: str, style: Style = PS.text) -> None:
        avail = max(10, width - label_w - 2)
        chunks = [value[i : i + avail] for i in range(0, len(value), avail)] or [""]
        for k, chunk in enumerate(chunks):
            cells: Line = [(" " + pad(label if k == 0 else "", label_w), S.label), (" " + chunk, style)]
            out.append(pad_line(cells, width))

    def heading(text: str) -> None:
        out.append(pad_line([], width))
        out.append(pad_line([(text, S.title)], width))

    row = d.row
    proc = row.proc if row else None
    facts = d.facts if d.facts is not None and d.facts.exists else None
    title: Line = [(f" PID {d.pid}", S.title), (f"  on GPU {d.gpu_index}", PS.gpu)]
    if row is None:
        title.append(("  · no longer on this GPU", PS.note_warn))
    elif d.facts is not None and not d.facts.exists:
        title.append(("  · has exited", PS.note_warn))
    if d.note is not None:
        title.append(("  " + d.note.text, d.note.style))
    out.append(pad_line(title, width))
    if proc is not None and not proc.visible:
        kv("", NOT_VISIBLE, PS.hidden)
    cmdline = facts.cmdline if facts is not None else None
    if cmdline is None and proc is not None:
        cmdline = proc.cmdline
    name = proc.name if proc is not None else None
    kv("command", command_text(cmdline, name) if (cmdline or name) else "N/A")
    if facts is not None and facts.exe:
        kv("executable", literal(facts.exe))
    pending = "…" if d.facts is None and d.live else "N/A"
    kv("cwd", literal(facts.cwd) if facts is not None and facts.cwd else pending)
    user = (facts.user if facts is not None else None) or (proc.user if proc else None)
    kv("user", literal(user) if user else "N/A")
    if proc is not None and proc.visible:
        if proc.job is not None or d.live:  # a replay without one says nothing: older recordings lack it
            for label, value in job_facts(proc.job):
                kv(label, literal(value))
        if row is not None and row.launcher is not None:
            lp = row.launcher
            kv("launcher", f"{lp.kind} · process group {lp.pgid} · session {lp.sid}")
            kv("ranks on GPUs", ", ".join(map(str, row.gpus)) or "none shown")
        elif proc.launcher is not None:
            kv("launched by", f"PID {proc.launcher} (v: the tree; T/K/I on its row stop the whole job)")
    started = proc.create_time if proc is not None else None
    if started:
        local = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started))
        kv("started", f"{local}  ({fmt_elapsed(row.elapsed) if row else '?'} ago)")
    if facts is not None:
        parent = f"{facts.ppid}  {literal(facts.parent)}" if facts.parent else str(facts.ppid or "N/A")
        kv("parent", parent)
        children = ", ".join(f"{pid} {literal(n)}" for pid, n in facts.children)
        kv("children", children or "none")
        threads = facts.threads if facts.threads is not None else "?"
        kv("state", f"{facts.status or 'N/A'}, {threads} threads")
        files = facts.gpu_files
        opened = ", ".join(literal(f) for f in files) if files else None
        kv("GPU devices", opened or ("none open" if files is not None else "not readable"))
    if proc is not None and (proc.gpu_instance_id is not None or proc.compute_instance_id is not None):
        kv("MIG", f"GPU instance {proc.gpu_instance_id}, compute instance {proc.compute_instance_id}")
    if proc is not None:
        kv(
            "now",
            f"GPU memory {fmt_mem(proc.gpu_memory)} · SM {fmt_pct_cell(proc.sm_util)}% · "
            f"memory bandwidth {fmt_pct_cell(proc.mem_util)}% · enc {fmt_pct_cell(proc.enc_util)}% · "
            f"dec {fmt_pct_cell(proc.dec_util)}% · CPU {fmt_pct_cell(proc.cpu_percent)}% · "
            f"host memory {fmt_mem(proc.rss)}",
        )

    heading(" History (since gputui first saw it on this GPU, 1 sample a tick)")
    chart_w = max(10, width - label_w - 17)
    peak = max((v for v in d.memory if not math.isnan(v)), default=0.0)
    for label, values, top, style, now_text in (
        ("GPU memory", d.memory, peak or None, S.spark_mem, f"peak {fmt_mem(int(peak))}" if peak else ""),
        ("SM %", d.sm, 100.0, S.spark_util, f"{fmt_pct_cell(proc.sm_util)}%" if proc else ""),
    ):
        finite = [v for v in values if not math.isnan(v)]
        if not finite:
            out.append(pad_line([(" " + pad(label, label_w), S.label), (" no samples yet", S.dim)], width))
            continue
        for r, text in enumerate(sparkline_rows(values, chart_w, 2, top)):
            out.append(
                pad_line(
                    [
                        (" " + pad(label if r == 0 else "", label_w), S.label),
                        (" " + text, style),
                        (pad(now_text if r == 1 else "", 14, ">"), S.value),
                    ],
                    width,
                )
            )

    heading(" Environment")
    if d.facts is None:
        text = "  reading…" if d.live else "  not available: a recording holds no environment"
        out.append(pad_line([(text, S.dim)], width))
        return out
    if facts is None:
        out.append(pad_line([("  the process has exited", S.dim)], width))
        return out
    environ = facts.environ
    if environ is None:
        out.append(pad_line([("  " + literal(facts.environ_error or "not readable"), S.dim)], width))
        return out
    gpu_vars = [(k, v) for k, v in environ if is_gpu_env(k)]
    shown = environ if d.show_all_env else gpu_vars
    if not shown:
        out.append(pad_line([("  none of the GPU-related variables is set", S.dim)], width))
    for k, v in shown:
        secret = looks_secret(k)
        value = "(hidden: the name looks like a secret)" if secret else literal(v)
        text = f"{literal(k)}={value}"
        avail = max(10, width - 4)
        for i in range(0, len(text), avail):
            out.append(
                pad_line(
                    [("  " if i == 0 else "    ", None), (text[i : i + avail], S.dim if secret else PS.text)],
                    width,
                )
            )
    others = len(environ) - len(gpu_vars)
    if not d.show_all_env and others:
        out.append(pad_line([(f"  {others} more variables: press e to show all", S.dim)], width))
    return out
