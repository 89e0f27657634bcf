"""gputui's diagnosis child: why CUDA, cuDNN or NCCL do not work in *this* interpreter.

Runs INSIDE the interpreter being diagnosed, as a file (`python probe.py`), so it uses the
standard library only (plus torch, which it probes, and libnvidia-ml / libcuda through
ctypes) and stays compatible with Python 3.8.  It imports nothing from gputui.

Protocol (version 1): one JSON object per line on stdout, UTF-8.  Everything else a library
prints goes to stderr (stdout's file descriptor is moved aside before anything is imported).
Every object has "v" (the protocol version) and "event":

  {"v": 1, "event": "hello", "tool": "probe", "python": "3.11.7", "executable": "...",
   "prefix": "...", "pid": 123, "time": 1795000000.0}
  {"v": 1, "event": "phase", "name": "torch-import", "state": "start" | "end", "title": "..."}
  {"v": 1, "event": "check", "id": "torch.build", "group": "torch", "title": "...",
   "status": "PASS" | "WARN" | "FAIL" | "SKIP", "summary": "one line",
   "evidence": {...}, "cause": "cpu-only-wheel" | null, "fix": ["..."], "note": "..." | null,
   "seconds": 0.01}
  {"v": 1, "event": "done", "seconds": 3.2}

`cause` names the failure mode (gputui/diag/verdicts.py explains each and adds its fix);
`fix` holds the steps only this process can know (a directory, a variable).  Phases bracket
slow steps so a parent that has to kill a hung child can say what was running.  Any other
line on stdout is not part of the protocol.

Run by hand: `python probe.py` prints the events; `--no-nccl` skips the multi-GPU all-reduce.
"""

from __future__ import annotations

import ctypes
import glob
import json
import math
import os
import re
import socket
import subprocess
import sys
import threading
import time
import traceback
import warnings

PROTOCOL = 1

# Running as a file puts this directory first on sys.path; nothing here may shadow a module
# the diagnosed code imports (a `probe` or `stress` package of the user's, say).
_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or ".") == _HERE and __name__ == "__main__":
    del sys.path[0]

_OUT = None  # the protocol stream (the real stdout)
_OUT_LOCK = threading.Lock()
_T0 = time.monotonic()


def take_stdout():
    """Keep the real stdout for the protocol; route fd 1 (C libraries, NCCL_DEBUG) to stderr."""
    global _OUT
    if _OUT is not None:
        return
    sys.stdout.flush()
    fd = os.dup(1)
    os.dup2(2, 1)
    _OUT = os.fdopen(fd, "w", buffering=1, encoding="utf-8", errors="replace")
    sys.stdout = sys.stderr


def _plain(value):
    """JSON-safe copy: NaN/Inf become strings, tuples lists, unknown objects their str()."""
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    return str(value)


def emit(event, **fields):
    obj = {"v": PROTOCOL, "event": event}
    obj.update(fields)
    line = json.dumps(_plain(obj), ensure_ascii=False, allow_nan=False)
    with _OUT_LOCK:
        out = _OUT if _OUT is not None else sys.stdout
        out.write(line + "\n")
        out.flush()


def hello(tool, **extra):
    """The first event of a child: which tool, in which interpreter, as which process."""
    emit(
        "hello",
        tool=tool,
        python=sys.version.split()[0],
        executable=sys.executable,
        prefix=sys.prefix,
        pid=os.getpid(),
        time=time.time(),
        **extra,
    )


class Phase:
    """Brackets a slow step with phase events (what was running if we are killed)."""

    def __init__(self, name, title):
        self.name = name
        self.title = title

    def __enter__(self):
        emit("phase", name=self.name, state="start", title=self.title)
        return self

    def __exit__(self, *exc):
        emit("phase", name=self.name, state="end", title=self.title)
        return False


def check(cid, group, title, status, summary, evidence=None, cause=None, fix=None, note=None, t0=None):
    emit(
        "check",
        id=cid,
        group=group,
        title=title,
        status=status,
        summary=summary,
        evidence=evidence or {},
        cause=cause,
        fix=list(fix or []),
        note=note,
        seconds=round(time.monotonic() - t0, 4) if t0 is not None else None,
    )


def tail(text, lines=15):
    parts = text.strip().splitlines()
    return "\n".join(parts[-lines:])


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def version_tuple(text):
    """ "12.8" -> (12, 8); None when it is not a version."""
    if not text:
        return None
    m = re.match(r"^(\d+)\.(\d+)", str(text))
    return (int(m.group(1)), int(m.group(2))) if m else None


# --------------------------------------------------------------------------------------
# NVML and the CUDA driver API through ctypes: no pynvml needed in the diagnosed env
# --------------------------------------------------------------------------------------

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


class _EventData(ctypes.Structure):
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
        maps = _read("/proc/self/maps") or ""
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

    def compute_pids(self, i):
        """PIDs with a compute context on GPU i (None when NVML cannot say)."""

        class _Proc(ctypes.Structure):
            _fields_ = [
                ("pid", ctypes.c_uint),
                ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint),
                ("computeInstanceId", ctypes.c_uint),
            ]

        h = self.handles[i]
        count = ctypes.c_uint(64)
        procs = (_Proc * 64)()
        for name in ("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"):
            if self.call(name, h, ctypes.byref(count), procs) == 0:
                return [procs[k].pid for k in range(count.value)]
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
    out["library"] = _mapped("libcuda.so")
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


def _mapped(fragment):
    for line in (_read("/proc/self/maps") or "").splitlines():
        parts = line.split()
        if len(parts) >= 6 and fragment in os.path.basename(parts[-1]):
            return parts[-1]
    return None


# --------------------------------------------------------------------------------------
# the checks, in the order a layer depends on the one before
# --------------------------------------------------------------------------------------


