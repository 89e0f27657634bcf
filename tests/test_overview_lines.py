"""The overview's lines, built from real recordings as plain data: the compact rows, the
GPU card's activity (GPM) line and hint, the header at 80 columns, the host's cores strip."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import H100_GPM
from gpm_support import FP32, phase_ticks

from gputui.telemetry.hints import HintConfig, gpu_hints
from gputui.telemetry.model import MachineInfo, Snapshot, SystemInfo
from gputui.telemetry.recording import read_recording
from gputui.ui.overview.lines import compact_detail, compact_row, host_lines
from gputui.ui.widgets.card import gpu_card
from gputui.ui.widgets.header import header_line

SPARK_GLYPHS = set("▁▂▃▄▅▆▇█")


def text(line) -> str:  # type: ignore[no-untyped-def]
    return "".join(t for t, _ in line)


def no_series(gpu: int, metric: str, n: int) -> list[float]:
    return [50.0] * n


def x2_tick(x2_recording, seq: int) -> tuple[MachineInfo, Snapshot]:  # type: ignore[no-untyped-def]
    header, ticks = x2_recording
    return header.machine, ticks[seq - 1]


def test_compact_rows_say_each_thing_once_and_label_what_they_show(x2_recording) -> None:  # type: ignore[no-untyped-def]
    """Tick 35 of the 2x H200 run: both GPUs at their power cap ("SW power cap"), P0."""
    info, snap = x2_tick(x2_recording, 35)
    dev, g = info.devices[0], snap.gpus[0]
    assert g.clock_event_reasons == 4 and g.pstate == 0  # the recording is what we think
    procs = [p for p in snap.processes if p.gpu_index == 0]
    for width in (80, 120, 160):
        first = text(compact_row(dev, g, no_series, width))
        second = text(compact_detail(dev, g, procs, no_series, width))
        both = first + "\n" + second
        assert both.count("SW power cap") <= 1, both
        assert not SPARK_GLYPHS & set(second), second  # no second, unlabelled UTIL sparkline
        assert "P 0" not in second
    wide = text(compact_detail(dev, g, procs, no_series, 160))
    assert "P0" in wide


def test_compact_second_row_keeps_the_clock_reason_when_an_alert_takes_the_first(x2_recording) -> None:  # type: ignore[no-untyped-def]
    info, snap = x2_tick(x2_recording, 35)
    dev, g = info.devices[0], snap.gpus[0]
    first = text(compact_row(dev, g, no_series, 160, alert="⚠ 61°C"))
    second = text(compact_detail(dev, g, [], no_series, 160, alert="⚠ 61°C"))
    assert "⚠ 61°C" in first and "SW power cap" not in first
    assert "SW power cap" in second


def gpm_tick() -> tuple[MachineInfo, Snapshot]:
    header, _ = read_recording(H100_GPM)
    return header.machine, phase_ticks(FP32)[3]


def test_card_shows_sm_tensor_dram_and_the_hint() -> None:
    info, snap = gpm_tick()
    dev, g = info.devices[0], snap.gpus[0]
    w = g.gpm
    assert w is not None and w.sm_active is not None and w.dram_active is not None
    hints = gpu_hints(g, HintConfig())
    lines = [text(line) for line in gpu_card(dev, g, snap.processes, no_series, 120, 1, hints=hints)]
    activity = next(line for line in lines if "TENSOR" in line)
    assert f"SM act {w.sm_active:.0f}% · TENSOR 0% · DRAM {w.dram_active:.0f}%" in activity
    assert "» no tensor cores: try TF32 or bf16" in activity
    narrow = [text(line) for line in gpu_card(dev, g, snap.processes, no_series, 64, 1, hints=hints)]
    activity = next(line for line in narrow if "TENSOR" in line)
    assert "SM act " in activity and "TF32" in activity  # the hint stays; DRAM goes first


def test_card_without_gpm_says_na_never_zero(x2_recording) -> None:  # type: ignore[no-untyped-def]
    info, snap = x2_tick(x2_recording, 50)  # a version-1 recording: no GPM
    lines = [text(line) for line in gpu_card(info.devices[0], snap.gpus[0], [], no_series, 120, 1)]
    activity = next(line for line in lines if "TENSOR" in line)
    assert "SM act N/A · TENSOR N/A · DRAM N/A" in activity
    info2, snap2 = gpm_tick()
    g = snap2.gpus[0]
    assert g.gpm is not None
    reason = "needs a Hopper or newer GPU (this one is Ampere)"
    g = dataclasses.replace(g, gpm=dataclasses.replace(g.gpm, unavailable=reason, sm_active=None))
    lines = [text(line) for line in gpu_card(info2.devices[0], g, [], no_series, 120, 1)]
    assert any("GPM N/A · " + reason in line for line in lines)


def test_header_at_80_columns_keeps_host_and_driver_before_lesser_items() -> None:
    """Items are dropped whole, least important first: never the host or the driver while
    the CUDA version or the GPU count is shown (a replay's time is shorter there)."""
    devices = tuple(dataclasses.replace(d, index=i) for i, d in enumerate(gpm_tick()[0].devices * 2))
    for hostname in ("gpu-node-17", "gpu-node-17.cluster.example.internal"):
        info = MachineInfo(SystemInfo(hostname, "580.159.04", "13.0"), devices)
        for live in (True, False):
            line = text(
                header_line(
                    info, 80, live=live, label="x", interval=1.0, paused=False, position=None, timestamp=1.8e9
                )
            )
            assert len(line) == 80
            assert "…" not in line
            assert ("live" if live else "replay") in line
            order = ["gpu-node-17", "driver 580.159.04", "CUDA 13.0", "2 GPUs"]
            shown = [item in line for item in order]
            assert shown == sorted(shown, reverse=True), (line, shown)  # a prefix of the order
            if len(hostname) < 20:
                assert shown[:2] == [True, True], line


def test_cores_strip_says_when_it_groups_cpus(x2_recording) -> None:  # type: ignore[no-untyped-def]
    _, ticks = x2_recording
    host = ticks[50].host
    assert host is not None and len(host.per_cpu) == 32
    wide = "\n".join(text(line) for line in host_lines(host, "vm", 160))
    assert "cores " in wide and "per glyph" not in wide
    many = dataclasses.replace(host, per_cpu=host.per_cpu * 4)  # 128 CPUs, as on a real 8-GPU host
    narrow = "\n".join(text(line) for line in host_lines(many, "vm", 80))
    assert "128 CPUs" in narrow
    assert "per glyph" in narrow, narrow


def test_detail_activity_box_has_every_figure_the_hint_and_its_numbers() -> None:
    from gputui.ui.detail.lines import HINT_LINES, activity_lines

    _, snap = gpm_tick()
    g = snap.gpus[0]
    w = g.gpm
    assert w is not None and w.fp32_active is not None
    hints = gpu_hints(g, HintConfig())
    lines = [text(line) for line in activity_lines(g, hints, 160)]
    body = "\n".join(lines)
    assert "Activity (GPM)" in lines[0] and f"over {w.window:.1f} s" in lines[0]
    assert "tensor (any)" in body and f"FP32 pipe       {w.fp32_active:.1f}%" in body
    labels = ("SM occupancy", "tensor HMMA", "tensor IMMA", "tensor DFMA", "FP64 pipe", "NVLink RX")
    assert all(label in body for label in labels)
    assert "» no tensor cores: try TF32 or bf16" in body and hints[0].evidence in body
    assert "torch.backends.cuda.matmul.allow_tf32 = True" in body
    # the same height without a hint, and without GPM (N/A with why)
    assert len(activity_lines(g, (), 160)) == len(lines)
    none = [text(line) for line in activity_lines(dataclasses.replace(g, gpm=None), (), 160, live=False)]
    assert len(none) == len(lines)
    assert any("N/A: not in this recording" in line for line in none)
    assert 1 + len(hints[0].remedies) <= HINT_LINES


def test_gpm_figures_can_be_card_sparklines() -> None:
    from gputui.config import CardConfig, parse
    from gputui.telemetry.history import History

    parsed, errors = parse('[cards]\nsparklines = ["util", "sm_active", "tensor_active", "dram_active"]\n')
    assert errors == []
    header, ticks = read_recording(H100_GPM)
    history = History(300)
    tick = phase_ticks(FP32)[3]
    for t in ticks[: tick.seq]:
        history.append(t)
    assert history.series(0, "tensor_active", 5) == [0.0] * 5  # measured zeros, not gaps
    assert history.series(0, "sm_active", 1)[0] > 90
    card: CardConfig = parsed.cards

    def series(gpu: int, metric: str, n: int) -> list[float]:
        return history.series(gpu, metric, n)

    g = tick.gpus[0]
    lines = [text(line) for line in gpu_card(header.machine.devices[0], g, [], series, 120, 2, card=card)]
    rows = {line.split()[1]: line for line in lines if line.startswith("│ ") and len(line.split()) > 2}
    assert "SMACT" in rows and "TENSR" in rows and "DRAM" in rows
    assert rows["TENSR"].rstrip(" │").endswith("0%")


@pytest.mark.parametrize("rx", [None, 0, 999, 41_070_000, 14_200_000_000, 99_950_000_000])
def test_pcie_rates_keep_the_info_row_still(rx) -> None:  # type: ignore[no-untyped-def]
    """PCIe RX/TX are a 20 ms window: they jump between MB/s and GB/s from one pass to the
    next. The items after them must not move (moving, the whole rest of the row is redrawn
    and sent to the terminal each time: 170 B/s live on the H100)."""
    info, snap = gpm_tick()
    g = dataclasses.replace(snap.gpus[0], pcie_rx=14_200_000_000, pcie_tx=734_000_000)
    ref = next(text(x) for x in gpu_card(info.devices[0], g, [], no_series, 160, 1) if " TX " in text(x))
    g = dataclasses.replace(g, pcie_rx=rx)
    row = next(text(x) for x in gpu_card(info.devices[0], g, [], no_series, 160, 1) if " TX " in text(x))
    assert row.index(" TX ") == ref.index(" TX ") and row.index("ENC") == ref.index("ENC")
