"""NVML's calls, errors and values: `Nvml.query` (the one way gputui calls NVML) and what
a failure to load NVML means.

Every NVML call goes through `Nvml.query`, which turns "Not Supported" and other per-value
failures into `None`, remembers what a GPU does not support so it is not asked again every
tick, reports a function missing from the bindings or the driver once, and raises `GpuLost`
when a GPU has fallen off the bus.  This is the only module that imports pynvml.
"""

from __future__ import annotations

import threading
from typing import Any

from gputui.telemetry.metric_types import watts
from gputui.telemetry.model import NvmlProblem


def _log() -> Any:
    import logging  # only when there is something to say: a one-shot snapshot never does

    return logging.getLogger(__name__)


# NVML return codes we treat specially (values from nvml.h; stable across versions).
_NOT_SUPPORTED = 3
_NO_PERMISSION = 4
_NOT_FOUND = 6
_DRIVER_NOT_LOADED = 9
_LIBRARY_NOT_FOUND = 12
_FUNCTION_NOT_FOUND = 13
_GPU_IS_LOST = 15
_LIB_RM_VERSION_MISMATCH = 18
_NO_DATA = 21
_TIMEOUT = 10
_GPU_NOT_FOUND = 28
_UNKNOWN = 999


# NVML enums and field ids NvmlSource reads (values from nvml.h).
_ARCHITECTURES = {
    2: "Kepler",
    3: "Maxwell",
    4: "Pascal",
    5: "Volta",
    6: "Turing",
    7: "Ampere",
    8: "Ada Lovelace",
    9: "Hopper",
    10: "Blackwell",
    13: "Rubin",
}
_ARCHITECTURE_CODES = {name: code for code, name in _ARCHITECTURES.items()}
_BRANDS = {
    1: "Quadro",
    2: "Tesla",
    3: "NVS",
    4: "GRID",
    5: "GeForce",
    6: "Titan",
    7: "vApps",
    8: "vPC",
    9: "vCS",
    10: "vWS",
    11: "Cloud Gaming",
    12: "Quadro RTX",
    13: "NVIDIA RTX",
    14: "NVIDIA",
    15: "GeForce RTX",
    16: "Titan RTX",
}
_COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}

_P2P_STATUS = {
    0: "OK",
    1: "chipset not supported",
    2: "GPU not supported",
    3: "topology not supported",
    4: "disabled by regkey",
    5: "not supported",
    6: "unknown",
}
_INVALID_ID = 0xFFFFFFFF  # NVML's "no MIG instance"
_ALL_LINKS = 0xFFFFFFFF  # field-value scope: summed over every NVLink
_NVLINK_REMOTE_TYPES = {0: "GPU", 1: "IBM NPU", 2: "switch", 0xFF: "unknown"}
# field ids (nvml.h; stable): NVLink link count, NVLink data throughput counters in KiB
_FI_MEMORY_TEMP = 82
"""NVML_FI_DEV_MEMORY_TEMP: memory (HBM) temperature, °C (nvidia-smi's temperature.memory)."""
_FI_NVLINK_LINK_COUNT = 91
_FI_NVLINK_THROUGHPUT_DATA_TX = 138
_FI_NVLINK_THROUGHPUT_DATA_RX = 139
_RETIRED_SBE = 0  # NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
_RETIRED_DBE = 1  # NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR


class GpuLost(Exception):
    """NVML reports that a GPU has fallen off the bus."""

    def __init__(self, index: int) -> None:
        super().__init__(f"GPU {index} is lost")
        self.index = index


