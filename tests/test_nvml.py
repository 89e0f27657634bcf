"""The NVML layer: the real failure on a machine without the driver, what the failures
mean, CPU lists, and `Nvml.query`'s error handling.

`ScriptedNvmlLib` below stands in for the pynvml module to exercise our error handling:
it is not a GPU.  It raises the real `pynvml.NVMLError` subclasses for real NVML return
codes, and where a value has to come back it returns what the real 2x H200 recording holds.
"""

from __future__ import annotations

import ctypes
import os
import queue
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import psutil
import pynvml
import pytest

from gputui.telemetry.model import GpuSample, MachineInfo, Snapshot
from gputui.telemetry.nvml.source import GpuLost, Nvml, NvmlSource, cpulist, explain_nvml_failure
from gputui.telemetry.poller import Poller
from gputui.telemetry.recording import RecordingHeader


def _nvml_library_loads() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


no_driver = pytest.mark.skipif(
    _nvml_library_loads(), reason="libnvidia-ml.so.1 is installed here: these tests are about its absence"
)


# --------------------------------------------------------------------------------------
# The real thing, on a machine without the NVIDIA driver
# --------------------------------------------------------------------------------------


@no_driver
def test_open_without_the_driver_explains_why_and_still_samples_the_host() -> None:
    source = NvmlSource()
    try:
        info = source.open()
        problem = info.system.nvml_problem
        assert problem is not None
        assert problem.code == 12
        assert "NVML Shared Library Not Found" in problem.error
        assert "libnvidia-ml.so" in problem.meaning
        assert any("--gpus all" in a for a in problem.advice)
        assert info.system.hostname == socket.gethostname()
        assert info.system.device_count == 0
        assert info.devices == ()
        assert info.system.driver_version is None
        assert source.read_topology() is None
        assert source.notes() == []

        first = source.sample()
        time.sleep(0.25)  # CPU % needs readings 0.2 s apart
        second = source.sample()
        assert (first.seq, second.seq) == (1, 2)
        assert second.timestamp >= first.timestamp
        for snap in (first, second):
            assert snap.gpus == ()
            assert snap.processes == ()
            assert snap.host is not None
            assert snap.host.mem_total == psutil.virtual_memory().total
            assert snap.sample_cost is not None
        assert second.host is not None and len(second.host.per_cpu) == psutil.cpu_count()
    finally:
        source.close()


@no_driver
def test_poller_on_the_real_source_without_the_driver() -> None:
    infos: list[MachineInfo] = []
    errors: list[BaseException] = []
    snapshots: queue.Queue[Snapshot] = queue.Queue()
    poller = Poller(NvmlSource(), 0.1, snapshots.put, infos.append, errors.append)
    poller.start()
    try:
        first = snapshots.get(timeout=10)
    finally:
        poller.stop(timeout=10)
    assert errors == []
    problem = infos[0].system.nvml_problem
    assert problem is not None
    assert problem.code == 12
    assert first.gpus == ()
    assert first.host is not None


# --------------------------------------------------------------------------------------
# What NVML initialisation failures mean (real pynvml exception objects)
# --------------------------------------------------------------------------------------


def test_explain_driver_library_mismatch() -> None:
    exc = pynvml.NVMLError(pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH)
    assert type(exc).__name__ == "NVMLError_LibRmVersionMismatch"
    problem = explain_nvml_failure(exc)
    assert problem.code == 18
    assert problem.error == str(exc)
    assert "version mismatch" in problem.error
    assert "rebooted" in problem.meaning
    assert problem.advice[0].startswith("Reboot")


def test_explain_driver_not_loaded() -> None:
    problem = explain_nvml_failure(pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED))
    assert problem.code == 9
    assert problem.error == "Driver Not Loaded"
    assert "kernel driver is not loaded" in problem.meaning
    assert any("modprobe" in a for a in problem.advice)


def test_explain_no_permission() -> None:
    problem = explain_nvml_failure(pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION))
    assert problem.code == 4
    assert problem.error == "Insufficient Permissions"
    assert "/dev/nvidia" in problem.meaning
    assert any("ls -l /dev/nvidia*" in a for a in problem.advice)


def test_explain_library_not_found() -> None:
    problem = explain_nvml_failure(pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND))
    assert problem.code == 12
    assert problem.error == "NVML Shared Library Not Found"
    assert "no NVIDIA driver" in problem.meaning


def test_explain_missing_bindings() -> None:
    try:
        import gputui_no_such_module  # type: ignore[import-not-found]  # noqa: F401
    except ImportError as exc:
        problem = explain_nvml_failure(exc)
    assert problem.code is None
    assert "gputui_no_such_module" in problem.error
    assert "nvidia-ml-py" in problem.meaning
    assert problem.advice == ("pip install nvidia-ml-py",)


def test_explain_anything_else() -> None:
    problem = explain_nvml_failure(pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN))
    assert problem.code == 999
    assert problem.error == "Unknown Error"
    assert problem.meaning == "NVML could not be initialised."
    problem = explain_nvml_failure(OSError("odd"))
    assert problem.code is None
    assert problem.error == "odd"
    assert explain_nvml_failure(RuntimeError()).error == "RuntimeError"


