"""From the child's events to findings a person can act on: causes in plain words, the exact
commands that fix them, the overall verdict and exit code, and the report (Markdown, JSON).

The child (`probe.py`) decides each check's status from what it measured and names the
failure mode (`cause`); this module owns what each cause means and how to fix it, because
the fix depends on facts gathered across checks (the driver's CUDA version, the
interpreter's path).  The JSON report's schema is `report.schema.json` beside this file.
"""

from __future__ import annotations

import json
import platform
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gputui import __version__

STATUSES = ("PASS", "WARN", "FAIL", "SKIP")
EXIT_CODES = {"PASS": 0, "WARN": 1, "FAIL": 2}
REPORT_FORMAT = "gputui-diagnosis"
REPORT_VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("report.schema.json")
PROTOCOL = 1
"""The child protocol version this parent speaks (see probe.py)."""

#: The order layers depend on each other: the first FAIL in this order is "the" problem.
LAYERS = (
    "system",
    "driver",
    "visibility",
    "torch",
    "devices",
    "cudnn",
    "compute",
    "environment",
    "health",
    "child",
)

# --------------------------------------------------------------------------------------
# PyTorch wheels and drivers
# --------------------------------------------------------------------------------------

#: PyTorch wheel indexes: (CUDA version, index, newest torch published there or None if
#: current).  Current torch (2.9+) publishes cu126, cu128 and cu130.
TORCH_INDEXES: tuple[tuple[tuple[int, int], str, str | None], ...] = (
    ((13, 0), "cu130", None),
    ((12, 8), "cu128", None),
    ((12, 6), "cu126", None),
    ((12, 4), "cu124", "2.6.0"),
    ((12, 1), "cu121", "2.5.1"),
    ((11, 8), "cu118", "2.7.1"),
)
INDEX_URL = "https://download.pytorch.org/whl/{}"

#: Minimum Linux driver for each CUDA toolkit (CUDA release notes, "toolkit driver version").
MIN_DRIVER: dict[tuple[int, int], str] = {
    (13, 0): "580.65.06",
    (12, 9): "575.51.03",
    (12, 8): "570.26",
    (12, 6): "560.28.03",
    (12, 4): "550.54.14",
    (12, 1): "530.30.02",
    (11, 8): "520.61.05",
}
#: Oldest driver per CUDA major that runs its minor versions (minor-version compatibility).
MINOR_COMPAT_DRIVER = {13: "580.65.06", 12: "525.60.13", 11: "450.80.02"}