def explain_nvml_failure(exc: BaseException) -> NvmlProblem:
    """Turn an NVML initialisation failure into what it means and what to do."""
    code = getattr(exc, "value", None)
    text = str(exc) or type(exc).__name__
    if isinstance(exc, ImportError):
        return NvmlProblem(
            None,
            text,
            "The nvidia-ml-py package (imported as pynvml) is not installed in this environment.",
            ("pip install nvidia-ml-py",),
        )
    if code == _LIBRARY_NOT_FOUND:
        return NvmlProblem(
            code,
            text,
            "libnvidia-ml.so, which ships with the NVIDIA driver, was not found: this machine "
            "has no NVIDIA driver installed, or this container was started without the GPU.",
            (
                "On a GPU server: install the NVIDIA driver and check that `nvidia-smi` works.",
                "In a container: start it with `--gpus all` (Docker) and install the NVIDIA "
                "Container Toolkit on the host.",
                "If the driver is installed elsewhere, add its directory to LD_LIBRARY_PATH.",
            ),
        )
    if code == _LIB_RM_VERSION_MISMATCH:
        return NvmlProblem(
            code,
            text,
            "The NVIDIA kernel module that is loaded is a different version from the user-space "
            "driver library: usually the driver was upgraded (often unattended) and the machine "
            "has not been rebooted since.",
            (
                "Reboot the machine (or unload and reload the nvidia kernel modules when no GPU job runs).",
                "Compare `cat /proc/driver/nvidia/version` with the library version "
                "(`ls /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.*`).",
                "To stop it recurring, hold the driver packages out of unattended upgrades.",
            ),
        )
    if code == _DRIVER_NOT_LOADED:
        return NvmlProblem(
            code,
            text,
            "The NVIDIA library is installed but the kernel driver is not loaded.",
            (
                "Check `lsmod | grep nvidia` and `dmesg | grep -i nvidia` for why it failed to load.",
                "Secure Boot can block an unsigned module; nouveau can hold the GPU instead.",
                "Try `sudo modprobe nvidia`, or reinstall the driver for the running kernel.",
            ),
        )
    if code == _NO_PERMISSION:
        return NvmlProblem(
            code,
            text,
            "This user may not open the NVIDIA device files (/dev/nvidia*).",
            (
                "Check the permissions of /dev/nvidiactl and /dev/nvidia0 (`ls -l /dev/nvidia*`).",
                "Add the user to the group that owns them (often `video`), or ask an administrator.",
            ),
        )
    return NvmlProblem(
        code if isinstance(code, int) else None,
        text,
        "NVML could not be initialised.",
        (
            "Run `nvidia-smi`: if it fails with the same error, the driver needs attention.",
            "Check `dmesg | grep -i -E 'nvidia|xid'` for driver errors.",
        ),
    )


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _watts(milliwatts: Any) -> float | None:
    return None if milliwatts is None else watts(milliwatts)


def cpulist(words: Any, bits_per_word: int = 64) -> str | None:
    """A CPU bit mask (sequence of words, lowest CPUs first) as a list like "0-15,32-47"."""
    if words is None:
        return None
    cpus = [
        w * bits_per_word + b
        for w, word in enumerate(words)
        for b in range(bits_per_word)
        if int(word) >> b & 1
    ]
    if not cpus:
        return None
    ranges: list[str] = []
    start = prev = cpus[0]
    for cpu in [*cpus[1:], -1]:
        if cpu == prev + 1:
            prev = cpu
            continue
        ranges.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = cpu
    return ",".join(ranges)


def single_node(words: Any) -> int | None:
    """The NUMA node of a node bit mask when exactly one bit is set, else None."""
    nodes = cpulist(words)
    return int(nodes) if nodes is not None and nodes.isdigit() else None


def _sysfs_pci(bus_id: str | None, name: str) -> str | None:
    """Read /sys/bus/pci/devices/<bus>/<name>; NVML's 8-digit domain is 4 digits in sysfs."""
    if not bus_id:
        return None
    domain, _, rest = bus_id.lower().partition(":")
    path = f"/sys/bus/pci/devices/{domain[-4:]}:{rest}/{name}"
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