class Probe:
    def __init__(self, options):
        self.options = options
        self.nvml = Nvml()
        self.nvml_devices = []
        self.driver_cuda = None
        self.in_container = False
        self.container_evidence = []
        self.expected_visible = None  # GPUs CUDA should see, from NVML and the variables
        self.torch = None
        self.torch_cuda = None
        self.cuda_api = None
        self.available = False
        self.device_count = 0
        self.link_under_load = {}
        self.workers = []
        self.worker_started = None

    # ---- system ----------------------------------------------------------------------

    def python(self):
        t0 = time.monotonic()
        env = "system"
        if sys.prefix != getattr(sys, "base_prefix", sys.prefix):
            env = "venv"
        if os.path.isdir(os.path.join(sys.prefix, "conda-meta")):
            env = "conda"
        check(
            "system.python",
            "system",
            "Python interpreter",
            "PASS",
            f"Python {sys.version.split()[0]} ({env}) at {sys.executable}",
            evidence={
                "executable": sys.executable,
                "version": sys.version,
                "prefix": sys.prefix,
                "environment": env,
                "platform": sys.platform,
                "machine": os.uname().machine if hasattr(os, "uname") else None,
                "kernel": os.uname().release if hasattr(os, "uname") else None,
                "hostname": socket.gethostname(),
                "PYTHONPATH": os.environ.get("PYTHONPATH"),
            },
            t0=t0,
        )

    def driver(self):
        t0 = time.monotonic()
        nv = self.nvml
        ok = nv.open()
        proc_version = _read("/proc/driver/nvidia/version")
        kernel_version = None
        if proc_version:
            m = re.search(r"Kernel Module(?: for \S+)?\s+([0-9][0-9.]+)", proc_version)
            kernel_version = m.group(1) if m else None
        modules = _read("/proc/modules") or ""
        loaded = sorted({ln.split()[0] for ln in modules.splitlines() if ln.split()})
        nvidia_loaded = "nvidia" in loaded
        nouveau_loaded = "nouveau" in loaded
        self.kernel_evidence = {
            "kernel_module_version": kernel_version,
            "nvidia_module_loaded": nvidia_loaded if modules else None,
            "nouveau_loaded": nouveau_loaded if modules else None,
            "nvidia_uvm_loaded": ("nvidia_uvm" in loaded) if modules else None,
        }
        ev = {"library": nv.library_path() if nv.lib is not None else None}
        ev.update(self.kernel_evidence)
        if not ok:
            if nv.lib is None:
                ev["load_error"] = nv.load_error
                cause = "nouveau" if nouveau_loaded else "no-driver"
                summary = f"libnvidia-ml.so.1 (part of the NVIDIA driver) cannot be loaded: {nv.load_error}"
                if self.in_container:
                    cause = "container-no-gpus"
            else:
                ev["nvml_error"] = nv.init_error
                ev["nvml_code"] = nv.init_code
                lib_version = None
                m = re.search(r"libnvidia-ml\.so\.(\d+\.\d+(?:\.\d+)?)", ev["library"] or "")
                if m:
                    lib_version = m.group(1)
                ev["library_version"] = lib_version
                cause = {
                    18: "driver-library-mismatch",
                    9: "driver-not-loaded",
                    4: "no-permission",
                }.get(nv.init_code, "nvml-error")
                if cause == "driver-not-loaded" and nouveau_loaded:
                    cause = "nouveau"
                summary = f"NVML failed: {nv.init_error} (NVML error {nv.init_code})"
                if cause == "driver-library-mismatch":
                    summary += ": kernel module {}, library {}".format(
                        kernel_version or "?", lib_version or "?"
                    )
            check("driver.nvml", "driver", "NVIDIA driver (NVML)", "FAIL", summary, ev, cause=cause, t0=t0)
            return
        self.driver_cuda = nv.cuda_version()
        driver_version = nv.driver_version()
        self.nvml_devices = [nv.device(i) for i in range(len(nv.handles))]
        ev.update(
            {
                "driver_version": driver_version,
                "cuda_driver_version": self.driver_cuda,
                "nvml_version": nv.text("nvmlSystemGetNVMLVersion"),
                "device_count": len(self.nvml_devices),
                "devices": self.nvml_devices,
            }
        )
        status, cause, note = "PASS", None, None
        summary = "driver %s, supports CUDA up to %s, %d GPU%s" % (
            driver_version,
            self.driver_cuda,
            len(self.nvml_devices),
            "" if len(self.nvml_devices) == 1 else "s",
        )
        if not self.nvml_devices:
            status, cause = "FAIL", "no-gpu"
            summary = f"the driver {driver_version} is loaded but reports no GPU"
        elif kernel_version and driver_version and kernel_version != driver_version:
            status, cause = "WARN", "driver-library-mismatch"
            note = f"kernel module {kernel_version}, user-space library {driver_version}"
        check(
            "driver.nvml",
            "driver",
            "NVIDIA driver (NVML)",
            status,
            summary,
            ev,
            cause=cause,
            note=note,
            t0=t0,
        )

    def device_nodes(self):
        t0 = time.monotonic()
        nodes = sorted(glob.glob("/dev/nvidia*"))
        info = {}
        for path in nodes:
            if os.path.isdir(path):
                continue
            info[path] = "rw" if os.access(path, os.R_OK | os.W_OK) else "no access"
        ev = {"nodes": info, "in_container": self.in_container, "container_evidence": self.container_evidence}
        gpu_nodes = [p for p in info if re.match(r"/dev/nvidia\d+$", p)]
        if not info:
            if self.nvml.ok:
                cause = "container-no-gpus" if self.in_container else "no-device-nodes"
                check(
                    "driver.devices",
                    "driver",
                    "Device files /dev/nvidia*",
                    "FAIL",
                    "no /dev/nvidia* device files" + (" in this container" if self.in_container else ""),
                    ev,
                    cause=cause,
                    t0=t0,
                )
            else:
                check(
                    "driver.devices",
                    "driver",
                    "Device files /dev/nvidia*",
                    "SKIP",
                    "no /dev/nvidia* device files (consistent with the driver check above)",
                    ev,
                    t0=t0,
                )
            return
        denied = [p for p, a in info.items() if a != "rw"]
        if denied:
            check(
                "driver.devices",
                "driver",
                "Device files /dev/nvidia*",
                "FAIL",
                "this user cannot open {}".format(", ".join(denied)),
                ev,
                cause="no-permission",
                t0=t0,
            )
            return
        if "/dev/nvidia-uvm" not in info and self.nvml.ok:
            check(
                "driver.devices",
                "driver",
                "Device files /dev/nvidia*",
                "FAIL",
                "/dev/nvidia-uvm is missing: CUDA cannot allocate memory without the nvidia-uvm module",
                ev,
                cause="uvm-missing",
                t0=t0,
            )
            return
        check(
            "driver.devices",
            "driver",
            "Device files /dev/nvidia*",
            "PASS",
            "%d GPU device file%s, control and UVM present and accessible"
            % (len(gpu_nodes), "" if len(gpu_nodes) == 1 else "s"),
            ev,
            t0=t0,
        )

    def container(self):
        why = []
        if os.path.exists("/.dockerenv"):
            why.append("/.dockerenv")
        if os.path.exists("/run/.containerenv"):
            why.append("/run/.containerenv (podman)")
        cgroup = _read("/proc/1/cgroup") or ""
        for word in ("docker", "kubepods", "containerd", "libpod", "lxc"):
            if word in cgroup:
                why.append(f"/proc/1/cgroup mentions {word}")
                break
        if os.environ.get("container"):
            why.append("container={}".format(os.environ["container"]))
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            why.append("KUBERNETES_SERVICE_HOST is set")
        self.in_container = bool(why)
        self.container_evidence = why

    def visibility(self):
        t0 = time.monotonic()
        env = os.environ
        cvd = env.get("CUDA_VISIBLE_DEVICES")
        nvd = env.get("NVIDIA_VISIBLE_DEVICES")
        order = env.get("CUDA_DEVICE_ORDER")
        n = len(self.nvml_devices)
        ev = {
            "CUDA_VISIBLE_DEVICES": cvd,
            "NVIDIA_VISIBLE_DEVICES": nvd,
            "CUDA_DEVICE_ORDER": order,
            "in_container": self.in_container,
            "container_evidence": self.container_evidence,
            "nvml_device_count": n if self.nvml.ok else None,
        }
        status, cause, notes, summary = "PASS", None, [], ""
        visible = list(range(n))
        if cvd is not None:
            visible, invalid, ignored = parse_visible_devices(
                cvd, self.nvml_devices if self.nvml.ok else None
            )
            ev.update({"visible": visible, "invalid_entry": invalid, "ignored_entries": ignored})
            if cvd.strip() == "":
                status, cause = "FAIL", "cvd-empty"
                summary = "CUDA_VISIBLE_DEVICES is set to nothing: CUDA sees no GPU"
            elif invalid is not None and not visible:
                status, cause = "FAIL", "cvd-invalid"
                summary = f"CUDA_VISIBLE_DEVICES={cvd}: {invalid!r} is not a GPU here, so CUDA sees none"
            elif invalid is not None:
                status, cause = "WARN", "cvd-invalid"
                summary = (
                    f"CUDA_VISIBLE_DEVICES={cvd}: {invalid!r} is not a GPU here; "
                    f"CUDA stops there and sees only {visible}"
                )
            elif not self.nvml.ok:
                summary = f"CUDA_VISIBLE_DEVICES={cvd} (not checked against the GPUs: no driver)"
            elif len(visible) < n:
                summary = "CUDA_VISIBLE_DEVICES=%s shows %d of the %d GPUs" % (cvd, len(visible), n)
                notes.append("the others are hidden from CUDA on purpose, it seems")
            else:
                summary = f"CUDA_VISIBLE_DEVICES={cvd}"
        else:
            summary = "CUDA_VISIBLE_DEVICES is not set: CUDA sees every GPU" + (" (%d)" % n if n else "")
        if nvd is not None and nvd.strip().lower() in ("", "void", "none"):
            if status == "PASS":
                status, cause = "FAIL" if not n else "WARN", "nvd-none"
            summary += f"; NVIDIA_VISIBLE_DEVICES={nvd!r} asks the container runtime for no GPU"
        if self.nvml.ok and n > 1 and order != "PCI_BUS_ID":
            names = {d.get("name") for d in self.nvml_devices}
            if len(names) > 1:
                if status == "PASS":
                    status, cause = "WARN", "device-order"
                notes.append(
                    "GPUs of different models and CUDA_DEVICE_ORDER is not PCI_BUS_ID: CUDA numbers "
                    "the fastest first, so CUDA's device 0 may not be nvidia-smi's GPU 0"
                )
        if self.in_container:
            notes.append("in a container ({})".format("; ".join(self.container_evidence)))
        self.expected_visible = len(visible) if self.nvml.ok else None
        check(
            "visibility.env",
            "visibility",
            "GPU visibility (CUDA_VISIBLE_DEVICES, containers)",
            status,
            summary,
            ev,
            cause=cause,
            note="; ".join(notes) or None,
            t0=t0,
        )

    # ---- environment -----------------------------------------------------------------

    def variables(self):
        t0 = time.monotonic()
        env = os.environ
        flagged = {}
        for name in DCGM_FLAGGED_VARIABLES:
            if name in env:
                flagged[name] = env[name]
        shown = {}
        for name in SHOWN_VARIABLES:
            if name in env:
                shown[name] = env[name]
        for name in sorted(env):
            if name.startswith(("NCCL_", "TORCH_NCCL")):
                shown[name] = env[name]
        status, cause, notes = "PASS", None, []
        if env.get("CUDA_LAUNCH_BLOCKING", "0") not in ("", "0"):
            status, cause = "WARN", "launch-blocking"
            notes.append(
                "CUDA_LAUNCH_BLOCKING={} makes every kernel launch synchronous".format(
                    env["CUDA_LAUNCH_BLOCKING"]
                )
            )
        if flagged:
            status, cause = "WARN", cause or "injection-variables"
            notes.append(
                "set: {} (DCGM flags these: profilers, debuggers, injection)".format(
                    ", ".join(sorted(flagged))
                )
            )
        if env.get("PYTORCH_NO_CUDA_MEMORY_CACHING", "0") not in ("", "0"):
            status, cause = "WARN", cause or "no-caching-allocator"
            notes.append("PYTORCH_NO_CUDA_MEMORY_CACHING turns off PyTorch's caching allocator (slow)")
        if env.get("CUDA_CACHE_DISABLE", "0") not in ("", "0"):
            notes.append("CUDA_CACHE_DISABLE: PTX is JIT-compiled again on every start")
        summary = "; ".join(notes) if notes else "no variable that slows CUDA down or injects into it"
        if "PYTORCH_CUDA_ALLOC_CONF" in env or "PYTORCH_ALLOC_CONF" in env:
            summary += "; allocator: %s" % (
                env.get("PYTORCH_CUDA_ALLOC_CONF") or env.get("PYTORCH_ALLOC_CONF")
            )
        check(
            "env.variables",
            "environment",
            "Environment variables",
            status,
            summary,
            {"flagged": flagged, "shown": shown},
            cause=cause,
            t0=t0,
        )

    def library_path(self):
        t0 = time.monotonic()
        found = {}
        stubs = []
        paths = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
        for d in paths:
            for pattern in LIBRARY_PATTERNS:
                for f in sorted(glob.glob(os.path.join(d, pattern))):
                    found.setdefault(d, []).append(os.path.basename(f))
            if os.path.basename(os.path.normpath(d)) == "stubs" and glob.glob(os.path.join(d, "libcuda.so*")):
                stubs.append(d)
        self.ld_library_path_libs = found
        ev = {"LD_LIBRARY_PATH": paths, "cuda_libraries_found": found, "stub_dirs": stubs}
        cudnn = [d for d, fs in found.items() if any(f.startswith("libcudnn") for f in fs)]
        nccl = [d for d, fs in found.items() if any(f.startswith("libnccl") for f in fs)]
        status, cause, parts, fix = "PASS", None, [], []
        if stubs:
            status, cause = "FAIL", "cuda-stub"
            parts.append(f"the libcuda.so *stub* from the CUDA toolkit is on LD_LIBRARY_PATH ({stubs[0]})")
            fix.append(f"remove {stubs[0]} from LD_LIBRARY_PATH (it is for linking only)")
        if cudnn:
            status, cause = ("WARN", cause or "cudnn-shadow") if status == "PASS" else (status, cause)
            parts.append("a system cuDNN in {} can shadow the one torch ships".format(", ".join(cudnn)))
        if nccl:
            status, cause = ("WARN", cause or "nccl-shadow") if status == "PASS" else (status, cause)
            parts.append("a system NCCL in {} can shadow the one torch ships".format(", ".join(nccl)))
        summary = (
            "; ".join(parts)
            if parts
            else (
                "no CUDA, cuDNN or NCCL library on LD_LIBRARY_PATH"
                if not found
                else "CUDA libraries on LD_LIBRARY_PATH: {}".format(", ".join(sorted(found)))
            )
        )
        check(
            "env.libpath", "environment", "LD_LIBRARY_PATH", status, summary, ev, cause=cause, fix=fix, t0=t0
        )

    def wheels(self):
        t0 = time.monotonic()
        try:
            from importlib import metadata
        except ImportError:  # 3.7
            check("env.wheels", "environment", "CUDA wheels", "SKIP", "importlib.metadata is missing", t0=t0)
            return
        installed = {}
        locations = {}
        for dist in metadata.distributions():
            try:
                name = (dist.metadata["Name"] or "").lower().replace("_", "-")
            except Exception:
                continue
            if not name:
                continue
            installed.setdefault(name, []).append(dist.version)
            try:
                locations.setdefault(name, []).append(str(dist.locate_file("")))
            except Exception:
                pass
        families = {}
        for name, versions in installed.items():
            m = re.match(r"^nvidia-(.+?)(?:-cu(\d+))?$", name)
            if m and name not in ("nvidia-ml-py", "nvidia-ml-py3"):
                families.setdefault(m.group(1), []).append((name, versions))
        duplicates = {}
        for lib, entries in families.items():
            names = [n for n, _ in entries]
            multi_version = any(len(v) > 1 for _, v in entries)
            if len(names) > 1 or multi_version:
                duplicates[lib] = dict(entries)
        torch_pins = {}
        mismatched = {}
        if "torch" in installed:
            try:
                reqs = metadata.requires("torch") or []
            except Exception:
                reqs = []
            for req in reqs:
                m = re.match(r"^(nvidia-[A-Za-z0-9_.-]+)\s*==\s*([^;\s]+)", req)
                if m:
                    pin_name = m.group(1).lower().replace("_", "-")
                    torch_pins[pin_name] = m.group(2)
                    have = installed.get(pin_name)
                    if have and m.group(2) not in have:
                        mismatched[pin_name] = {"torch_requires": m.group(2), "installed": have}
        ev = {
            "nvidia_wheels": {n: v for n, v in installed.items() if n.startswith("nvidia-")},
            "duplicates": duplicates,
            "torch_pins": torch_pins,
            "pin_mismatches": mismatched,
            "torch_distributions": installed.get("torch", []),
            "torch_locations": locations.get("torch", []),
        }
        status, cause, parts = "PASS", None, []
        if len(installed.get("torch", [])) > 1:
            status, cause = "WARN", "two-torch"
            parts.append(
                "%d torch installations: %s" % (len(installed["torch"]), ", ".join(installed["torch"]))
            )
        if duplicates:
            status = "WARN"
            libs = sorted(duplicates)
            cause = cause or ("two-nccl" if "nccl" in libs else "two-cuda-wheels")
            parts.append(
                "two builds of the same NVIDIA library installed: {}".format(
                    "; ".join("{} ({})".format(k, ", ".join(sorted(duplicates[k]))) for k in libs)
                )
            )
        if mismatched:
            status = "WARN"
            cause = cause or ("two-nccl" if any("nccl" in k for k in mismatched) else "wheel-pin-mismatch")
            parts.append(
                "versions torch was not built with: {}".format(
                    "; ".join(
                        "{} {} (torch wants {})".format(k, "/".join(v["installed"]), v["torch_requires"])
                        for k, v in sorted(mismatched.items())
                    )
                )
            )
        n_nv = len(ev["nvidia_wheels"])
        summary = (
            "; ".join(parts)
            if parts
            else (
                "%d NVIDIA wheels, one of each, at the versions torch asks for" % n_nv
                if n_nv
                else "no NVIDIA wheels installed"
            )
        )
        check("env.wheels", "environment", "CUDA library wheels", status, summary, ev, cause=cause, t0=t0)

    # ---- torch -----------------------------------------------------------------------

    def start_driver_api(self):
        """cuInit in a thread while torch imports: the two cost about the same and overlap."""
        result = {}

        def run():
            try:
                result.update(cuda_driver_api())
            except Exception as exc:
                result["exception"] = repr(exc)
            emit("phase", name="cuda-init", state="end", title="CUDA driver initialisation (cuInit)")

        thread = threading.Thread(target=run, name="cuinit", daemon=True)
        emit("phase", name="cuda-init", state="start", title="CUDA driver initialisation (cuInit)")
        thread.start()
        return thread, result

    def driver_api(self, thread, result):
        t0 = time.monotonic()
        thread.join()
        self.cuda_api = result
        if "load_error" in result:
            if self.nvml.ok:
                check(
                    "cuda.driver",
                    "driver",
                    "CUDA driver API (libcuda)",
                    "FAIL",
                    "NVML works but libcuda.so.1 cannot be loaded: {}".format(result["load_error"]),
                    result,
                    cause="no-libcuda",
                    t0=t0,
                )
            else:
                check(
                    "cuda.driver",
                    "driver",
                    "CUDA driver API (libcuda)",
                    "SKIP",
                    "libcuda.so.1 is not installed (no NVIDIA driver)",
                    result,
                    t0=t0,
                )
            return
        if not self.driver_cuda:
            self.driver_cuda = result.get("driver_cuda")
        code = result.get("init_code")
        if code == 0:
            check(
                "cuda.driver",
                "driver",
                "CUDA driver API (libcuda)",
                "PASS",
                "cuInit succeeded in {:.2f} s: {} device{}, driver CUDA {}".format(
                    result.get("init_seconds", 0),
                    result.get("device_count"),
                    "" if result.get("device_count") == 1 else "s",
                    result.get("driver_cuda"),
                ),
                result,
                t0=t0,
            )
            return
        cause = cuda_cause(code, self)
        check(
            "cuda.driver",
            "driver",
            "CUDA driver API (libcuda)",
            "FAIL",
            "cuInit failed: error {} {}: {}".format(
                code, result.get("error_name"), result.get("error_string", "")
            ),
            result,
            cause=cause,
            t0=t0,
        )

    def import_torch(self):
        t0 = time.monotonic()
        with Phase("torch-import", "import torch"):
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    import torch
            except BaseException as exc:  # SystemExit, a segfault-free crash: all findings
                text = traceback.format_exc()
                ev = {"exception": f"{type(exc).__name__}: {exc}", "traceback": tail(text, 25)}
                if isinstance(exc, ModuleNotFoundError) and getattr(exc, "name", None) == "torch":
                    check(
                        "torch.import",
                        "torch",
                        "import torch",
                        "FAIL",
                        f"torch is not installed in this interpreter ({sys.executable})",
                        ev,
                        cause="torch-missing",
                        t0=t0,
                    )
                else:
                    check(
                        "torch.import",
                        "torch",
                        "import torch",
                        "FAIL",
                        "import torch raised {}: {}".format(
                            type(exc).__name__, str(exc).splitlines()[0] if str(exc) else ""
                        ),
                        ev,
                        cause=import_cause(str(exc) + "\n" + text),
                        t0=t0,
                    )
                return False
        self.torch = torch
        seconds = time.monotonic() - t0
        import_warnings = [str(w.message) for w in caught][:5]
        check(
            "torch.import",
            "torch",
            "import torch",
            "PASS",
            f"torch {torch.__version__} imported in {seconds:.1f} s from {os.path.dirname(torch.__file__)}",
            {
                "version": torch.__version__,
                "path": torch.__file__,
                "seconds": round(seconds, 3),
                "warnings": import_warnings,
            },
            t0=t0,
        )
        return True

    def torch_build(self):
        t0 = time.monotonic()
        torch = self.torch
        version = getattr(torch, "version", None)
        cuda = getattr(version, "cuda", None)
        hip = getattr(version, "hip", None)
        self.torch_cuda = cuda
        ev = {
            "version": torch.__version__,
            "cuda": cuda,
            "hip": hip,
            "git": getattr(version, "git_version", None),
            "debug": getattr(version, "debug", None),
            "cudnn_compiled": _safe(torch.backends.cudnn.version) if cuda else None,
            "nccl": _safe(lambda: ".".join(str(x) for x in torch.cuda.nccl.version())) if cuda else None,
            "arch_list": _safe(lambda: torch._C._cuda_getArchFlags().split()) if cuda else None,
        }
        if hip:
            check(
                "torch.build",
                "torch",
                "torch build",
                "FAIL",
                f"torch {torch.__version__} is a ROCm (AMD) build",
                ev,
                cause="rocm-build",
                t0=t0,
            )
            return False
        if not cuda:
            check(
                "torch.build",
                "torch",
                "torch build",
                "FAIL",
                f"torch {torch.__version__} is a CPU-only build: it cannot use any GPU",
                ev,
                cause="cpu-only-wheel",
                t0=t0,
            )
            return False
        check(
            "torch.build",
            "torch",
            "torch build",
            "PASS",
            "torch {} built for CUDA {}{}".format(
                torch.__version__,
                cuda,
                ", cuDNN {}".format(ev["cudnn_compiled"]) if ev["cudnn_compiled"] else "",
            ),
            ev,
            t0=t0,
        )
        return True

    def cuda_vs_driver(self):
        t0 = time.monotonic()
        runtime = version_tuple(self.torch_cuda)
        driver = version_tuple(self.driver_cuda)
        ev = {
            "torch_cuda": self.torch_cuda,
            "driver_cuda": self.driver_cuda,
            "driver_version": self.nvml.driver_version() if self.nvml.ok else None,
        }
        if driver is None:
            check(
                "torch.cuda_vs_driver",
                "torch",
                "CUDA runtime vs driver",
                "SKIP",
                "the driver's CUDA version is unknown (no driver)",
                ev,
                t0=t0,
            )
            return
        if runtime[0] > driver[0]:
            check(
                "torch.cuda_vs_driver",
                "torch",
                "CUDA runtime vs driver",
                "FAIL",
                f"torch needs CUDA {self.torch_cuda} but the driver supports only up to "
                f"CUDA {self.driver_cuda}",
                ev,
                cause="driver-too-old",
                t0=t0,
            )
        elif runtime > driver:
            check(
                "torch.cuda_vs_driver",
                "torch",
                "CUDA runtime vs driver",
                "WARN",
                f"torch is built for CUDA {self.torch_cuda}, the driver supports {self.driver_cuda}: "
                "it runs through minor-version compatibility (no PTX JIT of newer code)",
                ev,
                cause="driver-minor-older",
                t0=t0,
            )
        else:
            check(
                "torch.cuda_vs_driver",
                "torch",
                "CUDA runtime vs driver",
                "PASS",
                f"torch's CUDA {self.torch_cuda} <= the driver's CUDA {self.driver_cuda}",
                ev,
                t0=t0,
            )

    def cuda_available(self):
        t0 = time.monotonic()
        torch = self.torch
        with Phase("cuda-available", "torch.cuda.is_available() (CUDA initialisation)"):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                available = bool(torch.cuda.is_available())
                count = int(torch.cuda.device_count()) if available else 0
            messages = [str(w.message) for w in caught]
            init_error = None
            if not available:
                try:
                    torch.cuda.init()
                except Exception as exc:
                    init_error = f"{type(exc).__name__}: {exc}"
        self.available = available
        self.device_count = count
        text = "\n".join(messages + ([init_error] if init_error else []))
        code = None
        m = re.search(r"[Ee]rror (\d+)", text)
        if m:
            code = int(m.group(1))
        elif "too old" in text or "insufficient" in text.lower():
            code = 35
        api = self.cuda_api or {}
        if code is None and api.get("init_code"):
            code = api["init_code"]
        ev = {
            "available": available,
            "device_count": count,
            "warnings": messages,
            "init_error": init_error,
            "cuda_error_code": code,
            "driver_api": api.get("error_name"),
        }
        if available:
            check(
                "torch.cuda_available",
                "torch",
                "torch.cuda.is_available()",
                "PASS",
                "True: %d device%s" % (count, "" if count == 1 else "s"),
                ev,
                t0=t0,
            )
            return True
        cause = cuda_cause(code, self)
        detail = first_line(init_error or (messages[0] if messages else "")) or "no error text"
        check(
            "torch.cuda_available",
            "torch",
            "torch.cuda.is_available()",
            "FAIL",
            "False{}: {}".format(" (CUDA error %d)" % code if code is not None else "", detail),
            ev,
            cause=cause,
            t0=t0,
        )
        return False

    def device_count_check(self):
        t0 = time.monotonic()
        n_nvml = len(self.nvml_devices) if self.nvml.ok else None
        expected = self.expected_visible
        ev = {"torch": self.device_count, "nvml": n_nvml, "expected_from_CUDA_VISIBLE_DEVICES": expected}
        if n_nvml is None:
            check(
                "torch.device_count",
                "torch",
                "Devices torch sees",
                "PASS",
                "torch sees %d device(s)" % self.device_count,
                ev,
                t0=t0,
            )
            return
        if expected is not None and self.device_count != expected:
            check(
                "torch.device_count",
                "torch",
                "Devices torch sees",
                "WARN",
                "torch sees %d device(s) but NVML lists %d and CUDA_VISIBLE_DEVICES allows %d"
                % (self.device_count, n_nvml, expected),
                ev,
                cause="count-mismatch",
                t0=t0,
            )
            return
        check(
            "torch.device_count",
            "torch",
            "Devices torch sees",
            "PASS",
            "torch sees %d of the %d GPUs NVML lists" % (self.device_count, n_nvml),
            ev,
            t0=t0,
        )

    # ---- per device ------------------------------------------------------------------

    def devices(self):
        torch = self.torch
        arch = _safe(torch.cuda.get_arch_list) or []
        ok_all = True
        for i in range(self.device_count):
            t0 = time.monotonic()
            try:
                with Phase("device-%d" % i, "initialising GPU %d" % i):
                    props = torch.cuda.get_device_properties(i)
                    torch.zeros(1, device="cuda:%d" % i)
                    torch.cuda.synchronize(i)
            except Exception as exc:
                ok_all = False
                check(
                    "device.%d" % i,
                    "devices",
                    "GPU %d" % i,
                    "FAIL",
                    "cannot use GPU %d: %s" % (i, first_line(str(exc))),
                    {"error": str(exc)},
                    cause=cuda_cause(_error_code(str(exc)), self),
                    t0=t0,
                )
                continue
            cc = "%d.%d" % (props.major, props.minor)
            sm = "sm_%d%d" % (props.major, props.minor)
            ev = {
                "name": props.name,
                "compute_capability": cc,
                "memory_total": props.total_memory,
                "multiprocessors": props.multi_processor_count,
                "tensor_cores": props.major >= 7,
                "bf16": props.major >= 8,
                "arch_list": arch,
                "uuid": str(getattr(props, "uuid", "")) or None,
                "l2_cache": getattr(props, "L2_cache_size", None),
            }
            ptx = [
                a for a in arch if a.startswith("compute_") and _arch_num(a) <= props.major * 10 + props.minor
            ]
            summary = "%s, compute %s, %.1f GiB, %d SMs%s%s" % (
                props.name,
                cc,
                props.total_memory / 2**30,
                props.multi_processor_count,
                ", tensor cores" if props.major >= 7 else "",
                ", bf16" if props.major >= 8 else "",
            )
            if any(a == sm or a.startswith(sm) for a in arch):
                check("device.%d" % i, "devices", "GPU %d" % i, "PASS", summary, ev, t0=t0)
            elif ptx:
                check(
                    "device.%d" % i,
                    "devices",
                    "GPU %d" % i,
                    "WARN",
                    summary
                    + f"; no {sm} kernels in this torch build, PTX ({ptx[-1]}) is JIT-compiled at start",
                    ev,
                    cause="ptx-jit",
                    t0=t0,
                )
            else:
                ok_all = False
                check(
                    "device.%d" % i,
                    "devices",
                    "GPU %d" % i,
                    "FAIL",
                    summary
                    + "; this torch build has no kernels for {} (it has {}): ".format(
                        sm, " ".join(arch) or "none"
                    )
                    + '"no kernel image is available"',
                    ev,
                    cause="no-kernel-image",
                    t0=t0,
                )
        return ok_all

    # ---- cuDNN, flags ----------------------------------------------------------------

    def cudnn(self):
        t0 = time.monotonic()
        torch = self.torch
        cudnn = torch.backends.cudnn
        ev = {
            "available": _safe(cudnn.is_available),
            "enabled": cudnn.enabled,
            "version": _safe(cudnn.version),
            "library": None,
        }
        if not ev["available"]:
            check(
                "cudnn.version",
                "cudnn",
                "cuDNN",
                "FAIL",
                "cuDNN cannot be loaded by torch",
                ev,
                cause="cudnn-missing",
                t0=t0,
            )
            return
        results = []
        with Phase("cudnn-conv", "cuDNN convolution forward and backward"):
            for i in range(self.device_count):
                results.append(conv_check(torch, i))
        ev["library"] = _mapped("libcudnn")
        ev["conv"] = results
        status = "PASS"
        cause = None
        summary = "cuDNN %s, enabled=%s; conv2d forward+backward matches the CPU on %d GPU%s" % (
            ev["version"],
            cudnn.enabled,
            len(results),
            "" if len(results) == 1 else "s",
        )
        bad = [r for r in results if not r.get("ok")]
        if bad:
            status, cause = "FAIL", "cudnn-wrong" if all("error" not in r for r in bad) else "cudnn-error"
            summary = "cuDNN {}: convolution {} on GPU {}".format(
                ev["version"],
                "differs from the CPU" if cause == "cudnn-wrong" else "failed",
                ", ".join(str(r["gpu"]) for r in bad),
            )
        if not cudnn.enabled:
            status, cause = ("WARN", "cudnn-disabled") if status == "PASS" else (status, cause)
            summary += "; torch.backends.cudnn.enabled is False (convolutions use slow fallbacks)"
        check("cudnn.conv", "cudnn", "cuDNN convolution", status, summary, ev, cause=cause, t0=t0)

    def flags(self):
        t0 = time.monotonic()
        torch = self.torch
        ev = {
            "cudnn.benchmark": torch.backends.cudnn.benchmark,
            "cudnn.deterministic": torch.backends.cudnn.deterministic,
            "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
            "cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "float32_matmul_precision": _safe(torch.get_float32_matmul_precision),
            "deterministic_algorithms": _safe(torch.are_deterministic_algorithms_enabled),
        }
        meanings = [
            "cudnn.benchmark={}: {}".format(
                ev["cudnn.benchmark"],
                "cuDNN times algorithms on the first call of each shape (fast for fixed shapes)"
                if ev["cudnn.benchmark"]
                else "cuDNN picks algorithms by heuristics (set True for fixed input shapes)",
            ),
            "cudnn.deterministic={}".format(ev["cudnn.deterministic"]),
            "TF32 convolutions %s" % ("on" if ev["cudnn.allow_tf32"] else "off"),
            "TF32 matmuls {} (precision {})".format(
                "on" if ev["cuda.matmul.allow_tf32"] else "off", ev["float32_matmul_precision"]
            ),
        ]
        ampere = any(torch.cuda.get_device_capability(i)[0] >= 8 for i in range(self.device_count))
        cause = None
        if not ev["cuda.matmul.allow_tf32"] and ampere:
            cause = "tf32-off"
        check(
            "torch.flags",
            "cudnn",
            "cuDNN and TF32 flags",
            "PASS",
            "; ".join(meanings),
            ev,
            cause=cause,
            note="float32 matmuls do not use tensor cores (PyTorch's default since 1.12); "
            "torch.set_float32_matmul_precision('high') allows TF32"
            if cause
            else None,
            t0=t0,
        )

    # ---- functional ------------------------------------------------------------------

    def matmul(self):
        t0 = time.monotonic()
        torch = self.torch
        results = []
        with Phase("matmul", "matmul on each GPU against the CPU"):
            for i in range(self.device_count):
                results.append(matmul_check(torch, i))
            self.link_under_load = self.pcie_under_load()
        bad = [r for r in results if not r.get("ok")]
        if bad:
            check(
                "compute.matmul",
                "compute",
                "Matrix multiply vs CPU",
                "FAIL",
                "wrong or failed matmul on GPU {}".format(", ".join(str(r["gpu"]) for r in bad)),
                {"results": results},
                cause="matmul-wrong" if all("error" not in r for r in bad) else "cuda-error",
                t0=t0,
            )
            return
        check(
            "compute.matmul",
            "compute",
            "Matrix multiply vs CPU",
            "PASS",
            "float32 512x512 matmul matches the CPU (float64) on every GPU (max rel. error {:.1e})".format(
                max(r["max_rel_error"] for r in results)
            ),
            {"results": results},
            t0=t0,
        )

    def pcie_under_load(self):
        """The PCIe link generation while each GPU is busy (it drops at idle to save power)."""
        torch = self.torch
        out = {}
        if not self.nvml.ok:
            return out
        for i in range(self.device_count):
            nvml_index = self.nvml_index(i)
            if nvml_index is None:
                continue
            try:
                with torch.cuda.device(i):
                    a = torch.randn(2048, 2048, device="cuda")
                    for _ in range(60):
                        a = torch.tanh(a @ a)
                    gen, width = self.nvml.link(nvml_index)  # while the queue runs
                    torch.cuda.synchronize(i)
                out[nvml_index] = {"gen": gen, "width": width}
            except Exception as exc:
                out[nvml_index] = {"error": str(exc)}
        return out

    def nvml_index(self, torch_index):
        """NVML's index of torch's device (by UUID or PCI bus id)."""
        torch = self.torch
        try:
            props = torch.cuda.get_device_properties(torch_index)
            uuid = str(getattr(props, "uuid", "") or "")
        except Exception:
            return None
        for d in self.nvml_devices:
            if uuid and d.get("uuid") and d["uuid"].replace("GPU-", "") == uuid.replace("GPU-", ""):
                return d["index"]
        bus = _safe(lambda: torch.cuda.get_device_properties(torch_index).pci_bus_id)
        for d in self.nvml_devices:
            if bus is not None and d.get("bus_id") and int(d["bus_id"].split(":")[1], 16) == bus:
                return d["index"]
        return torch_index if len(self.nvml_devices) == self.device_count else None

    def amp(self):
        t0 = time.monotonic()
        torch = self.torch
        results = []
        for i in range(self.device_count):
            for dtype_name in ("float16", "bfloat16"):
                if dtype_name == "bfloat16" and torch.cuda.get_device_capability(i)[0] < 8:
                    results.append(
                        {"gpu": i, "dtype": dtype_name, "skipped": "no native bf16 before compute 8.0"}
                    )
                    continue
                results.append(amp_check(torch, i, dtype_name))
        bad = [r for r in results if not r.get("ok") and not r.get("skipped")]
        if bad:
            check(
                "compute.amp",
                "compute",
                "Mixed precision (autocast)",
                "FAIL",
                "autocast failed or was wrong: {}".format(
                    ", ".join("GPU %d %s" % (r["gpu"], r["dtype"]) for r in bad)
                ),
                {"results": results},
                cause="amp-wrong",
                t0=t0,
            )
            return
        ran = sorted({r["dtype"] for r in results if r.get("ok")})
        check(
            "compute.amp",
            "compute",
            "Mixed precision (autocast)",
            "PASS",
            "autocast {} runs and matches float32 within its precision".format(" and ".join(ran)),
            {"results": results},
            t0=t0,
        )

    def peers(self):
        t0 = time.monotonic()
        torch = self.torch
        n = self.device_count
        if n < 2:
            check("compute.peer", "compute", "Peer-to-peer access", "SKIP", "one GPU: nothing to pair", t0=t0)
            return
        pairs = []
        for i in range(n):
            for j in range(n):
                if i == j:
                    continue
                entry = {
                    "from": i,
                    "to": j,
                    "access": _safe(lambda i=i, j=j: torch.cuda.can_device_access_peer(i, j)),
                }
                if i < j:
                    try:
                        x = torch.arange(1 << 20, dtype=torch.float32, device="cuda:%d" % i)
                        y = x.to("cuda:%d" % j)
                        back = y.to("cuda:%d" % i)
                        entry["copy_ok"] = bool(torch.equal(x, back))
                    except Exception as exc:
                        entry["copy_ok"] = False
                        entry["error"] = first_line(str(exc))
                pairs.append(entry)
        no_access = [p for p in pairs if not p["access"]]
        bad_copy = [p for p in pairs if p.get("copy_ok") is False]
        if bad_copy:
            status, cause = "FAIL", "p2p-wrong"
            summary = "a copy between GPUs came back wrong: {}".format(
                ", ".join("%d<->%d" % (p["from"], p["to"]) for p in bad_copy)
            )
        elif no_access:
            status, cause = "WARN", "no-p2p"
            summary = "no direct peer access for {}: copies go through host memory".format(
                ", ".join("%d->%d" % (p["from"], p["to"]) for p in no_access)
            )
        else:
            status, cause = "PASS", None
            summary = "every pair of the %d GPUs has direct peer access; copies are exact" % n
        check(
            "compute.peer",
            "compute",
            "Peer-to-peer access",
            status,
            summary,
            {"pairs": pairs},
            cause=cause,
            t0=t0,
        )

    # ---- NCCL ------------------------------------------------------------------------

    def start_nccl(self):
        """Start one all-reduce worker per GPU now, so their torch import overlaps ours."""
        n = self.expected_visible if self.expected_visible is not None else len(self.nvml_devices)
        if self.options.get("no_nccl") or not self.nvml.ok or n < 2:
            return
        port = _free_port()
        env = dict(os.environ)
        env.update(MULTICAST_OFF)
        env.setdefault("NCCL_DEBUG", "WARN")
        self.worker_started = time.monotonic()
        for rank in range(n):
            self.workers.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        os.path.abspath(__file__),
                        "--nccl-worker",
                        str(rank),
                        str(n),
                        str(port),
                    ],
                    stdout=subprocess.PIPE,
                    stdin=subprocess.DEVNULL,
                    env=env,
                )
            )

    def nccl(self):
        t0 = time.monotonic()
        if not self.workers:
            reason = (
                "one GPU: nothing to reduce across"
                if (self.expected_visible or 0) < 2
                else "skipped (--no-nccl)"
            )
            if not self.nvml.ok:
                reason = "no NVML: GPU count unknown"
            check("compute.nccl", "compute", "NCCL all-reduce", "SKIP", reason, t0=t0)
            return
        if not self.available or self.device_count < 2:
            self.stop_workers()
            check(
                "compute.nccl",
                "compute",
                "NCCL all-reduce",
                "SKIP",
                "fewer than 2 GPUs usable by torch",
                t0=t0,
            )
            return
        results = []
        with Phase("nccl", "NCCL all-reduce across %d GPUs" % len(self.workers)):
            deadline = time.monotonic() + float(self.options.get("nccl_timeout", 90))
            for proc in self.workers:
                left = max(0.1, deadline - time.monotonic())
                try:
                    out, _ = proc.communicate(timeout=left)
                    line = [ln for ln in out.decode("utf-8", "replace").splitlines() if ln.startswith("{")]
                    results.append(
                        json.loads(line[-1])
                        if line
                        else {"ok": False, "error": f"no result (exit {proc.returncode})"}
                    )
                except subprocess.TimeoutExpired:
                    results.append({"ok": False, "error": "timed out"})
            self.stop_workers()
        ok = all(r.get("ok") for r in results) and len(results) >= 2
        version = next((r.get("nccl") for r in results if r.get("nccl")), None)
        ev = {
            "ranks": results,
            "world_size": len(results),
            "nccl": version,
            "multicast_off": MULTICAST_OFF,
            "seconds": round(time.monotonic() - (self.worker_started or t0), 2),
        }
        if ok:
            check(
                "compute.nccl",
                "compute",
                "NCCL all-reduce",
                "PASS",
                "all-reduce over %d GPUs (one process each) gave the right sum; NCCL %s"
                % (len(results), version),
                ev,
                t0=t0,
            )
        else:
            errors = "; ".join(first_line(str(r.get("error"))) for r in results if not r.get("ok"))
            check(
                "compute.nccl",
                "compute",
                "NCCL all-reduce",
                "FAIL",
                f"all-reduce failed: {errors}",
                ev,
                cause=nccl_cause(errors),
                t0=t0,
            )

    def stop_workers(self):
        for proc in self.workers:
            if proc.poll() is None:
                proc.kill()
            try:
                proc.wait(timeout=5)
            except Exception:
                pass

    # ---- after the work: what got loaded, and NVML health ----------------------------

    def loaded_libraries(self):
        t0 = time.monotonic()
        maps = _read("/proc/self/maps") or ""
        loaded = {}
        for line in maps.splitlines():
            parts = line.split()
            if len(parts) < 6:
                continue
            path = parts[-1]
            base = os.path.basename(path)
            for prefix in ("libcudnn", "libnccl", "libcudart", "libcublas", "libcuda.so", "libnvrtc"):
                if base.startswith(prefix):
                    loaded.setdefault(base, path)
        torch_dir = os.path.dirname(os.path.dirname(self.torch.__file__)) if self.torch else None
        outside = {}
        for base, path in loaded.items():
            if base.startswith("libcuda.so"):
                continue  # the driver's own: system-wide by design
            if torch_dir and not path.startswith(torch_dir):
                outside[base] = path
        ev = {"loaded": loaded, "outside_site_packages": outside, "site_packages": torch_dir}
        if outside:
            kinds = sorted({re.sub(r"[._].*", "", b) for b in outside})
            cause = (
                "cudnn-shadow"
                if any(k.startswith("libcudnn") for k in kinds)
                else ("nccl-shadow" if any(k.startswith("libnccl") for k in kinds) else "lib-shadow")
            )
            check(
                "env.loaded",
                "environment",
                "Libraries actually loaded",
                "WARN",
                "loaded from outside torch's packages: {}".format(", ".join(sorted(outside.values()))),
                ev,
                cause=cause,
                t0=t0,
            )
        else:
            check(
                "env.loaded",
                "environment",
                "Libraries actually loaded",
                "PASS",
                "CUDA libraries loaded from torch's own packages (%d)" % len(loaded)
                if loaded
                else "no CUDA library loaded",
                ev,
                t0=t0,
            )

    def health(self):
        if not self.nvml.ok:
            check("health", "health", "GPU health (NVML)", "SKIP", "no NVML", {})
            return
        for i in range(len(self.nvml.handles)):
            t0 = time.monotonic()
            h = self.nvml.health(i)
            if i in self.link_under_load:
                h["pcie_under_load"] = self.link_under_load[i]
            status, cause, parts = judge_health(h)
            name = self.nvml_devices[i].get("name") if i < len(self.nvml_devices) else None
            check(
                "health.%d" % i,
                "health",
                "GPU %d health" % i,
                status,
                "; ".join(parts)
                if parts
                else "%s: no ECC errors, no pending row remaps, no slowdown" % (name or "GPU"),
                h,
                cause=cause,
                t0=t0,
            )

    # ---- main ------------------------------------------------------------------------

    def run(self):
        start = time.monotonic()
        hello("probe")
        self.python()
        self.container()
        self.driver()
        self.device_nodes()
        self.visibility()
        self.variables()
        self.library_path()
        self.start_nccl()
        thread, api = self.start_driver_api()
        self.wheels()
        try:
            imported = self.import_torch()
            self.driver_api(thread, api)
            usable = imported and self.torch_build()
            if not imported:
                skip_rest(TORCH_STEPS, "torch could not be imported")
            elif not usable:
                skip_rest(TORCH_STEPS[1:], "this torch build has no CUDA")
            else:
                self.cuda_vs_driver()
                if self.cuda_available():
                    self.device_count_check()
                    self.devices()
                    self.cudnn()
                    self.flags()
                    self.matmul()
                    self.amp()
                    self.peers()
                else:
                    skip_rest(TORCH_STEPS[3:], "CUDA is not available to torch")
            self.nccl()
            if imported:
                self.loaded_libraries()
            self.health()
        finally:
            self.stop_workers()
        emit("done", seconds=round(time.monotonic() - start, 3))