def version_tuple(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    parts = str(text).split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return None


def torch_index_for(driver_cuda: str | None) -> tuple[str, str | None]:
    """The wheel index matching a driver's highest CUDA version: (index, pinned torch or None)."""
    have = version_tuple(driver_cuda)
    if have is None:
        return TORCH_INDEXES[0][1], None
    for cuda, index, pin in TORCH_INDEXES:
        if cuda <= have:
            return index, pin
    return TORCH_INDEXES[-1][1], TORCH_INDEXES[-1][2]


def min_driver_for(cuda: str | None) -> str | None:
    v = version_tuple(cuda)
    if v is None:
        return None
    if v in MIN_DRIVER:
        return MIN_DRIVER[v]
    older = [k for k in MIN_DRIVER if k[0] == v[0] and k <= v]
    return MIN_DRIVER[max(older)] if older else MINOR_COMPAT_DRIVER.get(v[0])


# --------------------------------------------------------------------------------------
# causes
# --------------------------------------------------------------------------------------


@dataclass
class Context:
    """Facts from across the checks that fixes depend on."""

    python: str = "python"
    driver_version: str | None = None
    driver_cuda: str | None = None
    torch_version: str | None = None
    torch_cuda: str | None = None
    in_container: bool = False

    def pip_install_torch(self) -> list[str]:
        index, pin = torch_index_for(self.driver_cuda)
        spec = f"torch=={pin}" if pin else "torch"
        lines = []
        if self.torch_version:
            lines.append(f"{self.python} -m pip uninstall -y torch")
        lines.append(f"{self.python} -m pip install {spec} --index-url {INDEX_URL.format(index)}")
        return lines

    def index_note(self) -> str:
        index, pin = torch_index_for(self.driver_cuda)
        if self.driver_cuda is None:
            return (
                f"{index} needs a driver for CUDA 13.0 (R580 or newer); with an older driver pick the "
                "index for the 'CUDA Version' that nvidia-smi prints (cu128: R570+, cu126: R560+)"
            )
        if pin:
            return (
                f"the driver supports CUDA {self.driver_cuda}: current torch needs CUDA 12.6 (driver "
                f"{MIN_DRIVER[(12, 6)]}+); torch {pin} is the newest built for {index}"
            )
        return f"{index} matches this driver (CUDA {self.driver_cuda}, driver {self.driver_version})"


@dataclass(frozen=True)
class Cause:
    title: str
    """The failure mode, named."""
    meaning: str
    """What it means, in plain words."""
    fix: Callable[[Context, dict[str, Any]], list[str]] = lambda ctx, ev: []
    """The steps that fix it, most likely first."""
    refs: tuple[str, ...] = ()
    """Where users hit it (issue trackers)."""


def _static(*lines: str) -> Callable[[Context, dict[str, Any]], list[str]]:
    return lambda ctx, ev: list(lines)


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


def _fix_container(ctx: Context, ev: dict[str, Any]) -> list[str]:
    return [
        "Docker: start the container with `--gpus all` (or `--runtime=nvidia`), with the NVIDIA "
        "Container Toolkit installed on the host (`nvidia-ctk runtime configure --runtime=docker`)",
        "Kubernetes: request the GPU in the pod spec (`resources.limits: nvidia.com/gpu: 1`) "
        "and run the NVIDIA device plugin",
        "Check on the host first: `nvidia-smi` must work there",
    ]


CAUSES: dict[str, Cause] = {
    "no-driver": Cause(
        "No NVIDIA driver",
        "libnvidia-ml.so.1, part of the NVIDIA driver, is not installed or not on the loader's path: "
        "nothing on this machine can use a GPU.",
        _static(
            "Install the NVIDIA driver (e.g. `sudo apt install nvidia-driver-580-server` or the "
            "distribution's equivalent) and check that `nvidia-smi` works",
            "If the driver is installed elsewhere, add its library directory to LD_LIBRARY_PATH",
        ),
    ),
    "container-no-gpus": Cause(
        "Container started without GPUs",
        "This is a container and it has no NVIDIA device files nor driver libraries: the container "
        "runtime did not pass the GPUs in.",
        _fix_container,
        ("pytorch#18690",),
    ),
    "no-device-nodes": Cause(
        "No /dev/nvidia* device files",
        "The driver library works but the device files CUDA opens are missing.",
        _static("Run `sudo nvidia-modprobe -u -c=0` (or reboot) to create them"),
    ),
    "uvm-missing": Cause(
        "nvidia-uvm not loaded",
        "CUDA needs the nvidia-uvm kernel module (/dev/nvidia-uvm) for memory management; "
        "without it CUDA initialisation fails (often as error 999 or 'no device').",
        _static("sudo modprobe nvidia-uvm   (or `sudo nvidia-modprobe -u -c=0`)"),
    ),
    "nouveau": Cause(
        "nouveau holds the GPU",
        "The open-source nouveau driver is loaded, so the NVIDIA driver cannot take the GPU.",
        _static(
            "Blacklist nouveau: echo 'blacklist nouveau' | sudo tee /etc/modprobe.d/blacklist-nouveau.conf",
            "sudo update-initramfs -u && sudo reboot, then install or reload the NVIDIA driver",
        ),
    ),
    "driver-library-mismatch": Cause(
        "Driver/library version mismatch",
        "The loaded NVIDIA kernel module and the user-space driver libraries are different versions: "
        "almost always the driver was upgraded (often unattended) and the machine not rebooted.",
        _static(
            "Reboot (or, with no GPU job running, unload and reload the nvidia modules)",
            "Compare `cat /proc/driver/nvidia/version` with `ls /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.*`",
            "Hold the driver out of unattended upgrades (e.g. `sudo apt-mark hold 'nvidia-*'`)",
        ),
    ),
    "driver-not-loaded": Cause(
        "Kernel driver not loaded",
        "The NVIDIA libraries are installed but the kernel module is not loaded.",
        _static(
            "sudo modprobe nvidia; check `dmesg | grep -i nvidia` for why it failed",
            "Secure Boot blocks unsigned modules: sign the module or disable Secure Boot",
            "After a kernel update: reinstall the driver (DKMS) for the running kernel",
        ),
    ),
    "no-permission": Cause(
        "No permission on the GPU device files",
        "This user may not open /dev/nvidia*.",
        _static(
            "ls -l /dev/nvidia*; add the user to the owning group (often `video`) or ask an admin",
        ),
    ),
    "nvml-error": Cause(
        "NVML failed",
        "The driver's management library failed to initialise.",
        _static("Run `nvidia-smi`; check `dmesg | grep -i -E 'nvidia|xid'`"),
    ),
    "no-gpu": Cause(
        "The driver sees no GPU",
        "The driver is loaded but lists no GPU: the GPU is not on the PCI bus, fell off it, or is "
        "bound to another driver (vfio).",
        _static("lspci | grep -i nvidia; dmesg | grep -i -E 'nvidia|xid|NVRM'"),
    ),
    "no-libcuda": Cause(
        "libcuda.so.1 missing",
        "NVML works but the CUDA driver library is not found: an incomplete driver install, or a "
        "container that mounted only the utility libraries (NVIDIA_DRIVER_CAPABILITIES without compute).",
        _static(
            "Reinstall the driver's CUDA component (libnvidia-compute / nvidia-driver package)",
            "In a container: NVIDIA_DRIVER_CAPABILITIES=compute,utility",
        ),
    ),
    "cvd-empty": Cause(
        "CUDA_VISIBLE_DEVICES is empty",
        "CUDA_VISIBLE_DEVICES is set but empty, which hides every GPU from CUDA.",
        _static("unset CUDA_VISIBLE_DEVICES   (or set it to the GPUs you want, e.g. 0,1)"),
    ),
    "cvd-invalid": Cause(
        "CUDA_VISIBLE_DEVICES names a GPU that does not exist",
        "CUDA reads CUDA_VISIBLE_DEVICES up to the first entry that is not a GPU and ignores the rest; "
        "an index past the last GPU, a typo or a stale UUID hides GPUs.",
        lambda ctx, ev: [
            "Set CUDA_VISIBLE_DEVICES to indices or UUIDs that `nvidia-smi -L` lists"
            + (f" (it is {ev.get('CUDA_VISIBLE_DEVICES')!r})" if ev.get("CUDA_VISIBLE_DEVICES") else ""),
            "or unset it to use every GPU",
        ],
    ),
    "nvd-none": Cause(
        "NVIDIA_VISIBLE_DEVICES asks for no GPU",
        "The NVIDIA container runtime reads NVIDIA_VISIBLE_DEVICES; 'void', 'none' or empty gives "
        "the container no GPU.",
        _static("Start the container with NVIDIA_VISIBLE_DEVICES=all (or `--gpus all`)"),
    ),
    "device-order": Cause(
        "CUDA and nvidia-smi number the GPUs differently",
        "With different GPU models CUDA numbers the fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID.",
        _static("export CUDA_DEVICE_ORDER=PCI_BUS_ID"),
    ),
    "torch-missing": Cause(
        "torch is not installed",
        "This interpreter has no torch package.",
        _fix_torch_missing,
    ),
    "torch-broken": Cause(
        "torch fails to import",
        "torch is installed but importing it raises: a broken or partial install, or a package "
        "named torch shadowing the real one.",
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
        _static("Use a newer OS image, or a torch version built for this glibc (manylinux tag)"),
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
        _static(
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
        _static(
            "dmesg | grep -i -E 'xid|NVRM'",
            "sudo rmmod nvidia_uvm && sudo modprobe nvidia_uvm   (with no GPU job running)",
            "If that does not help: reboot the machine",
        ),
    ),
    "cuda-init-error": Cause(
        "CUDA initialisation error",
        "The CUDA driver failed to initialise (error 3).",
        _static("dmesg | grep -i -E 'xid|NVRM'; reboot if the driver reports errors"),
    ),
    "cuda-stub": Cause(
        "The libcuda stub is on the library path",
        "The CUDA toolkit's stubs/libcuda.so is for linking only; loaded at run time it makes every "
        "CUDA call fail (error 34).",
        _static("Remove the .../stubs directory from LD_LIBRARY_PATH"),
    ),
    "devices-busy": Cause(
        "GPUs busy or in exclusive mode",
        "All GPUs are in exclusive-process compute mode and already used, or unavailable (error 46).",
        _static("nvidia-smi -q -d COMPUTE; `sudo nvidia-smi -c DEFAULT` if exclusive mode is not wanted"),
    ),
    "no-device": Cause(
        "CUDA finds no device",
        "The driver lists GPUs but CUDA sees none (error 100).",
        _static("Check CUDA_VISIBLE_DEVICES and that /dev/nvidia-uvm exists; dmesg for Xid errors"),
    ),
    "cuda-unavailable": Cause(
        "CUDA unavailable",
        "torch reports no CUDA without an error code.",
        _static("Run `python -c 'import torch; torch.cuda.init()'` to see the full error"),
    ),
    "cuda-error": Cause("CUDA error", "A CUDA call failed.", _static("See the evidence for the error text")),
    "count-mismatch": Cause(
        "torch sees a different number of GPUs",
        "torch sees fewer or more GPUs than NVML lists after CUDA_VISIBLE_DEVICES: MIG instances, "
        "a GPU CUDA cannot use, or a variable set differently for the training job.",
        _static("nvidia-smi -L; compare with torch.cuda.device_count()"),
    ),
    "ptx-jit": Cause(
        "No native kernels for this GPU",
        "torch has no machine code for this GPU's architecture and JIT-compiles its PTX at start "
        "(slow first run, some kernels may be missing).",
        lambda ctx, ev: [
            f"Install a torch build that lists this GPU: {line}" for line in ctx.pip_install_torch()[-1:]
        ],
    ),
    "no-kernel-image": Cause(
        "'no kernel image is available for execution on the device'",
        "This torch build has no kernels for this GPU's compute capability (too new or too old for "
        "the build's TORCH_CUDA_ARCH_LIST).",
        lambda ctx, ev: [
            "Install a torch build that supports this GPU (new GPUs need the newest CUDA wheels):",
            *ctx.pip_install_torch(),
        ],
        ("pytorch#31285",),
    ),
    "cudnn-missing": Cause(
        "cuDNN cannot be loaded",
        "torch could not load cuDNN: the nvidia-cudnn wheel is missing or broken, or a system cuDNN "
        "of another version is loaded first.",
        lambda ctx, ev: [
            f"{ctx.python} -m pip install --force-reinstall "
            f"nvidia-cudnn-cu{(ctx.torch_cuda or '12').split('.')[0]}"
        ],
    ),
    "cudnn-wrong": Cause(
        "cuDNN computes wrong results",
        "A convolution on the GPU did not match the CPU result.",
        _static("Run `gputui stress` on this GPU; check for a cuDNN on LD_LIBRARY_PATH"),
    ),
    "cudnn-error": Cause(
        "cuDNN convolution fails",
        "A convolution raised an error (often CUDNN_STATUS_NOT_INITIALIZED or EXECUTION_FAILED: a cuDNN "
        "version mismatch or out of memory).",
        _static(
            "Check for a system cuDNN on LD_LIBRARY_PATH "
            "(see 'LD_LIBRARY_PATH' and 'Libraries actually loaded')"
        ),
    ),
    "cudnn-disabled": Cause(
        "cuDNN is disabled",
        "torch.backends.cudnn.enabled is False: convolutions use slow fallbacks.",
        _static("Remove `torch.backends.cudnn.enabled = False` from the code (often left from debugging)"),
    ),
    "tf32-off": Cause(
        "TF32 off for float32 matmuls",
        "Since PyTorch 1.12 float32 matmuls do not use TF32 tensor cores by default; on Ampere and "
        "newer that can be up to 8x slower than needed (not an error).",
        _static(
            "torch.set_float32_matmul_precision('high')   # in the training script, if TF32 is acceptable"
        ),
        ("pytorch#67384",),
    ),
    "matmul-wrong": Cause(
        "Wrong matmul results",
        "A matrix product on the GPU did not match the CPU: faulty hardware or a broken library.",
        _static("Run `gputui stress --gpus N` on that GPU; check `nvidia-smi -q -d ECC`"),
    ),
    "amp-wrong": Cause(
        "Mixed precision fails",
        "autocast in float16/bfloat16 raised or gave wrong results.",
        _static("See the evidence; check the cuBLAS wheel matches torch (see 'CUDA library wheels')"),
    ),
    "p2p-wrong": Cause(
        "Peer-to-peer copies are corrupted",
        "Data copied between two GPUs came back different: a known symptom of IOMMU/ACS settings "
        "on some PCIe platforms.",
        _static(
            "Disable ACS on the PCIe switches / set iommu=pt, or run with NCCL_P2P_DISABLE=1",
            "Test with the CUDA sample p2pBandwidthLatencyTest",
        ),
    ),
    "no-p2p": Cause(
        "No direct peer access",
        "Some GPU pairs cannot read each other's memory directly; NCCL and copies go through host "
        "memory (slower), common in VMs and on consumer GPUs.",
        _static("nvidia-smi topo -p2p r   shows the matrix; NVLink or a PCIe switch gives direct access"),
    ),
    "two-nccl": Cause(
        "Two NCCL libraries",
        "An NCCL other than the one torch was built with is installed or loaded, which gives "
        "'undefined symbol: nccl...' errors or hangs.",
        lambda ctx, ev: [
            f"{ctx.python} -m pip list | grep -i nccl   # keep only the version torch requires",
            "Remove system NCCL directories from LD_LIBRARY_PATH",
        ],
        ("pytorch#119932",),
    ),
    "two-cuda-wheels": Cause(
        "Two builds of a CUDA library",
        "Two wheels of the same NVIDIA library for different CUDA versions (e.g. -cu11 and -cu12) are "
        "installed; which one loads depends on import order.",
        lambda ctx, ev: [
            f"{ctx.python} -m pip uninstall <the wheel torch does not require>   (see the evidence)"
        ],
    ),
    "wheel-pin-mismatch": Cause(
        "CUDA wheels at versions torch was not built with",
        "torch pins its nvidia-* wheels; another package upgraded or downgraded one.",
        lambda ctx, ev: [
            f"{ctx.python} -m pip install "
            + " ".join(
                f"{k}=={v['torch_requires']}" for k, v in sorted((ev.get("pin_mismatches") or {}).items())
            )
        ],
    ),
    "two-torch": Cause(
        "Two torch installations",
        "torch is installed twice (e.g. user site and the environment); the one imported may not be "
        "the one you upgraded.",
        lambda ctx, ev: [
            f"{ctx.python} -m pip uninstall torch   (repeat until none is left), then reinstall"
        ],
    ),
    "cudnn-shadow": Cause(
        "A system cuDNN can shadow torch's",
        "A cuDNN on LD_LIBRARY_PATH (or loaded from there) can be picked up instead of the one torch "
        "ships; a different version fails at the first convolution or is slower.",
        _static("Remove the cuDNN directory from LD_LIBRARY_PATH for PyTorch jobs"),
        ("pytorch PR #80877",),
    ),
    "nccl-shadow": Cause(
        "A system NCCL can shadow torch's",
        "An NCCL on LD_LIBRARY_PATH may be loaded instead of torch's.",
        _static("Remove the NCCL directory from LD_LIBRARY_PATH for PyTorch jobs"),
        ("pytorch#119932",),
    ),
    "lib-shadow": Cause(
        "CUDA libraries loaded from outside torch",
        "A CUDA library was loaded from a system directory rather than torch's wheels.",
        _static("Check LD_LIBRARY_PATH and LD_PRELOAD"),
    ),
    "launch-blocking": Cause(
        "CUDA_LAUNCH_BLOCKING is set",
        "Every kernel launch waits for the previous one: right for debugging, many times slower "
        "for training.",
        _static("unset CUDA_LAUNCH_BLOCKING"),
    ),
    "injection-variables": Cause(
        "Profiler or injection variables set",
        "Variables that inject profilers or debuggers into CUDA (DCGM's diagnostics refuse to run "
        "with them) slow every CUDA program down.",
        lambda ctx, ev: [f"unset {name}" for name in sorted(ev.get("flagged") or {})],
    ),
    "no-caching-allocator": Cause(
        "PyTorch's caching allocator is off",
        "PYTORCH_NO_CUDA_MEMORY_CACHING makes every allocation a cudaMalloc: much slower.",
        _static("unset PYTORCH_NO_CUDA_MEMORY_CACHING"),
    ),
    "nccl-timeout": Cause(
        "NCCL all-reduce timed out",
        "The ranks did not complete the all-reduce: a hang in NCCL's setup (P2P/IB/shared memory).",
        _static("Run with NCCL_DEBUG=INFO; try NCCL_P2P_DISABLE=1 to test whether P2P is the cause"),
    ),
    "nccl-error": Cause(
        "NCCL all-reduce failed",
        "The multi-GPU all-reduce raised an error.",
        _static("Run with NCCL_DEBUG=INFO to see where it fails"),
    ),
    "row-remap-failed": Cause(
        "Row remapping failed",
        "The GPU ran out of spare memory rows: it needs service (RMA).",
        _static("Drain the GPU from scheduling and contact the vendor"),
    ),
    "ecc-uncorrected": Cause(
        "Uncorrected ECC errors",
        "The GPU memory returned wrong data since the driver loaded; applications on it may have crashed "
        "(Xid 48/63/64/94/95).",
        _static(
            "Drain the GPU, reset it (`sudo nvidia-smi -r -i N`) and run `gputui stress`; RMA if it recurs"
        ),
    ),
    "ecc-history": Cause(
        "ECC errors in the GPU's history",
        "Uncorrected errors happened in this GPU's lifetime (not since this boot).",
        _static("Watch it: `nvidia-smi -q -d ECC,ROW_REMAPPER`"),
    ),
    "reset-pending": Cause(
        "GPU reset pending",
        "A memory row remap or page retirement waits for a GPU reset to take effect.",
        _static("Drain the GPU, then `sudo nvidia-smi -r -i N` (or reboot)"),
    ),
    "slowdown": Cause(
        "Clocks held back",
        "Thermal slowdown or a power brake is active now: the GPU runs slower than it can.",
        _static("Check cooling and airflow, `nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER`"),
    ),
    "persistence-off": Cause(
        "Persistence mode off",
        "Without persistence (or nvidia-persistenced) the driver tears the GPU down when no process "
        "uses it; each CUDA start pays the initialisation again.",
        _static("sudo systemctl enable --now nvidia-persistenced   (or `sudo nvidia-smi -pm 1`)"),
    ),
    "pcie-downgraded": Cause(
        "PCIe link below its maximum",
        "The link runs at a lower generation or width than the GPU and slot support under load: "
        "a badly seated card, riser or BIOS setting.",
        _static("nvidia-smi -q -d PCIE (and `lspci -vv` LnkSta vs LnkCap); reseat the card / check the BIOS"),
    ),
    "child-crashed": Cause(
        "The diagnosis crashed",
        "The diagnosing process died before it finished (see the signal and stderr): a crash inside "
        "the driver or a library is itself the finding.",
        _static(
            "Run the same interpreter with "
            "`python -X faulthandler -c 'import torch; torch.zeros(1, device=\"cuda\")'`"
        ),
    ),
    "child-timeout": Cause(
        "The diagnosis hung",
        "A step did not finish in time and was killed; a hung CUDA initialisation usually means a "
        "driver in a bad state or a missing Fabric Manager.",
        _static(
            "dmesg | grep -i -E 'xid|NVRM'",
            "On NVSwitch systems: systemctl status nvidia-fabricmanager",
        ),
    ),
    "bad-interpreter": Cause(
        "Not a usable Python interpreter",
        "The interpreter could not be started, or it is older than Python 3.8.",
        _static("Pick another interpreter (the path to a `python` executable)"),
    ),
}


# --------------------------------------------------------------------------------------
# findings and the diagnosis
# --------------------------------------------------------------------------------------


@dataclass
class Finding:
    """One check's result, with the cause explained and its fix."""

    id: str
    group: str
    title: str
    status: str
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    cause: str | None = None
    cause_title: str | None = None
    meaning: str | None = None
    fix: list[str] = field(default_factory=list)
    refs: list[str] = field(default_factory=list)
    note: str | None = None
    seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "group": self.group,
            "title": self.title,
            "status": self.status,
            "summary": self.summary,
            "evidence": self.evidence,
            "cause": self.cause,
            "cause_title": self.cause_title,
            "meaning": self.meaning,
            "fix": self.fix,
            "refs": self.refs,
            "note": self.note,
            "seconds": self.seconds,
        }


def _text(value: Any, default: str = "") -> str:
    return value if isinstance(value, str) else default


class Diagnosis:
    """Accumulates a child's events into findings (in the order they arrive)."""

    def __init__(self, python: str = "python") -> None:
        self.context = Context(python=python)
        self.findings: list[Finding] = []
        self.hello: dict[str, Any] | None = None
        self.phases: dict[str, str] = {}
        """Phases started and not ended: name -> title (what runs now)."""
        self.done = False
        self.seconds: float | None = None
        self.child: dict[str, Any] = {}
        """How the child ended (runner.ChildResult.to_json())."""
        self.stray: list[str] = []
        """Lines on the child's stdout that were not protocol events."""
        self.created = time.time()

    # ---- feeding ---------------------------------------------------------------------

    def feed(self, event: dict[str, Any]) -> Finding | None:
        """Take one protocol event; returns the new finding for a check event."""
        kind = event.get("event")
        if kind == "hello":
            self.hello = event
            return None
        if kind == "phase":
            name = _text(event.get("name"))
            if event.get("state") == "start":
                self.phases[name] = _text(event.get("title"), name)
            else:
                self.phases.pop(name, None)
            return None
        if kind == "done":
            self.done = True
            seconds = event.get("seconds")
            self.seconds = float(seconds) if isinstance(seconds, int | float) else None
            return None
        if kind == "check":
            return self.add_check(event)
        return None

    def add_check(self, event: dict[str, Any]) -> Finding:
        evidence = event.get("evidence") if isinstance(event.get("evidence"), dict) else {}
        assert isinstance(evidence, dict)
        self._learn(_text(event.get("id")), evidence)
        status = _text(event.get("status"), "FAIL")
        if status not in STATUSES:
            status = "FAIL"
        cause_id = event.get("cause") if isinstance(event.get("cause"), str) else None
        seconds = event.get("seconds")
        finding = Finding(
            id=_text(event.get("id"), "?"),
            group=_text(event.get("group"), "other"),
            title=_text(event.get("title"), _text(event.get("id"), "?")),
            status=status,
            summary=_text(event.get("summary")),
            evidence=evidence,
            cause=cause_id,
            note=event.get("note") if isinstance(event.get("note"), str) else None,
            seconds=float(seconds) if isinstance(seconds, int | float) else None,
        )
        child_fix = [str(x) for x in event.get("fix") or [] if isinstance(x, str)]
        explain(finding, self.context, child_fix)
        self.findings.append(finding)
        return finding

    def _learn(self, check_id: str, ev: dict[str, Any]) -> None:
        ctx = self.context
        if check_id == "driver.nvml":
            ctx.driver_version = ev.get("driver_version") or ctx.driver_version
            ctx.driver_cuda = ev.get("cuda_driver_version") or ctx.driver_cuda
        elif check_id == "cuda.driver":
            ctx.driver_cuda = ctx.driver_cuda or ev.get("driver_cuda")
        elif check_id in ("visibility.env", "driver.devices"):
            ctx.in_container = ctx.in_container or bool(ev.get("in_container"))
        elif check_id == "torch.import":
            ctx.torch_version = ev.get("version") or ctx.torch_version
        elif check_id == "torch.build":
            ctx.torch_version = ev.get("version") or ctx.torch_version
            ctx.torch_cuda = ev.get("cuda")

    def finish(self, child: dict[str, Any]) -> None:
        """The child ended: record how, and turn a crash, hang or bad exit into a finding."""
        self.child = child
        if child.get("cancelled"):
            return
        if child.get("timed_out"):
            pending = child.get("pending_phase") or self.current_phase()
            self.add_check(
                {
                    "id": "diag.child",
                    "group": "child",
                    "title": "Diagnosis process",
                    "status": "FAIL",
                    "summary": f"timed out after {child.get('timeout')} s"
                    + (f" while {pending} was running" if pending else "")
                    + "; killed",
                    "cause": "child-timeout",
                    "evidence": {"pending_phase": pending, "stderr_tail": child.get("stderr_tail")},
                }
            )
            return
        if child.get("start_error"):
            self.add_check(
                {
                    "id": "diag.child",
                    "group": "child",
                    "title": "Diagnosis process",
                    "status": "FAIL",
                    "summary": f"cannot run {child.get('python')}: {child['start_error']}",
                    "cause": "bad-interpreter",
                    "evidence": {"error": child["start_error"]},
                }
            )
            return
        if not self.done or child.get("returncode"):
            signal_name = child.get("signal")
            how = (
                f"killed by {signal_name}" if signal_name else f"exited with status {child.get('returncode')}"
            )
            pending = self.current_phase()
            syntax = "SyntaxError" in (child.get("stderr_tail") or "") and not self.findings
            self.add_check(
                {
                    "id": "diag.child",
                    "group": "child",
                    "title": "Diagnosis process",
                    "status": "FAIL",
                    "summary": f"the diagnosis {how}"
                    + (f" during {pending}" if pending else "")
                    + ("" if self.done else " before it finished"),
                    "cause": "bad-interpreter" if syntax else "child-crashed",
                    "evidence": {
                        "signal": signal_name,
                        "returncode": child.get("returncode"),
                        "pending_phase": pending,
                        "stderr_tail": child.get("stderr_tail"),
                    },
                }
            )

    # ---- reading ---------------------------------------------------------------------

    def current_phase(self) -> str | None:
        """The step running now (the phase started last)."""
        return next(reversed(self.phases.values()), None) if self.phases else None

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(STATUSES, 0)
        for f in self.findings:
            out[f.status] += 1
        return out

    @property
    def status(self) -> str:
        counts = self.counts()
        if counts["FAIL"]:
            return "FAIL"
        if counts["WARN"]:
            return "WARN"
        return "PASS"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def primary(self) -> Finding | None:
        """The problem to fix first: the first FAIL (else WARN) in layer order."""
        for status in ("FAIL", "WARN"):
            hits = [f for f in self.findings if f.status == status]
            if hits:
                return min(hits, key=lambda f: _layer(f.group))
        return None

    def summary_line(self) -> str:
        c = self.counts()
        return f"{c['PASS']} pass · {c['WARN']} warn · {c['FAIL']} fail · {c['SKIP']} skip"

    def to_json(self, stress: dict[str, Any] | None = None) -> dict[str, Any]:
        primary = self.primary()
        hello = self.hello or {}
        return {
            "format": REPORT_FORMAT,
            "version": REPORT_VERSION,
            "gputui": __version__,
            "created": _iso(self.created),
            "host": socket.gethostname(),
            "platform": platform.platform(),
            "python": {
                "executable": hello.get("executable") or self.context.python,
                "version": hello.get("python"),
                "prefix": hello.get("prefix"),
            },
            "status": self.status,
            "exit_code": self.exit_code,
            "counts": self.counts(),
            "primary": primary.to_json() if primary else None,
            "checks": [f.to_json() for f in self.findings],
            "child": self.child,
            "stray_output": self.stray[-20:],
            "stress": stress,
        }


def explain(finding: Finding, ctx: Context, child_fix: Iterable[str] = ()) -> None:
    """Attach the cause's name, meaning, fix and references to a finding."""
    cause = CAUSES.get(finding.cause or "")
    fixes = list(child_fix)
    if cause is not None:
        finding.cause_title = cause.title
        finding.meaning = cause.meaning
        finding.refs = list(cause.refs)
        if finding.status != "PASS" or finding.note:
            fixes += [line for line in cause.fix(ctx, finding.evidence) if line not in fixes]
    finding.fix = fixes if finding.status != "PASS" or finding.note else []


def _layer(group: str) -> int:
    return LAYERS.index(group) if group in LAYERS else len(LAYERS)


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


# --------------------------------------------------------------------------------------
# reports
# --------------------------------------------------------------------------------------


def load_schema() -> dict[str, Any]:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    assert isinstance(schema, dict)
    return schema


def report_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def report_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown, to paste into a bug report."""
    lines: list[str] = []
    status = report["status"]
    py = report["python"]
    lines.append(f"# gputui diagnosis: {status}")
    lines.append("")
    lines.append(
        f"{report['host']} · {report['created']} · Python {py.get('version') or '?'} "
        f"`{py.get('executable')}` · gputui {report['gputui']}"
    )
    lines.append("")
    c = report["counts"]
    lines.append(f"**{c['PASS']} pass · {c['WARN']} warn · {c['FAIL']} fail · {c['SKIP']} skip**")
    primary = report.get("primary")
    if primary:
        lines.append("")
        lines.append(
            f"**{primary['status']}: {primary.get('cause_title') or primary['title']}**: {primary['summary']}"
        )
        if primary.get("fix"):
            lines.append("")
            lines.append("Fix:")
            lines.append("")
            lines.append("```sh")
            lines += primary["fix"]
            lines.append("```")
    lines.append("")
    lines.append("| status | check | result |")
    lines.append("|---|---|---|")
    for chk in report["checks"]:
        lines.append(f"| {chk['status']} | {_md_cell(chk['title'])} | {_md_cell(chk['summary'])} |")
    problems = [chk for chk in report["checks"] if chk["status"] in ("FAIL", "WARN") or chk.get("note")]
    if problems:
        lines.append("")
        lines.append("## Findings")
        for chk in problems:
            lines.append("")
            lines.append(f"### {chk['status']} · {chk['title']} (`{chk['id']}`)")
            lines.append("")
            lines.append(chk["summary"])
            if chk.get("cause_title"):
                lines.append("")
                lines.append(f"*{chk['cause_title']}*: {chk.get('meaning') or ''}")
            if chk.get("note"):
                lines.append("")
                lines.append(f"Note: {chk['note']}")
            if chk.get("fix"):
                lines.append("")
                lines.append("```sh")
                lines += chk["fix"]
                lines.append("```")
            if chk.get("refs"):
                lines.append("")
                lines.append("Seen in: " + ", ".join(chk["refs"]))
    stress = report.get("stress")
    if stress:
        lines.append("")
        lines += stress_markdown(stress)
    child = report.get("child") or {}
    if child.get("stderr_tail") and (
        child.get("returncode") or child.get("timed_out") or child.get("signal")
    ):
        lines.append("")
        lines.append("## Diagnosis process stderr (tail)")
        lines.append("")
        lines.append("```")
        lines.append(child["stderr_tail"].rstrip())
        lines.append("```")
    lines.append("")
    lines.append("<details><summary>Evidence (every check)</summary>")
    lines.append("")
    lines.append("```json")
    lines.append(json.dumps({chk["id"]: chk["evidence"] for chk in report["checks"]}, indent=1, default=str))
    lines.append("```")
    lines.append("")
    lines.append("</details>")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------
# the stress benchmark: results, reference figures, per-GPU verdicts
# --------------------------------------------------------------------------------------

#: Dense datasheet peaks (TFLOP/s; FP64 on tensor cores; FP8 with fp32 accumulate) and HBM
#: bandwidth (GB/s), by the exact name NVML and torch report.  Unknown models get no %.
DATASHEET: dict[str, dict[str, float]] = {
    "NVIDIA H200": {"fp64": 67, "fp32": 67, "tf32": 495, "fp16": 989, "bf16": 989, "fp8": 1979, "hbm": 4800},
    "NVIDIA H100 80GB HBM3": {
        "fp64": 67,
        "fp32": 67,
        "tf32": 495,
        "fp16": 989,
        "bf16": 989,
        "fp8": 1979,
        "hbm": 3350,
    },
    "NVIDIA A100-SXM4-80GB": {"fp64": 19.5, "fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312, "hbm": 2039},
    "NVIDIA A100-SXM4-40GB": {"fp64": 19.5, "fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312, "hbm": 1555},
}
#: What plain torch achieves on a healthy GPU (matmul 8192^3 TFLOP/s; d2d: 2 GiB copy_, GB/s
#: read+write), measured on the machines this project is tested on (bench/RESULTS.md).
ACHIEVABLE: dict[str, dict[str, float]] = {
    "NVIDIA H200": {"bf16": 773, "fp16": 748, "fp8": 1426, "tf32": 393, "fp32": 51, "fp64": 55, "d2d": 4270},
    "NVIDIA H100 80GB HBM3": {"bf16": 798, "d2d": 3000},
}
#: Below this fraction of the best GPU of its model in the run, or of ACHIEVABLE: WARN.
SLOW_FRACTION = 0.75
STRESS_SLOWDOWN_MASK = 0x008 | 0x020 | 0x040 | 0x080  # HW slowdown, SW/HW thermal, power brake
STRESS_PHASES = ("matmul", "memory", "burn", "health")


@dataclass
class StressGpu:
    index: int
    name: str = "?"
    nvml_index: int | None = None
    matmul: dict[str, dict[str, Any]] = field(default_factory=dict)
    memory: dict[str, float] = field(default_factory=dict)
    burn: dict[str, Any] | None = None
    health: dict[str, Any] | None = None
    errors: list[str] = field(default_factory=list)
    progress: dict[str, float] = field(default_factory=dict)
    """Phase -> fraction done."""
    live: dict[str, Any] = field(default_factory=dict)
    """The latest burn progress (TFLOP/s, mismatches so far)."""


class StressResults:
    """Accumulates the stress child's events."""

    def __init__(self) -> None:
        self.gpus: dict[int, StressGpu] = {}
        self.p2p: list[dict[str, Any]] = []
        self.phases_done: list[str] = []
        self.phases: dict[str, str] = {}
        self.errors: list[dict[str, Any]] = []
        self.hello: dict[str, Any] | None = None
        self.done = False
        self.seconds: float | None = None

    def gpu(self, index: Any) -> StressGpu:
        i = int(index) if isinstance(index, int) else -1
        if i not in self.gpus:
            self.gpus[i] = StressGpu(i)
        return self.gpus[i]

    def feed(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "hello":
            self.hello = event
        elif kind == "gpus":
            for g in event.get("gpus") or []:
                gpu = self.gpu(g.get("index"))
                gpu.name = str(g.get("name"))
                gpu.nvml_index = g.get("nvml_index")
        elif kind == "phase":
            name = _text(event.get("name"))
            if event.get("state") == "start":
                self.phases[name] = _text(event.get("title"), name)
            else:
                self.phases.pop(name, None)
                if name in STRESS_PHASES:
                    self.phases_done.append(name)
        elif kind == "progress":
            gpu = self.gpu(event.get("gpu"))
            gpu.progress[_text(event.get("phase"))] = float(event.get("fraction") or 0.0)
            if event.get("phase") == "burn":
                gpu.live = {k: event.get(k) for k in ("tflops", "mismatches", "nonfinite")}
        elif kind == "result":
            self._result(event)
        elif kind == "error":
            self.errors.append({"message": event.get("message"), "cause": event.get("cause")})
        elif kind == "done":
            self.done = True
            seconds = event.get("seconds")
            self.seconds = float(seconds) if isinstance(seconds, int | float) else None

    def _result(self, e: dict[str, Any]) -> None:
        phase = e.get("phase")
        if phase == "p2p":
            self.p2p.append(
                {"from": e.get("from"), "to": e.get("to"), "gbps": e.get("gbps"), "error": e.get("error")}
            )
            return
        gpu = self.gpu(e.get("gpu"))
        if e.get("error"):
            gpu.errors.append(f"{phase}: {e['error']}")
        if phase == "matmul":
            gpu.matmul[_text(e.get("precision"))] = {
                "tflops": e.get("tflops"),
                "sustained_tflops": e.get("sustained_tflops"),
                "size": e.get("size"),
                "skipped": e.get("skipped"),
            }
        elif phase == "memory" and isinstance(e.get("gbps"), int | float):
            gpu.memory[_text(e.get("kind"))] = float(e["gbps"])
        elif phase == "burn":
            gpu.burn = {k: v for k, v in e.items() if k not in ("v", "event", "phase", "gpu")}
        elif phase == "health":
            gpu.health = {k: v for k, v in e.items() if k not in ("v", "event", "phase", "gpu")}

    def current_phase(self) -> str | None:
        return next(reversed(self.phases.values()), None) if self.phases else None


def _count(value: Any) -> int:
    return int(value) if isinstance(value, int | float) else 0


def _health_deltas(health: dict[str, Any] | None) -> tuple[list[str], list[str]]:
    """(FAIL reasons, WARN reasons) from NVML before/after."""
    fail: list[str] = []
    warn: list[str] = []
    if not health or health.get("skipped"):
        return fail, warn
    before = health.get("before") or {}
    after = health.get("after") or {}
    new_ecc = _count(after.get("ecc_volatile_uncorrected")) - _count(before.get("ecc_volatile_uncorrected"))
    if new_ecc > 0:
        fail.append(f"{new_ecc} new uncorrected ECC error(s)")
    xids = health.get("xid_events") or []
    if xids:
        fail.append("Xid event(s) during the run: " + ", ".join(str(x) for x in xids))
    rows_b, rows_a = before.get("remapped_rows") or {}, after.get("remapped_rows") or {}
    if rows_a.get("failed") and not rows_b.get("failed"):
        fail.append("a row remapping failed during the run")
    new_unc_rows = _count(rows_a.get("uncorrectable")) - _count(rows_b.get("uncorrectable"))
    if new_unc_rows > 0 or (rows_a.get("pending") and not rows_b.get("pending")):
        fail.append("new remapped rows (uncorrectable memory errors)")
    replays = _count(after.get("pcie_replays")) - _count(before.get("pcie_replays"))
    if replays > 0:
        warn.append(f"{replays} PCIe replay(s) during the run (link errors)")
    new_corr = _count(after.get("ecc_volatile_corrected")) - _count(before.get("ecc_volatile_corrected"))
    if new_corr > 0:
        warn.append(f"{new_corr} corrected ECC error(s) during the run")
    return fail, warn


def stress_verdicts(
    results: StressResults, monitor: dict[int, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Per-GPU PASS/WARN/FAIL with reasons, and the stress section of the report.

    FAIL: a miscompare, NaN/Inf, a reference mismatch, new ECC errors, Xid events, a phase
    error.  WARN: throughput below 75 % of the best GPU of the same model in the run or of
    the achievable figure for the model; thermal or power-brake slowdown seen."""
    monitor = monitor or {}
    best: dict[tuple[str, str], float] = {}
    for g in results.gpus.values():
        for precision, m in g.matmul.items():
            if isinstance(m.get("tflops"), int | float):
                key = (g.name, precision)
                best[key] = max(best.get(key, 0.0), float(m["tflops"]))
        for kind, gbps in g.memory.items():
            key = (g.name, kind)
            best[key] = max(best.get(key, 0.0), gbps)
    gpus_out = []
    for g in sorted(results.gpus.values(), key=lambda x: x.index):
        fail: list[str] = list(g.errors)
        warn: list[str] = []
        burn = g.burn or {}
        if burn:
            if _count(burn.get("mismatches")):
                fail.append(f"{burn['mismatches']} miscompare(s): repeated products differed")
            if _count(burn.get("nonfinite")):
                fail.append(f"{burn['nonfinite']} NaN/Inf value(s)")
            if _count(burn.get("reference_mismatches")):
                fail.append(f"{burn['reference_mismatches']} element(s) off the float64 reference")
        h_fail, h_warn = _health_deltas(g.health)
        fail += h_fail
        warn += h_warn
        peaks = DATASHEET.get(g.name, {})
        achievable = ACHIEVABLE.get(g.name, {})
        matmul_out: dict[str, Any] = {}
        for precision, m in g.matmul.items():
            tflops = m.get("tflops")
            peak = peaks.get(precision)
            entry = {
                "tflops": tflops,
                "sustained_tflops": m.get("sustained_tflops"),
                "peak": peak,
                "percent": round(100.0 * tflops / peak, 1)
                if peak and isinstance(tflops, int | float)
                else None,
                "size": m.get("size"),
                "skipped": m.get("skipped"),
            }
            matmul_out[precision] = entry
            if isinstance(tflops, int | float):
                top = best.get((g.name, precision), 0.0)
                if top and tflops < SLOW_FRACTION * top:
                    warn.append(
                        f"{precision} {tflops:.0f} TFLOP/s is below 75 % of the best {g.name} "
                        f"here ({top:.0f})"
                    )
                ref = achievable.get(precision)
                if ref and tflops < SLOW_FRACTION * ref:
                    warn.append(f"{precision} {tflops:.0f} TFLOP/s is below 75 % of the achievable {ref:.0f}")
        for kind, gbps in g.memory.items():
            top = best.get((g.name, kind), 0.0)
            if top and gbps < SLOW_FRACTION * top:
                warn.append(f"{kind} {gbps:.0f} GB/s is below 75 % of the best {g.name} here ({top:.0f})")
            ref = achievable.get(kind)
            if ref and gbps < SLOW_FRACTION * ref:
                warn.append(f"{kind} {gbps:.0f} GB/s is below 75 % of the achievable {ref:.0f}")
        mon = monitor.get(g.nvml_index) if g.nvml_index is not None else None
        reasons = _count((g.health or {}).get("clock_event_reasons")) | _count(
            (mon or {}).get("clock_event_reasons")
        )
        if reasons & STRESS_SLOWDOWN_MASK:
            from gputui.telemetry.model import decode_clock_events

            slow = list(decode_clock_events(reasons & STRESS_SLOWDOWN_MASK))
            warn.append("clocks were held back during the run: " + ", ".join(slow))
        status = "FAIL" if fail else "WARN" if warn else "PASS"
        gpus_out.append(
            {
                "index": g.index,
                "nvml_index": g.nvml_index,
                "name": g.name,
                "status": status,
                "reasons": fail + warn,
                "matmul": matmul_out,
                "memory": g.memory,
                "burn": g.burn,
                "health": g.health,
                "monitor": mon,
            }
        )
    statuses = [g["status"] for g in gpus_out]
    overall = (
        "FAIL"
        if "FAIL" in statuses or results.errors or not gpus_out
        else "WARN"
        if "WARN" in statuses
        else "PASS"
    )
    return {
        "status": overall,
        "duration": (results.hello or {}).get("duration"),
        "seconds": results.seconds,
        "phases": results.phases_done,
        "errors": results.errors,
        "gpus": gpus_out,
        "p2p": results.p2p,
        "references": {
            name: {"datasheet": DATASHEET.get(name), "achievable": ACHIEVABLE.get(name)}
            for name in {g.name for g in results.gpus.values()}
        },
    }


def stress_table(stress: dict[str, Any]) -> list[list[str]]:
    """Rows of the per-GPU results table (header first), as text cells."""
    precisions = [
        p
        for p in ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")
        if any(isinstance((g["matmul"].get(p) or {}).get("tflops"), int | float) for g in stress["gpus"])
    ]
    header = ["GPU", "verdict", *precisions, "D2D GB/s", "H2D pinned", "burn", "max °C"]
    rows = [header]
    for g in stress["gpus"]:
        cells = [f"{g['index']} {g['name']}", g["status"]]
        for p in precisions:
            m = g["matmul"].get(p) or {}
            t = m.get("tflops")
            if isinstance(t, int | float):
                cells.append(_num(t) + (f" ({m['percent']:.0f}%)" if m.get("percent") is not None else ""))
            else:
                cells.append("—")
        mem = g.get("memory") or {}
        cells.append(_num(mem["d2d"]) if "d2d" in mem else "—")
        cells.append(f"{mem['h2d_pinned']:.1f}" if "h2d_pinned" in mem else "—")
        burn = g.get("burn") or {}
        if burn:
            errors = (
                _count(burn.get("mismatches"))
                + _count(burn.get("nonfinite"))
                + _count(burn.get("reference_mismatches"))
            )
            cells.append(
                f"{errors} errors / {burn.get('iterations')} it"
                if errors
                else f"ok / {burn.get('iterations')} it"
            )
        else:
            cells.append("—")
        mon = g.get("monitor") or {}
        cells.append(str(mon.get("max_temperature")) if mon.get("max_temperature") is not None else "—")
        rows.append(cells)
    return rows


def _num(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def stress_markdown(stress: dict[str, Any]) -> list[str]:
    """The stress results as Markdown lines."""
    lines = [f"## Stress benchmark: {stress['status']}", ""]
    rows = stress_table(stress)
    lines.append("| " + " | ".join(rows[0]) + " |")
    lines.append("|" + "---|" * len(rows[0]))
    for row in rows[1:]:
        lines.append("| " + " | ".join(_md_cell(c) for c in row) + " |")
    lines.append("")
    lines.append(
        "TFLOP/s per precision (% of the datasheet's dense peak where the model is known); "
        "D2D counts bytes read and written."
    )
    for g in stress["gpus"]:
        if g["reasons"]:
            lines.append("")
            lines.append(f"GPU {g['index']} {g['status']}:")
            lines += [f"- {r}" for r in g["reasons"]]
    if stress.get("p2p"):
        lines.append("")
        lines.append(
            "Peer-to-peer: "
            + ", ".join(
                f"{p['from']}→{p['to']} {p['gbps']:.0f} GB/s"
                for p in stress["p2p"]
                if isinstance(p.get("gbps"), int | float)
            )
        )
    for err in stress.get("errors") or []:
        lines.append("")
        lines.append(f"Error: {err.get('message')}")
    return lines


def stress_only_report(python: str, stress: dict[str, Any]) -> dict[str, Any]:
    """A report holding only a stress run (what `gputui stress --json` prints)."""
    report = Diagnosis(python=python).to_json(stress)
    report["status"] = stress["status"]
    report["exit_code"] = EXIT_CODES[stress["status"]]
    report["child"] = stress.get("child") or {}
    return report
