"""`gputui snapshot --json` and GPM (issue 24 item 15, issue 33 item 3): the whole document
measures one GPM window where GPM works (--gpm-window, 0.2 s by default), says why not where
it does not, and never prints every gpm.* figure null beside a null `gpm.unavailable` (the
schema's "measured").  A one-shot snapshot reads the slow values once on its own thread,
with the window open around those reads (it waits for the longer of the two, not both);
--watch keeps the slow thread and its bounded wait.

Live runs go through the real NvmlSource and the command's own selection and wait, on
ScriptedNvmlLib answering with the real H100 GPM recording (tests/fixtures/h100-gpm): NVML's
device values from its ticks and nvmlGpmMetricsGet's figures from one of its float32-matmul
windows.  The check on a real H100 is `bench/device.sh snapshot-gpm OUT`."""

from __future__ import annotations

import json
from typing import Any

import pynvml
import pytest
from conftest import H100_GPM, H200_X2, gputui
from gpm_support import FP32
from test_gpm import gpm_lib, raw_values, recorded_window
from test_nvml import Fail, RecordedNvml

from gputui.cli import _parse
from gputui.commands import snapshot as cmd
from gputui.export import snapshot as fmt
from gputui.export import snapshot_fields as fields_fmt
from gputui.telemetry.nvml import gpm as gpm_module
from gputui.telemetry.nvml.source import Nvml
from gputui.telemetry.recording import read_recording

GPM_FIELDS = [f.name for f in fields_fmt.GPM_FIELDS if f.name != "gpm.unavailable"]


def h100_lib(arch: int = pynvml.NVML_DEVICE_ARCH_HOPPER, **gpm_overrides: Any) -> Any:
    """The H100 recording's NVML answers plus GPM functions giving a float32-matmul window."""
    header, ticks = read_recording(H100_GPM)
    scripted = RecordedNvml(header, ticks[60:70], lost_gpu=-1, lost_from=99)
    lib = scripted.lib
    lib.nvmlDeviceGetArchitecture = lambda h: arch
    gpm = gpm_lib(raw_values(recorded_window(FP32)), **gpm_overrides)
    for name in dir(gpm):
        if name.startswith("nvmlGpm"):
            setattr(lib, name, getattr(gpm, name))
    return lib


def live_document(argv: list[str], lib: Any, **later: float) -> tuple[dict[str, Any], Any]:
    """What `gputui snapshot ARGV` prints live on `lib` (one-shot, or --watch's first
    document), and the source it read.  `later`: the command's constants to change after
    the source is made."""
    args = _parse(["snapshot", *argv])
    sel = cmd.select(args)
    source = cmd.open_live(sel, bool(args.processes), nvml=Nvml(lib=lib), one_shot=args.watch is None)
    saved = {name: getattr(cmd, name) for name in later}
    try:
        for name, value in later.items():
            setattr(cmd, name, value)
        if args.watch is None:
            info = cmd.open_one_shot(source, sel, args.gpm_window)
        else:
            info = source.open()
            cmd.wait_for_slow(source, sel)
        assert info.system.nvml_problem is None
        doc = fmt.document(info, source.sample(), sel.gpu_fields, sel.proc_fields, processes=args.processes)
    finally:
        for name, value in saved.items():
            setattr(cmd, name, value)
        source.close()
    return doc, source


@pytest.mark.parametrize("window", [None, 0.05, 0.3])
def test_the_whole_document_measures_one_gpm_window_on_a_hopper_gpu(window: float | None) -> None:
    """One window of the length asked for (the default without --gpm-window), measured
    around the slow reads on the command's own thread: no slow thread is started."""
    argv = ["--json"] if window is None else ["--json", "--gpm-window", str(window)]
    doc, source = live_document(argv, h100_lib())
    gpu = doc["gpus"][0]
    want = recorded_window(FP32)
    assert gpu["gpm.unavailable"] is None
    assert gpu["gpm.fp32_active"] == pytest.approx(want.fp32_active, abs=0.01)
    assert gpu["gpm.tensor_active"] == 0.0  # a measured 0, not null
    assert gpu["gpm.sm_active"] == pytest.approx(want.sm_active, abs=0.01)
    measured = source._slow[0].fields["gpm"].window  # the window NVML's figures are over
    assert measured >= (cmd.GPM_WINDOW_S if window is None else window)
    assert source._slow_thread is None and source.slow_passes == 2


