"""GPM figures that cannot be true (an activity outside 0-100 %, a negative or non-finite
byte rate) are invalid wherever they come from: N/A with the reason, the same for the
cards, the detail view, the hints, `gputui snapshot` and the exporter (issue 24 item 6).

The recordings here are the real H100 GPM recording (tests/fixtures/h100-gpm) with the
figures of a few ticks altered, as a hostile or corrupt file would have them."""

from __future__ import annotations

import asyncio
import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest
from conftest import H100_GPM, gputui, replay_app, run_to_tick, screen_lines
from gpm_support import FP32, phase_ticks
from test_export import exporter, samples
from test_gpm import gpm_lib, raw_values, recorded_window

from gputui.telemetry.hints import HintEngine
from gputui.telemetry.model import GpmSample
from gputui.telemetry.nvml.gpm import GpmSampler, invalid_reason
from gputui.telemetry.nvml.source import Nvml
from gputui.telemetry.recording import read_recording


def fp32_tick() -> int:
    """A tick of the float32 phase: the fp32_no_tensor hint fires on its real figures."""
    return phase_ticks(FP32)[3].seq


def altered(tmp_path: Path, changes: dict[str, Any], tick: int | None = None, name: str = "bad") -> Path:
    """The H100 GPM recording with GPU 0's GPM figures at `tick` (default: a float32 tick)
    changed as given."""
    tick = fp32_tick() if tick is None else tick
    lines = gzip.decompress(H100_GPM.read_bytes()).decode().splitlines()
    out = []
    for line in lines:
        obj = json.loads(line)
        if obj.get("seq") == tick:
            obj["gpus"][0]["gpm"].update(changes)
        out.append(json.dumps(obj))
    path = tmp_path / f"{name}.jsonl"
    path.write_text("\n".join(out) + "\n")
    return path


def tick_of(path: Path, seq: int) -> Any:
    _, ticks = read_recording(path)
    return next(t for t in ticks if t.seq == seq)


BAD = [
    ({"sm_active": -50.0}, "SM active -50"),
    ({"tensor_active": 1e18}, "tensor (any) 1e+18"),
    ({"dram_active": 100.01}, "DRAM bandwidth 100.01"),
    ({"pcie_rx": -5}, "PCIe RX -5"),
]


@pytest.mark.parametrize(("change", "named"), BAD)
def test_a_recorded_figure_out_of_range_makes_the_window_na_with_the_reason(tmp_path, change, named):
    seq = fp32_tick()
    w = tick_of(altered(tmp_path, change), seq).gpus[0].gpm
    assert w is not None
    assert w.unavailable is not None
    assert named in w.unavailable, w.unavailable
    assert "impossible" in w.unavailable
    assert w.sm_active is None and w.fp32_active is None and w.pcie_rx is None  # no figure survives
    # the neighbours are untouched
    before = tick_of(altered(tmp_path, change), seq - 1).gpus[0].gpm
    assert before is not None and before.unavailable is None and before.sm_active is not None


@pytest.mark.parametrize("edge", [{"sm_active": 0.0}, {"sm_active": 100.0}, {"pcie_rx": 0}])
def test_the_range_ends_are_valid(tmp_path, edge):
    w = tick_of(altered(tmp_path, edge), fp32_tick()).gpus[0].gpm
    assert w is not None and w.unavailable is None
    (field, value) = next(iter(edge.items()))
    assert getattr(w, field) == value


def test_a_bad_window_gives_no_hint(tmp_path):
    """The real float32 tick gives fp32_no_tensor; with a negative tensor figure it gives none."""
    seq = fp32_tick()
    good = HintEngine().update(tick_of(H100_GPM, seq))
    assert {h.kind for h in good.get(0, ())} == {"fp32_no_tensor"}
    bad = HintEngine().update(tick_of(altered(tmp_path, {"tensor_active": -1.0}), seq))
    assert bad == {}


def test_the_cards_and_the_detail_view_show_na_with_the_reason(tmp_path):
    seq = fp32_tick()
    path = altered(tmp_path, {"sm_active": 1e18, "tensor_active": -50.0})

    async def go() -> tuple[str, str]:
        app = replay_app(path)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, seq)
            cards = "\n".join(screen_lines(app))
            await pilot.press("enter")  # the selected GPU's detail view
            await pilot.pause()
            return cards, "\n".join(screen_lines(app))

    cards, detail = asyncio.run(go())
    assert "GPM N/A" in cards and "impossible" in cards
    for text in (cards, detail):
        assert "1000000000000000000" not in text
        assert "-50%" not in text and "-50.0%" not in text
    assert "impossible figures" in detail and "SM active 1e+18 %" in detail


