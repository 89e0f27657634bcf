"""What CUDA would see, mapped onto NVML's GPUs and MIG devices (telemetry/cuda_visible.py):
CUDA's device order, UUIDs and MIG UUIDs of real GPUs.  The CUDA_VISIBLE_DEVICES rule itself
(strtoul indices, prefixes, the first bad entry ends the list, repeats) is tested once, in
test_rules_cuda_visible.py."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import H200_X2

from gputui.telemetry.cuda_visible import cuda_order, cuda_visibility
from gputui.telemetry.model import DeviceInfo, MigDevice
from gputui.telemetry.recording import read_recording

X2_DEVICES = read_recording(H200_X2)[0].machine.devices
"""The real 2x H200: GPU-7ef01d99-... (bus 00:06.0) and GPU-e203cfca-... (bus 00:07.0)."""


def gpus(n: int) -> list[DeviceInfo]:
    """n identical GPUs on consecutive buses (parser input, not GPU data)."""
    return [
        DeviceInfo(
            index=i, name="NVIDIA H200", uuid=f"GPU-{i:08x}-aaaa", bus_id=f"00000000:{0x18 + i:02X}:00.0"
        )
        for i in range(n)
    ]


# ---- ordinals -------------------------------------------------------------------------


def test_unset_means_every_gpu_in_cuda_order() -> None:
    result = cuda_visibility(gpus(4), None)
    assert [(d.cuda_index, d.gpu_index) for d in result.devices] == [(0, 0), (1, 1), (2, 2), (3, 3)]
    assert result.order == "FASTEST_FIRST"
    assert result.order_exact  # identical GPUs: fastest-first is a tie, broken by PCI bus id
    assert result.reason is None


def test_listed_order_is_the_cuda_order() -> None:
    # the guide: "2,1 causes device 0 to be invisible and device 2 to be enumerated before device 1"
    result = cuda_visibility(gpus(3), "2,1")
    assert [(d.cuda_index, d.gpu_index, d.entry) for d in result.devices] == [(0, 2, "2"), (1, 1, "1")]
    assert result.cuda_index_of(2) == 0
    assert result.cuda_index_of(0) is None


# ---- UUIDs ----------------------------------------------------------------------------


def test_uuid_of_the_real_h200s() -> None:
    result = cuda_visibility(list(X2_DEVICES), "GPU-e203cfca,GPU-7ef0")
    assert [(d.cuda_index, d.gpu_index) for d in result.devices] == [(0, 1), (1, 0)]
    unknown = cuda_visibility(list(X2_DEVICES), "GPU-ffff")
    assert unknown.devices == ()
    assert unknown.reason is not None
    assert "matches no device" in unknown.reason


def test_an_index_list_does_not_take_uuids() -> None:
    result = cuda_visibility(list(X2_DEVICES), "1,GPU-7ef01d99")
    assert [d.gpu_index for d in result.devices] == [1]
    assert result.stopped_at == "GPU-7ef01d99"


# ---- MIG ------------------------------------------------------------------------------


def mig_gpus() -> tuple[list[DeviceInfo], dict[int, list[MigDevice]]]:
    """GPU 1 of the real pair, with two MIG devices: invented for the parser (no MIG data)."""
    devs = [X2_DEVICES[0], dataclasses.replace(X2_DEVICES[1], mig_mode=True)]
    migs = {
        1: [
            MigDevice(index=0, gpu_instance_id=2, compute_instance_id=0, uuid="MIG-aaaa1111-0000"),
            MigDevice(index=1, gpu_instance_id=9, compute_instance_id=0, uuid="MIG-bbbb2222-0000"),
        ]
    }
    return devs, migs


def test_mig_uuids_select_mig_devices() -> None:
    devs, migs = mig_gpus()
    result = cuda_visibility(devs, "MIG-bbbb,MIG-aaaa1111-0000", mig_devices=migs)
    assert [(d.cuda_index, d.gpu_index, d.mig.index if d.mig else None) for d in result.devices] == [
        (0, 1, 1),
        (1, 1, 0),
    ]
    assert any("MIG" in n for n in result.notes)


def test_legacy_mig_form_gpu_uuid_gi_ci() -> None:
    devs, migs = mig_gpus()
    value = f"MIG-{devs[1].uuid}/9/0"
    result = cuda_visibility(devs, value, mig_devices=migs)
    assert [(d.gpu_index, d.mig.gpu_instance_id if d.mig else None) for d in result.devices] == [(1, 9)]


# ---- CUDA_DEVICE_ORDER ----------------------------------------------------------------


def mixed_models() -> list[DeviceInfo]:
    """A smaller GPU on the lowest bus, two H200s after it (parser input, not GPU data)."""
    small = DeviceInfo(
        index=0,
        name="NVIDIA L4",
        bus_id="00000000:05:00.0",
        cuda_cores=7424,
        max_sm_clock=2040,
        uuid="GPU-l4",
    )
    big = [
        dataclasses.replace(X2_DEVICES[k], index=k + 1, bus_id=f"00000000:{0x40 + k:02X}:00.0")
        for k in range(2)
    ]
    return [small, *big]


def test_pci_bus_id_order_is_nvidia_smi_order() -> None:
    devs = mixed_models()
    assert cuda_order(devs, "PCI_BUS_ID") == ([0, 1, 2], True)
    result = cuda_visibility(devs, "0", "PCI_BUS_ID")
    assert [d.gpu_index for d in result.devices] == [0]


def test_fastest_first_with_mixed_models_is_an_estimate() -> None:
    devs = mixed_models()
    order, exact = cuda_order(devs, "FASTEST_FIRST")
    assert order == [1, 2, 0]  # the H200s (16896 cores x 1980 MHz) before the L4
    assert not exact
    result = cuda_visibility(devs, "0")  # CUDA index 0 = the first H200, not nvidia-smi's GPU 0
    assert [d.gpu_index for d in result.devices] == [1]
    assert any("PCI_BUS_ID" in n for n in result.notes)


def test_bus_order_not_index_order() -> None:
    # a recording's NVML indices need not follow the bus ids: the order follows the bus
    buses = ["00000000:30:00.0", "00000000:10:00.0", "0000:20:00.0"]
    devs = [dataclasses.replace(d, bus_id=b) for d, b in zip(gpus(3), buses, strict=True)]
    assert cuda_order(devs, "PCI_BUS_ID") == ([1, 2, 0], True)


@pytest.mark.parametrize("value", ["SLOWEST_FIRST", "pci_bus_id", ""])
def test_an_undocumented_order_is_taken_as_the_default_with_a_note(value: str) -> None:
    result = cuda_visibility(mixed_models(), None, value)
    assert result.order == "FASTEST_FIRST"
    assert bool(value) == any(repr(value) in n for n in result.notes)


def test_no_gpus() -> None:
    assert cuda_visibility([], None).devices == ()
    result = cuda_visibility([], "0")
    assert result.devices == ()
    assert result.reason is not None
    assert "beyond the 0 device(s)" in result.reason


def test_special_and_loose_values_are_noted() -> None:
    assert any("Slurm" in n for n in cuda_visibility(gpus(2), "NoDevFiles").notes)
    assert any("'0 1' is read as 0" in n for n in cuda_visibility(gpus(2), "0 1").notes)
