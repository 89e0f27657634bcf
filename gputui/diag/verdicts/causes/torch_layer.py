"""PyTorch and CUDA: the wheel, its libraries, the driver it needs, CUDA's initialisation,
the devices it sees."""

from __future__ import annotations

from typing import Any

from gputui.diag.verdicts.causes.base import Cause, Context, static
from gputui.diag.verdicts.causes.wheels import INDEX_URL, min_driver_for, torch_index_for


def _fix_driver_too_old(ctx: Context, ev: dict[str, Any]) -> list[str]:
    need = min_driver_for(ctx.torch_cuda)
    lines = [
        f"Upgrade the NVIDIA driver to {need} or newer (torch is built for CUDA {ctx.torch_cuda}; "
        f"this driver {ctx.driver_version or ''} supports CUDA {ctx.driver_cuda or '?'})"
    ]
    lines.append("or install a torch built for this driver:")
    lines += ctx.pip_install_torch()
    return lines


def _fix_cpu_only(ctx: Context, ev: dict[str, Any]) -> list[str]:
    return [*ctx.pip_install_torch(), f"({ctx.index_note()})"]


def _fix_torch_missing(ctx: Context, ev: dict[str, Any]) -> list[str]:
    return [*ctx.pip_install_torch(), f"({ctx.index_note()})"]


TORCH: dict[str, Cause] = {
    "torch-missing": Cause(
        "torch is not installed",
        "This interpreter has no torch package.",
        _fix_torch_missing,
    ),
    "torch-broken": Cause(
        "torch is broken",
        "torch is installed but importing it raises, or the module imported lacks part of torch's "
        "API: a broken or partial install, or a package named torch shadowing the real one.",
        lambda ctx, ev: [
            f"{ctx.python} -m pip install --force-reinstall torch --index-url "
            f"{INDEX_URL.format(torch_index_for(ctx.driver_cuda)[0])}",
            "Look for a directory or file named torch on sys.path that is not the package",
        ],
    ),
    "cuda-libs-missing": Cause(
        "CUDA libraries of the torch wheel are missing",
        "torch could not load one of the CUDA libraries its wheel depends on (the nvidia-* wheels).",
        lambda ctx, ev: [
            f"{ctx.python} -m pip install --force-reinstall torch --index-url "
            f"{INDEX_URL.format(torch_index_for(ctx.driver_cuda)[0])}",
        ],
    ),
    "glibc-too-old": Cause(
        "The system C library is too old for this torch",
        "torch's binaries need a newer glibc than this system has.",
        static("Use a newer OS image, or a torch version built for this glibc (manylinux tag)"),
    ),
    "numpy-abi": Cause(
        "numpy mismatch",
        "torch failed while loading numpy: a numpy built for a different ABI.",
        lambda ctx, ev: [f"{ctx.python} -m pip install --force-reinstall numpy"],
    ),
    "cpu-only-wheel": Cause(
        "CPU-only torch",
        "This torch was built without CUDA (a '+cpu' wheel, or the default wheel on a platform "
        "without CUDA builds): torch.cuda.is_available() is always False.",
        _fix_cpu_only,
        ("pytorch#85332", "pytorch#51858"),
    ),
    "rocm-build": Cause(
        "ROCm torch on an NVIDIA machine",
        "This torch is built for AMD GPUs (ROCm/HIP).",
        _fix_cpu_only,
    ),
    "driver-too-old": Cause(
        "Driver too old for torch's CUDA",
        "torch ships its own CUDA runtime, which needs a driver at least as new as that CUDA "
        "version (CUDA error 35, 'driver version is insufficient').",
        _fix_driver_too_old,
        ("pytorch#4546", "pytorch#920"),
    ),
    "driver-minor-older": Cause(
        "Driver older than torch's CUDA minor version",
        "torch's CUDA minor version is newer than the driver's; it runs through minor-version "
        "compatibility, but code that needs PTX JIT or newer driver features can fail.",
        lambda ctx, ev: [
            f"Upgrade the driver to {min_driver_for(ctx.torch_cuda)} or newer to remove the gap"
        ],
    ),
    "forward-compat": Cause(
        "CUDA forward compatibility not supported (error 804)",
        "A cuda-compat library (forward compatibility) is being used on a GPU that does not support "
        "it; forward compatibility works on data-centre GPUs only.",
        static(
            "Remove the cuda-compat directory (e.g. /usr/local/cuda/compat) from LD_LIBRARY_PATH",
            "or upgrade the driver so that compat is not needed",
        ),
    ),
    "fabric-manager": Cause(
        "Fabric Manager not running (error 802)",
        "On NVSwitch systems (HGX/DGX) CUDA waits for the NVIDIA Fabric Manager to set up the "
        "NVLink fabric: 'system not yet initialized'.",
        lambda ctx, ev: [
            "Install nvidia-fabricmanager of exactly the driver's version"
            + (f" ({ctx.driver_version})" if ctx.driver_version else "")
            + " and start it: sudo systemctl enable --now nvidia-fabricmanager",
            "Check: systemctl status nvidia-fabricmanager; journalctl -u nvidia-fabricmanager",
        ],
        ("pytorch#35710", "gpu-burn#92"),
    ),
    "cuda-unknown": Cause(
        "CUDA error 999 (unknown)",
        "CUDA initialisation failed with an unspecified error: usually a driver in a bad state (after "
        "suspend/resume, an Xid error) or nvidia-uvm missing.",
        static(
            "dmesg | grep -i -E 'xid|NVRM'",
            "sudo rmmod nvidia_uvm && sudo modprobe nvidia_uvm   (with no GPU job running)",
            "If that does not help: reboot the machine",
        ),
    ),
    "cuda-init-error": Cause(
        "CUDA initialisation error",
        "The CUDA driver failed to initialise (error 3).",
        static("dmesg | grep -i -E 'xid|NVRM'; reboot if the driver reports errors"),
    ),
    "cuda-stub": Cause(
        "The libcuda stub is on the library path",
        "The CUDA toolkit's stubs/libcuda.so is for linking only; loaded at run time it makes every "
        "CUDA call fail (error 34).",
        static("Remove the .../stubs directory from LD_LIBRARY_PATH"),
    ),
    "devices-busy": Cause(
        "GPUs busy or in exclusive mode",
        "All GPUs are in exclusive-process compute mode and already used, or unavailable (error 46).",
        static("nvidia-smi -q -d COMPUTE; `sudo nvidia-smi -c DEFAULT` if exclusive mode is not wanted"),
    ),
    "no-device": Cause(
        "CUDA finds no device",
        "The driver lists GPUs but CUDA sees none (error 100).",
        static(
            "Check CUDA_VISIBLE_DEVICES and that /dev/nvidia-uvm exists; "
            "look for Xid errors: `dmesg | grep -i xid`"
        ),
    ),
    "cuda-unavailable": Cause(
        "CUDA unavailable",
        "torch reports no CUDA without an error code.",
        static("Run `python -c 'import torch; torch.cuda.init()'` to see the full error"),
    ),
    "cuda-error": Cause("CUDA error", "A CUDA call failed.", static("See the evidence for the error text")),
    "count-mismatch": Cause(
        "torch sees a different number of GPUs",
        "torch sees fewer or more GPUs than NVML lists after CUDA_VISIBLE_DEVICES: MIG instances, "
        "a GPU CUDA cannot use, or a variable set differently for the training job.",
        static("nvidia-smi -L; compare with torch.cuda.device_count()"),
    ),
}