def test_the_exporter_publishes_no_impossible_figure(tmp_path):
    seq = fp32_tick()
    path = altered(tmp_path, {"sm_active": 1e18, "tensor_active": -50.0, "pcie_rx": -7})
    with exporter(path) as e:
        e.step_to(seq)
        got = samples(e.scrape())
    assert "DCGM_FI_DEV_GPU_UTIL" in got  # the rest of the tick is served
    assert not [name for name in got if name.startswith("DCGM_FI_PROF_")]
    assert "gputui_gpu_efficiency_hint" not in got or not got["gputui_gpu_efficiency_hint"]


def test_the_snapshot_says_why(tmp_path):
    seq = fp32_tick()
    path = altered(tmp_path, {"sm_active": -50.0})
    r = gputui("snapshot", "--replay", str(path), "--tick", str(seq), "--json")
    assert r.returncode == 0, r.stderr
    gpu = json.loads(r.stdout)["gpus"][0]
    assert gpu["gpm.sm_active"] is None and gpu["gpm.fp32_active"] is None
    assert "SM active -50" in gpu["gpm.unavailable"]


# ---- the live sampler: the same rule for what NVML hands over ----------------------------


@pytest.mark.parametrize(
    ("metric_id", "value", "named"),
    [
        (2, -50.0, "SM active -50"),
        (5, 1e16, "tensor (any) 1e+16"),
        (10, 100.6, "DRAM bandwidth 100.6"),
        (21, -1.0, "PCIe RX"),
        (21, math.inf, "PCIe RX"),
    ],
)
def test_nvml_figures_out_of_range_are_na_with_the_reason(metric_id, value, named):
    values = raw_values(recorded_window(FP32)) | {metric_id: value}
    sampler = GpmSampler(Nvml(lib=gpm_lib(values)))
    sampler.sample(0, "h0", arch_code=9)
    got = sampler.sample(0, "h0", arch_code=9)
    assert got is not None
    assert got.unavailable is not None and named in got.unavailable, got.unavailable
    assert got.sm_active is None and got.tensor_active is None


def test_nvml_rounding_noise_at_the_ends_is_kept_in_range():
    """100.004 % and -0.004 % are float noise of 100 and 0 (figures are kept to 0.01)."""
    values = raw_values(recorded_window(FP32)) | {2: 100.004, 5: -0.004}
    sampler = GpmSampler(Nvml(lib=gpm_lib(values)))
    sampler.sample(0, "h0", arch_code=9)
    got = sampler.sample(0, "h0", arch_code=9)
    assert got is not None and got.unavailable is None
    assert got.sm_active == 100.0 and got.tensor_active == 0.0


def test_invalid_reason_checks_mig_instances_too():
    good = GpmSample(window=2.0, sm_active=50.0, gpu_instance_id=1)
    bad = GpmSample(window=2.0, sm_active=150.0, gpu_instance_id=2)
    assert invalid_reason(good) is None
    reason = invalid_reason(bad)
    assert reason is not None and "SM active 150" in reason
    assert invalid_reason(GpmSample(unavailable="MIG is on", mig=(good,))) is None


def test_a_cluster_scrape_with_impossible_ratios_is_na_with_the_reason():
    """A hostile or broken exporter serves DCGM_FI_PROF_SM_ACTIVE -0.5 (-50 %) in a real tick
    of the H100 as `gputui export` serves it: the cluster view gets N/A with the reason.
    (1e16 and larger are DCGM's "blank" values: read as not measured, also no figure.)"""
    from cluster_support import exposition

    from gputui.cluster import expfmt
    from gputui.cluster.model import LabelMap, build_gpus

    header, ticks = read_recording(H100_GPM)
    snap = next(t for t in ticks if t.seq == fp32_tick())
    text = exposition(header.machine, snap, "n1").decode()
    good = build_gpus("n1", ((s.name, s.labels, s.value) for s in expfmt.parse(text).samples), LabelMap())
    assert good[0].sample.gpm is not None and good[0].sample.gpm.unavailable is None
    lines = [
        line.replace(line.rsplit(" ", 1)[1], "-0.5") if line.startswith("DCGM_FI_PROF_SM_ACTIVE{") else line
        for line in text.splitlines()
    ]
    e = expfmt.parse("\n".join(lines) + "\n")
    (got,) = build_gpus("n1", ((s.name, s.labels, s.value) for s in e.samples), LabelMap())
    w = got.sample.gpm
    assert w is not None and w.sm_active is None
    assert w.unavailable is not None and "SM active -50 %" in w.unavailable
