"""CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER as CUDA reads them: `visible_devices` of
`gputui.rules.cuda_devices`, the one rule both the monitor (`telemetry/cuda_visible.py`) and
the diagnosis child use.

The expected results follow the CUDA Programming Guide ("CUDA Environment Variables": unset is
every device, empty is none, "2,1" enumerates 2 before 1, "0,2,-1,1" shows 0 and 2, UUID
prefixes, MIG UUIDs) and the rules PyTorch pins in its tests of
`torch.cuda._parse_visible_devices` (strtoul reading, a repeated device empties the list, an
index beyond the count ends it).  The inputs on which gputui's two former parsers disagreed
("0,2,0", "1gpu2", "+3") are pinned here once, and checked on both sides.
"""

from __future__ import annotations

import pytest
from diag_support import make_bare_venv, run_probe_checks

from gputui.rules.cuda_devices import device_order, visible_devices
from gputui.telemetry.cuda_visible import cuda_visibility
from gputui.telemetry.model import DeviceInfo


def ordinals(value: str | None, count: int | None = 8) -> list[int | None]:
    return [e.ordinal for e in visible_devices(value, count).entries]


def test_unset_is_every_device_and_empty_is_none() -> None:
    unset = visible_devices(None, 4)
    assert unset.form == "unset" and unset.unset and not unset.hides_everything
    for value in ("", " "):
        empty = visible_devices(value, 4)
        assert empty.form == "empty" and empty.entries == () and empty.reason


@pytest.mark.parametrize(
    ("value", "expected", "stopped_at"),
    [
        ("2,1", [2, 1], None),  # the guide: 2 is enumerated before 1
        ("0,2,-1,1", [0, 2], "-1"),  # the guide: an invalid index ends the list
        ("0,2,0", [], "0"),  # a repeated device: nothing is visible
        ("1gpu2", [1], None),  # strtoul: what follows the digits is ignored
        ("1gpu2,2ampere", [1, 2], None),
        ("+3", [3], None),  # a sign is allowed
        ("-0", [0], None),
        ("0, 1, 2, -1, 3", [0, 1, 2], " -1"),  # leading blanks allowed
        ("3 ,1", [3, 1], None),
        ("07", [7], None),
        ("one,two,3,4", [], "one"),  # no digits: the list ends before anything
        ("4,3,two,one", [4, 3], "two"),
        ("1,", [1], ""),  # a trailing comma is an empty entry: the end
        (",1", [], ""),
        ("  ,", [], "  "),
        ("0,GPU-7ef0", [0], "GPU-7ef0"),  # an index list takes no UUID
    ],
)
def test_index_lists(value: str, expected: list[int], stopped_at: str | None) -> None:
    seen = visible_devices(value, 8)
    assert [e.ordinal for e in seen.entries] == expected
    assert seen.stopped_at == stopped_at
    assert (seen.reason is None) == (stopped_at is None)


def test_entries_read_loosely_are_listed() -> None:
    assert visible_devices("0 1,2", 8).loose == ("'0 1' is read as 0",)
    assert visible_devices("1gpu2, +3,4", 8).loose == (
        "'1gpu2' is read as 1",
        "'+3' is read as 3",
    )
    assert visible_devices(" 0, 1", 8).loose == ()  # blanks around a number are plain


def test_a_repeat_after_the_end_of_the_list_does_not_count() -> None:
    # the list has already ended at -1: the second 0 is never read
    assert ordinals("0,-1,0") == [0]


def test_index_beyond_the_device_count_ends_the_list() -> None:
    seen = visible_devices("1, 5, 0", 2)  # PyTorch's test: one device visible
    assert [e.ordinal for e in seen.entries] == [1]
    assert seen.ignored == (" 0",)
    assert seen.reason is not None and "beyond the 2 device(s)" in seen.reason


def test_without_the_devices_only_the_form_is_checked() -> None:
    seen = visible_devices("5,9", None)
    assert [e.ordinal for e in seen.entries] == [5, 9] and not seen.checked
    assert visible_devices("GPU-ab,GPU-cd", 2).checked is False  # no UUIDs given


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("NoDevFiles", "Slurm"),  # Slurm's value for a step given no GPU
        ("-1", "hide every GPU"),
        ("all", "NVIDIA_VISIBLE_DEVICES"),
        ("none", "NVIDIA_VISIBLE_DEVICES"),
        ("void", "NVIDIA_VISIBLE_DEVICES"),
    ],
)
def test_special_values_mean_no_gpu_and_are_explained(value: str, needle: str) -> None:
    seen = visible_devices(value, 4)
    assert seen.entries == () and seen.hides_everything
    assert seen.special is not None and needle in seen.special


