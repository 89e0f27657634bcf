"""GPM's range checks on MIG GPU instances, at their boundaries (issue 31: a planted-bug area).

Under MIG, GPM is measured per GPU instance (`GpmSample.mig`); each instance's figures are
checked as a whole GPU's are: an activity at 0 or 100 % is real, just over 100 % or under 0
is not (that instance's window is N/A with the reason, the others keep theirs), a figure not
measured stays None (not 0, not an error).  Wherever the figures enter: a recording, NVML.

The recording is the DERIVED MIG file (tests/fixtures/derived/h200x2-mig: GPU 1 in MIG mode
with three invented instances, 1, 5 and 13), each instance given the figures of a REAL GPM
window of the same H200 model (tests/fixtures/h200-x2-gpm, bf16 training); one figure of
instance 5 is then moved to the boundary under test."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest
from conftest import DERIVED, FIXTURES
from test_gpm import gpm_lib

from gputui.telemetry.metrics import GPM_READS
from gputui.telemetry.model import GpmSample
from gputui.telemetry.nvml.gpm import GpmSampler
from gputui.telemetry.nvml.source import Nvml
from gputui.telemetry.recording import FORMAT_VERSION, read_recording
from gputui.ui.detail.lines import activity_lines

MIG = DERIVED / "h200x2-mig.jsonl.gz"
REAL = FIXTURES / "h200-x2-gpm" / "recording.jsonl.gz"
INSTANCES = (1, 5, 13)
MIG_ON = "MIG is on: GPM is measured per GPU instance (the detail view)"
NAMES = {m.figure: m.name for m in GPM_READS}


def lines(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode().splitlines()


def real_window() -> dict[str, Any]:
    """GPU 0's GPM window of a real training tick (bf16 on an H200)."""
    tick = json.loads(lines(REAL)[40])
    w = dict(tick["gpus"][0]["gpm"])
    assert w["sm_active"] > 50 and "unavailable" not in w
    return w


def mig_recording(tmp_path: Path, change: dict[str, Any]) -> Path:
    """The MIG recording with GPU 1's GPM per instance: the real window for each, instance
    5's figures changed by `change` (a value of ... removes the figure: not measured)."""
    w = real_window()
    head, *ticks = lines(MIG)
    header = json.loads(head)
    header["version"] = FORMAT_VERSION
    out = [json.dumps(header)]
    for line in ticks:
        obj = json.loads(line)
        parts = []
        for gi in INSTANCES:
            part = {**w, "gpu_instance_id": gi}
            if gi == 5:
                for k, v in change.items():
                    if v is ...:
                        part.pop(k)
                    else:
                        part[k] = v
            parts.append(part)
        obj["gpus"][1]["gpm"] = {"unavailable": MIG_ON, "mig": parts}
        out.append(json.dumps(obj))
    path = tmp_path / "mig.jsonl"
    path.write_text("\n".join(out) + "\n")
    return path


def gpu1(path: Path) -> Any:
    _, ticks = read_recording(path)
    return ticks[5].gpus[1]


VALID = [
    ("sm_active", 0.0),
    ("sm_active", 100.0),
    ("graphics_active", 100.0),
    ("dram_active", 0.0),
    ("tensor_active", 100.0),
    ("pcie_rx", 0),
    ("nvlink_tx", 0),
]
INVALID = [
    ("sm_active", 100.01),
    ("sm_active", -0.01),
    ("graphics_active", 100.01),
    ("dram_active", 1e18),
    ("fp32_active", -1.0),
    ("tensor_active", 100.5),
    ("pcie_rx", -1),
    ("nvlink_rx", -5),
]


@pytest.mark.parametrize(("figure", "value"), VALID)
def test_an_instance_figure_at_the_range_ends_is_kept(tmp_path: Path, figure: str, value: float) -> None:
    g = gpu1(mig_recording(tmp_path, {figure: value}))
    w = g.gpm
    assert w is not None and w.unavailable == MIG_ON and g.activity is None  # the GPU as a whole: N/A
    assert [p.gpu_instance_id for p in w.mig] == list(INSTANCES)
    five = w.mig[1]
    assert five.unavailable is None and getattr(five, figure) == value
    assert all(p.unavailable is None and p.sm_active is not None for p in w.mig)