# --------------------------------------------------------------------------------------
# pieces
# --------------------------------------------------------------------------------------

DCGM_FLAGGED_VARIABLES = (
    "NSIGHT_CUDA_DEBUGGER",
    "CUDA_INJECTION32_PATH",
    "CUDA_INJECTION64_PATH",
    "CUDA_AUTO_BOOST",
    "CUDA_ENABLE_COREDUMP_ON_EXCEPTION",
    "CUDA_COREDUMP_FILE",
    "CUDA_DEVICE_WAITS_ON_EXCEPTION",
    "CUDA_PROFILE",
    "COMPUTE_PROFILE",
    "OPENCL_PROFILE",
    "NVTX_INJECTION64_PATH",
)
SHOWN_VARIABLES = (
    "CUDA_LAUNCH_BLOCKING",
    "PYTORCH_CUDA_ALLOC_CONF",
    "PYTORCH_ALLOC_CONF",
    "PYTORCH_NO_CUDA_MEMORY_CACHING",
    "CUDA_MODULE_LOADING",
    "CUDA_CACHE_DISABLE",
    "CUDA_HOME",
    "CUDA_PATH",
    "LD_PRELOAD",
    "TORCH_CUDA_ARCH_LIST",
    "CUBLAS_WORKSPACE_CONFIG",
)
LIBRARY_PATTERNS = ("libcudnn.so*", "libcudnn_*.so*", "libnccl.so*", "libcudart.so*", "libcublas.so*")
MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


