"""The topology classifier against nvidia-smi's own output, captured in the same run as the
recordings (tests/fixtures/*/nvidia-smi-topo*.txt, nvidia-smi-nvlink.txt)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from conftest import FIXTURES, H200_X1, H200_X2
from smi_text import parse_nvlink_status, parse_topo_m, parse_topo_p2p

from gputui.telemetry.model import DeviceInfo, GpuSample, MachineInfo, NvLink, SystemInfo, Topology
from gputui.telemetry.recording import read_recording
from gputui.telemetry.topology import (
    LEGEND,
    affinity,
    bus_key,
    class_rank,
    link_class,
    link_groups,
    link_matrix,
    nvlink_count,
    p2p,
    p2p_problems,
    pcie_state,
    ranges,
)

MIXED = FIXTURES / "derived" / "h200x8-mixed-topology.jsonl.gz"


def na(value: object) -> str:
    return "N/A" if value is None else str(value)


#: Every real fixture with a recording and nvidia-smi topo -m of the same run (a new one, e.g.
#: from `bench/device.sh topo`, is compared as soon as it is committed).
SAME_RUN = sorted(
    d.name
    for d in FIXTURES.iterdir()
    if (d / "nvidia-smi-topo.txt").exists() and (d / "recording.jsonl.gz").exists()
)


def test_the_real_captures_are_compared() -> None:
    assert {"h200-x2", "h200-x1-v2"} <= set(SAME_RUN)


@pytest.mark.parametrize("fixture", SAME_RUN)
def test_matrix_matches_nvidia_smi_topo_m_cell_by_cell(fixture: str) -> None:
    info = read_recording(FIXTURES / fixture / "recording.jsonl.gz")[0].machine
    gpus, rows, _ = parse_topo_m((FIXTURES / fixture / "nvidia-smi-topo.txt").read_text())
    assert len(gpus) == len(info.devices)
    matrix = link_matrix(info)
    compared = 0
    for i, row_name in enumerate(gpus):
        for j, col_name in enumerate(gpus):
            assert matrix[i][j] == rows[row_name][col_name], (row_name, col_name)
            compared += 1
        dev = info.devices[i]
        aff = affinity(dev)
        assert rows[row_name]["CPU Affinity"] == na(aff.cpus)
        assert rows[row_name]["GPU NUMA ID"] == na(aff.gpu_numa_id)
        # NUMA Affinity: nvidia-smi printed 0.  These recordings predate gputui reading
        # NVML's memory affinity (the VM's sysfs has no NUMA node), so they hold None;
        # compare whenever a recording has it.
        if aff.numa is not None:
            assert rows[row_name]["NUMA Affinity"] == str(aff.numa)
        else:
            assert rows[row_name]["NUMA Affinity"] == "0"
    assert compared == len(gpus) ** 2


def test_x2_is_nv18_through_nvswitch() -> None:
    info = read_recording(H200_X2)[0].machine
    topo = info.topology
    assert topo is not None
    # the real capture: every link active, to a switch the VM cannot see
    for links in topo.nvlinks:
        assert len(links) == 18
        assert {lk.remote_bus_id for lk in links} == {"FFFFFFFF:FF:FF.0"}
        assert all(lk.active for lk in links)
        assert {lk.remote_type for lk in links} == {None}  # recorded before the remote type
    assert topo.levels[0][1] == 30  # NVML alone would say PHB
    assert nvlink_count(topo, info.devices, 0, 1) == nvlink_count(topo, info.devices, 1, 0) == 18
    # the same with the remote type NVML reports today (nvml-links.json: remote_type 2 = switch)
    typed = dataclasses.replace(
        topo,
        nvlinks=tuple(tuple(dataclasses.replace(lk, remote_type="switch") for lk in g) for g in topo.nvlinks),
    )
    assert link_class(typed, info.devices, 0, 1) == "NV18"


def test_active_links_agree_with_nvidia_smi_nvlink_s() -> None:
    info = read_recording(H200_X2)[0].machine
    assert info.topology is not None
    smi = parse_nvlink_status((FIXTURES / "h200-x2" / "nvidia-smi-nvlink.txt").read_text())
    for i, links in enumerate(info.topology.nvlinks):
        assert [(lk.link, bool(lk.active)) for lk in links] == [
            (n, "inactive" not in state) for n, state in smi[i]
        ]


def test_p2p_matches_nvidia_smi_topo_p2p_rw() -> None:
    info = read_recording(H200_X2)[0].machine
    rows = parse_topo_p2p((FIXTURES / "h200-x2" / "nvidia-smi-topo-p2p.txt").read_text())
    for i in range(2):
        for j in range(2):
            expected = rows[f"GPU{i}"][f"GPU{j}"]
            got = "X" if i == j else p2p(info.topology, i, j).code()
            assert got == expected
    assert p2p_problems(info.topology, 2) == []


def test_legend_is_nvidia_smis_word_for_word() -> None:
    _, _, legend = parse_topo_m((FIXTURES / "h200-x2" / "nvidia-smi-topo.txt").read_text())
    ours = {code: text for code, text, _ in LEGEND}
    assert dict(legend) == ours


# ---- the derived 8-GPU mixed topology ------------------------------------------------------


def test_mixed_topology_classes() -> None:
    header, _ = read_recording(MIXED)
    assert header.derived  # invented topology: see tests/fixtures/derived/README.md
    matrix = link_matrix(header.machine)
    group0 = range(4)
    for i in range(8):
        for j in range(8):
            if i == j:
                expected = "X"
            elif {i, j} == {6, 7}:
                expected = "PIX"  # no NVLink between them: the PCIe level
            elif (i in group0) == (j in group0):
                expected = "NV4"  # 4 direct links, though NVML's level says NODE
            else:
                expected = "SYS"
            assert matrix[i][j] == expected, (i, j)
    problems = p2p_problems(header.machine.topology, 8)
    assert len(problems) == 16  # every cross-socket pair
    assert {reason for _, _, reason in problems} == {"topology not supported"}


def test_link_groups_name_the_far_end() -> None:
    header, _ = read_recording(MIXED)
    topo = header.machine.topology
    assert topo is not None
    groups = link_groups(topo.nvlinks[6], header.machine.devices)
    assert [(g.span(), g.active, g.remote) for g in groups] == [
        ("0-3", True, "GPU 4"),
        ("4-7", True, "GPU 5"),
        ("8-17", False, ""),
    ]


# ---- rules on hand-made link tables (the classifier's logic, not GPU data) -----------------


def two_gpus(links0: list[NvLink], links1: list[NvLink], nvlink_p2p: str | None = "OK") -> MachineInfo:
    devices = (
        DeviceInfo(index=0, name="a", bus_id="00000000:10:00.0"),
        DeviceInfo(index=1, name="b", bus_id="0000:20:00.0"),
    )
    pair = ((None, nvlink_p2p), (nvlink_p2p, None))
    topo = Topology(levels=((None, 50), (50, None)), p2p_nvlink=pair, nvlinks=(tuple(links0), tuple(links1)))
    return MachineInfo(SystemInfo("test"), devices, topo)


def switch_links(n: int, active: int | None = None) -> list[NvLink]:
    return [
        NvLink(k, k < (n if active is None else active), 6, "FFFFFFFF:FF:FF.0", "switch") for k in range(n)
    ]


def test_switch_pair_counts_the_fewer_active_links() -> None:
    info = two_gpus(switch_links(18), switch_links(18, active=17))
    assert link_matrix(info) == [["X", "NV17"], ["NV17", "X"]]


def test_switch_links_without_nvlink_p2p_are_not_a_path() -> None:
    # e.g. Fabric Manager not running: links are up, NVML reports no NVLink P2P
    info = two_gpus(switch_links(18), switch_links(18), nvlink_p2p="not supported")
    assert link_matrix(info) == [["X", "SYS"], ["SYS", "X"]]


def test_direct_links_count_by_the_peers_bus_id_in_either_spelling() -> None:
    to_1 = [NvLink(k, True, 4, "00000000:20:00.0", "GPU") for k in range(2)]
    to_0 = [NvLink(k, True, 4, "0000:10:00.0") for k in range(2)]  # 4-digit domain, no type
    info = two_gpus([*to_1, NvLink(2, False, 4, None)], to_0, nvlink_p2p="OK")
    assert link_matrix(info) == [["X", "NV2"], ["NV2", "X"]]


def test_no_topology_or_no_level_is_na() -> None:
    info = two_gpus([], [])
    assert link_class(None, info.devices, 0, 1) == "N/A"
    empty = MachineInfo(info.system, info.devices, Topology())
    assert link_matrix(empty) == [["X", "N/A"], ["N/A", "X"]]
    assert p2p(None, 0, 1).code() == "N/A"


def test_class_rank_orders_fastest_first() -> None:
    ranked = sorted(["SYS", "PIX", "NV4", "NODE", "PHB", "PXB", "X", "N/A"], key=class_rank)
    assert ranked == ["X", "NV4", "PIX", "PXB", "PHB", "NODE", "SYS", "N/A"]


@pytest.mark.parametrize(
    ("bus", "key"),
    [
        ("00000000:00:07.0", (0, 0, 7, 0)),
        ("0000:3B:00.1", (0, 0x3B, 0, 1)),
        ("FFFFFFFF:FF:FF.0", (0xFFFFFFFF, 0xFF, 0xFF, 0)),
        ("garbage", None),
        (None, None),
    ],
)
def test_bus_key(bus: str | None, key: tuple[int, ...] | None) -> None:
    assert bus_key(bus) == key


def test_ranges() -> None:
    assert ranges([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert ranges([3]) == "3"
    assert ranges([]) == ""


def test_pcie_downtrained_only_under_load() -> None:
    dev = DeviceInfo(index=0, name="x", pcie_max_gen=5, pcie_max_width=16)
    idle = pcie_state(dev, GpuSample(index=0, gpu_util=0, pcie_gen=1, pcie_width=16))
    assert idle.below_max
    assert not idle.downtrained  # GPUs lower the link at idle to save power
    busy = pcie_state(dev, GpuSample(index=0, gpu_util=97, pcie_gen=4, pcie_width=16))
    assert busy.downtrained
    narrow = pcie_state(dev, GpuSample(index=0, gpu_util=97, pcie_gen=5, pcie_width=8))
    assert narrow.downtrained
    full = pcie_state(dev, GpuSample(index=0, gpu_util=97, pcie_gen=5, pcie_width=16))
    assert not full.downtrained
    unknown = pcie_state(DeviceInfo(index=0, name="x"), GpuSample(index=0, gpu_util=97, pcie_gen=4))
    assert not unknown.downtrained
    assert not pcie_state(dev, None).downtrained


def test_the_real_recordings_never_flag_their_links() -> None:
    for path in (H200_X2, H200_X1):
        header, ticks = read_recording(path)
        for snap in ticks:
            for g in snap.gpus:
                assert not pcie_state(header.machine.devices[g.index], g).downtrained


def test_fixture_files_exist() -> None:
    for name in ("nvidia-smi-topo.txt", "nvidia-smi-topo-p2p.txt", "nvidia-smi-nvlink.txt"):
        assert Path(FIXTURES / "h200-x2" / name).exists()