@pytest.mark.parametrize(("figure", "value"), INVALID)
def test_an_instance_figure_just_out_of_range_makes_that_instance_na(
    tmp_path: Path, figure: str, value: float
) -> None:
    g = gpu1(mig_recording(tmp_path, {figure: value}))
    w = g.gpm
    assert w is not None and w.unavailable == MIG_ON  # the parent's reason stays its own
    one, five, thirteen = w.mig
    assert five.gpu_instance_id == 5
    assert five.unavailable is not None and f"{NAMES[figure]} {value:g}" in five.unavailable
    assert all(getattr(five, m.figure) is None for m in GPM_READS)  # no figure survives
    real = real_window()
    for other in (one, thirteen):  # the other instances keep theirs
        assert other.unavailable is None and other.sm_active == real["sm_active"]
    text = "\n".join("".join(t for t, _ in line) for line in activity_lines(g, (), 120, live=False))
    assert "GPU instance 5" in text and "N/A: GPM gave impossible figures" in text
    assert f"{NAMES[figure]} {value:g}" in text


@pytest.mark.parametrize("figure", ["sm_active", "tensor_active", "pcie_rx"])
def test_an_instance_figure_not_measured_is_none_not_zero_and_not_an_error(
    tmp_path: Path, figure: str
) -> None:
    g = gpu1(mig_recording(tmp_path, {figure: ...}))
    five = g.gpm.mig[1]
    assert five.unavailable is None and getattr(five, figure) is None
    assert five.dram_active == real_window()["dram_active"]
    text = "\n".join("".join(t for t, _ in line) for line in activity_lines(g, (), 120, live=False))
    assert "N/A" in text and "impossible" not in text


def test_every_instance_out_of_range_still_names_each() -> None:
    """Checked as `checked` is applied to a MIG sample: each instance alone."""
    from gputui.telemetry.gpm_check import checked

    bad = [GpmSample(window=2.0, sm_active=100.01, gpu_instance_id=gi) for gi in INSTANCES]
    w = checked(GpmSample(unavailable=MIG_ON, mig=tuple(bad)))
    assert w.unavailable == MIG_ON
    assert [p.gpu_instance_id for p in w.mig] == list(INSTANCES)
    assert all(p.unavailable is not None and "SM active 100.01" in p.unavailable for p in w.mig)


# ---- NVML: the per-instance call, the rounding noise at the ends ----------------------------


def per_instance_lib(values: list[dict[int, float]]) -> Any:
    """nvmlGpmMetricsGet answering with `values[k]` for the k-th instance of each pass."""
    calls = {"n": 0}
    lib = gpm_lib(values[0])

    def metrics_get(get: Any) -> Any:
        v = values[calls["n"] % len(values)]
        calls["n"] += 1
        for k in range(get.numMetrics):
            get.metrics[k].value = v[get.metrics[k].metricId]
        return get

    lib.nvmlGpmMetricsGet = metrics_get
    return lib


def nvml_values(**figures: float) -> dict[int, float]:
    w = real_window()
    out = {m.metric_id: w[m.figure] / (2**20 if m.unit == "B/s" else 1) for m in GPM_READS}
    ids = {m.figure: m.metric_id for m in GPM_READS}
    out.update({ids[k]: v for k, v in figures.items()})
    return out


@pytest.mark.parametrize(
    ("sm", "kept"),
    [
        (100.004, 100.0),
        (-0.004, 0.0),
        (0.0, 0.0),
        (100.0, 100.0),
        (100.006, None),
        (-0.006, None),
        (math.inf, None),
    ],
)
def test_nvml_instance_figures_at_the_ends(sm: float, kept: float | None) -> None:
    lib = per_instance_lib([nvml_values(), nvml_values(sm_active=sm)])
    sampler = GpmSampler(Nvml(lib=lib))
    assert sampler.sample(0, "h0", arch_code=9, mig_instances=(1, 5)) is None
    got = sampler.sample(0, "h0", arch_code=9, mig_instances=(1, 5))
    assert got is not None and got.unavailable is not None and "per GPU instance" in got.unavailable
    first, second = got.mig
    assert first.unavailable is None and first.sm_active == pytest.approx(
        real_window()["sm_active"], abs=0.01
    )
    assert second.gpu_instance_id == 5
    if kept is None:
        assert second.unavailable is not None and "impossible" in second.unavailable
        assert second.sm_active is None
    else:
        assert second.unavailable is None and second.sm_active == kept