#: The checks after `import torch`, skipped with a reason when an earlier one fails.
TORCH_STEPS = (
    ("torch.build", "torch", "torch build"),
    ("torch.cuda_vs_driver", "torch", "CUDA runtime vs driver"),
    ("torch.cuda_available", "torch", "torch.cuda.is_available()"),
    ("torch.device_count", "torch", "Devices torch sees"),
    ("cudnn.conv", "cudnn", "cuDNN convolution"),
    ("compute.matmul", "compute", "Matrix multiply vs CPU"),
    ("compute.amp", "compute", "Mixed precision (autocast)"),
    ("compute.peer", "compute", "Peer-to-peer access"),
)


def skip_rest(steps, reason):
    for cid, group, title in steps:
        check(cid, group, title, "SKIP", reason)


def parse_visible_devices(value, devices):
    """What CUDA makes of CUDA_VISIBLE_DEVICES: (visible NVML indices, first invalid entry,
    entries ignored after it).  CUDA stops at the first entry that is not a GPU.  With
    `devices` None (no NVML) only the form of the entries is checked, and visible holds the
    accepted entries themselves."""
    entries = [e.strip() for e in value.split(",")]
    if value.strip() == "":
        return [], None, []
    if devices is None:  # no NVML: only the form of each entry can be checked
        accepted = []
        for k, entry in enumerate(entries):
            if not (re.match(r"^\d+$", entry) or entry.startswith(("GPU-", "MIG-"))):
                return accepted, entry, entries[k + 1 :]
            accepted.append(entry)
        return accepted, None, []
    visible = []
    for k, entry in enumerate(entries):
        index = None
        if re.match(r"^-?\d+$", entry):
            n = int(entry)
            index = n if 0 <= n < len(devices) else None
        elif entry.startswith(("GPU-", "MIG-")):
            for d in devices:
                uuid = d.get("uuid") or ""
                if entry.startswith("GPU-") and uuid.startswith(entry):
                    index = d["index"]
                    break
            if entry.startswith("MIG-") and any(d.get("mig") for d in devices):
                index = -1  # a MIG instance: valid, not one of NVML's GPU indices
        if index is None or index in visible:
            return visible, entry, entries[k + 1 :]
        visible.append(index)
    return visible, None, []