# --------------------------------------------------------------------------------------
# CPU affinity masks
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ([0xFFFF], "0-15"),
        ([0xFFFFFFFF], "0-31"),  # what the H200 machines report (DeviceInfo.cpu_affinity)
        ([0x0F0F], "0-3,8-11"),
        ([0b10101], "0,2,4"),
        ([0b1101_0000_0110], "1-2,8,10-11"),
        ([0x1], "0"),
        ([1 << 63], "63"),
        ([0, 1], "64"),
        ([1 << 63, 1], "63-64"),  # a range across two words
        ([0xFFFFFFFFFFFFFFFF, 0xFFFF], "0-79"),
        ([0xFFFF, 0xFFFF0000], "0-15,80-95"),
        ([0, 0, 0xF], "128-131"),
        ([0], None),
        ([], None),
        (None, None),
    ],
)
def test_cpulist(words: list[int] | None, expected: str | None) -> None:
    assert cpulist(words) == expected


def test_cpulist_32_bit_words_and_ctypes_arrays() -> None:
    assert cpulist([0xFFFFFFFF, 0xFFFFFFFF], bits_per_word=32) == "0-63"
    assert cpulist([0, 0x3], bits_per_word=32) == "32-33"
    # pynvml hands back a ctypes array of c_ulong
    words = (ctypes.c_ulong * 2)(0xFF, 0xFF00)
    assert cpulist(words) == "0-7,72-79"


def test_cpulist_matches_the_recorded_affinity(x2_recording: tuple[RecordingHeader, list[Snapshot]]) -> None:
    header, _ = x2_recording
    assert [d.cpu_affinity for d in header.machine.devices] == [cpulist([(1 << 32) - 1])] * 2


# --------------------------------------------------------------------------------------
# Nvml.query's error handling, through a scripted stand-in for pynvml
# --------------------------------------------------------------------------------------


class Fail:
    """Make a scripted function raise the real pynvml exception for this NVML return code."""

    def __init__(self, code: int) -> None:
        self.code = code


class ScriptedNvmlLib:
    """A stand-in for the pynvml module, to test our error handling (not a GPU).

    Only the functions given exist (anything else is "not in these bindings", as with old
    nvidia-ml-py); each returns its scripted value, or calls its scripted function, and a
    `Fail(code)` result raises the real `pynvml.NVMLError` for that code.  The `NVML_*`
    constants and the `NVMLError` class are pynvml's own.  Calls are counted per
    (function, first argument) so a test can see what was asked again.
    """

    NVMLError = pynvml.NVMLError

    def __init__(self, **functions: Any) -> None:
        self.calls: Counter[tuple[str, Any]] = Counter()
        for name, outcome in functions.items():
            setattr(self, name, self._scripted(name, outcome))

    def _scripted(self, name: str, outcome: Any) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            self.calls[(name, args[0] if args else None)] += 1
            result = outcome(*args) if callable(outcome) else outcome
            if isinstance(result, Fail):
                raise pynvml.NVMLError(result.code)
            return result

        return call

    def __getattr__(self, name: str) -> Any:
        if name.startswith("NVML_"):
            return getattr(pynvml, name)
        raise AttributeError(name)


def test_not_supported_is_none_and_not_asked_again_for_that_device() -> None:
    lib = ScriptedNvmlLib(nvmlDeviceGetFanSpeed=Fail(pynvml.NVML_ERROR_NOT_SUPPORTED))
    nv = Nvml(lib=lib)
    for _ in range(3):
        assert nv.query("nvmlDeviceGetFanSpeed", "h0", device=0) is None
    assert lib.calls[("nvmlDeviceGetFanSpeed", "h0")] == 1
    assert nv.query("nvmlDeviceGetFanSpeed", "h1", device=1) is None
    assert nv.query("nvmlDeviceGetFanSpeed", "h1", device=1) is None
    assert lib.calls[("nvmlDeviceGetFanSpeed", "h1")] == 1  # the other device is asked, once
    assert nv.notes == []  # not supported is normal, not news


def test_not_supported_is_remembered_per_integer_argument() -> None:
    def clock(handle: str, kind: int) -> Any:
        return Fail(pynvml.NVML_ERROR_NOT_SUPPORTED) if kind == pynvml.NVML_CLOCK_MEM else 1980

    lib = ScriptedNvmlLib(nvmlDeviceGetClockInfo=clock)
    nv = Nvml(lib=lib)
    for _ in range(3):
        assert nv.query("nvmlDeviceGetClockInfo", "h0", pynvml.NVML_CLOCK_MEM, device=0) is None
        assert nv.query("nvmlDeviceGetClockInfo", "h0", pynvml.NVML_CLOCK_SM, device=0) == 1980
    assert lib.calls[("nvmlDeviceGetClockInfo", "h0")] == 1 + 3  # MEM once, SM every time


def test_no_permission_is_treated_as_not_supported() -> None:
    lib = ScriptedNvmlLib(nvmlDeviceGetSerial=Fail(pynvml.NVML_ERROR_NO_PERMISSION))
    nv = Nvml(lib=lib)
    assert nv.query("nvmlDeviceGetSerial", "h0", device=0) is None
    assert nv.query("nvmlDeviceGetSerial", "h0", device=0) is None
    assert lib.calls[("nvmlDeviceGetSerial", "h0")] == 1
    assert nv.notes == []


def test_function_not_found_in_the_driver_is_noted_once() -> None:
    lib = ScriptedNvmlLib(nvmlDeviceGetNumGpuCores=Fail(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND))
    nv = Nvml(lib=lib)
    for handle, device in [("h0", 0), ("h1", 1), ("h0", 0), ("h1", 1)]:
        assert nv.query("nvmlDeviceGetNumGpuCores", handle, device=device) is None
    assert nv.notes == ["nvmlDeviceGetNumGpuCores: absent from this driver"]
    assert sum(lib.calls.values()) == 1  # never asked again, for any device


