"""The environment layer: variables, LD_LIBRARY_PATH, wheels, and the libraries really loaded."""

from __future__ import annotations

import glob
import os
import re
import time

from . import multicast, startvars
from .protocol import check, read_text
from .registry import declare

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
#: NVIDIA's Python packages that hold no CUDA library (NVML bindings, an index helper).
NOT_CUDA_LIBRARIES = ("nvidia-ml-py", "nvidia-ml-py3", "nvidia-pyindex")
LIBRARY_PATTERNS = ("libcudnn.so*", "libcudnn_*.so*", "libnccl.so*", "libcudart.so*", "libcublas.so*")


@declare("env.variables", "environment", "Environment variables")
def variables(p):
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
            "set: {} (DCGM flags these: profilers, debuggers, injection)".format(", ".join(sorted(flagged)))
        )
    if env.get("PYTORCH_NO_CUDA_MEMORY_CACHING", "0") not in ("", "0"):
        status, cause = "WARN", cause or "no-caching-allocator"
        notes.append("PYTORCH_NO_CUDA_MEMORY_CACHING turns off PyTorch's caching allocator (slow)")
    if env.get("CUDA_CACHE_DISABLE", "0") not in ("", "0"):
        notes.append("CUDA_CACHE_DISABLE: PTX is JIT-compiled again on every start")
    summary = "; ".join(notes) if notes else "no variable that slows CUDA down or injects into it"
    if "PYTORCH_CUDA_ALLOC_CONF" in env or "PYTORCH_ALLOC_CONF" in env:
        summary += "; allocator: %s" % (env.get("PYTORCH_CUDA_ALLOC_CONF") or env.get("PYTORCH_ALLOC_CONF"))
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


@declare("env.start", "environment", "Variables that change how CUDA, torch and NCCL start")
def start_variables(p):
    """Every variable of gputui/startvars.py's table that is set, checked before any CUDA call:
    a malformed value is named here, not found later as a crash.  FAIL where the library refuses
    to start (or crashes) on it, WARN where it ignores it."""
    t0 = time.monotonic()
    env = os.environ
    ours = [k for k, v in multicast.MULTICAST_OFF.items() if env.get(k) == v]  # gputui set these
    found = startvars.start_suspects(env, skip=ours)
    bad = [(n, v, why) for n, v, why in found if why is not None]
    ev = {
        "set": {n: v for n, v, _ in found},
        "malformed": {n: why for n, _, why in bad},
        "judged_elsewhere": sorted(
            n for n, _, _ in found if startvars.start_variable(n).checked_by is not None
        ),
    }
    if bad:
        specs = [(n, startvars.start_variable(n)) for n, _, _ in bad]
        stops = [(n, spec.library) for n, spec in specs if spec.stops]
        summary = "; ".join("%s=%r: %s" % (n, v, why) for n, v, why in bad)
        for name, library in stops:
            summary += "; %s stops on %s where it reads it (an error, or a crash)" % (library, name)
        check(
            "env.start",
            "environment",
            "Variables that change how CUDA, torch and NCCL start",
            "FAIL" if stops else "WARN",
            summary,
            ev,
            cause="malformed-variable",
            fix=["unset %s   # or correct it: %s" % (n, why) for n, _, why in bad],
            t0=t0,
        )
        return
    summary = (
        "well formed: " + ", ".join("%s=%r" % (n, v) for n, v, _ in found)
        if found
        else "none set (besides gputui's own NVLink multicast switches)"
        if ours
        else "none set"
    )
    check(
        "env.start",
        "environment",
        "Variables that change how CUDA, torch and NCCL start",
        "PASS",
        summary,
        ev,
        t0=t0,
    )


@declare("env.libpath", "environment", "LD_LIBRARY_PATH")
def library_path(p):
    t0 = time.monotonic()
    found = {}
    stubs = []
    paths = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    for d in paths:
        for pattern in LIBRARY_PATTERNS:
            for f in sorted(glob.glob(os.path.join(d, pattern))):
                found.setdefault(d, []).append(os.path.basename(f))
        if os.path.basename(os.path.normpath(d)) == "stubs" and glob.glob(os.path.join(d, "libcuda.so*")):
            stubs.append(d)
    p.ld_library_path_libs = found
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
    check("env.libpath", "environment", "LD_LIBRARY_PATH", status, summary, ev, cause=cause, fix=fix, t0=t0)


@declare("env.wheels", "environment", "CUDA library wheels")
def wheels(p):
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
        if m and name not in NOT_CUDA_LIBRARIES:
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
        "cuda_wheels": {
            n: v for n, v in installed.items() if n.startswith("nvidia-") and n not in NOT_CUDA_LIBRARIES
        },
        "duplicates": duplicates,
        "torch_pins": torch_pins,
        "pin_mismatches": mismatched,
        "torch_distributions": installed.get("torch", []),
        "torch_locations": locations.get("torch", []),
    }
    status, cause, parts = "PASS", None, []
    if len(installed.get("torch", [])) > 1:
        status, cause = "WARN", "two-torch"
        parts.append("%d torch installations: %s" % (len(installed["torch"]), ", ".join(installed["torch"])))
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
    n_nv = len(ev["cuda_wheels"])
    summary = (
        "; ".join(parts)
        if parts
        else (
            "%d CUDA library wheels, one of each, at the versions torch asks for" % n_nv
            if n_nv
            else "no CUDA library wheels installed"
        )
    )
    check("env.wheels", "environment", "CUDA library wheels", status, summary, ev, cause=cause, t0=t0)


# ---- torch -----------------------------------------------------------------------


@declare("env.loaded", "environment", "Libraries actually loaded", needs=("torch",))
def loaded_libraries(p):
    t0 = time.monotonic()
    maps = read_text("/proc/self/maps") or ""
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
    torch_dir = os.path.dirname(os.path.dirname(p.torch.__file__)) if p.torch else None
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
