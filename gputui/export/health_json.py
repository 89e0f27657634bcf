"""The job-health block of `gputui snapshot --processes --json` (docs/job-health.md).

Verdicts need time: ranks must wait [health] stuck_seconds, a GPU must spin spin_seconds.
A one-shot live snapshot has one tick, so it gives the ranks and their states but no
verdict, and says "needs watching over time (gputui watch / export)" instead.  With
`--watch S` the verdicts build up across the documents; with `--replay F --tick N` the
recording's ticks up to N are judged, as a live run would have.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gputui.export.nccl_json import nccl_job, nccl_schema
from gputui.rules.timestamps import iso_utc
from gputui.telemetry.health import arithmetic_active
from gputui.telemetry.health_config import VERDICT_KINDS, HealthConfig
from gputui.telemetry.health_report import GpuHealth, HealthReport, JobHealth, RankHealth
from gputui.telemetry.job_energy import JobEnergy
from gputui.telemetry.model import Snapshot
from gputui.telemetry.nccl.findings import NOT_ASKED
from gputui.telemetry.nccl.model import NcclView
from gputui.telemetry.stack_evidence import PLACES

NEEDS_WATCHING = "needs watching over time (gputui watch / export)"
MIB = 1 << 20


def _time(ts: float | None) -> str | None:
    return None if ts is None else iso_utc(ts)


def _rank(r: RankHealth) -> dict[str, Any]:
    return {
        "pid": r.pid,
        "rank": r.rank,
        "gpu": r.gpu,
        "gpus": list(r.gpus),
        "state": r.state,
        "state_since": r.state_since,
        "cpu_percent": r.cpu_percent,
        "condition": r.condition,
        "waiting_since": r.waiting_since,
        "utilization.gpu": r.util,
        "sm_active": r.sm,
        "tensor_active": r.tensor,
        "used_gpu_memory": None if r.memory is None else r.memory // MIB,
        "power.draw": r.power,
        "exited_at": r.exited_at,
        "wait_share": r.wait_share,
        "where": _where(r),
    }


def _where(r: RankHealth) -> dict[str, Any] | None:
    """Where its stack was, as the verdict read it (function and file names: outside text,
    escaped like every string of the document)."""
    w = r.where
    if w is None:
        return None
    return {
        "place": w.place,
        "call": w.call,
        "at": w.at,
        "frames": list(w.frames),
        "taken": w.taken,
        "reason": w.reason,
        "message": w.message,
    }


def _energy(e: JobEnergy | None) -> dict[str, Any] | None:
    if e is None:
        return None
    return {
        "joules": e.joules,
        "wh": e.wh,
        "since": e.since,
        "gpus": list(e.gpus),
        "shared": list(e.shared),
        "unknown": list(e.unknown),
        "text": e.text(),
    }


def _job(
    j: JobHealth, watched: float, cfg: HealthConfig, nccl: NcclView | None, absent: str
) -> dict[str, Any]:
    v = j.verdict
    verdict = None
    if v is not None:
        named = {r.pid: r for r in (*j.ranks, *j.exited)}
        verdict = {
            "kind": v.kind,
            "text": v.short,
            "why": v.why,
            "since": v.since,
            "since_time": _time(v.since),
            "culprits": [
                {
                    "pid": pid,
                    "rank": named[pid].rank if pid in named else None,
                    "gpu": named[pid].gpu if pid in named else None,
                }
                for pid in v.pids
            ],
        }
    return {
        "key": list(j.key),
        "launcher": j.launcher,
        "ranks": [_rank(r) for r in j.ranks],
        "exited": [_rank(r) for r in j.exited],
        "verdict": verdict,
        "note": NEEDS_WATCHING if v is None and watched < cfg.stuck_seconds else None,
        "energy": _energy(j.energy),
        "nccl": nccl_job(nccl, {r.pid for r in (*j.ranks, *j.exited)}, absent),
    }


def _gpu(h: GpuHealth, snap: Snapshot) -> dict[str, Any]:
    g = next((g for g in snap.gpus if g.index == h.gpu), None)
    w = g.activity if g is not None else None
    return {
        "index": h.gpu,
        "waiting": h.waiting,
        "certain": h.certain,
        "since": h.since,
        "seconds": h.seconds,
        "text": h.short,
        "evidence": h.evidence,
        "utilization.gpu": g.gpu_util if g is not None else None,
        "gr_engine_active": w.graphics_active if w is not None else None,
        "sm_active": w.sm_active if w is not None else None,
        "dram_active": w.dram_active if w is not None else None,
        "arithmetic_active": arithmetic_active(w),
        "power": g.power_draw if g is not None else None,
        "idle_power_max": h.idle_power_max,
    }


def health_block(
    report: HealthReport,
    snap: Snapshot,
    cfg: HealthConfig,
    watched: float,
    nccl: NcclView | None = None,
    absent: str = NOT_ASKED,
) -> dict[str, Any]:
    """`watched`: seconds of snapshots the engine has judged (0 for a one-shot snapshot);
    `nccl`: NCCL RAS's latest view (each job's `nccl` section); `absent`: what a job's section
    says where there is none (gputui.telemetry.hub `nccl_absent`)."""
    return {
        "thresholds": dataclasses.asdict(cfg),
        "watched_seconds": watched,
        "note": NEEDS_WATCHING if watched < min(cfg.stuck_seconds, cfg.spin_seconds) else None,
        "gpus": [_gpu(h, snap) for _, h in sorted(report.gpus.items())],
        "jobs": [_job(j, watched, cfg, nccl, absent) for j in report.jobs],
    }


def _t(*types: str) -> dict[str, Any]:
    return {"type": list(types)}


_RANK = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "pid": {"type": "integer"},
        "rank": {**_t("integer", "null"), "description": "RANK of its environment, else --rank"},
        "gpu": {"type": "integer"},
        "gpus": {"type": "array", "items": {"type": "integer"}},
        "state": {**_t("string", "null"), "description": "R, S, D, T, t, Z (/proc/PID/stat)"},
        "state_since": _t("number", "null"),
        "cpu_percent": _t("number", "null"),
        "condition": {
            "enum": ["spinning", "blocked", "stopped", "disk", "zombie", "computing", "unknown", "exited"]
        },
        "waiting_since": _t("number", "null"),
        "utilization.gpu": {**_t("number", "null"), "description": "its GPU's [%]"},
        "sm_active": {**_t("number", "null"), "description": "its GPU's, GPM [%]"},
        "tensor_active": {**_t("number", "null"), "description": "its GPU's, GPM [%]"},
        "used_gpu_memory": {**_t("integer", "null"), "description": "[MiB] the process holds"},
        "power.draw": {**_t("number", "null"), "description": "its GPU's [W]"},
        "exited_at": _t("number", "null"),
        "wait_share": {
            **_t("number", "null"),
            "description": "share (0-1) of each step it waits, while the job runs in step (straggler rule)",
        },
        "where": {
            "type": ["object", "null"],
            "description": "where its Python stack was, read while the job's ranks waited (py-spy)",
            "additionalProperties": False,
            "properties": {
                "place": {"enum": list(PLACES)},
                "call": _t("string", "null"),
                "at": {**_t("string", "null"), "description": "the call site, file:line"},
                "frames": {"type": "array", "items": {"type": "string"}},
                "taken": {"type": "number"},
                "reason": {**_t("string", "null"), "description": "why unread"},
                "message": _t("string", "null"),
            },
        },
    },
}


def health_schema() -> dict[str, Any]:
    num = _t("number", "null")
    ints = {"type": "array", "items": {"type": "integer"}}
    return {
        "description": "with --processes: job health (docs/job-health.md); verdicts need time "
        "(note says so when the document has not watched long enough)",
        "type": "object",
        "required": ["thresholds", "watched_seconds", "note", "gpus", "jobs"],
        "additionalProperties": False,
        "properties": {
            "thresholds": {"type": "object", "description": "the config file's [health]"},
            "watched_seconds": {"type": "number", "description": "[s] of samples judged"},
            "note": _t("string", "null"),
            "gpus": {
                "description": "GPUs showing the spinning signature",
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "index": {"type": "integer"},
                        "waiting": {"type": "boolean", "description": "held for spin_seconds"},
                        "certain": {"type": "boolean", "description": "false without GPM"},
                        "since": {"type": "number"},
                        "seconds": {"type": "number"},
                        "text": {"type": "string"},
                        "evidence": {"type": "string"},
                        "utilization.gpu": num,
                        "gr_engine_active": {**num, "description": "GPM [%]"},
                        "sm_active": {**num, "description": "GPM [%]"},
                        "dram_active": {**num, "description": "GPM [%]"},
                        "arithmetic_active": {
                            **num,
                            "description": "GPM [%]: the busiest of the tensor, FP64, FP32 and FP16 pipes",
                        },
                        "power": {**num, "description": "[W]"},
                        "idle_power_max": {**num, "description": "[W] the most that counts as idle"},
                    },
                },
            },
            "jobs": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "key": {"type": "array", "items": {"type": "string"}},
                        "launcher": _t("integer", "null"),
                        "ranks": {"type": "array", "items": _RANK},
                        "exited": {"type": "array", "items": _RANK},
                        "verdict": {
                            "type": ["object", "null"],
                            "additionalProperties": False,
                            "properties": {
                                "kind": {"enum": list(VERDICT_KINDS)},
                                "text": {"type": "string"},
                                "why": {"type": "string"},
                                "since": num,
                                "since_time": _t("string", "null"),
                                "culprits": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "properties": {
                                            "pid": {"type": "integer"},
                                            "rank": _t("integer", "null"),
                                            "gpu": _t("integer", "null"),
                                        },
                                    },
                                },
                            },
                        },
                        "note": _t("string", "null"),
                        "nccl": nccl_schema(),
                        "energy": {
                            "type": ["object", "null"],
                            "additionalProperties": False,
                            "properties": {
                                "joules": num,
                                "wh": num,
                                "since": num,
                                "gpus": ints,
                                "shared": {**ints, "description": "shared with other processes: not counted"},
                                "unknown": {**ints, "description": "no energy counter reading"},
                                "text": {"type": "string"},
                            },
                        },
                    },
                },
            },
        },
    }
