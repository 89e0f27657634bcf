"""The detail view's and the topology tab's content as text, from the real recordings (and the
derived MIG and 8-GPU files, labelled as such): every fact shown, N/A where NVML gave
nothing, every line exactly as wide as asked, never a crash on missing fields."""

from __future__ import annotations

import dataclasses
import math
import time

import pytest
from conftest import DERIVED, FIXTURES, H100_GPM, H200_X1, H200_X2, NOGPU

from gputui.telemetry.cuda_visible import cuda_visibility
from gputui.telemetry.facts import CORES_PER_SM, sm_count
from gputui.telemetry.model import (
    CLOCK_EVENT_REASONS,
    DeviceInfo,
    GpuSample,
    MachineInfo,
    SystemInfo,
    Topology,
)
from gputui.telemetry.recording import read_recording
from gputui.ui.detail.charts import chart_lines
from gputui.ui.detail.lines import (
    clock_reason_lines,
    driver_facts,
    health,
    identity_facts,
    link_facts,
    memory_facts,
    mig_lines,
    power_facts,
    process_lines,
)
from gputui.ui.render import S, line_len
from gputui.ui.topology.lines import (
    cuda_lines,
    link_row,
    link_table,
    matrix_lines,
    nvlink_summary,
    p2p_lines,
    pcie_text,
    problem_lines,
)
from gputui.ui.widgets.chart import Series, braille_chart

MIG = DERIVED / "h200x2-mig.jsonl.gz"
MIXED = DERIVED / "h200x8-mixed-topology.jsonl.gz"
X16 = DERIVED / "h200x16-nvswitch-256procs.jsonl.gz"
V1 = FIXTURES / "h200-x1" / "recording-v1mem.jsonl.gz"


def text(lines: list) -> str:
    return "\n".join("".join(t for t, _ in line) for line in lines)


def facts_text(facts: list) -> dict[str, str]:
    return {label.strip(): value for label, value, _ in facts}


# ---- facts ------------------------------------------------------------------------------


def test_every_static_fact_of_the_real_h200() -> None:
    header, ticks = read_recording(H200_X2)
    info = header.machine
    dev = info.devices[0]
    g = ticks[59].gpus[0]
    ident = facts_text(identity_facts(dev))
    assert ident["UUID"] == "GPU-7ef01d99-3d11-e20d-b7d3-0ad9551199e9"
    assert ident["Serial"] == "1653724055576"
    assert ident["Board part"] == "692-2G520-0282-000"
    assert ident["VBIOS"] == "96.00.A5.00.1A"  # nvidia-smi -q: VBIOS Version
    assert ident["InfoROM image"] == "G520.0282.02.02"
    assert ident["Compute cap."] == "9.0"
    assert ident["SMs"] == "132 (128 CUDA cores each)"  # H200: 132 SMs
    assert ident["CUDA cores"] == "16,896"
    assert ident["Minor number"] == "/dev/nvidia0"
    drv = facts_text(driver_facts(info, dev))
    assert drv["Driver"] == "580.159.04"
    assert drv["CUDA (driver)"] == "up to 13.0"
    assert (drv["Persistence"], drv["MIG mode"], drv["ECC mode"]) == ("enabled", "disabled", "enabled")
    assert drv["Compute mode"] == "Default"
    mem = facts_text(memory_facts(dev, g))
    assert mem["Memory"] == "140.4 GiB"  # nvidia-smi -q: FB Memory Usage Total 143771 MiB
    assert mem["Bus width"] == "6016 bits"
    assert mem["BAR1"] == "262,144 MiB"  # nvidia-smi -q: BAR1 Total 262144 MiB
    power = facts_text(power_facts(dev, g))
    assert (power["Power limit"], power["default"], power["settable"]) == ("700 W", "700 W", "200-700 W")
    assert (power["Slowdown temp"], power["Shutdown temp"], power["Max operating"]) == (
        "89°C",
        "95°C",
        "87°C",
    )
    link = facts_text(link_facts(dev, g))
    assert link["PCIe link"] == "Gen5 x16"
    assert link["maximum"] == "Gen5 x16"
    assert link["CPU affinity"] == "0-31"
    # not in this recording (it predates them): N/A, not 0
    assert link["replays"] == "N/A"
    assert link["NUMA node"] == "N/A"