def test_function_missing_from_the_bindings_is_noted_once() -> None:
    nv = Nvml(lib=ScriptedNvmlLib())
    for device in (0, 1, 0, 1, -1):
        assert nv.query("nvmlDeviceGetSomethingNew", f"h{device}", device=device) is None
    assert nv.notes == ["nvmlDeviceGetSomethingNew: not in these nvidia-ml-py bindings"]


@pytest.mark.parametrize("code", [pynvml.NVML_ERROR_GPU_IS_LOST, pynvml.NVML_ERROR_GPU_NOT_FOUND])
def test_gpu_lost_raises_with_the_index(code: int) -> None:
    nv = Nvml(lib=ScriptedNvmlLib(nvmlDeviceGetTemperature=Fail(code)))
    with pytest.raises(GpuLost) as info:
        nv.query("nvmlDeviceGetTemperature", "h1", 0, device=1)
    assert info.value.index == 1
    assert str(info.value) == "GPU 1 is lost"
    assert isinstance(info.value.__cause__, pynvml.NVMLError)
    assert info.value.__cause__.value == code
    # not cached: the caller decides what a lost GPU means
    with pytest.raises(GpuLost):
        nv.query("nvmlDeviceGetTemperature", "h1", 0, device=1)


def test_gpu_lost_without_a_device_is_just_noted() -> None:
    nv = Nvml(lib=ScriptedNvmlLib(nvmlDeviceGetCount=Fail(pynvml.NVML_ERROR_GPU_IS_LOST)))
    assert nv.query("nvmlDeviceGetCount") is None
    assert nv.notes == ["nvmlDeviceGetCount: GPU is lost"]


@pytest.mark.parametrize("code", [pynvml.NVML_ERROR_NO_DATA, pynvml.NVML_ERROR_NOT_FOUND])
def test_no_data_and_not_found_are_none_without_a_note_and_asked_again(code: int) -> None:
    lib = ScriptedNvmlLib(nvmlDeviceGetProcessUtilization=Fail(code))
    nv = Nvml(lib=lib)
    for _ in range(3):
        assert nv.query("nvmlDeviceGetProcessUtilization", "h0", 123, device=0) is None
    assert lib.calls[("nvmlDeviceGetProcessUtilization", "h0")] == 3
    assert nv.notes == []


def test_other_errors_are_noted_once_per_message_and_asked_again() -> None:
    outcomes = iter([Fail(pynvml.NVML_ERROR_UNKNOWN)] * 3 + [Fail(pynvml.NVML_ERROR_TIMEOUT), 123456])
    lib = ScriptedNvmlLib(nvmlDeviceGetPowerUsage=lambda h: next(outcomes))
    nv = Nvml(lib=lib)
    results = [nv.query("nvmlDeviceGetPowerUsage", "h0", device=0) for _ in range(5)]
    assert results == [None, None, None, None, 123456]
    assert nv.notes == ["nvmlDeviceGetPowerUsage: Unknown Error", "nvmlDeviceGetPowerUsage: Timeout"]
    assert lib.calls[("nvmlDeviceGetPowerUsage", "h0")] == 5


def test_init_and_shutdown_go_to_the_library() -> None:
    lib = ScriptedNvmlLib(nvmlInit=None, nvmlShutdown=Fail(pynvml.NVML_ERROR_UNINITIALIZED))
    nv = Nvml(lib=lib)
    nv.init()
    nv.shutdown()  # a failing shutdown is logged, not raised
    assert lib.calls[("nvmlInit", None)] == 1
    assert lib.calls[("nvmlShutdown", None)] == 1


# --------------------------------------------------------------------------------------
# NvmlSource on the stand-in: one GPU falls off the bus, the other goes on
# --------------------------------------------------------------------------------------


class RecordedNvml:
    """Scripts a ScriptedNvmlLib to answer with the real 2x H200 recording, tick by tick,
    and to report GPU_IS_LOST for one GPU from a given tick on."""

    def __init__(self, header: RecordingHeader, ticks: list[Snapshot], lost_gpu: int, lost_from: int) -> None:
        self.header = header
        self.ticks = ticks
        self.tick = 0
        self.lost_gpu = lost_gpu
        self.lost_from = lost_from
        devices = header.machine.devices
        clocks = {
            pynvml.NVML_CLOCK_SM: "sm_clock",
            pynvml.NVML_CLOCK_MEM: "mem_clock",
            pynvml.NVML_CLOCK_GRAPHICS: "graphics_clock",
            pynvml.NVML_CLOCK_VIDEO: "video_clock",
        }
        system = header.machine.system
        assert system.cuda_driver_version == "13.0"
        self.lib = ScriptedNvmlLib(
            nvmlInit=None,
            nvmlShutdown=None,
            nvmlSystemGetDriverVersion=system.driver_version,
            nvmlSystemGetNVMLVersion=system.nvml_version,
            nvmlSystemGetCudaDriverVersion=13000,
            nvmlDeviceGetCount=len(devices),
            nvmlDeviceGetHandleByIndex=lambda i: f"handle-{i}",
            nvmlDeviceGetName=lambda h: devices[self._index(h)].name,
            nvmlDeviceGetUUID=lambda h: devices[self._index(h)].uuid,
            nvmlDeviceGetUtilizationRates=lambda h: self._value(
                h, lambda g: SimpleNamespace(gpu=g.gpu_util, memory=g.mem_util)
            ),
            nvmlDeviceGetMemoryInfo=lambda h, *version: self._value(
                h, lambda g: SimpleNamespace(used=g.mem_used, free=g.mem_free, reserved=g.mem_reserved)
            ),
            nvmlDeviceGetTemperature=lambda h, sensor: self._value(h, lambda g: g.temperature),
            nvmlDeviceGetPowerUsage=lambda h: self._value(h, lambda g: round(g.power_draw * 1000)),
            nvmlDeviceGetClockInfo=lambda h, kind: self._value(h, lambda g: getattr(g, clocks[kind])),
            nvmlDeviceGetPerformanceState=lambda h: self._value(h, lambda g: g.pstate),
        )
        self.lib.nvmlMemory_v2 = object()  # type: ignore[attr-defined]  # ask for v2, as on the real driver

    @staticmethod
    def _index(handle: str) -> int:
        return int(handle.rsplit("-", 1)[1])

    def _value(self, handle: str, read: Callable[[GpuSample], Any]) -> Any:
        i = self._index(handle)
        if i == self.lost_gpu and self.tick >= self.lost_from:
            return Fail(pynvml.NVML_ERROR_GPU_IS_LOST)
        return read(self.ticks[self.tick].gpus[i])


