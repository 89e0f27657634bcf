"""Which failure mode (a cause id, explained in gputui/diag/verdicts/causes/) lies behind
an error code or message, in this process's context."""

from __future__ import annotations

import glob
import os
import re


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