def test_unknown_everything_is_na_not_a_crash() -> None:
    info = MachineInfo(SystemInfo("host"), (DeviceInfo(index=0, name="GPU"),))
    dev = info.devices[0]
    for builder in (identity_facts(dev), driver_facts(info, dev)):
        assert {v for _, v, _ in builder} == {"N/A"}
    for g in (None, GpuSample(index=0)):
        for facts in (memory_facts(dev, g), power_facts(dev, g), link_facts(dev, g)):
            assert all(v == "N/A" or "N/A" in v for _, v, _ in facts), facts
        h = health(g)
        assert h.style in (S.dim,)
    assert health(GpuSample(index=0)).verdict == "not reported by this GPU"


def test_sm_count_only_where_exact() -> None:
    dev = DeviceInfo(index=0, name="x", cuda_cores=16896, compute_capability=(9, 0))
    assert sm_count(dev) == 132
    assert sm_count(dataclasses.replace(dev, compute_capability=(8, 0), cuda_cores=6912)) == 108  # A100
    assert sm_count(dataclasses.replace(dev, compute_capability=(99, 0))) is None  # unknown arch
    assert sm_count(dataclasses.replace(dev, cuda_cores=16895)) is None  # does not divide
    assert sm_count(dataclasses.replace(dev, cuda_cores=None)) is None
    assert all(v in (64, 128, 192) for v in CORES_PER_SM.values())


# ---- health -----------------------------------------------------------------------------


def test_health_of_the_real_gpu_is_clean() -> None:
    _, ticks = read_recording(H200_X2)
    h = health(ticks[0].gpus[0])
    assert h.verdict == "✓ no memory errors"
    facts = facts_text(h.facts)
    assert facts["ECC volatile"] == "0 corrected · 0 uncorrected"
    assert facts["Retired pages"] == "N/A"
    assert facts["Remapped rows"] == "N/A"
    assert "Xid events" not in facts  # a recording made without the event watch: not claimed


def test_xid_events_are_listed_in_the_health_facts() -> None:
    _, ticks = read_recording(H200_X2)
    watched = dataclasses.replace(ticks[0].gpus[0], xid_count=0, xid_last=None)
    assert facts_text(health(watched).facts)["Xid events"] == "none (since gputui started)"
    assert health(watched).verdict == "✓ no memory errors"
    hit = dataclasses.replace(watched, xid_count=2, xid_last=48)
    assert (
        facts_text(health(hit).facts)["Xid events"]
        == "2, last Xid 48: double-bit ECC error (since gputui started)"
    )


@pytest.mark.parametrize(
    ("changes", "verdict", "style"),
    [
        ({"ecc_volatile_uncorrected": 2}, "uncorrectable ECC errors", S.bad),
        ({"remapped_rows_failure": True}, "a row remap failed", S.bad),
        ({"remapped_rows_pending": True}, "reset the GPU", S.warn),
        ({"ecc_aggregate_corrected": 5}, "corrected ECC errors", S.warn),
        ({"retired_pages_dbe": 1}, "double-bit", S.bad),
        ({"retired_pages_pending": True}, "reload the driver", S.warn),
        ({"xid_count": 1, "xid_last": 79}, "Xid 79: GPU has fallen off the bus", S.bad),
        ({"xid_count": 3, "xid_last": 31}, "Xid 31: GPU memory page fault (an application's", S.warn),
    ],
)
def test_health_flags(changes: dict, verdict: str, style: object) -> None:
    # the real sample with one error counter changed: the logic under test, not GPU data
    _, ticks = read_recording(H200_X2)
    g = dataclasses.replace(ticks[0].gpus[0], **{"remapped_rows_pending": False, **changes})
    h = health(g)
    assert verdict in h.verdict
    assert h.style == style
    assert h.verdict.startswith("⚠")


# ---- clock-event reasons ------------------------------------------------------------------


