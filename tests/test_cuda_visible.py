"""CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER, parsed as CUDA does.

The expected results follow the CUDA Programming Guide's examples and the rules PyTorch pins
in its own tests of `torch.cuda._parse_visible_devices` / `_transform_uuid_to_ordinals`
(test/test_cuda_nvml_based_avail.py): the same inputs, the same visible devices.
"""

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


def visible(value: str | None, devices: list[DeviceInfo] | None = None, **kw: object) -> list[int]:
    result = cuda_visibility(devices if devices is not None else gpus(8), value, **kw)  # type: ignore[arg-type]
    return [d.gpu_index for d in result.devices]


# ---- ordinals -------------------------------------------------------------------------


def test_unset_means_every_gpu_in_cuda_order() -> None:
    result = cuda_visibility(gpus(4), None)
    assert [(d.cuda_index, d.gpu_index) for d in result.devices] == [(0, 0), (1, 1), (2, 2), (3, 3)]
    assert result.order == "FASTEST_FIRST"
    assert result.order_exact  # identical GPUs: fastest-first is a tie, broken by PCI bus id
    assert result.reason is None


@pytest.mark.parametrize("value", ["", " ", "  ,"])
def test_set_but_empty_means_no_gpu(value: str) -> None:
    result = cuda_visibility(gpus(4), value)
    assert result.devices == ()
    assert result.reason is not None


def test_listed_order_is_the_cuda_order() -> None:
    # the guide: "2,1 causes device 0 to be invisible and device 2 to be enumerated before device 1"
    result = cuda_visibility(gpus(3), "2,1")
    assert [(d.cuda_index, d.gpu_index, d.entry) for d in result.devices] == [(0, 2, "2"), (1, 1, "1")]
    assert result.cuda_index_of(2) == 0
    assert result.cuda_index_of(0) is None


def test_invalid_index_ends_the_list() -> None:
    # the guide: "0,2,-1,1 causes devices 0 and 2 to be visible and device 1 to be invisible"
    result = cuda_visibility(gpus(3), "0,2,-1,1")
    assert [d.gpu_index for d in result.devices] == [0, 2]
    assert result.stopped_at == "-1"
    assert result.reason is not None
    assert "negative" in result.reason


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1gpu2,2ampere", [1, 2]),  # strtoul: what follows the digits is ignored
        ("0, 1, 2, -1, 3", [0, 1, 2]),  # blanks allowed; a negative number ends the list
        ("0, 1, 2, 1", []),  # the same device twice: nothing is visible
        ("2, +3, -0, 5", [2, 3, 0, 5]),  # signs: +3 is 3, -0 is 0
        ("one,two,3,4", []),  # no digits first: nothing
        ("4,3,two,one", [4, 3]),  # no digits later: ends the list there
        ("1,", [1]),  # a trailing comma is an empty entry: the end
        (",1", []),
        ("07", [7]),
        ("3 ,1", [3, 1]),
    ],
)
def test_ordinal_rules_as_pytorch_pins_them(value: str, expected: list[int]) -> None:
    assert visible(value) == expected


def test_index_beyond_the_device_count_ends_the_list() -> None:
    # PyTorch's test: two GPUs, "1, 5, 0" -> one visible device
    result = cuda_visibility(gpus(2), "1, 5, 0")
    assert [d.gpu_index for d in result.devices] == [1]
    assert result.reason is not None
    assert "beyond the 2 GPU(s)" in result.reason


def test_duplicate_reason_says_nothing_is_visible() -> None:
    result = cuda_visibility(gpus(4), "0,1,0")
    assert result.devices == ()
    assert result.reason is not None
    assert "already listed" in result.reason


# ---- UUIDs ----------------------------------------------------------------------------

PYTORCH_UUIDS = [
    "GPU-9942190a-aa31-4ff1-4aa9-c388d80f85f1",
    "GPU-9e8d35e3-a134-0fdd-0e01-23811fdbd293",
    "GPU-e429a63e-c61c-4795-b757-5132caeb8e70",
    "GPU-eee1dfbc-0a0f-6ad8-5ff6-dc942a8b9d98",
    "GPU-bbcd6503-5150-4e92-c266-97cc4390d04e",
    "GPU-472ea263-58d7-410d-cc82-f7fdece5bd28",
    "GPU-e56257c4-947f-6a5b-7ec9-0f45567ccf4e",
    "GPU-1c20e77d-1c1a-d9ed-fe37-18b8466a78ad",
]


def uuid_gpus() -> list[DeviceInfo]:
    return [dataclasses.replace(d, uuid=u) for d, u in zip(gpus(8), PYTORCH_UUIDS, strict=True)]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("GPU-9e8d35e3", [1]),
        ("GPU-e4,GPU-9e8d35e3", [2, 1]),
        ("GPU-9e8d35e3,GPU-1,GPU-47", [1, 7, 5]),
        ("GPU-123,GPU-9e8d35e3", []),  # the first unknown UUID ends the list
        ("GPU-9e8d35e3,GPU-123,GPU-47", [1]),
        ("GPU-9e8d35e3,GPU-e,GPU-47", [1]),  # an ambiguous prefix ends it too
        ("GPU-9e8d35e3,GPU-47,GPU-9e8", []),  # the same GPU twice: nothing
        ("GPU-9e8d35e3,2", [1]),  # an index in a UUID list ends it
        ("GPU-9942190a-aa31-4ff1-4aa9-c388d80f85f1", [0]),  # a whole UUID
    ],
)
def test_uuid_prefixes_as_pytorch_resolves_them(value: str, expected: list[int]) -> None:
    assert visible(value, uuid_gpus()) == expected


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


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("MIG-cccc", []),  # unknown
        ("MIG-aaaa1111,MIG-aaaa", []),  # the same device twice
        ("MIG-aaaa1111,GPU-7ef0", [1]),  # a GPU UUID in a MIG list ends it
        ("MIG-", []),  # matches both: ambiguous
    ],
)
def test_mig_list_rules(value: str, expected: list[int]) -> None:
    devs, migs = mig_gpus()
    assert visible(value, devs, mig_devices=migs) == expected


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
    assert "beyond the 0 GPU(s)" in result.reason
