"""The `nccl` section of each job in `gputui snapshot --processes --json` (docs/job-health.md,
"NCCL RAS"): what NCCL's RAS service says of the job's communicators, or the one reason it
says nothing.  Text from an answer (hosts, collective names) goes out as the answer gave it;
`export.snapshot.dumps` escapes what a terminal would not show as itself."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from typing import Any

from gputui.telemetry.nccl.findings import NOT_ASKED, job_nccl
from gputui.telemetry.nccl.model import NcclComm, NcclRank, NcclView


def _rank(r: NcclRank) -> dict[str, Any]:
    return {
        "rank": r.rank,
        "host": r.host,
        "pid": r.pid,
        "cuda_dev": r.cuda_dev,
        "nvml_dev": r.nvml_dev,
        "init_state": r.init_state,
        "async_error": r.async_error,
        "finalize_called": r.finalize_called,
        "destroy_flag": r.destroy_flag,
        "abort_flag": r.abort_flag,
        "collective_counts": {c.collective: c.count for c in r.counts},
        "unresponsive": r.unresponsive,
        "considered_dead": r.considered_dead,
    }


def _comm(c: NcclComm) -> dict[str, Any]:
    per_node = Counter(r.host or "?" for r in c.ranks)
    return {
        "hash": c.hash,
        "size": c.size,
        "ranks_count": c.ranks_count,
        "missing_ranks_count": c.missing_ranks_count,
        "ranks_per_node": dict(sorted(per_node.items())),
        "ranks": [_rank(r) for r in c.ranks],
        "missing_ranks": [_rank(r) for r in c.missing_ranks],
        "dropped": c.dropped,
        "counts_since": c.counts_since,
    }


def nccl_job(view: NcclView | None, pids: Collection[int], absent: str = NOT_ASKED) -> dict[str, Any]:
    """One job's section (its local ranks' `pids`; `absent`: the reason where there is no view)."""
    j = job_nccl(view, pids, absent)
    return {
        "asked_at": j.asked_at,
        "reason": j.reason,
        "nccl_version": j.version,
        "communicators": [_comm(c) for c in j.comms],
        "findings": [
            {
                "kind": f.kind,
                "comm": f.comm,
                "rank": f.rank,
                "host": f.host,
                "pid": f.pid,
                "collective": f.collective,
                "behind": f.behind,
                "since": f.since,
                "detail": f.detail,
            }
            for f in j.findings
        ],
    }


def _t(*types: str) -> dict[str, Any]:
    return {"type": list(types)}


def nccl_schema() -> dict[str, Any]:
    ints, num, text, flag = (
        _t("integer", "null"),
        _t("number", "null"),
        _t("string", "null"),
        _t("boolean", "null"),
    )
    rank = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "rank": ints,
            "host": {**text, "description": "the node's address as NCCL gives it (untrusted)"},
            "pid": {**ints, "description": "in the rank's own PID namespace"},
            "cuda_dev": ints,
            "nvml_dev": ints,
            "init_state": {**ints, "description": "ncclResult_t: 0 done, 7 initialising, else an error"},
            "async_error": {**ints, "description": "ncclResult_t: 0 none, 7 in progress, else an error"},
            "finalize_called": flag,
            "destroy_flag": flag,
            "abort_flag": flag,
            "collective_counts": {
                "type": "object",
                "additionalProperties": {"type": "integer"},
                "description": "operations launched per collective",
            },
            "unresponsive": {**flag, "description": "a missing rank: its process does not answer"},
            "considered_dead": flag,
        },
    }
    return {
        "description": "NCCL RAS's view of the job (docs/job-health.md, NCCL RAS); reason says why "
        "there is nothing or only part (RAS off, unreachable, an older NCCL, not asked yet)",
        "type": "object",
        "additionalProperties": False,
        "required": ["asked_at", "reason", "nccl_version", "communicators", "findings"],
        "properties": {
            "asked_at": {**num, "description": "Unix time of the answers"},
            "reason": text,
            "nccl_version": text,
            "communicators": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "hash": {"type": "string"},
                        "size": ints,
                        "ranks_count": ints,
                        "missing_ranks_count": ints,
                        "ranks_per_node": {"type": "object", "additionalProperties": {"type": "integer"}},
                        "ranks": {"type": "array", "items": rank},
                        "missing_ranks": {"type": "array", "items": rank},
                        "dropped": {"type": "integer", "description": "rank entries over the cap: not kept"},
                        "counts_since": {**num, "description": "Unix time the counts were first seen as now"},
                    },
                },
            },
            "findings": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "kind": {"enum": ["missing", "behind", "async_error", "abort", "init", "mismatch"]},
                        "comm": {"type": "string"},
                        "rank": ints,
                        "host": text,
                        "pid": ints,
                        "collective": text,
                        "behind": ints,
                        "since": num,
                        "detail": {"type": "string"},
                    },
                },
            },
        },
    }