def cuda_cause(code, probe):
    """Name the failure mode behind a CUDA error code, in this process's context."""
    if code is None:
        return "cuda-unavailable"
    if code == 35:
        return "driver-too-old"
    if code == 100:
        cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
        if cvd is not None and cvd.strip() == "":
            return "cvd-empty"
        if cvd is not None:
            return "cvd-invalid"
        if probe.in_container and not glob.glob("/dev/nvidia[0-9]*"):
            return "container-no-gpus"
        if not probe.nvml.ok:
            return "no-driver"
        return "no-device"
    return {
        3: "cuda-init-error",
        34: "cuda-stub",
        46: "devices-busy",
        101: "cvd-invalid",
        802: "fabric-manager",
        803: "driver-library-mismatch",
        804: "forward-compat",
        999: "cuda-unknown",
    }.get(code, "cuda-error")


def import_cause(text):
    if re.search(r"undefined symbol: *nccl", text) or "libnccl" in text:
        return "two-nccl"
    if "libcudnn" in text:
        return (
            "cudnn-shadow" if "undefined symbol" in text or "version" in text.lower() else "cuda-libs-missing"
        )
    if re.search(r"GLIBC(XX)?_\d", text):
        return "glibc-too-old"
    if re.search(r"lib(cudart|cublas|cusparse|cufft|curand|nvrtc|nvJitLink|cusolver|cudnn)", text):
        return "cuda-libs-missing"
    if "numpy" in text.lower():
        return "numpy-abi"
    return "torch-broken"