@pytest.fixture
def recorded_source(
    x2_recording: tuple[RecordingHeader, list[Snapshot]],
) -> Iterator[tuple[NvmlSource, RecordedNvml]]:
    header, ticks = x2_recording
    scripted = RecordedNvml(header, ticks[55:60], lost_gpu=1, lost_from=2)  # a busy stretch
    source = NvmlSource(slow_interval=60.0, nvml=Nvml(lib=scripted.lib))
    yield source, scripted
    source.close()


PASSED_THROUGH = (
    "gpu_util",
    "mem_util",
    "mem_used",
    "mem_free",
    "mem_reserved",
    "temperature",
    "power_draw",
    "sm_clock",
    "mem_clock",
    "graphics_clock",
    "pstate",
)


def test_a_lost_gpu_does_not_take_the_other_one_down(
    recorded_source: tuple[NvmlSource, RecordedNvml],
) -> None:
    source, scripted = recorded_source
    info = source.open()
    assert info.system.nvml_problem is None
    assert info.system.device_count == 2
    assert info.system.cuda_driver_version == "13.0"
    assert [d.uuid for d in info.devices] == [d.uuid for d in scripted.header.machine.devices]

    def calls_to_gpu1() -> int:
        return sum(n for (_, handle), n in scripted.lib.calls.items() if handle == "handle-1")

    calls_when_lost = 0
    for tick in range(5):
        scripted.tick = tick
        snap = source.sample()
        assert snap.seq == tick + 1
        recorded = scripted.ticks[tick]
        gpu0, gpu1 = snap.gpus
        for name in PASSED_THROUGH:
            assert getattr(gpu0, name) == getattr(recorded.gpus[0], name), (tick, name)
        assert gpu0.lost is False
        if tick < scripted.lost_from:
            assert gpu1.lost is False
            assert gpu1.temperature == recorded.gpus[1].temperature
            assert gpu1.power_draw == recorded.gpus[1].power_draw
        else:
            assert gpu1 == GpuSample(index=1, lost=True)  # every value None
        if tick == scripted.lost_from:
            calls_when_lost = calls_to_gpu1()
    # once lost, the GPU is not asked again
    assert calls_when_lost > 0
    assert calls_to_gpu1() == calls_when_lost
    assert all("GPU is lost" not in note for note in source.notes())


def test_open_on_the_stand_in_notes_each_missing_function_once(
    recorded_source: tuple[NvmlSource, RecordedNvml],
) -> None:
    source, _ = recorded_source
    source.open()
    source.sample()
    notes = source.notes()
    assert "nvmlDeviceGetSerial: not in these nvidia-ml-py bindings" in notes
    assert len(notes) == len(set(notes))


def test_open_reports_an_init_failure_through_the_problem() -> None:
    lib = ScriptedNvmlLib(nvmlInit=Fail(pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH))
    source = NvmlSource(nvml=Nvml(lib=lib))
    try:
        info = source.open()
        assert info.system.nvml_problem is not None
        assert info.system.nvml_problem.code == 18
        assert info.devices == ()
        assert source.sample().gpus == ()
    finally:
        source.close()


def test_prefetch_opens_in_the_background_and_open_returns_its_result():
    src = NvmlSource()
    src.prefetch()
    info = src.open()  # waits for the prefetch thread
    if _nvml_library_loads():  # a GPU machine: the prefetch opened the real driver
        assert info.system.nvml_problem is None and info.system.device_count == len(info.devices) >= 1
    else:
        assert info.system.nvml_problem is not None
        assert info.system.nvml_problem.code == 12
    assert src.open() is info  # opening again does not re-initialise
    src.close()


def test_a_one_shot_source_starts_no_slow_thread_and_skips_psutil(
    x2_recording: tuple[RecordingHeader, list[Snapshot]],
) -> None:
    """`gputui snapshot` opens NVML with slow=False, enrich_processes=False: no thread whose
    20 ms PCIe calls hold NVML, and processes as NVML lists them (no psutil facts)."""
    header, ticks = x2_recording
    scripted = RecordedNvml(header, ticks[55:60], lost_gpu=-1, lost_from=99)  # nothing lost
    source = NvmlSource(nvml=Nvml(lib=scripted.lib), slow=False, enrich_processes=False)
    try:
        source.open()
        assert source._slow_thread is None
        snap = source.sample()
        assert source._procs is None  # psutil's process inspector was never made
        assert [g.pcie_rx for g in snap.gpus] == [None, None]  # slow-cadence values: not read
        assert [g.gpu_util for g in snap.gpus] == [g.gpu_util for g in ticks[55].gpus]
    finally:
        source.close()