class Nvml:
    """Owns the NVML library: initialisation, shutdown and the one query helper."""

    def __init__(self, lib: Any = None) -> None:
        if lib is None:
            import pynvml

            lib = pynvml
        self.lib = lib
        self._unsupported: set[tuple[Any, ...]] = set()
        self._missing: set[str] = set()
        self._reported: set[tuple[str, str]] = set()
        self._notes: list[str] = []
        self._lock = threading.Lock()

    def init(self) -> None:
        self.lib.nvmlInit()

    def shutdown(self) -> None:
        try:
            self.lib.nvmlShutdown()
        except Exception as exc:
            _log().debug("nvmlShutdown failed: %s", exc)

    @property
    def notes(self) -> list[str]:
        """One line per problem seen (a missing function, an unexpected error), each once."""
        with self._lock:
            return list(self._notes)

    def note(self, fn: str, what: str) -> None:
        """Record a problem with `fn` for `notes`, once (also for NvmlSource's own threads)."""
        with self._lock:
            if (fn, what) in self._reported:
                return
            self._reported.add((fn, what))
            self._notes.append(f"{fn}: {what}")
        _log().info("NVML %s: %s", fn, what)

    def attempt(self, fn: str, *args: Any, device: int = -1) -> tuple[Any, int | None, str]:
        """Call `pynvml.<fn>(*args)`: (result, None, ""), or (None, NVML's error code, its
        text) — for callers that must tell errors apart (GPM: no permission vs not
        supported).  A function missing from the bindings or the driver gives
        FUNCTION_NOT_FOUND and is noted once.  Raises GpuLost when the GPU (`device`) has
        fallen off the bus."""
        if fn in self._missing:
            return None, _FUNCTION_NOT_FOUND, "missing"
        func = getattr(self.lib, fn, None)
        if func is None:
            self._missing.add(fn)
            self.note(fn, "not in these nvidia-ml-py bindings")
            return None, _FUNCTION_NOT_FOUND, "missing"
        try:
            return func(*args), None, ""
        except self.lib.NVMLError as exc:
            code = exc.value
            if code in (_GPU_IS_LOST, _GPU_NOT_FOUND) and device >= 0:
                raise GpuLost(device) from exc
            if code == _FUNCTION_NOT_FOUND:
                self._missing.add(fn)
                self.note(fn, "absent from this driver")
            return None, code, str(exc)

    def query(self, fn: str, *args: Any, device: int = -1, scope: object = None) -> Any:
        """Call `pynvml.<fn>(*args)`; None when unsupported or failed.

        Raises GpuLost when the GPU (`device`) has fallen off the bus.  `scope` tells apart
        what "not supported" is remembered for when the handle is not the GPU's own (a MIG
        device of that GPU, say).
        """
        key = (fn, device, scope, *(a for a in args[1:] if isinstance(a, int)))
        if key in self._unsupported:
            return None
        value, code, text = self.attempt(fn, *args, device=device)
        if code in (_NOT_SUPPORTED, _NO_PERMISSION):
            self._unsupported.add(key)
        elif code not in (None, _FUNCTION_NOT_FOUND, _NOT_FOUND, _NO_DATA):
            self.note(fn, text)  # (not found / no data: e.g. no process samples yet, normal)
        return value


def field_int(value: Any) -> int | None:
    """The integer in one of nvmlDeviceGetFieldValues' results; None when NVML reported an
    error for that field."""
    if value is None or getattr(value, "nvmlReturn", 0) != 0:
        return None
    inner = getattr(value, "value", None)
    kind = getattr(value, "valueType", 3)
    # nvmlValueType_t: 0 double, 1 uint, 2 ulong, 3 ulonglong, 4 slonglong, 5 sint, 6 ushort
    name = {1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(kind)
    if inner is None or name is None:
        return None
    return int(getattr(inner, name))


def counter_rate(previous: tuple[float, int] | None, now: tuple[float, int], unit: int = 1024) -> int | None:
    """Bytes per second between two readings (timestamp µs, counter in `unit` bytes) of a
    cumulative counter; None for the first reading, a clock that did not advance, or a
    counter that went backwards (reset or wrapped)."""
    if previous is None:
        return None
    dt = (now[0] - previous[0]) / 1e6
    delta = now[1] - previous[1]
    if dt <= 0 or delta < 0:
        return None
    return round(delta * unit / dt)


def memory_info(nv: Nvml, i: int, h: Any) -> Any:
    """Memory info v2 (used excludes driver-reserved memory, as nvidia-smi shows it);
    v1 on drivers without it, where "used" includes the reserved part."""
    v2 = getattr(nv.lib, "nvmlMemory_v2", None)
    if v2 is not None:
        mem = nv.query("nvmlDeviceGetMemoryInfo", h, v2, device=i)
        if mem is not None:
            return mem
    return nv.query("nvmlDeviceGetMemoryInfo", h, device=i)