def nccl_cause(text):
    if "undefined symbol" in text:
        return "two-nccl"
    if "timed out" in text or "Timeout" in text:
        return "nccl-timeout"
    return "nccl-error"


def judge_health(h):
    """PASS/WARN/FAIL from one GPU's NVML health facts."""
    status, cause, parts = "PASS", None, []

    def worse(new_status, new_cause, text):
        nonlocal status, cause
        order = {"PASS": 0, "WARN": 1, "FAIL": 2}
        if order[new_status] > order[status]:
            status, cause = new_status, new_cause
        parts.append(text)

    rows = h.get("remapped_rows") or {}
    if rows.get("failed"):
        worse("FAIL", "row-remap-failed", "a row remapping FAILED: this GPU's memory needs service")
    if h.get("ecc_volatile_uncorrected"):
        worse(
            "FAIL",
            "ecc-uncorrected",
            "%d uncorrected ECC errors since the driver loaded" % h["ecc_volatile_uncorrected"],
        )
    if rows.get("pending") or h.get("retired_pages_pending"):
        worse(
            "WARN",
            "reset-pending",
            "a memory row remap / page retirement is pending: reset the GPU to apply it",
        )
    if h.get("ecc_aggregate_uncorrected") and not h.get("ecc_volatile_uncorrected"):
        worse(
            "WARN",
            "ecc-history",
            "%d uncorrected ECC errors in this GPU's lifetime" % h["ecc_aggregate_uncorrected"],
        )
    reasons = h.get("clock_event_reasons") or 0
    slow = [name for bit, name in SLOWDOWN_REASONS if reasons & bit]
    if slow:
        worse("WARN", "slowdown", "clocks held back now: {}".format(", ".join(slow)))
    if h.get("persistence_mode") == 0:
        worse("WARN", "persistence-off", "persistence mode is off: each CUDA start re-initialises the GPU")
    load = h.get("pcie_under_load") or {}
    max_gen, max_width = h.get("pcie_max_gen"), h.get("pcie_max_width")
    gen = load.get("gen") if load.get("gen") is not None else None
    width = load.get("width") if load.get("width") is not None else h.get("pcie_width")
    if max_width and width and width < max_width:
        worse("WARN", "pcie-downgraded", "PCIe link x%d, below its x%d" % (width, max_width))
    if max_gen and gen and gen < max_gen:
        worse("WARN", "pcie-downgraded", "PCIe Gen%d under load, below its Gen%d" % (gen, max_gen))
    return status, cause, parts


