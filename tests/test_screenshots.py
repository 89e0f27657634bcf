"""screenshots/ holds the README's pictures: the snapshot SVGs of each screen, kept current.

After `pytest tests/test_snapshots.py --snapshot-update`, refresh them with
`UPDATE_SCREENSHOTS=1 pytest tests/test_screenshots.py`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SNAPS = ROOT / "tests" / "__snapshots__" / "test_snapshots"
SHOTS = ROOT / "screenshots"

PICTURES = {
    "overview-2gpu-160x50.svg": "test_overview_2gpu_160x50.svg",
    "overview-1gpu-160x50.svg": "test_overview_1gpu_160x50.svg",
    "overview-2gpu-80x24.svg": "test_overview_2gpu_80x24.svg",
    "overview-2gpu-light-120x40.svg": "test_overview_2gpu_light_theme_120x40.svg",
    "overview-2gpu-alerts-160x50.svg": "test_overview_2gpu_alerts_160x50.svg",
    "overview-1gpu-80x24.svg": "test_overview_1gpu_80x24.svg",
    "overview-8gpu-160x50.svg": "test_overview_8gpu_160x50.svg",
    "overview-16gpu-80x24.svg": "test_overview_16gpu_80x24.svg",
    "help.svg": "test_help_screen.svg",
    "chart-picker-120x40.svg": "test_chart_picker_over_the_cards.svg",
    "processes-8gpu-160x50.svg": "test_processes_8gpu_160x50.svg",
    "processes-2gpu-80x24.svg": "test_processes_2gpu_80x24.svg",
    "processes-sorted-filtered-160x50.svg": "test_processes_sorted_filtered_160x50.svg",
    "kill-dialog.svg": "test_kill_dialog.svg",
    "processes-job-tree-160x30.svg": "test_processes_tree_and_job_column_160x30.svg",
    "process-detail.svg": "test_process_detail.svg",
    "no-gpu.svg": "test_no_gpu_panel.svg",
    "topology-2gpu-160x50.svg": "test_topology_2gpu_160x50.svg",
    "topology-8gpu-mixed-120x40.svg": "test_topology_8gpu_mixed_120x40.svg",
    "topology-cuda-view-80x24.svg": "test_topology_cuda_view_80x24.svg",
    "detail-2gpu-160x50.svg": "test_detail_2gpu_160x50.svg",
    "detail-2gpu-charts-160x50.svg": "test_detail_2gpu_charts_160x50.svg",
    "detail-1gpu-120x40.svg": "test_detail_1gpu_120x40.svg",
    "detail-mig-160x50.svg": "test_detail_mig_160x50.svg",
    "overview-selected-160x50.svg": "test_overview_selected_card_160x50.svg",
    "diagnostics-h200-160x50.svg": "test_diagnostics_h200_160x50.svg",
    "diagnostics-cpu-torch-120x40.svg": "test_diagnostics_cpu_torch_120x40.svg",
    "overview-gpm-2gpu-160x50.svg": "test_overview_gpm_2gpu_160x50.svg",
    "overview-gpm-h100-float32-160x50.svg": "test_overview_gpm_h100_float32_160x50.svg",
    "detail-gpm-h100-float32-160x50.svg": "test_detail_gpm_h100_float32_160x50.svg",
    "overview-stuck-job-160x50.svg": "test_overview_stuck_job_160x50.svg",
    "job-view-stuck-job-160x50.svg": "test_job_view_stuck_job_160x50.svg",
    "overview-input-bound-h100-160x50.svg": "test_overview_input_bound_h100_160x50.svg",
}


@pytest.mark.parametrize(("picture", "snapshot"), sorted(PICTURES.items()))
def test_screenshot_is_the_current_snapshot(picture, snapshot):
    src, dst = SNAPS / snapshot, SHOTS / picture
    if os.environ.get("UPDATE_SCREENSHOTS"):
        SHOTS.mkdir(exist_ok=True)
        shutil.copyfile(src, dst)
    assert dst.exists(), f"missing {dst}: run UPDATE_SCREENSHOTS=1 pytest {__file__}"
    assert dst.read_bytes() == src.read_bytes(), f"{dst} is stale: UPDATE_SCREENSHOTS=1 pytest {__file__}"
