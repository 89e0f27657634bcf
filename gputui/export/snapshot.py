"""One snapshot as nvidia-smi-style CSV or as a versioned JSON document (`gputui snapshot`).

Field names are nvidia-smi's `--query-gpu` / `--query-compute-apps` names wherever nvidia-smi
has the same quantity (`index`, `memory.used`, `utilization.gpu`, `clocks.current.sm`, ...),
with nvidia-smi's units and formatting: CSV prints `memory.used [MiB]` in the header and
`143771 MiB` as the value (`nounits`: `143771`), `[N/A]` where NVML gave nothing.  The JSON
document uses the same names with plain numbers in the same units (null for N/A); its schema
is `gputui/schemas/snapshot-v1.json` (`gputui snapshot --schema`).  Fields nvidia-smi does not
have (PCIe throughput, energy, per-process details) are gputui's own and marked so.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Sequence
from typing import Any

from gputui import __version__
from gputui.export.snapshot_fields import (
    GPU_BY_NAME,
    GPU_FIELDS,
    JSON_DOCUMENT_LEVEL,
    NA,
    NO_WINDOW_LIVE,
    NO_WINDOW_REPLAY,
    PROCESS_BY_NAME,
    PROCESS_FIELDS,
    Ctx,
    Field,
    iso,
    mib,
)
from gputui.telemetry.model import (
    MachineInfo,
    NvmlProblem,
    Snapshot,
)
from gputui.untrusted import csv_cell, json_text

FORMAT_NAME = "gputui-snapshot"
FORMAT_VERSION = 1

# --------------------------------------------------------------------------------------
# rows
# --------------------------------------------------------------------------------------


def _contexts(info: MachineInfo, snap: Snapshot, live: bool = True) -> list[Ctx]:
    gpus = {g.index: g for g in snap.gpus}
    why = NO_WINDOW_LIVE if live else NO_WINDOW_REPLAY
    return [Ctx(info, snap, d, gpus.get(d.index), no_window=why) for d in info.devices]


def _process_contexts(info: MachineInfo, snap: Snapshot) -> list[Ctx]:
    gpus = {g.index: g for g in snap.gpus}
    devs = {d.index: d for d in info.devices}
    procs = sorted(snap.processes, key=lambda p: (p.gpu_index, p.pid))
    return [Ctx(info, snap, devs.get(p.gpu_index), gpus.get(p.gpu_index), p) for p in procs]


def _csv_value(f: Field, v: Any, units: bool) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return NA
    if isinstance(v, bool):
        text = "true" if v else "false"
    elif isinstance(v, float) and f.decimals is not None:
        text = f"{v:.{f.decimals}f}"
    elif isinstance(v, str):
        text = csv_cell(v)  # untrusted: escaped, and no formula for a spreadsheet
    else:
        text = str(v)
    return f"{text} {f.unit}" if units and f.unit else text


def csv_text(
    info: MachineInfo,
    snap: Snapshot,
    fields: Sequence[tuple[str, Field]],
    *,
    processes: bool = False,
    header: bool = True,
    units: bool = True,
    live: bool = True,
) -> str:
    """nvidia-smi's CSV: ", "-separated; a value holding a comma or quote is quoted (RFC 4180),
    so `csv.reader(f, skipinitialspace=True)` reads it back."""
    rows: list[list[str]] = []
    if header:  # nvidia-smi heads a column with the field's own name, whatever alias was asked
        rows.append([f.header for _, f in fields])
    for ctx in _process_contexts(info, snap) if processes else _contexts(info, snap, live):
        rows.append([_csv_value(f, f.get(ctx), units) for _, f in fields])
    return "".join(", ".join(_quote(cell) for cell in row) + "\n" for row in rows)


def _quote(cell: str) -> str:
    if any(ch in cell for ch in ',"\n\r') or cell != cell.strip():
        return '"' + cell.replace('"', '""') + '"'
    return cell


# --------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------


def document(
    info: MachineInfo,
    snap: Snapshot,
    gpu_fields: Sequence[tuple[str, Field]] | None = None,
    process_fields: Sequence[tuple[str, Field]] | None = None,
    *,
    processes: bool = False,
    source: dict[str, Any] | None = None,
    health: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The gputui-snapshot document (version 1); fields default to all of them; `health`:
    the job-health block (gputui/export/health_json.py)."""
    if gpu_fields is None:
        gsel = [(f.name, f) for f in GPU_FIELDS if f.name not in JSON_DOCUMENT_LEVEL]
    else:
        gsel = list(gpu_fields)
    if not any(f.name == "index" for _, f in gsel):
        gsel.insert(0, ("index", GPU_BY_NAME["index"]))
    doc_source = source or {"kind": "live"}
    contexts = _contexts(info, snap, live=doc_source.get("kind") != "replay")
    gpus = [{f.name: f.get(ctx) for _, f in gsel} for ctx in contexts]
    sys_ = info.system
    host = snap.host
    doc: dict[str, Any] = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "gputui": __version__,
        "source": doc_source,
        "hostname": sys_.hostname,
        "driver_version": sys_.driver_version,
        "cuda_version": sys_.cuda_driver_version,
        "nvml_version": sys_.nvml_version,
        "timestamp": snap.timestamp,
        "time": iso(snap.timestamp),
        "gpus": gpus,
        "host": None
        if host is None
        else {
            "cpu_count": len(host.per_cpu) or (os.cpu_count() if doc_source["kind"] == "live" else None),
            "cpu_percent": host.cpu_percent,
            "memory.total": mib(host.mem_total),
            "memory.used": mib(host.mem_used),
            "memory.available": mib(host.mem_available),
            "swap.total": mib(host.swap_total),
            "swap.used": mib(host.swap_used),
            "load_average": list(host.load_avg) if host.load_avg else None,
            "uptime": host.uptime,
        },
    }
    if processes:
        psel = [(f.name, f) for f in PROCESS_FIELDS] if process_fields is None else list(process_fields)
        for must in ("pid", "gpu_index"):
            if not any(f.name == must for _, f in psel):
                psel.insert(0, (must, PROCESS_BY_NAME[must]))
        doc["processes"] = [{f.name: f.get(ctx) for _, f in psel} for ctx in _process_contexts(info, snap)]
    if health is not None:
        doc["health"] = health
    return doc


