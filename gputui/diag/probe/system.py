"""The system and driver layers: the interpreter, NVML, /dev/nvidia*, cuInit through libcuda."""

from __future__ import annotations

import glob
import os
import re
import socket
import sys
import threading
import time

from .causes import cuda_cause
from .nvml import cuda_driver_api
from .protocol import check, emit, read_text
from .registry import declare


@declare("system.python", "system", "Python interpreter")
def python(p):
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


@declare("driver.nvml", "driver", "NVIDIA driver (NVML)", gives="nvml", deny="no NVML")
def driver(p):
    t0 = time.monotonic()
    nv = p.nvml
    ok = nv.open()
    proc_version = read_text("/proc/driver/nvidia/version")
    kernel_version = None
    if proc_version:
        m = re.search(r"Kernel Module(?: for \S+)?\s+([0-9][0-9.]+)", proc_version)
        kernel_version = m.group(1) if m else None
    modules = read_text("/proc/modules") or ""
    loaded = sorted({ln.split()[0] for ln in modules.splitlines() if ln.split()})
    nvidia_loaded = "nvidia" in loaded
    nouveau_loaded = "nouveau" in loaded
    p.kernel_evidence = {
        "kernel_module_version": kernel_version,
        "nvidia_module_loaded": nvidia_loaded if modules else None,
        "nouveau_loaded": nouveau_loaded if modules else None,
        "nvidia_uvm_loaded": ("nvidia_uvm" in loaded) if modules else None,
    }
    ev = {"library": nv.library_path() if nv.lib is not None else None}
    ev.update(p.kernel_evidence)
    if not ok:
        if nv.lib is None:
            ev["load_error"] = nv.load_error
            cause = "nouveau" if nouveau_loaded else "no-driver"
            summary = f"libnvidia-ml.so.1 (part of the NVIDIA driver) cannot be loaded: {nv.load_error}"
            if p.in_container:
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
                summary += ": kernel module {}, library {}".format(kernel_version or "?", lib_version or "?")
        check("driver.nvml", "driver", "NVIDIA driver (NVML)", "FAIL", summary, ev, cause=cause, t0=t0)
        return False
    p.driver_cuda = nv.cuda_version()
    driver_version = nv.driver_version()
    p.nvml_devices = [nv.device(i) for i in range(len(nv.handles))]
    ev.update(
        {
            "driver_version": driver_version,
            "cuda_driver_version": p.driver_cuda,
            "nvml_version": nv.text("nvmlSystemGetNVMLVersion"),
            "device_count": len(p.nvml_devices),
            "devices": p.nvml_devices,
        }
    )
    status, cause, note = "PASS", None, None
    summary = "driver %s, supports CUDA up to %s, %d GPU%s" % (
        driver_version,
        p.driver_cuda,
        len(p.nvml_devices),
        "" if len(p.nvml_devices) == 1 else "s",
    )
    if not p.nvml_devices:
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
    return p.nvml.ok


@declare("driver.devices", "driver", "Device files /dev/nvidia*")
def device_nodes(p):
    t0 = time.monotonic()
    nodes = sorted(glob.glob("/dev/nvidia*"))
    info = {}
    for path in nodes:
        if os.path.isdir(path):
            continue
        info[path] = "rw" if os.access(path, os.R_OK | os.W_OK) else "no access"
    ev = {"nodes": info, "in_container": p.in_container, "container_evidence": p.container_evidence}
    gpu_nodes = [path for path in info if re.match(r"/dev/nvidia\d+$", path)]
    if not info:
        if p.nvml.ok:
            cause = "container-no-gpus" if p.in_container else "no-device-nodes"
            check(
                "driver.devices",
                "driver",
                "Device files /dev/nvidia*",
                "FAIL",
                "no /dev/nvidia* device files" + (" in this container" if p.in_container else ""),
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
    if "/dev/nvidia-uvm" not in info and p.nvml.ok:
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


def start_cuinit(p):
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
    p.cuinit = (thread, result)


@declare("cuda.driver", "driver", "CUDA driver API (libcuda)")
def driver_api(p):
    t0 = time.monotonic()
    if p.cuinit is None:
        error = p.start_errors.get("start_cuinit", "not started")
        check(
            "cuda.driver",
            "driver",
            "CUDA driver API (libcuda)",
            "FAIL",
            "cuInit could not be started: %s" % error,
            {"error": error},
            cause="cuda-error",
            t0=t0,
        )
        return
    thread, result = p.cuinit
    thread.join()
    p.cuda_api = result
    if "load_error" in result:
        if p.nvml.ok:
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
    if not p.driver_cuda:
        p.driver_cuda = result.get("driver_cuda")
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
    cause = cuda_cause(code, p)
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