def test_the_window_is_a_setting_within_bounds() -> None:
    assert _parse(["snapshot", "--json"]).gpm_window == cmd.GPM_WINDOW_S
    assert _parse(["snapshot", "--gpm-window", "1"]).gpm_window == 1.0
    for bad in ("0", "0.01", "11", "nan", "x"):
        r = gputui("snapshot", "--json", "--gpm-window", bad)
        assert r.returncode == 2 and "--gpm-window" in r.stderr and "Traceback" not in r.stderr


def test_watch_measures_over_its_slow_cadence() -> None:
    """--watch keeps the slow thread: its first document waits (bounded) for the window
    between its first two passes, WATCH_SLOW_S apart."""
    doc, source = live_document(["--json", "--watch", "5"], h100_lib(), WATCH_SLOW_S=0.2)
    assert doc["gpus"][0]["gpm.unavailable"] is None
    assert source._slow_thread is not None


def test_the_whole_document_does_not_wait_where_gpm_cannot_work() -> None:
    """An Ampere: NVML says no GPM support; one slow pass, no window to wait for, the reason."""
    lib = h100_lib(
        arch=pynvml.NVML_DEVICE_ARCH_AMPERE,
        nvmlGpmQueryDeviceSupport=type("S", (), {"isSupportedDevice": 0})(),
    )
    doc, source = live_document(["--json", "--gpm-window", "10"], lib)
    gpu = doc["gpus"][0]
    assert source.slow_passes == 1  # no second GPM sample, so no wait for one
    assert gpu["gpm.unavailable"] == "GPM needs a Hopper or newer GPU (this one is Ampere)"
    assert {gpu[name] for name in GPM_FIELDS} == {None}


def test_no_permission_is_said_not_null() -> None:
    lib = h100_lib(nvmlGpmQueryDeviceSupport=Fail(pynvml.NVML_ERROR_NO_PERMISSION))
    doc, _ = live_document(["--json"], lib)
    assert doc["gpus"][0]["gpm.unavailable"] == gpm_module.NO_PERMISSION


def test_a_window_not_closed_in_time_is_said_not_null(monkeypatch: pytest.MonkeyPatch) -> None:
    """The wait is bounded: where the second GPM sample comes later than the wait allows
    (here a slow cadence of a minute), gpm.* stay null with the reason, never null as if
    measured."""
    monkeypatch.setattr(cmd, "WATCH_SLOW_S", 60.0)  # the source's slow cadence
    doc, _ = live_document(["--json", "--watch", "5"], h100_lib(), WATCH_SLOW_S=0.2)
    gpu = doc["gpus"][0]
    assert {gpu[name] for name in GPM_FIELDS} == {None}
    assert gpu["gpm.unavailable"] == fields_fmt.NO_WINDOW_LIVE


def test_csv_without_gpm_fields_starts_no_slow_pass() -> None:
    """The CSV default (nvidia-smi's columns) needs nothing slow: still no wait."""
    args = _parse(["snapshot"])
    sel = cmd.select(args)
    assert not any(f.slow for f in sel.wanted)
    assert cmd.select(_parse(["snapshot", "--json"])).wanted  # the JSON default wants all


@pytest.mark.parametrize(("path", "tick"), [(H200_X2, 50), (H100_GPM, 1)])
def test_a_replay_without_a_window_says_so(path, tick) -> None:
    """A recording made without GPM, and the tick before the first window."""
    r = gputui("snapshot", "--replay", str(path), "--tick", str(tick), "--json")
    assert r.returncode == 0, r.stderr
    for gpu in json.loads(r.stdout)["gpus"]:
        assert {gpu[name] for name in GPM_FIELDS} == {None}
        assert gpu["gpm.unavailable"] == fields_fmt.NO_WINDOW_REPLAY