def static_lib() -> ScriptedNvmlLib:
    """One GPU whose static facts are scripted (values as an H200 reports them)."""
    return ScriptedNvmlLib(
        nvmlInit=None,
        nvmlShutdown=None,
        nvmlDeviceGetCount=1,
        nvmlDeviceGetHandleByIndex=lambda i: f"handle-{i}",
        nvmlDeviceGetName="NVIDIA H200",
        nvmlDeviceGetUUID="GPU-1",
        nvmlDeviceGetPciInfo_v3=SimpleNamespace(busId=b"00000000:00:06.0"),
        nvmlDeviceGetMaxClockInfo=lambda h, kind: {pynvml.NVML_CLOCK_SM: 1980}.get(kind, 3201),
        nvmlDeviceGetPowerManagementLimitConstraints=(200_000, 700_000),
        nvmlDeviceGetMigMode=(0, 1),
        nvmlDeviceGetMemoryAffinity=lambda h, n, scope: [1],
        nvmlDeviceGetSerial="1654123456789",
        nvmlDeviceGetCurrentEccMode=1,
        nvmlDeviceGetArchitecture=9,
        nvmlDeviceGetComputeMode=0,
    )


def test_static_facts_can_be_limited_to_the_ones_asked_for() -> None:
    """A one-shot reader names the static facts it prints; NVML is asked for those alone (the
    NUMA affinity call alone costs 12 ms on an H200) and each shared call once."""
    lib = static_lib()
    source = NvmlSource(
        nvml=Nvml(lib=lib), slow=False, static=("max_sm_clock", "power_max_limit", "mig_mode")
    )
    (dev,) = source.open().devices
    assert (dev.name, dev.uuid, dev.bus_id) == ("NVIDIA H200", "GPU-1", "00000000:00:06.0")  # always
    assert (dev.max_sm_clock, dev.power_max_limit, dev.mig_mode) == (1980, 700.0, False)
    assert dev.power_min_limit is None and dev.mig_mode_pending is None  # not asked for
    assert dev.serial is None and dev.numa_node is None and dev.ecc_mode is None
    asked = {fn for fn, _ in lib.calls}
    assert "nvmlDeviceGetMemoryAffinity" not in asked and "nvmlDeviceGetSerial" not in asked
    assert lib.calls[("nvmlDeviceGetMaxClockInfo", "handle-0")] == 1  # the SM clock only
    source.close()

    lib = static_lib()
    full = NvmlSource(nvml=Nvml(lib=lib), slow=False)  # the default: every fact
    (dev,) = full.open().devices
    assert (dev.power_min_limit, dev.power_max_limit) == (200.0, 700.0)
    assert lib.calls[("nvmlDeviceGetPowerManagementLimitConstraints", "handle-0")] == 1  # shared
    assert (dev.mig_mode, dev.mig_mode_pending, dev.numa_node, dev.serial) == (
        False,
        True,
        0,
        "1654123456789",
    )
    assert (dev.ecc_mode, dev.architecture, dev.compute_mode, dev.max_mem_clock) == (
        True,
        "Hopper",
        "Default",
        3201,
    )
    full.close()


def with_events(lib: ScriptedNvmlLib, register: Any, wait: Any) -> ScriptedNvmlLib:
    """`lib` with NVML's event API scripted: one event set, "the-set"."""
    for name, outcome in {
        "nvmlEventSetCreate": "the-set",
        "nvmlDeviceRegisterEvents": register,
        "nvmlEventSetWait_v2": wait,
        "nvmlEventSetFree": None,
    }.items():
        setattr(lib, name, lib._scripted(name, outcome))
    return lib


def test_xid_events_are_counted_per_gpu_while_the_source_runs(
    x2_recording: tuple[RecordingHeader, list[Snapshot]],
) -> None:
    """The slow thread drains the queued events after each pass: GPU 0 delivers two Xids,
    GPU 1 has no event support (None: not watched, rather than 0).  The drain never waits
    (a 1 ms wait per call).  The event set is freed when the source closes."""
    header, ticks = x2_recording
    scripted = RecordedNvml(header, ticks[55:60], lost_gpu=-1, lost_from=99)
    events: queue.Queue[Any] = queue.Queue()

    def wait(event_set: object, timeout_ms: int) -> Any:
        assert event_set == "the-set"
        assert timeout_ms <= 1  # the slow pass drains the queue: it never waits for events
        try:
            return events.get(timeout=timeout_ms / 1000)
        except queue.Empty:
            return Fail(pynvml.NVML_ERROR_TIMEOUT)

    def register(handle: str, types: int, event_set: object) -> Any:
        assert types == pynvml.nvmlEventTypeXidCriticalError
        return None if handle == "handle-0" else Fail(pynvml.NVML_ERROR_NOT_SUPPORTED)

    lib = with_events(scripted.lib, register, wait)
    source = NvmlSource(slow_interval=0.05, nvml=Nvml(lib=lib))
    source.open()
    try:

        def xids() -> list[tuple[int | None, int | None]]:
            return [(g.xid_count, g.xid_last) for g in source.sample().gpus]

        deadline = time.monotonic() + 10
        while xids()[0] != (0, None):  # watching GPU 0, nothing yet
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert xids()[1] == (None, None)  # GPU 1 is not watched
        events.put(
            SimpleNamespace(device="handle-0", eventType=pynvml.nvmlEventTypeXidCriticalError, eventData=31)
        )
        events.put(
            SimpleNamespace(device="handle-0", eventType=pynvml.nvmlEventTypeXidCriticalError, eventData=79)
        )
        while xids()[0] != (2, 79):
            assert time.monotonic() < deadline, xids()
            time.sleep(0.01)
        assert source.notes() == [
            n for n in source.notes() if "nvmlEventSetWait" not in n
        ]  # timeouts are normal
    finally:
        source.close()
    assert lib.calls[("nvmlEventSetFree", "the-set")] == 1


