"""The torch layer: import, build (CUDA / CPU-only / ROCm), its CUDA against the driver's,
`torch.cuda.is_available()` with the real error, and how many devices torch sees."""

from __future__ import annotations

import os
import re
import sys
import time
import traceback
import warnings

from . import versions
from .causes import cuda_cause, import_cause
from .protocol import Phase, check, first_line, safe, tail
from .registry import declare


@declare("torch.import", "torch", "import torch", gives="torch", deny="torch could not be imported")
def import_torch(p):
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
    p.torch = torch
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


@declare(
    "torch.build",
    "torch",
    "torch build",
    needs=("torch",),
    gives="torch-cuda",
    deny="this torch build has no CUDA",
)
def torch_build(p):
    t0 = time.monotonic()
    torch = p.torch
    version = torch.version  # every torch has it: one without it is broken, not CPU-only
    cuda = getattr(version, "cuda", None)
    hip = getattr(version, "hip", None)
    p.torch_cuda = cuda
    ev = {
        "version": torch.__version__,
        "cuda": cuda,
        "hip": hip,
        "git": getattr(version, "git_version", None),
        "debug": getattr(version, "debug", None),
        "cudnn_compiled": safe(torch.backends.cudnn.version) if cuda else None,
        "nccl": safe(lambda: ".".join(str(x) for x in torch.cuda.nccl.version())) if cuda else None,
        "arch_list": safe(lambda: torch._C._cuda_getArchFlags().split()) if cuda else None,
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


@declare("torch.cuda_vs_driver", "torch", "CUDA runtime vs driver", needs=("torch-cuda",))
def cuda_vs_driver(p):
    t0 = time.monotonic()
    runtime = versions.version_tuple(p.torch_cuda)
    driver = versions.version_tuple(p.driver_cuda)
    ev = {
        "torch_cuda": p.torch_cuda,
        "driver_cuda": p.driver_cuda,
        "driver_version": p.nvml.driver_version() if p.nvml.ok else None,
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
            f"torch needs CUDA {p.torch_cuda} but the driver supports only up to CUDA {p.driver_cuda}",
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
            f"torch is built for CUDA {p.torch_cuda}, the driver supports {p.driver_cuda}: "
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
            f"torch's CUDA {p.torch_cuda} <= the driver's CUDA {p.driver_cuda}",
            ev,
            t0=t0,
        )


@declare(
    "torch.cuda_available",
    "torch",
    "torch.cuda.is_available()",
    needs=("torch-cuda",),
    gives="cuda",
    deny="CUDA is not available to torch",
)
def cuda_available(p):
    t0 = time.monotonic()
    torch = p.torch
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
    p.available = available
    p.device_count = count
    text = "\n".join(messages + ([init_error] if init_error else []))
    code = None
    m = re.search(r"[Ee]rror (\d+)", text)
    if m:
        code = int(m.group(1))
    elif "too old" in text or "insufficient" in text.lower():
        code = 35
    api = p.cuda_api or {}
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
    cause = cuda_cause(code, p)
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


@declare("torch.device_count", "torch", "Devices torch sees", needs=("cuda",))
def device_count_check(p):
    t0 = time.monotonic()
    n_nvml = len(p.nvml_devices) if p.nvml.ok else None
    expected = p.expected_visible
    ev = {"torch": p.device_count, "nvml": n_nvml, "expected_from_CUDA_VISIBLE_DEVICES": expected}
    if n_nvml is None:
        check(
            "torch.device_count",
            "torch",
            "Devices torch sees",
            "PASS",
            "torch sees %d device(s)" % p.device_count,
            ev,
            t0=t0,
        )
        return
    if expected is not None and p.device_count != expected:
        check(
            "torch.device_count",
            "torch",
            "Devices torch sees",
            "WARN",
            "torch sees %d device(s) but NVML lists %d and CUDA_VISIBLE_DEVICES allows %d"
            % (p.device_count, n_nvml, expected),
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
        "torch sees %d of the %d GPUs NVML lists" % (p.device_count, n_nvml),
        ev,
        t0=t0,
    )


# ---- per device ------------------------------------------------------------------
