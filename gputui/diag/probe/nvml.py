"""NVML and the CUDA driver API through ctypes: the one NVML client of the children.

The diagnosed interpreter may not have pynvml (nvidia-ml-py) installed, and must not need
it: the children (this probe and stress.py) read NVML only through this module, which needs
nothing but libnvidia-ml.so.1 from the driver.  gputui's own process uses pynvml
(gputui/telemetry/nvml/source.py); the two never run in the same interpreter.
"""

from __future__ import annotations

import ctypes
import os
import time

from .protocol import mapped, read_text

NVML_ERRORS = {
    1: "UNINITIALIZED",
    2: "INVALID_ARGUMENT",
    3: "NOT_SUPPORTED",
    4: "NO_PERMISSION",
    6: "NOT_FOUND",
    9: "DRIVER_NOT_LOADED",
    12: "LIBRARY_NOT_FOUND",
    13: "FUNCTION_NOT_FOUND",
    15: "GPU_IS_LOST",
    17: "OPERATING_SYSTEM",
    18: "LIB_RM_VERSION_MISMATCH",
    999: "UNKNOWN",
}


#: NVML's "not available" for a process's memory (in containers, without permission).
NVML_VALUE_NOT_AVAILABLE = (1 << 64) - 1
NVML_INSUFFICIENT_SIZE = 7