SLOWDOWN_REASONS = (
    (0x008, "HW slowdown"),
    (0x020, "SW thermal"),
    (0x040, "HW thermal"),
    (0x080, "HW power brake"),
)


def conv_check(torch, i):
    dev = "cuda:%d" % i
    g = torch.Generator().manual_seed(1234 + i)
    x = torch.randn(2, 3, 16, 16, generator=g, dtype=torch.float64)
    w = torch.randn(4, 3, 3, 3, generator=g, dtype=torch.float64)
    saved = torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cudnn.allow_tf32 = False
        xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
        yc = torch.nn.functional.conv2d(xc, wc, padding=1)
        yc.sum().backward()
        xg = x.to(dev, torch.float32).requires_grad_()
        wg = w.to(dev, torch.float32).requires_grad_()
        yg = torch.nn.functional.conv2d(xg, wg, padding=1)
        yg.sum().backward()
        torch.cuda.synchronize(i)
        errs = [
            _rel_err(torch, yg, yc),
            _rel_err(torch, xg.grad, xc.grad),
            _rel_err(torch, wg.grad, wc.grad),
        ]
    except Exception as exc:
        return {"gpu": i, "ok": False, "error": first_line(str(exc))}
    finally:
        torch.backends.cudnn.allow_tf32 = saved
    return {
        "gpu": i,
        "ok": max(errs) < 1e-4,
        "max_rel_error": max(errs),
        "errors": {"forward": errs[0], "grad_input": errs[1], "grad_weight": errs[2]},
    }


