"""The rules gputui and its diagnosis children share (gputui/rules/), each tested once:
versions, the NVLink-multicast switches, the slowdown reasons, UTC timestamps.  (The
CUDA_VISIBLE_DEVICES rule has its own file: test_rules_cuda_visible.py.)"""

from __future__ import annotations

import datetime as dt
import importlib.util
import sys

import pytest

from gputui.diag import PROBE
from gputui.diag.childenv import child_env
from gputui.diag.verdicts import Diagnosis
from gputui.rules import clocks, cuda_devices, multicast, timestamps, versions
from gputui.telemetry.model import CLOCK_EVENT_SLOWDOWN_MASK, decode_clock_events


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12.8", (12, 8)),
        ("13.0", (13, 0)),
        ("13", (13, 0)),  # a bare major version
        ("12.8.1", (12, 8)),
        ("2.13.0+cpu", (2, 13)),
        ("580.159.04", (580, 159)),
        (" 12.4", (12, 4)),
        ("", None),
        (None, None),
        ("cu128", None),
        ("unknown", None),
    ],
)
def test_version_tuple(text: str | None, expected: tuple[int, int] | None) -> None:
    assert versions.version_tuple(text) == expected


def test_multicast_is_off_in_every_child() -> None:
    assert multicast.MULTICAST_OFF == {
        "NCCL_NVLS_ENABLE": "0",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
        "NVSHMEM_DISABLE_NVLS": "1",
    }
    env, changes = child_env(sys.executable, base={"NCCL_NVLS_ENABLE": "1"})
    for name, value in multicast.MULTICAST_OFF.items():
        assert env[name] == value
    assert changes["NCCL_NVLS_ENABLE"] == "0"


def test_slowdown_reasons() -> None:
    # NVML's bits: HW slowdown 0x8, SW thermal 0x20, HW thermal 0x40, HW power brake 0x80
    assert clocks.SLOWDOWN_MASK == 0x008 | 0x020 | 0x040 | 0x080
    assert CLOCK_EVENT_SLOWDOWN_MASK == clocks.SLOWDOWN_MASK  # the monitor's colour uses the rule
    assert clocks.slowdown_names(0x001 | 0x004 | 0x040) == ["HW thermal"]  # idle, SW power cap: not slow
    assert clocks.slowdown_names(None) == []
    assert clocks.slowdown_names(0xFF) == ["HW slowdown", "SW thermal", "HW thermal", "HW power brake"]
    assert len(decode_clock_events(clocks.SLOWDOWN_MASK)) == 4


def test_iso_utc_one_suffix() -> None:
    assert timestamps.iso_utc(0) == "1970-01-01T00:00:00+00:00"
    text = timestamps.iso_utc(1795355836.9)
    assert text is not None and text.endswith("+00:00")
    parsed = dt.datetime.fromisoformat(text)  # readable on every Python version
    assert parsed.tzinfo is not None and parsed.timestamp() == 1795355836
    assert Diagnosis().to_json()["created"].endswith("+00:00")


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 1e18, -1e18])
def test_iso_utc_of_an_impossible_time_is_none(value: float) -> None:
    assert timestamps.iso_utc(value) is None


def test_the_children_load_the_same_file() -> None:
    """The probe package loads each of gputui/rules/'s files it uses by path: the very files
    the app imports."""
    spec = importlib.util.spec_from_file_location(
        "_gputui_probe_t", PROBE / "__init__.py", submodule_search_locations=[str(PROBE)]
    )
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(package)
    for module in (cuda_devices, versions, multicast, clocks):
        loaded = getattr(package, module.__name__.rpartition(".")[2])
        assert loaded.__file__ == module.__file__
    assert package.cuda_devices.visible_devices("0,2,0", 8).repeated
    assert package.lifeline.PARENT_VAR == "GPUTUI_PARENT_PID"