class _PciInfo(ctypes.Structure):
    _fields_ = [
        ("busIdLegacy", ctypes.c_char * 16),
        ("domain", ctypes.c_uint),
        ("bus", ctypes.c_uint),
        ("device", ctypes.c_uint),
        ("pciDeviceId", ctypes.c_uint),
        ("pciSubSystemId", ctypes.c_uint),
        ("busId", ctypes.c_char * 32),
    ]


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class _Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class EventData(ctypes.Structure):
    _fields_ = [
        ("device", ctypes.c_void_p),
        ("eventType", ctypes.c_ulonglong),
        ("eventData", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    ]


class Nvml:
    """A few NVML calls through ctypes.  Every getter returns None when NVML says no."""

    def __init__(self):
        self.lib = None
        self.load_error = None
        self.init_code = None
        self.init_error = None
        self.handles = []

    def open(self):
        try:
            self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        except OSError as exc:
            self.load_error = str(exc)
            return False
        self.lib.nvmlErrorString.restype = ctypes.c_char_p
        fn = getattr(self.lib, "nvmlInit_v2", None) or self.lib.nvmlInit
        rc = fn()
        if rc != 0:
            self.init_code = rc
            self.init_error = self.error_string(rc)
            return False
        count = ctypes.c_uint(0)
        self.call("nvmlDeviceGetCount_v2", ctypes.byref(count))
        for i in range(count.value):
            h = ctypes.c_void_p()
            rc = self.call("nvmlDeviceGetHandleByIndex_v2", ctypes.c_uint(i), ctypes.byref(h))
            self.handles.append(h if rc == 0 else None)
        return True

    @property
    def ok(self):
        return self.lib is not None and self.init_code is None

    def error_string(self, rc):
        try:
            text = self.lib.nvmlErrorString(rc)
            return text.decode() if text else NVML_ERRORS.get(rc, str(rc))
        except Exception:
            return NVML_ERRORS.get(rc, str(rc))

    def call(self, name, *args):
        fn = getattr(self.lib, name, None) if self.lib is not None else None
        if fn is None:
            return -1
        return fn(*args)

    def text(self, name, *args):
        buf = ctypes.create_string_buffer(256)
        rc = self.call(name, *((*args, buf, ctypes.c_uint(256))))
        return buf.value.decode("utf-8", "replace") if rc == 0 else None

    def uint(self, name, *args):
        v = ctypes.c_uint(0)
        return v.value if self.call(name, *((*args, ctypes.byref(v)))) == 0 else None

    def ull(self, name, *args):
        v = ctypes.c_ulonglong(0)
        return v.value if self.call(name, *((*args, ctypes.byref(v)))) == 0 else None

    def library_path(self):
        maps = read_text("/proc/self/maps") or ""
        for line in maps.splitlines():
            if "libnvidia-ml.so" in line:
                return os.path.realpath(line.split()[-1])
        return None

    # -- system --
    def driver_version(self):
        return self.text("nvmlSystemGetDriverVersion")

    def cuda_version(self):
        v = ctypes.c_int(0)
        rc = self.call("nvmlSystemGetCudaDriverVersion_v2", ctypes.byref(v))
        if rc != 0:
            rc = self.call("nvmlSystemGetCudaDriverVersion", ctypes.byref(v))
        return "%d.%d" % (v.value // 1000, v.value % 1000 // 10) if rc == 0 and v.value else None

    # -- per device --
    def device(self, i):
        h = self.handles[i]
        if h is None:
            return {"index": i, "error": "no handle"}
        d = {"index": i, "name": self.text("nvmlDeviceGetName", h), "uuid": self.text("nvmlDeviceGetUUID", h)}
        pci = _PciInfo()
        if self.call("nvmlDeviceGetPciInfo_v3", h, ctypes.byref(pci)) == 0:
            d["bus_id"] = pci.busId.decode()
        major, minor = ctypes.c_int(0), ctypes.c_int(0)
        if self.call("nvmlDeviceGetCudaComputeCapability", h, ctypes.byref(major), ctypes.byref(minor)) == 0:
            d["compute_capability"] = "%d.%d" % (major.value, minor.value)
        mem = _Memory()
        if self.call("nvmlDeviceGetMemoryInfo", h, ctypes.byref(mem)) == 0:
            d["memory_total"] = mem.total
        cur, pend = ctypes.c_uint(0), ctypes.c_uint(0)
        if self.call("nvmlDeviceGetMigMode", h, ctypes.byref(cur), ctypes.byref(pend)) == 0:
            d["mig"] = bool(cur.value)
        return d

    def health(self, i):
        """Persistence, ECC, retired pages / remapped rows, clock events, PCIe link."""
        h = self.handles[i]
        out = {}
        if h is None:
            return out
        out["persistence_mode"] = self.uint("nvmlDeviceGetPersistenceMode", h)
        ecc_cur, ecc_pend = ctypes.c_uint(0), ctypes.c_uint(0)
        if self.call("nvmlDeviceGetEccMode", h, ctypes.byref(ecc_cur), ctypes.byref(ecc_pend)) == 0:
            out["ecc_mode"] = bool(ecc_cur.value)
            out["ecc_mode_pending"] = bool(ecc_pend.value)
        # error type 1 = uncorrected, 0 = corrected; counter 0 = volatile, 1 = aggregate
        out["ecc_volatile_uncorrected"] = self.ull("nvmlDeviceGetTotalEccErrors", h, 1, 0)
        out["ecc_aggregate_uncorrected"] = self.ull("nvmlDeviceGetTotalEccErrors", h, 1, 1)
        out["ecc_volatile_corrected"] = self.ull("nvmlDeviceGetTotalEccErrors", h, 0, 0)
        corr, unc, pending, failed = (ctypes.c_uint(0) for _ in range(4))
        rc = self.call(
            "nvmlDeviceGetRemappedRows",
            h,
            ctypes.byref(corr),
            ctypes.byref(unc),
            ctypes.byref(pending),
            ctypes.byref(failed),
        )
        if rc == 0:
            out["remapped_rows"] = {
                "correctable": corr.value,
                "uncorrectable": unc.value,
                "pending": bool(pending.value),
                "failed": bool(failed.value),
            }
        retired = self.uint("nvmlDeviceGetRetiredPagesPendingStatus", h)
        if retired is not None:
            out["retired_pages_pending"] = bool(retired)
        reasons = self.ull("nvmlDeviceGetCurrentClocksEventReasons", h)
        if reasons is None:
            reasons = self.ull("nvmlDeviceGetCurrentClocksThrottleReasons", h)
        out["clock_event_reasons"] = reasons
        out["pcie_gen"] = self.uint("nvmlDeviceGetCurrPcieLinkGeneration", h)
        out["pcie_width"] = self.uint("nvmlDeviceGetCurrPcieLinkWidth", h)
        out["pcie_max_gen"] = self.uint("nvmlDeviceGetGpuMaxPcieLinkGeneration", h) or self.uint(
            "nvmlDeviceGetMaxPcieLinkGeneration", h
        )
        out["pcie_max_width"] = self.uint("nvmlDeviceGetMaxPcieLinkWidth", h)
        out["pcie_replays"] = self.uint("nvmlDeviceGetPcieReplayCounter", h)
        out["temperature"] = self.uint("nvmlDeviceGetTemperature", h, 0)
        util = _Utilization()
        if self.call("nvmlDeviceGetUtilizationRates", h, ctypes.byref(util)) == 0:
            out["gpu_util"] = util.gpu
        return out

    def link(self, i):
        h = self.handles[i]
        if h is None:
            return None, None
        return self.uint("nvmlDeviceGetCurrPcieLinkGeneration", h), self.uint(
            "nvmlDeviceGetCurrPcieLinkWidth", h
        )

    def memory(self, i):
        """{"total", "free", "used"} in bytes (used includes what the driver reserves), or None."""
        h = self.handles[i]
        mem = _Memory()
        if h is None or self.call("nvmlDeviceGetMemoryInfo", h, ctypes.byref(mem)) != 0:
            return None
        return {"total": mem.total, "free": mem.free, "used": mem.used}

    def processes(self, i):
        """[{"pid", "used_bytes"}] of every process with a context on GPU i (compute and
        graphics; used_bytes None where NVML cannot say), or None when NVML cannot list them."""
        h = self.handles[i]
        if h is None:
            return None
        out, listed = {}, False
        for kind in ("Compute", "Graphics"):
            for version in ("_v3", "_v2", ""):
                rows = self._process_rows("nvmlDeviceGet%sRunningProcesses%s" % (kind, version), h)
                if rows is not None:
                    listed = True
                    for pid, used in rows:
                        if pid not in out or out[pid] is None:
                            out[pid] = used
                    break
        if not listed:
            return None
        return [{"pid": pid, "used_bytes": used} for pid, used in sorted(out.items())]

    def _process_rows(self, name, h):
        """(pid, used bytes or None) from one of NVML's process lists, or None (no such call)."""
        if getattr(self.lib, name, None) is None:
            return None
        # nvmlProcessInfo_t: the same layout for the _v2 and _v3 calls (the first call, without
        # a suffix, has no instance ids)
        fields = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]
        if name[-3:] in ("_v2", "_v3"):
            fields += [("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]
        row = type("_Process", (ctypes.Structure,), {"_fields_": fields})
        size = 64
        for _ in range(4):  # the list may grow between the calls
            count = ctypes.c_uint(size)
            procs = (row * size)()
            rc = self.call(name, h, ctypes.byref(count), procs)
            if rc == 0:
                return [
                    (
                        procs[k].pid,
                        None
                        if procs[k].usedGpuMemory >= NVML_VALUE_NOT_AVAILABLE
                        else procs[k].usedGpuMemory,
                    )
                    for k in range(count.value)
                ]
            if rc != NVML_INSUFFICIENT_SIZE:
                return None
            size = max(count.value, size) * 2
        return None


# CUDA driver API result codes worth a name (cuda.h); runtime codes 35 (insufficient driver)
# has no driver-API twin: it is computed from the versions instead.
CU_ERRORS = {
    0: "CUDA_SUCCESS",
    3: "CUDA_ERROR_NOT_INITIALIZED",
    34: "CUDA_ERROR_STUB_LIBRARY",
    46: "CUDA_ERROR_DEVICE_UNAVAILABLE",
    100: "CUDA_ERROR_NO_DEVICE",
    101: "CUDA_ERROR_INVALID_DEVICE",
    802: "CUDA_ERROR_SYSTEM_NOT_READY",
    803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
    999: "CUDA_ERROR_UNKNOWN",
}


def cuda_driver_api():
    """cuInit(0) and cuDeviceGetCount through libcuda: the codes torch only half reports."""
    out = {"library": None, "driver_cuda": None, "init_code": None, "error_name": None}
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        out["load_error"] = str(exc)
        return out
    out["library"] = mapped("libcuda.so")
    ver = ctypes.c_int(0)
    if lib.cuDriverGetVersion(ctypes.byref(ver)) == 0 and ver.value:
        out["driver_cuda"] = "%d.%d" % (ver.value // 1000, ver.value % 1000 // 10)
    t0 = time.monotonic()
    rc = lib.cuInit(0)
    out["init_seconds"] = round(time.monotonic() - t0, 4)
    out["init_code"] = rc
    out["error_name"] = CU_ERRORS.get(rc, "CUresult %d" % rc)
    if rc != 0:
        msg = ctypes.c_char_p()
        try:
            if lib.cuGetErrorString(rc, ctypes.byref(msg)) == 0 and msg.value:
                out["error_string"] = msg.value.decode()
        except Exception:
            pass
        return out
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) == 0:
        out["device_count"] = count.value
    return out