def test_clock_reasons_explained_with_the_active_ones_named() -> None:
    lines = text(clock_reason_lines(0x4, 120)).splitlines()
    assert "held back by: SW power cap" in lines[1]
    assert "● SW power cap" in text(clock_reason_lines(0x4, 120))
    assert "the power draw reached the power limit" in text(clock_reason_lines(0x4, 120))
    assert sum("○" in line for line in lines) == len(CLOCK_EVENT_REASONS) - 1
    slow = text(clock_reason_lines(0x48, 120))  # HW slowdown + HW thermal
    assert "⚠ slowed down: HW slowdown, HW thermal" in slow
    assert "⚠ HW thermal" in slow
    assert "✓ none: the clocks run as fast" in text(clock_reason_lines(0, 120))
    assert "idle: nothing runs" in text(clock_reason_lines(0x1, 120))
    assert "N/A" in text(clock_reason_lines(None, 120))
    assert "0x1000 (a reason this gputui does not know)" in text(clock_reason_lines(0x1000, 120))


def test_clock_reasons_keep_their_height() -> None:
    # a change of height repaints the whole screen: every mask gives the same lines
    heights = {len(clock_reason_lines(mask, w)) for mask in (0, 1, 4, 0x48, 0x7FF, 0x1000) for w in (50, 160)}
    assert heights == {len(CLOCK_EVENT_REASONS) + 3}
    assert all(line_len(line) == 50 for line in clock_reason_lines(0x008, 50))


# ---- MIG (derived fixture: the MIG devices are invented) ------------------------------------


def test_mig_devices_list_their_processes_with_na_utilization() -> None:
    header, ticks = read_recording(MIG)
    assert header.derived is not None
    snap = ticks[19]
    dev = header.machine.devices[1]
    g = snap.gpus[1]
    procs = [p for p in snap.processes if p.gpu_index == 1]
    out = text(mig_lines(dev, g, procs, 140))
    rows = out.splitlines()
    i3g = next(k for k, r in enumerate(rows) if "3g.71gb" in r)
    i2g = next(k for k, r in enumerate(rows) if "2g.35gb" in r)
    i1g = next(k for k, r in enumerate(rows) if "1g.18gb" in r)
    assert "60 SMs" in rows[i3g]
    assert "ddp_like.py" in rows[i3g + 1]
    assert "no processes" in rows[i2g + 1]
    assert "hold_memory.py" in rows[i1g + 1]
    assert all("SM  N/A" in r for r in rows if "python3" in r)
    assert "per-process utilization: N/A on MIG" in rows[0]
    assert "SM    0%" not in out


def test_mig_enabled_without_instances() -> None:
    dev = DeviceInfo(index=0, name="x", mig_mode=True)
    assert "no GPU instance exists yet" in text(mig_lines(dev, GpuSample(index=0), [], 100))


def test_mig_pending_change_is_spelled_out() -> None:
    info = MachineInfo(
        SystemInfo("h"), (DeviceInfo(index=0, name="x", mig_mode=False, mig_mode_pending=True),)
    )
    assert facts_text(driver_facts(info, info.devices[0]))["MIG mode"] == (
        "disabled (enabled after the next GPU reset)"
    )


# ---- processes, charts ----------------------------------------------------------------------


def test_process_lines_show_untrusted_text_literally() -> None:
    _, ticks = read_recording(H200_X2)
    p = dataclasses.replace(ticks[59].processes[0], name="evil\x1b[31m", cmdline=("python", "\x1b]0;x\x07"))
    out = text(process_lines([p], 120))
    assert "\x1b" not in out
    assert "\x07" not in out
    assert "evil?[31m" in out


def test_charts_have_axes_and_time_labels() -> None:
    header, ticks = read_recording(H200_X2)
    dev = header.machine.devices[0]
    series = {
        m: [float(getattr(s.gpus[0], m)) for s in ticks]
        for m in ("gpu_util", "mem_util", "mem_used", "power_draw", "temperature", "sm_clock", "mem_clock")
    }
    # a version-1 recording has no GPM: its history is all gaps (NaN)
    from gputui.telemetry.history import HISTORY

    series |= {m.field: [math.nan] * len(ticks) for m in HISTORY if m.gpm is not None}
    times = [s.timestamp for s in ticks]
    lines = chart_lines(dev, lambda gpu, m: series[m], times, 160, live=False)
    out = text(lines)
    assert all(line_len(line) == 160 for line in lines[1:])
    for title in (
        "Utilization",
        "Activity (GPM)",
        "Pipes (GPM)",
        "Tensor pipes (GPM)",
        "Traffic (GPM)",
        "Memory used",
        "Power",
        "Temperature",
        "Clocks",
    ):
        assert title in out
    assert "100% ┤" in out
    assert "700 W ┤" in out
    assert "22:21:44" in out  # the first recorded second, UTC
    assert time.strftime("%H:%M:%S", time.gmtime(times[-1])) in out
    assert "the last 120 s (121 samples)" in out