def test_ctypes_handles_of_one_gpu_are_the_same_key() -> None:
    """An event names its GPU with a handle object of its own: matched by address."""
    from gputui.telemetry.nvml.events import _handle_key

    a = ctypes.cast(ctypes.c_void_p(0x1234), pynvml.c_nvmlDevice_t)
    b = ctypes.cast(ctypes.c_void_p(0x1234), pynvml.c_nvmlDevice_t)
    c = ctypes.cast(ctypes.c_void_p(0x5678), pynvml.c_nvmlDevice_t)
    assert a is not b
    assert _handle_key(a) == _handle_key(b) != _handle_key(c)


def test_a_failing_event_wait_stops_the_watch_quietly(
    x2_recording: tuple[RecordingHeader, list[Snapshot]],
) -> None:
    """An unexpected error while draining the events becomes a note (never a traceback on
    the TUI's terminal), and the GPUs read as not watched again."""
    header, ticks = x2_recording
    scripted = RecordedNvml(header, ticks[55:60], lost_gpu=-1, lost_from=99)
    lib = scripted.lib
    calls = []

    def wait(event_set: object, timeout_ms: int) -> Any:
        calls.append(timeout_ms)
        if len(calls) < 3:
            time.sleep(0.05)
            return Fail(pynvml.NVML_ERROR_TIMEOUT)
        raise RuntimeError("bindings out of step with the driver")

    with_events(lib, None, wait)
    hooked: list[object] = []
    old_hook = threading.excepthook
    threading.excepthook = hooked.append
    source = NvmlSource(slow_interval=0.05, nvml=Nvml(lib=lib))
    try:
        source.open()
        deadline = time.monotonic() + 10
        while not any("the Xid watch stopped" in n for n in source.notes()):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert [(g.xid_count, g.xid_last) for g in source.sample().gpus] == [(None, None), (None, None)]
    finally:
        source.close()
        threading.excepthook = old_hook
    assert hooked == []
    assert lib.calls[("nvmlEventSetFree", "the-set")] == 1


