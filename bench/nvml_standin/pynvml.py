"""A stand-in for the `pynvml` module that answers from a recording: for measuring gputui's
live path (NvmlSource, the live start, `snapshot --json`) on a machine without a GPU, and for
the live start's import list (tests/test_first_frame_imports.py).  It is not a GPU: its
numbers are a recorded tick's, and its costs (GPUTUI_NVML_STANDIN_COSTS=1) a model of the
calls that take long, each blocking (the GIL released, as in a C call) for its wall time on a
real GPU: PCIe throughput 21.0 ms a call, per-process utilization 2.6 ms, energy 2.9 ms, PCIe
replays 0.19 ms, MIG mode 0.16 ms (bench/nvml_cost.py, 4x H100, 2026-11-28); the static
facts' memory affinity 12 ms and max clocks 2 ms (an H200, docs in nvml/static.py); the rest
answer at once.  (The H100's whole slow pass was 76 ms a GPU, this model's 48 ms.)

    PYTHONPATH=bench/nvml_standin:$PWD GPUTUI_NVML_STANDIN=REC.jsonl.gz python3 -P -m gputui

GPUTUI_NVML_STANDIN: the recording (required); GPUTUI_NVML_STANDIN_TICK: which tick (default
30, or the last one before it).  The recorded processes' PIDs become this process's own PID (a process that
exists, so psutil has one to read).  NVML's constants, structures and error classes are the
real module's; a function not answered here raises NOT_SUPPORTED, as a GPU that lacks it.
"""

from __future__ import annotations

import ctypes
import gzip
import importlib.util
import json
import os
import sys
import sysconfig
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any


def _real() -> Any:
    """The installed nvidia-ml-py module, loaded under another name (constants, structures,
    errors)."""
    here = Path(__file__).resolve().parent
    for entry in sys.path:
        candidate = Path(entry or ".") / "pynvml.py"
        if candidate.is_file() and candidate.resolve().parent != here:
            break
    else:
        candidate = Path(sysconfig.get_paths()["purelib"]) / "pynvml.py"
    spec = importlib.util.spec_from_file_location("_real_pynvml", candidate)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["_real_pynvml"] = module
    spec.loader.exec_module(module)
    return module


_REAL = _real()
globals().update(
    {
        k: v
        for k, v in vars(_REAL).items()
        if not k.startswith("_") and (not k.startswith("nvml") or not callable(v))
    }
)
NVMLError = _REAL.NVMLError

_COSTS = os.environ.get("GPUTUI_NVML_STANDIN_COSTS") == "1"
_PCIE_S, _PROC_UTIL_S, _ENERGY_S, _REPLAY_S, _MIG_S = 0.021, 0.0026, 0.0029, 0.00019, 0.00016
_AFFINITY_S, _MAX_CLOCK_S = 0.012, 0.002
_state: dict[str, Any] = {}


def _tick() -> Any:
    """The recorded tick, decoded with gputui's codec alone (no recording module: the
    stand-in adds nothing of its own to what the live start imports)."""
    if "tick" not in _state:
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # gputui's checkout
        from gputui.telemetry.codec import decode_machine, decode_snapshot

        at = int(os.environ.get("GPUTUI_NVML_STANDIN_TICK", "30"))
        with gzip.open(os.environ["GPUTUI_NVML_STANDIN"], "rt") as f:
            _state["machine"] = decode_machine(json.loads(f.readline())["machine"])
            for k, line in enumerate(f):
                if line.strip():
                    _state["line"] = line
                if k == at:
                    break
        _state["tick"] = decode_snapshot(json.loads(_state["line"]))
    return _state["tick"]


def _gpu(handle: Any) -> Any:
    return _tick().gpus[handle.index]


def _device(handle: Any) -> Any:
    return _state["machine"].devices[handle.index]


def _wait(seconds: float) -> None:
    if _COSTS:
        time.sleep(seconds)  # (blocks, the GIL released: as a C call does)


def _fail(code: int = 3) -> Any:  # 3: NVML_ERROR_NOT_SUPPORTED
    raise NVMLError(code)


def _value(v: Any) -> Any:
    return _fail() if v is None else v


def nvmlInit() -> None:
    _tick()


def nvmlShutdown() -> None:
    pass


def nvmlSystemGetDriverVersion() -> str:
    return _state["machine"].system.driver_version or "unknown"


def nvmlSystemGetNVMLVersion() -> str:
    return _state["machine"].system.nvml_version or "unknown"


def nvmlSystemGetCudaDriverVersion() -> int:
    major, _, minor = (_state["machine"].system.cuda_driver_version or "0.0").partition(".")
    return int(major) * 1000 + int(minor or 0) * 10


def nvmlDeviceGetCount() -> int:
    return len(_tick().gpus)


def nvmlDeviceGetHandleByIndex(i: int) -> Any:
    return SimpleNamespace(index=i)


def nvmlDeviceGetName(h: Any) -> str:
    return _device(h).name


def nvmlDeviceGetUUID(h: Any) -> str:
    return _value(_device(h).uuid)


def nvmlDeviceGetPciInfo_v3(h: Any) -> Any:
    return SimpleNamespace(busId=_value(_device(h).bus_id))


nvmlDeviceGetPciInfo = nvmlDeviceGetPciInfo_v3


def nvmlDeviceGetArchitecture(h: Any) -> int:
    return {"Hopper": 9, "Ampere": 7, "Blackwell": 10}.get(_device(h).architecture or "", 9)