def _finite(obj: Any) -> Any:
    """`obj` with NaN and infinities as null (JSON has no such numbers; "not a measurement"
    is what null already means in these documents)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def dumps(doc: dict[str, Any], pretty: bool) -> str:
    """A document as JSON: non-finite numbers as null, and every character of untrusted text
    that a terminal would not show as itself (C1 controls, bidi, zero-width) as an escape."""
    doc = _finite(doc)
    if pretty:
        text = json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False)
    else:
        text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return json_text(text)


def _prop(f: Field) -> dict[str, Any]:
    unit = f" [{f.unit}]" if f.unit else ""
    origin = "" if f.smi else " (gputui's own field)"
    return {"type": [f.kind, "null"], "description": f"{f.doc}{unit}{origin}"}


def unavailable_document(info: MachineInfo, problem: NvmlProblem, source: dict[str, Any]) -> dict[str, Any]:
    """The document when NVML cannot be used: no GPUs, `error` saying why (exit status 2)."""
    sys_ = info.system
    now = time.time()
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "gputui": __version__,
        "source": source,
        "hostname": sys_.hostname,
        "driver_version": sys_.driver_version,
        "cuda_version": sys_.cuda_driver_version,
        "nvml_version": sys_.nvml_version,
        "timestamp": now,
        "time": iso(now),
        "gpus": [],
        "host": None,
        "error": {
            "kind": "nvml_unavailable",
            "error": problem.error,
            "code": problem.code,
            "meaning": problem.meaning,
            "advice": list(problem.advice),
        },
    }


def schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of the document; committed as gputui/schemas/snapshot-v1.json."""
    from gputui.export.health_json import health_schema

    mib = {"type": ["integer", "null"], "minimum": 0}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://github.com/gputui/gputui/blob/main/gputui/schemas/snapshot-v1.json",
        "title": "gputui snapshot, version 1",
        "description": (
            "`gputui snapshot --json`: one sample of every GPU.  Field names are nvidia-smi "
            "--query-gpu / --query-compute-apps names where nvidia-smi has the quantity, with "
            "its units (MiB, W, MHz, %, °C); null = not available.  With --fields a GPU object "
            "carries only the fields asked for (and always index)."
        ),
        "type": "object",
        "required": [
            "format",
            "version",
            "gputui",
            "source",
            "hostname",
            "driver_version",
            "cuda_version",
            "nvml_version",
            "timestamp",
            "time",
            "gpus",
            "host",
        ],
        "additionalProperties": False,
        "properties": {
            "format": {"const": FORMAT_NAME},
            "version": {"const": FORMAT_VERSION, "description": "incremented on incompatible changes"},
            "gputui": {"type": "string", "description": "version of gputui that wrote it"},
            "source": {
                "type": "object",
                "required": ["kind"],
                "additionalProperties": False,
                "properties": {
                    "kind": {"enum": ["live", "replay"]},
                    "file": {"type": "string", "description": "the recording (kind replay)"},
                    "tick": {"type": "integer", "minimum": 1, "description": "its tick, from 1"},
                },
            },
            "hostname": {"type": "string"},
            "driver_version": {"type": ["string", "null"]},
            "cuda_version": {"type": ["string", "null"], "description": "highest CUDA the driver supports"},
            "nvml_version": {"type": ["string", "null"]},
            "timestamp": {"type": "number", "description": "when sampled, seconds since the epoch"},
            "time": {"type": "string", "format": "date-time", "description": "the same, ISO 8601 UTC"},
            "gpus": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["index"],
                    "additionalProperties": False,
                    "properties": {f.name: _prop(f) for f in GPU_FIELDS},
                },
            },
            "processes": {
                "description": "with --processes: one object per process per GPU",
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["gpu_index", "pid"],
                    "additionalProperties": False,
                    "properties": {f.name: _prop(f) for f in PROCESS_FIELDS},
                },
            },
            "health": health_schema(),
            "error": {
                "description": "why there is no sample (then `gpus` is empty and the exit "
                "status 2): NVML could not be used",
                "type": "object",
                "required": ["kind", "error", "code", "meaning", "advice"],
                "additionalProperties": False,
                "properties": {
                    "kind": {"enum": ["nvml_unavailable"]},
                    "error": {"type": "string", "description": "the error NVML (or the loader) gave"},
                    "code": {"type": ["integer", "null"], "description": "NVML's error code"},
                    "meaning": {"type": "string", "description": "what it usually means"},
                    "advice": {"type": "array", "items": {"type": "string"}, "description": "what to try"},
                },
            },
            "host": {
                "type": ["object", "null"],
                "additionalProperties": False,
                "properties": {
                    "cpu_count": {"type": ["integer", "null"]},
                    "cpu_percent": {
                        "type": ["number", "null"],
                        "description": "all cores, 0-100, since the previous document; null in "
                        "the first of a live snapshot (a rate needs readings 0.2 s apart)",
                    },
                    "memory.total": {**mib, "description": "[MiB]"},
                    "memory.used": {**mib, "description": "[MiB] total minus available"},
                    "memory.available": {**mib, "description": "[MiB]"},
                    "swap.total": {**mib, "description": "[MiB]"},
                    "swap.used": {**mib, "description": "[MiB]"},
                    "load_average": {
                        "type": ["array", "null"],
                        "items": {"type": "number"},
                        "minItems": 3,
                        "maxItems": 3,
                        "description": "1, 5 and 15 minutes",
                    },
                    "uptime": {"type": ["number", "null"], "description": "[s] since boot"},
                },
            },
        },
    }