def matmul_check(torch, i):
    dev = "cuda:%d" % i
    g = torch.Generator().manual_seed(99 + i)
    a = torch.randn(512, 512, generator=g, dtype=torch.float64)
    b = torch.randn(512, 512, generator=g, dtype=torch.float64)
    saved = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        c = (a.to(dev, torch.float32) @ b.to(dev, torch.float32)).cpu()
        err = _rel_err(torch, c, a @ b)
    except Exception as exc:
        return {"gpu": i, "ok": False, "error": first_line(str(exc))}
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    return {"gpu": i, "ok": err < 1e-4, "max_rel_error": err}


def amp_check(torch, i, dtype_name):
    dev = "cuda:%d" % i
    dtype = getattr(torch, dtype_name)
    g = torch.Generator().manual_seed(7 + i)
    x = torch.randn(64, 256, generator=g)
    lin = torch.nn.Linear(256, 128)
    ref = lin(x).double()
    try:
        lin_g = lin.to(dev)
        with torch.autocast("cuda", dtype=dtype):
            y = lin_g(x.to(dev))
        out_dtype = str(y.dtype).replace("torch.", "")
        err = _rel_err(torch, y.float().cpu(), ref)
    except Exception as exc:
        return {"gpu": i, "dtype": dtype_name, "ok": False, "error": first_line(str(exc))}
    tol = 2e-2 if dtype_name == "bfloat16" else 5e-3
    return {
        "gpu": i,
        "dtype": dtype_name,
        "ok": out_dtype == dtype_name and err < tol,
        "output_dtype": out_dtype,
        "max_rel_error": err,
    }


def _rel_err(torch, got, want):
    got = got.detach().double().cpu()
    want = want.detach().double().cpu()
    scale = float(want.abs().max()) or 1.0
    if not bool(torch.isfinite(got).all()):
        return float("inf")
    return float((got - want).abs().max()) / scale


def _arch_num(arch):
    m = re.search(r"(\d+)", arch)
    return int(m.group(1)) if m else 0


def _error_code(text):
    m = re.search(r"[Ee]rror (\d+)", text)
    return int(m.group(1)) if m else None


def _safe(fn):
    try:
        return fn()
    except Exception:
        return None


def first_line(text):
    text = (text or "").strip()
    return text.splitlines()[0] if text else ""


def _free_port():
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


def nccl_worker(rank, world, port):
    """One rank of the all-reduce check: prints one JSON line on (the real) stdout."""
    take_stdout()
    result = {"rank": rank, "ok": False}
    t0 = time.monotonic()
    try:
        import datetime

        import torch
        import torch.distributed as dist

        if torch.cuda.device_count() < world:
            raise RuntimeError(
                "rank %d: torch sees %d GPUs, %d needed" % (rank, torch.cuda.device_count(), world)
            )
        torch.cuda.set_device(rank)
        dist.init_process_group(
            "nccl",
            init_method="tcp://127.0.0.1:%d" % port,
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=60),
        )
        t = torch.full((1 << 20,), float(rank + 1), device="cuda:%d" % rank)
        dist.all_reduce(t)
        torch.cuda.synchronize()
        want = world * (world + 1) / 2
        result["ok"] = bool((t == want).all())
        result["value"] = float(t[0])
        result["expected"] = want
        result["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version())
        dist.destroy_process_group()
    except BaseException as exc:
        result["error"] = f"{type(exc).__name__}: {first_line(str(exc))}"
    result["seconds"] = round(time.monotonic() - t0, 3)
    _OUT.write(json.dumps(_plain(result)) + "\n")
    _OUT.flush()


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--nccl-worker"]:
        nccl_worker(int(argv[1]), int(argv[2]), int(argv[3]))
        return 0
    take_stdout()
    options = {"no_nccl": "--no-nccl" in argv}
    Probe(options).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