def nvmlDeviceGetMemoryInfo(h: Any, *version: Any) -> Any:
    g, d = _gpu(h), _device(h)
    return SimpleNamespace(used=g.mem_used, free=g.mem_free, reserved=g.mem_reserved, total=d.memory_total)


def nvmlDeviceGetUtilizationRates(h: Any) -> Any:
    g = _gpu(h)
    return SimpleNamespace(gpu=_value(g.gpu_util), memory=_value(g.mem_util))


def nvmlDeviceGetTemperature(h: Any, sensor: int) -> int:
    return _value(_gpu(h).temperature)


def nvmlDeviceGetPowerUsage(h: Any) -> int:
    return round(_value(_gpu(h).power_draw) * 1000)


def nvmlDeviceGetEnforcedPowerLimit(h: Any) -> int:
    return round(_value(_gpu(h).power_limit) * 1000)


_CLOCKS = {0: "graphics_clock", 1: "sm_clock", 2: "mem_clock", 3: "video_clock"}
_MAX_CLOCKS = {0: "max_graphics_clock", 1: "max_sm_clock", 2: "max_mem_clock"}


def nvmlDeviceGetClockInfo(h: Any, kind: int) -> int:
    return _value(getattr(_gpu(h), _CLOCKS.get(kind, ""), None))


def nvmlDeviceGetMaxClockInfo(h: Any, kind: int) -> int:
    _wait(_MAX_CLOCK_S)
    return _value(getattr(_device(h), _MAX_CLOCKS.get(kind, ""), None))


def nvmlDeviceGetPerformanceState(h: Any) -> int:
    return _value(_gpu(h).pstate)


def nvmlDeviceGetCurrPcieLinkGeneration(h: Any) -> int:
    return _value(_gpu(h).pcie_gen)


def nvmlDeviceGetCurrPcieLinkWidth(h: Any) -> int:
    return _value(_gpu(h).pcie_width)


def nvmlDeviceGetCurrentClocksEventReasons(h: Any) -> int:
    return _value(_gpu(h).clock_event_reasons)


def nvmlDeviceGetPcieThroughput(h: Any, counter: int) -> int:
    _wait(_PCIE_S)
    g = _gpu(h)
    return _value(g.pcie_rx if counter == _REAL.NVML_PCIE_UTIL_RX_BYTES else g.pcie_tx) // 1024


def nvmlDeviceGetTotalEnergyConsumption(h: Any) -> int:
    _wait(_ENERGY_S)
    return _value(_gpu(h).energy)


def _processes(h: Any) -> list[Any]:
    return [p for p in _tick().processes if p.gpu_index == h.index]


def nvmlDeviceGetComputeRunningProcesses(h: Any) -> list[Any]:
    return [
        SimpleNamespace(
            pid=os.getpid(), usedGpuMemory=p.gpu_memory, gpuInstanceId=None, computeInstanceId=None
        )
        for p in _processes(h)
    ]


def nvmlDeviceGetGraphicsRunningProcesses(h: Any) -> list[Any]:
    return []


nvmlDeviceGetMPSComputeRunningProcesses = nvmlDeviceGetGraphicsRunningProcesses


def nvmlDeviceGetProcessUtilization(h: Any, since: int) -> list[Any]:
    _wait(_PROC_UTIL_S)
    now = int(time.time() * 1e6)
    return [
        SimpleNamespace(
            pid=os.getpid(),
            timeStamp=now,
            smUtil=p.sm_util or 0,
            memUtil=p.mem_util or 0,
            encUtil=p.enc_util or 0,
            decUtil=p.dec_util or 0,
        )
        for p in _processes(h)
    ]


def nvmlDeviceGetMemoryAffinity(h: Any, size: int, scope: int) -> list[int]:
    _wait(_AFFINITY_S)
    node = _device(h).numa_node
    return _fail() if node is None else [1 << node]


def nvmlDeviceGetPcieReplayCounter(h: Any) -> int:
    _wait(_REPLAY_S)
    return _value(_gpu(h).pcie_replay_counter)


def nvmlDeviceGetMigMode(h: Any) -> list[int]:
    _wait(_MIG_S)
    return [0, 0]


def nvmlGpmQueryDeviceSupport(h: Any) -> Any:
    return SimpleNamespace(isSupportedDevice=int(_gpu(h).gpm is not None))


def nvmlGpmSampleAlloc() -> Any:
    return ctypes.pointer(ctypes.c_int(0))


def nvmlGpmSampleFree(sample: Any) -> None:
    pass


def nvmlGpmSampleGet(h: Any, sample: Any) -> Any:
    _state.setdefault("owner", {})[ctypes.cast(sample, ctypes.c_void_p).value] = h.index
    return sample


def nvmlGpmMetricsGet(get: Any) -> Any:
    from gputui.telemetry.metrics import GPM_READS

    gpm = _tick().gpus[_state["owner"][get.sample2]].gpm
    ids = {m.metric_id: m for m in GPM_READS}
    for k in range(get.numMetrics):
        m = ids.get(get.metrics[k].metricId)
        value = getattr(gpm, m.figure, None) if m is not None else None
        if value is None:
            get.metrics[k].nvmlReturn = 3
        else:
            get.metrics[k].value = value / (2**20 if m.unit == "B/s" else 1)  # MiB/s, NVML's unit
    return get


def __getattr__(name: str) -> Any:
    if name.startswith("nvml"):

        def unsupported(*args: Any) -> Any:
            return _fail()

        return unsupported
    raise AttributeError(name)