def test_braille_chart_places_values() -> None:
    # 0 at the bottom row, 100 at the top, joined by a vertical run
    lines = braille_chart(
        [Series([0.0, 100.0], S.spark_util)], [0.0, 1.0], 12, 2, 0.0, 100.0, lambda v: f"{v:.0f}", str
    )
    plot = ["".join(t for t, _ in line)[5:] for line in lines[:2]]
    assert plot[0][-1] != " "  # the top row holds the 100
    assert plot[1][0] != " "  # the bottom row holds the 0
    assert all(line_len(line) == 12 for line in lines)


def test_braille_chart_leaves_gaps_and_nan_blank() -> None:
    values = [50.0, math.nan, math.nan, 50.0]
    lines = braille_chart([Series(values, S.spark_util)], [0.0, 1.0, 2.0, 100.0], 30, 2, 0.0, 100.0, str, str)
    row = "".join(t for t, _ in lines[0])
    # the two samples are 99 s apart after 1 s steps: not joined
    assert row.count(" ") > 10


# ---- topology lines ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", [H200_X2, H200_X1, V1, MIXED, X16, MIG])
@pytest.mark.parametrize("width", [60, 80, 120, 160, 220])
def test_every_line_is_exactly_the_width(path, width: int) -> None:
    header, ticks = read_recording(path)
    info = header.machine
    snap = ticks[len(ticks) // 2]
    gpus = {g.index: g for g in snap.gpus}
    topo = info.topology
    cuda = cuda_visibility(info.devices, "1,0", None)
    lines = [
        *matrix_lines(info, topo, width, 0, cuda),
        *p2p_lines(info, topo, width),
        *problem_lines(info, topo, gpus, width),
        *cuda_lines(info, cuda, width),
    ]
    for d in info.devices:
        links = topo.nvlinks[d.index] if topo and topo.nvlinks else ()
        lines += link_row(d, gpus.get(d.index), links, info.devices, width, d.index == 0)
        lines += link_table(d.index, links, info.devices, gpus.get(d.index), width)
        g = gpus.get(d.index)
        lines += clock_reason_lines(g.clock_event_reasons if g else None, width)
        lines += process_lines([p for p in snap.processes if p.gpu_index == d.index], width)
    for line in lines:
        assert line_len(line) == width


def test_sixteen_gpus_at_80_columns_fit() -> None:
    header, _ = read_recording(X16)
    lines = text(matrix_lines(header.machine, header.machine.topology, 80)).splitlines()
    assert "CPU affinity" not in lines[0]
    assert lines[0].split() == [str(i) for i in range(16)]
    assert lines[1].split() == ["GPU0", "X", *["N18"] * 15]  # every cell whole
    assert "N18 means NV18" in lines[17]
    assert any("CPUs" in line for line in lines)
    wide = text(matrix_lines(header.machine, header.machine.topology, 160)).splitlines()
    assert wide[1].split()[:3] == ["GPU0", "X", "NV18"]


def test_pcie_text() -> None:
    dev = DeviceInfo(index=0, name="x", pcie_max_gen=5, pcie_max_width=16)
    assert pcie_text(dev, GpuSample(index=0, gpu_util=90, pcie_gen=5, pcie_width=16)) == (
        "Gen5 x16 = max",
        S.value,
    )
    assert pcie_text(dev, GpuSample(index=0, gpu_util=90, pcie_gen=4, pcie_width=16)) == (
        "⚠ Gen4 x16 < Gen5 x16",
        S.bad,
    )
    assert pcie_text(dev, GpuSample(index=0, gpu_util=0, pcie_gen=1, pcie_width=16))[1] == S.label
    assert pcie_text(dev, None) == ("N/A", S.dim)


def test_problems_are_flagged_and_a_clean_machine_says_so() -> None:
    header, ticks = read_recording(H200_X2)
    info = header.machine
    gpus = {g.index: g for g in ticks[60].gpus}
    assert "✓ links look right" in text(problem_lines(info, info.topology, gpus, 120))
    # the same busy tick with GPU 1's link trained down to Gen3 and a link down: logic, not data
    assert info.topology is not None
    slow = {**gpus, 1: dataclasses.replace(gpus[1], pcie_gen=3, pcie_replay_counter=12)}
    links = list(info.topology.nvlinks[1])
    links[5] = dataclasses.replace(links[5], active=False)
    topo = dataclasses.replace(info.topology, nvlinks=(info.topology.nvlinks[0], tuple(links)))
    out = text(problem_lines(info, topo, slow, 200))
    assert "PCIe link below its maximum under load: GPU1 Gen3 x16 (max Gen5 x16)" in out
    assert "NVLinks inactive: GPU1 links 5 (1 of 18)" in out
    assert "PCIe replays" in out
    assert "GPU1 12" in out
    summary = text([nvlink_summary(links, info.devices)])
    assert "⚠1 down" in summary


def test_no_topology_at_all() -> None:
    header, _ = read_recording(H200_X2)
    info = dataclasses.replace(header.machine, topology=None)
    out = text(matrix_lines(info, None, 100))
    assert "N/A" in out
    assert "NVML gave no P2P status" in text(p2p_lines(info, None, 100))
    assert "NVML gave no P2P status" in text(p2p_lines(info, Topology(), 100))


def test_nogpu_recording_has_nothing_to_link() -> None:
    header, _ = read_recording(NOGPU)
    info = header.machine
    assert len(matrix_lines(info, info.topology, 100)) == 1  # the header row only


@pytest.mark.parametrize(("fixture", "recording"), [("h200-x2", H200_X2), ("h200-x1-v2", H200_X1)])
def test_static_facts_agree_with_nvidia_smi_q(fixture: str, recording) -> None:
    """The detail view's facts against nvidia-smi -q of the same run, GPU by GPU."""
    from smi_text import parse_query

    header, _ = read_recording(recording)
    smi = parse_query((FIXTURES / fixture / "nvidia-smi-q.txt").read_text())
    assert len(smi) == len(header.machine.devices)
    for dev, q in zip(header.machine.devices, smi, strict=True):
        ident = facts_text(identity_facts(dev))
        assert ident["UUID"] == q["GPU UUID"]
        assert ident["Serial"] == q["Serial Number"]
        assert ident["VBIOS"] == q["VBIOS Version"]
        assert ident["Board part"] == q["Board Part Number"]
        assert ident["InfoROM image"] == q["Inforom Version/Image Version"]
        assert ident["PCI bus id"] == q["PCI/Bus Id"]
        assert ident["Minor number"] == f"/dev/nvidia{q['Minor Number']}"
        drv = facts_text(driver_facts(header.machine, dev))
        assert drv["Persistence"] == q["Persistence Mode"].lower()
        assert drv["Compute mode"] == q["Compute Mode"]
        assert drv["MIG mode"] == q["MIG Mode/Current"].lower()
        assert drv["ECC mode"] == q["ECC Mode/Current"].lower()
        mem = facts_text(memory_facts(dev, None))
        assert mem["BAR1"] == f"{int(q['BAR1 Memory Usage/Total'].split()[0]):,} MiB"
        assert mem["Memory"] == f"{int(q['FB Memory Usage/Total'].split()[0]) / 1024:.1f} GiB"
        link = facts_text(link_facts(dev, None))
        gen = q["PCI/GPU Link Info/PCIe Generation/Max"]
        width = q["PCI/GPU Link Info/Link Width/Max"].rstrip("x")
        assert link["maximum"] == f"Gen{gen} x{width}"
        power = facts_text(power_facts(dev, None))
        assert power["default"] == f"{float(q['GPU Power Readings/Default Power Limit'].split()[0]):.0f} W"
        # what nvidia-smi reports for memory health, the recording's later ticks agree with
        assert q["Remapped Rows/Pending"] == "No"
        assert q["Retired Pages/Single Bit ECC"] == "N/A"  # Hopper remaps rows instead


def test_the_pipes_are_kept_in_history_charted_and_offered_as_sparklines_from_the_real_h100_run() -> None:
    """GPM's FP32/FP16/FP64 pipes and SM occupancy are kept in history, drawn in the detail
    view's "Pipes (GPM)" chart and offered as card sparklines: the float32 run (TF32 off) is
    the FP32 pipe busy with the tensor cores idle, the evidence behind the fp32_no_tensor hint."""
    from gpm_support import BF16, FP32, h100_ticks, phase_ticks

    from gputui.telemetry.history import History
    from gputui.telemetry.metrics import CARD_CHARTS

    assert {"fp32_active", "fp16_active", "fp64_active", "sm_occupancy"} <= set(CARD_CHARTS)
    history = History()
    for tick in h100_ticks():
        history.append(tick)
    times = [t.timestamp for t in h100_ticks()]
    fp32 = dict(zip(times, history.series(0, "fp32_active"), strict=True))
    tensor = dict(zip(times, history.series(0, "tensor_active"), strict=True))
    in_fp32 = [t.timestamp for t in phase_ticks(FP32)]
    in_bf16 = [t.timestamp for t in phase_ticks(BF16)]
    assert in_fp32 and in_bf16
    assert min(fp32[t] for t in in_fp32) > 50 and max(tensor[t] for t in in_fp32) < 1
    assert max(fp32[t] for t in in_bf16) < 5 and min(tensor[t] for t in in_bf16) > 50
    dev = read_recording(H100_GPM)[0].machine.devices[0]
    lines = chart_lines(dev, history.series, times, 160, live=False)
    out = text(lines)
    assert "Pipes (GPM)" in out
    assert "FP32" in out and "occupancy" in out


def test_the_detail_view_draws_every_chart_from_the_history() -> None:
    """The GPU detail view copies from the history the series its charts draw: the float32
    run's FP32 pipe is drawn, not reported missing (its chart list is the charts' own)."""
    import asyncio

    from conftest import replay_app, run_to_tick, screen_lines
    from gpm_support import FP32, phase_ticks

    async def go() -> str:
        app = replay_app(H100_GPM)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, phase_ticks(FP32)[-1].seq)
            await pilot.press("enter")
            await pilot.pause()
            for _ in range(3):
                await pilot.press("pagedown")
                await pilot.pause()
            return "\n".join(screen_lines(app))

    screen = asyncio.run(go())
    pipes = [line for line in screen.splitlines() if "Pipes (GPM)" in line]
    assert pipes, screen
    assert "N/A: no samples" not in screen