UUIDS = [
    "GPU-9942190a-aa31-4ff1-4aa9-c388d80f85f1",
    "GPU-9e8d35e3-a134-0fdd-0e01-23811fdbd293",
    "GPU-e429a63e-c61c-4795-b757-5132caeb8e70",
    "GPU-472ea263-58d7-410d-cc82-f7fdece5bd28",
]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("GPU-9e8d35e3", [1]),  # a unique prefix is enough
        ("GPU-e4,GPU-9e8d35e3", [2, 1]),
        ("GPU-123,GPU-9e8d35e3", []),  # an unknown UUID ends the list
        ("GPU-9e8d35e3,GPU-9,GPU-47", [1]),  # an ambiguous prefix ends it too
        ("GPU-9e8d35e3,GPU-47,GPU-9e8", []),  # the same GPU twice (two prefixes): nothing
        ("GPU-9e8d35e3,2", [1]),  # an index in a UUID list ends it
        (UUIDS[0], [0]),
    ],
)
def test_gpu_uuid_lists(value: str, expected: list[int]) -> None:
    seen = visible_devices(value, len(UUIDS), UUIDS)
    assert seen.form == "gpu-uuid"
    assert [UUIDS.index(e.uuid) for e in seen.entries if e.uuid] == expected


def test_mig_uuid_lists_both_forms() -> None:
    migs = ["MIG-aaaa1111-0000", "MIG-bbbb2222-0000", "MIG-GPU-e429a63e-c61c-4795-b757-5132caeb8e70/9/0"]
    seen = visible_devices("MIG-bbbb,MIG-GPU-e429a63e-c61c-4795-b757-5132caeb8e70/9/0", 4, UUIDS, migs)
    assert seen.form == "mig-uuid"
    assert [e.uuid for e in seen.entries] == [migs[1], migs[2]]
    assert visible_devices("MIG-aaaa1111,GPU-9e8d", 4, UUIDS, migs).stopped_at == "GPU-9e8d"
    assert visible_devices("MIG-cccc", 4, UUIDS, migs).entries == ()


@pytest.mark.parametrize(
    ("value", "order", "noted"),
    [
        (None, "FASTEST_FIRST", False),
        ("PCI_BUS_ID", "PCI_BUS_ID", False),
        ("pci_bus_id", "FASTEST_FIRST", True),
    ],
)
def test_device_order(value: str | None, order: str, noted: bool) -> None:
    got, note = device_order(value)
    assert got == order and (note is not None) == noted


# ---- both sides apply this one rule ----------------------------------------------------------


def _gpus(n: int) -> list[DeviceInfo]:
    return [DeviceInfo(index=i, name="NVIDIA H200", uuid=f"GPU-{i:08x}-aaaa") for i in range(n)]


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_bare_venv(tmp_path_factory.mktemp("bare") / "venv")


@pytest.mark.parametrize("value", ["0,2,0", "1gpu2", "+3", "0,2,-1,1", "NoDevFiles", "-1"])
def test_the_monitor_and_the_diagnosis_child_agree(value: str, bare_python: str) -> None:
    app = cuda_visibility(_gpus(8), value)
    assert [d.gpu_index for d in app.devices] == ordinals(value, 8)
    # the diagnosis child, for real, against the GPUs it finds (none without a driver: then
    # only the form is checked)
    vis = run_probe_checks(bare_python, {"CUDA_VISIBLE_DEVICES": value})["visibility.env"]
    count = vis["evidence"]["nvml_device_count"]
    seen = visible_devices(value, count)
    assert vis["evidence"]["visible"] == [e.ordinal for e in seen.entries]
    assert vis["evidence"]["repeated"] == seen.repeated
    want = "FAIL" if not seen.entries else ("WARN" if seen.stopped_at is not None or seen.loose else "PASS")
    assert vis["status"] == want