def test_the_prefetch_takes_the_first_sample_and_hands_it_out_once(
    x2_recording: tuple[RecordingHeader, list[Snapshot]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`prefetch()` opens and samples while the UI loads: the first `sample()` is that one
    (sampled before it was asked for), the next is new; one older than the limit is not used."""
    import gputui.telemetry.nvml.source as nvml_mod

    header, ticks = x2_recording
    scripted = RecordedNvml(header, ticks[55:60], lost_gpu=-1, lost_from=99)
    source = NvmlSource(slow=False, nvml=Nvml(lib=scripted.lib))
    try:
        source.prefetch()
        source.open()
        asked = time.time()
        first = source.sample()
        assert first.seq == 1 and first.timestamp <= asked
        assert [g.gpu_util for g in first.gpus] == [g.gpu_util for g in ticks[55].gpus]
        second = source.sample()
        assert second.seq == 2 and second.timestamp >= asked
    finally:
        source.close()

    monkeypatch.setattr(nvml_mod, "PREFETCHED_MAX_AGE_S", 0.0)
    stale = NvmlSource(
        slow=False, nvml=Nvml(lib=RecordedNvml(header, ticks[55:60], lost_gpu=-1, lost_from=99).lib)
    )
    try:
        stale.prefetch()
        stale.open()
        assert stale.sample().seq == 2  # the prefetched one was too old: sampled anew
    finally:
        stale.close()


def test_take_ready_hands_the_prefetched_facts_and_sample_once_and_never_waits(
    x2_recording: tuple[RecordingHeader, list[Snapshot]],
) -> None:
    """The UI thread asks at mount: while the prefetch runs it gets None at once (never
    waits on NVML); once it has finished, the facts and the first sample, once; the
    poller's `open` then returns the same facts and its `sample` a new snapshot."""
    header, ticks = x2_recording
    scripted = RecordedNvml(header, ticks[55:60], lost_gpu=-1, lost_from=99)
    release = threading.Event()
    real_init = scripted.lib.nvmlInit

    def slow_init() -> None:
        release.wait(10)
        real_init()

    scripted.lib.nvmlInit = slow_init
    source = NvmlSource(slow=False, nvml=Nvml(lib=scripted.lib))
    assert source.take_ready() is None  # no prefetch started
    try:
        source.prefetch()
        t0 = time.monotonic()
        assert source.take_ready() is None  # still opening: None, at once
        assert time.monotonic() - t0 < 1.0
        release.set()
        source._prefetch.join(10)  # type: ignore[union-attr]
        ready = source.take_ready()
        assert ready is not None
        info, first = ready
        assert len(info.devices) == 2 and first.seq == 1
        assert [g.gpu_util for g in first.gpus] == [g.gpu_util for g in ticks[55].gpus]
        assert source.take_ready() is None  # once
        assert source.open() is info
        assert source.sample().seq == 2
    finally:
        release.set()
        source.close()


def forking(
    x2_recording: tuple[RecordingHeader, list[Snapshot]], monkeypatch: pytest.MonkeyPatch
) -> RecordedNvml:
    """The real 2x H200 recording's busy stretch as NVML, for a source that reads ahead in a
    forked child: the fork is made even where other tests' daemon threads still run in this
    process (the child reads only the scripted NVML)."""
    import gputui.telemetry.nvml.source as nvml_mod

    monkeypatch.setattr(nvml_mod, "can_fork", lambda: True)
    header, ticks = x2_recording
    return RecordedNvml(header, ticks[55:60], lost_gpu=-1, lost_from=99)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this system")
def test_a_read_ahead_in_a_child_hands_over_its_reading_and_this_process_opens_its_own(
    x2_recording: tuple[RecordingHeader, list[Snapshot]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`prefetch(in_child=True)` (the monitor's start): a forked child opens NVML and takes
    the first sample; `take_ready` hands them over (the recorded GPUs, the busy tick); the
    poller's `open` then opens NVML in this process (its own handles, the same facts), the
    child is gone, and the next sample follows the child's."""
    _, ticks = x2_recording
    scripted = forking(x2_recording, monkeypatch)
    source = NvmlSource(slow=False, nvml=Nvml(lib=scripted.lib))
    try:
        source.prefetch(in_child=True)
        child = source._child
        assert child is not None and child.pid is not None and source._prefetch is None
        pid = child.pid
        assert child.answered(10)
        ready = source.take_ready()
        assert ready is not None
        info, first = ready
        assert len(info.devices) == 2 and first.seq == 1
        assert [g.gpu_util for g in first.gpus] == [g.gpu_util for g in ticks[55].gpus]
        assert source.take_ready() is None  # once
        assert scripted.lib.calls[("nvmlInit", None)] == 0  # (this process has not opened NVML yet)
        opened = source.open()
        assert opened == info and opened is not info  # read here, the same facts
        assert scripted.lib.calls[("nvmlInit", None)] == 1
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        assert source.sample().seq == 2
    finally:
        source.close()


def taken_from_child(source: NvmlSource, in_child: list[bool] | None = None) -> tuple[MachineInfo, Snapshot]:
    """`prefetch(in_child=True)`, the child's whole answer awaited, then taken as the app's
    mount takes it; `in_child` (a scripted NVML's flag) is set False in this process once
    the child is forked."""
    source.prefetch(in_child=True)
    if in_child is not None:
        in_child[0] = False
    assert source._child is not None and source._child.answered(10)
    ready = source.take_ready()
    assert ready is not None
    return ready


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this system")
def test_this_processes_open_keeps_the_childs_static_facts_when_the_same_gpus_answer(
    x2_recording: tuple[RecordingHeader, list[Snapshot]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The child read every GPU's static facts under a second ago (memory affinity alone
    12 ms a GPU on an H200): the poller's open, just after the first frame, asks each GPU
    its UUID and, the same GPUs answering, keeps those facts instead of reading them again
    (no name, no affinity asked here)."""
    scripted = forking(x2_recording, monkeypatch)
    source = NvmlSource(slow=False, nvml=Nvml(lib=scripted.lib))
    try:
        ready = taken_from_child(source)
        opened = source.open()
        assert opened == ready[0]
        for i in range(2):
            assert scripted.lib.calls[("nvmlDeviceGetUUID", f"handle-{i}")] == 1
            assert scripted.lib.calls[("nvmlDeviceGetName", f"handle-{i}")] == 0
    finally:
        source.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this system")
def test_another_gpu_at_this_processes_open_has_its_static_facts_read_anew(
    x2_recording: tuple[RecordingHeader, list[Snapshot]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A GPU that is not the one the child saw (its UUID differs: replaced, or the indices
    reordered between the two opens): every static fact is read here, and the open's facts
    are the new ones (the poller hands them out)."""
    header, _ = x2_recording
    scripted = forking(x2_recording, monkeypatch)
    devices = header.machine.devices
    in_child = [True]
    scripted.lib.nvmlDeviceGetUUID = scripted.lib._scripted(  # type: ignore[attr-defined]
        "nvmlDeviceGetUUID",
        lambda h: devices[RecordedNvml._index(h)].uuid if in_child[0] or h == "handle-0" else "GPU-another",
    )
    source = NvmlSource(slow=False, nvml=Nvml(lib=scripted.lib))
    try:
        ready = taken_from_child(source, in_child)
        assert ready[0].devices[1].uuid == devices[1].uuid
        opened = source.open()
        assert opened != ready[0]
        assert [d.uuid for d in opened.devices] == [devices[0].uuid, "GPU-another"]
        assert scripted.lib.calls[("nvmlDeviceGetName", "handle-1")] == 1
    finally:
        source.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this system")
def test_a_child_that_has_not_answered_at_mount_reads_on_beside_this_processes_open(
    x2_recording: tuple[RecordingHeader, list[Snapshot]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """NVML slow to open (a driver without persistence mode): at mount the child has not
    answered, `take_ready` gives None at once and leaves it reading (the driver's first
    open is then shared, not begun again); the poller's `open` reads NVML in this process,
    then kills and reaps the child; its first sample is the first."""
    scripted = forking(x2_recording, monkeypatch)
    real_init = scripted.lib.nvmlInit
    in_child = [True]

    def slow_init() -> None:
        if in_child[0]:  # (the child's copy of this flag: the parent's is set False below)
            time.sleep(30)
        real_init()

    scripted.lib.nvmlInit = slow_init
    source = NvmlSource(slow=False, nvml=Nvml(lib=scripted.lib))
    try:
        source.prefetch(in_child=True)
        in_child[0] = False
        child = source._child
        assert child is not None
        pid = child.pid
        assert pid is not None
        t0 = time.monotonic()
        assert source.take_ready() is None
        assert time.monotonic() - t0 < 0.5
        os.kill(pid, 0)  # still reading
        info = source.open()
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        assert child.status is not None and os.waitstatus_to_exitcode(child.status) == -9
        assert len(info.devices) == 2
        assert source.sample().seq == 1
    finally:
        source.close()


def test_counters_that_count_up_are_read_every_few_slow_passes_and_kept_between(
    x2_recording: tuple[RecordingHeader, list[Snapshot]],
) -> None:
    """Energy (4 ms a call), PCIe replays, remapped rows and retired pages are read on the
    first slow pass and every RARE_EVERY-th after it; between those passes the last values
    stand (never None, never 0); the throughput figures are read on every pass."""
    from gputui.telemetry.nvml import source as nvml_module

    header, ticks = x2_recording
    scripted = RecordedNvml(header, ticks[55:60], lost_gpu=-1, lost_from=99)
    energy = iter(range(1000, 10**6, 1000))
    scripted.lib.nvmlDeviceGetTotalEnergyConsumption = scripted.lib._scripted(  # type: ignore[attr-defined]
        "nvmlDeviceGetTotalEnergyConsumption", lambda h: next(energy)
    )
    scripted.lib.nvmlDeviceGetPcieThroughput = scripted.lib._scripted(  # type: ignore[attr-defined]
        "nvmlDeviceGetPcieThroughput", lambda h, kind: 7
    )
    source = NvmlSource(slow_interval=60.0, nvml=Nvml(lib=scripted.lib), slow=False)
    try:
        source.open()
        seen = []
        for n in range(2 * nvml_module.RARE_EVERY + 1):
            source.slow_passes = n
            values = source._slow_sample(0, "handle-0")
            source._slow[0] = values
            seen.append(values.fields["energy"])
            assert values.fields["pcie_rx"] == 7 * 1024
        rare = nvml_module.RARE_EVERY
        assert seen == [1000] * rare + [2000] * rare + [3000]
        assert scripted.lib.calls[("nvmlDeviceGetTotalEnergyConsumption", "handle-0")] == 3
        assert scripted.lib.calls[("nvmlDeviceGetPcieThroughput", "handle-0")] == 2 * len(seen)
    finally:
        source.close()


def test_a_read_ahead_source_starts_its_slow_thread_when_told_and_makes_no_ras_watch(
    x2_recording: tuple[RecordingHeader, list[Snapshot]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The monitor's source (read ahead while the UI loads) leaves for after the first frame
    what that frame does not draw: the slow-cadence thread starts at `start_background()`
    (the poller's, once the app's first frame is up), not at the poller's `open()`; and the
    read-ahead's first sample makes no NCCL RAS watch (its modules, the health engine among
    them, would load on the read-ahead's thread beside the UI's imports; RAS answers come
    from a round on its own thread, never in the first frame).  The poller's samples do."""
    import gputui.telemetry.nccl.watch as watch_module

    made: list[object] = []

    class Watch:
        def __init__(self) -> None:
            made.append(self)

        def offer(self, processes: Any, now: float) -> None:
            return None

        def close(self) -> None:
            pass

    monkeypatch.setattr(watch_module, "RasWatch", Watch)
    header, ticks = x2_recording
    scripted = RecordedNvml(header, ticks[55:60], lost_gpu=-1, lost_from=99)
    source = NvmlSource(slow_interval=60.0, nvml=Nvml(lib=scripted.lib))
    source._procs = Inspector(ticks[55].processes)  # type: ignore[assignment]
    try:
        source.prefetch()
        assert source._prefetch is not None
        source._prefetch.join()
        ready = source.take_ready()
        assert ready is not None and ready[1].processes  # a first sample with processes
        assert made == [] and source.ras is None  # no RAS watch for it
        source.open()  # the poller's
        assert source._slow_thread is None
        source.sample()  # the poller's first tick
        assert len(made) == 1
        source.start_background()
        slow = source._slow_thread
        assert slow is not None and slow.is_alive()
        source.start_background()
        assert source._slow_thread is slow  # once
    finally:
        source.close()


def test_a_source_not_read_ahead_starts_its_slow_thread_at_open(
    x2_recording: tuple[RecordingHeader, list[Snapshot]],
) -> None:
    """The exporter, `watch` and `record` open their source themselves (no read-ahead, no
    first frame): the slow thread starts at open, as ever."""
    header, ticks = x2_recording
    scripted = RecordedNvml(header, ticks[55:60], lost_gpu=-1, lost_from=99)
    source = NvmlSource(slow_interval=60.0, nvml=Nvml(lib=scripted.lib))
    try:
        source.open()
        assert source._slow_thread is not None
    finally:
        source.close()


class Inspector:
    """Stands in for psutil's ProcessInspector: the processes as NVML would list them."""

    launchers = ()

    def __init__(self, processes: Any) -> None:
        self.processes = list(processes)

    def enrich(self, raw: Any, now: float) -> list[Any]:
        return list(self.processes)