def test_every_gpm_figure_is_kept_in_history_offered_as_a_sparkline_and_charted() -> None:
    """Each of GPM's figures (the registry's GPM_READS: graphics engine, SM, occupancy, tensor any / HMMA /
    IMMA / DFMA, DRAM, the FP pipes, PCIe and NVLink bytes) is a history series, a card
    sparkline choice and a line in a detail chart.  On the real H100 run the bf16 matmul is
    HMMA work, the float32 one is not, and GPM's PCIe counters saw the host's traffic."""
    from gpm_support import BF16, FP32, h100_ticks, phase_ticks

    from gputui.telemetry.history import HISTORY, History
    from gputui.telemetry.metrics import CARD_CHARTS, GPM_READS
    from gputui.ui.detail.charts import chart_metrics

    by_gpm = {m.gpm.figure: m for m in HISTORY if m.gpm is not None}
    assert set(by_gpm) == {r.figure for r in GPM_READS}
    assert {m.key for m in by_gpm.values()} <= set(CARD_CHARTS)
    assert {m.field for m in by_gpm.values()} <= set(chart_metrics())
    history = History()
    for tick in h100_ticks():
        history.append(tick)
    times = [t.timestamp for t in h100_ticks()]

    def during(phase: str, gpm_field: str) -> list[float]:
        values = dict(zip(times, history.series(0, by_gpm[gpm_field].field), strict=True))
        return [values[t.timestamp] for t in phase_ticks(phase)]

    assert min(during(BF16, "tensor_hmma_active")) > 50
    assert max(during(FP32, "tensor_hmma_active")) < 1
    assert min(during(BF16, "graphics_active")) > 50
    assert max(during(BF16, "tensor_imma_active")) == 0  # no int8 work in that run
    assert max(v for v in history.series(0, by_gpm["pcie_rx"].field) if not math.isnan(v)) > 1e6
    dev = read_recording(H100_GPM)[0].machine.devices[0]
    out = text(chart_lines(dev, history.series, times, 160, live=False))
    for title, legend in (("Tensor pipes (GPM)", "HMMA"), ("Traffic (GPM)", "NVLink RX")):
        assert title in out and legend in out
