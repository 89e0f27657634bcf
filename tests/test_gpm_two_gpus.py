"""Two H200s at once, bf16 training on GPU 0 and float32 training (TF32 off) on GPU 1
(tests/fixtures/h200-x2-gpm): the tensor-core figure and the hint differ between the GPUs
as measured, and the live `gputui snapshot --json`, the exporter's /metrics and nvidia-smi's
own GPM view, captured during the same run, say the same."""

from __future__ import annotations

import gzip
import json
import statistics

import pytest
from conftest import FIXTURES
from gpm_support import dmon_rows
from prometheus_client.parser import text_string_to_metric_families

from gputui.telemetry.hints import HintEngine
from gputui.telemetry.model import Snapshot
from gputui.telemetry.recording import read_recording

X2_GPM = FIXTURES / "h200-x2-gpm"
WATCHED = ("sm_active", "tensor_active", "fp32_active", "dram_active")


def training_ticks() -> list[Snapshot]:
    """Ticks whose GPM windows were measured while both GPUs trained."""
    _, ticks = read_recording(X2_GPM / "recording.jsonl.gz")
    out = []
    for t in ticks:
        ws = [g.gpm for g in t.gpus]
        if all(w is not None and w.sm_active is not None and w.sm_active > 50 for w in ws):
            out.append(t)
    return out


def med(ticks: list[Snapshot], gpu: int, field: str) -> float:
    return statistics.median(getattr(t.gpus[gpu].gpm, field) for t in ticks)


def test_the_tensor_cores_work_on_the_bf16_gpu_only() -> None:
    ticks = training_ticks()
    assert len(ticks) >= 40  # ~55 s of training, a window every 2 s, shown every tick
    assert med(ticks, 0, "tensor_active") > 30
    assert med(ticks, 1, "tensor_active") < 1
    assert med(ticks, 1, "fp32_active") > 60
    assert all(t.gpus[0].gpu_util == t.gpus[1].gpu_util == 100 for t in ticks[2:-2])  # NVML: alike


def test_the_float32_gpu_gets_the_tf32_hint_and_the_bf16_gpu_none() -> None:
    engine = HintEngine()
    training = {t.seq for t in training_ticks()}
    _, ticks = read_recording(X2_GPM / "recording.jsonl.gz")
    per_gpu: dict[int, list[set[str]]] = {0: [], 1: []}
    for t in ticks:
        hints = engine.update(t)
        if t.seq in training:
            for gpu in (0, 1):
                per_gpu[gpu].append({h.kind for h in hints.get(gpu, ())})
    assert all(kinds == set() for kinds in per_gpu[0])
    assert all(kinds == {"fp32_no_tensor"} for kinds in per_gpu[1])
    hint = engine.current.get(1) or ()
    assert not hint or "TF32" in hint[0].short  # (the last tick may be after training)


def metrics() -> dict[str, dict[int, float]]:
    text = gzip.decompress((X2_GPM / "metrics.txt.gz").read_bytes()).decode()
    out: dict[str, dict[int, float]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if "gpu" in s.labels and s.name.startswith("DCGM_FI_PROF_"):
                out.setdefault(s.name, {})[int(s.labels["gpu"])] = s.value
    return out


DCGM = {
    "sm_active": "DCGM_FI_PROF_SM_ACTIVE",
    "tensor_active": "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "fp32_active": "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
    "dram_active": "DCGM_FI_PROF_DRAM_ACTIVE",
}


@pytest.mark.parametrize("gpu", [0, 1])
def test_live_snapshot_exporter_and_recording_agree(gpu: int) -> None:
    """Three gputui processes measured their own GPM windows within the same seconds: the
    live `gputui snapshot --json --fields gpm.*`, `gputui export`'s /metrics (ratios), and the
    recording; each figure agrees within 3 percentage points."""
    snap = json.loads((X2_GPM / "snapshot-gpm.json").read_text())["gpus"][gpu]
    scraped = metrics()
    ticks = training_ticks()
    assert snap["gpm.unavailable"] is None
    for field in WATCHED:
        ours = snap[f"gpm.{field}"]
        assert ours is not None
        assert abs(ours - 100 * scraped[DCGM[field]][gpu]) <= 3.0, field
        assert abs(ours - med(ticks, gpu, field)) <= 3.0, field


@pytest.mark.parametrize("gpu", [0, 1])
def test_agrees_with_nvidia_smi_dmon_gpm(gpu: int) -> None:
    rows = dmon_rows(X2_GPM / "nvidia-smi-dmon-gpm.txt.gz")
    rows = [r for r in rows if r["gpu"] == gpu and r["smutil"] > 50]
    assert len(rows) >= 30
    ticks = training_ticks()
    for dmon_name, field in (("smutil", "sm_active"), ("mmaact", "tensor_active"), ("fp32", "fp32_active")):
        theirs = statistics.median(r[dmon_name] for r in rows)
        assert abs(theirs - med(ticks, gpu, field)) <= 3.0, (gpu, dmon_name, theirs, med(ticks, gpu, field))


def test_the_default_snapshot_names_both_jobs() -> None:
    """`gputui snapshot --json --processes` during the run: each GPU's training process with
    its user and command line (the default document leaves GPM null: no window waited for)."""
    doc = json.loads((X2_GPM / "snapshot.json").read_text())
    procs = {(p["gpu_index"], p["user"]): p["command"] for p in doc["processes"]}
    assert "--precision bf16" in procs[(0, "root")]
    assert "--precision fp32" in procs[(1, "root")]
    assert {g["gpm.sm_active"] for g in doc["gpus"]} == {None}
