"""The cause catalogue: each failure mode the children name, in plain words, with the exact
commands that fix it (which depend on facts gathered across checks: the driver's CUDA
version, the interpreter's path), and the PyTorch wheel indexes and minimum drivers those
commands need."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gputui.rules import version_tuple

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
            "sudo update-initramfs -u && sudo reboot   # then install or reload the NVIDIA driver",
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
    "cvd-loose": Cause(
        "CUDA_VISIBLE_DEVICES is read differently from how it looks",
        "CUDA reads each entry like C's strtoul: the number it starts with, the rest ignored. "
        "'0 1' (a space for a comma) is GPU 0 alone; '1gpu2' is GPU 1.",
        lambda ctx, ev: [
            "export CUDA_VISIBLE_DEVICES="
            + ",".join(str(i) for i in ev.get("visible") or [0])
            + "   # the GPUs CUDA reads now, written plainly; separate GPUs with commas"
        ],
    ),
    "cvd-slurm-no-gpu": Cause(
        "Slurm gave this job step no GPU",
        "Slurm sets CUDA_VISIBLE_DEVICES=NoDevFiles when the step was allocated no GPU; CUDA reads "
        "it as an invalid entry and sees none.",
        _static(
            "srun --gpus=1 ...   # or --gres=gpu:1 / --gpus-per-node (sbatch, salloc too)",
            "scontrol show job $SLURM_JOB_ID | grep -i -E 'tres|gres'",
        ),
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
        _static(
            "Check CUDA_VISIBLE_DEVICES and that /dev/nvidia-uvm exists; "
            "look for Xid errors: `dmesg | grep -i xid`"
        ),
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
    "torch-shadowed": Cause(
        "Another torch comes first",
        "The torch that `import torch` finds is not this environment's: a PYTHONPATH entry, the "
        "user's site-packages (~/.local) or a directory named torch in the current directory "
        "comes first on sys.path.",
        lambda ctx, ev: [
            "unset PYTHONPATH   # or remove the entry that holds torch",
            f"{ctx.python} -s -c 'import torch; print(torch.__file__)'   # -s: without the user site",
            "export PYTHONNOUSERSITE=1   # if torch comes from ~/.local",
        ],
    ),
    "ld-preload": Cause(
        "A library is preloaded into every process",
        "LD_PRELOAD (or LD_AUDIT) loads a library before all others: it can replace CUDA, NCCL or "
        "libc functions for torch too (profilers, interposers, old shims).",
        _static("unset LD_PRELOAD LD_AUDIT   # then diagnose again to compare"),
    ),
    "pythonhome": Cause(
        "PYTHONHOME is set",
        "PYTHONHOME moves where Python takes its standard library and site-packages from; with "
        "another interpreter's prefix, packages (torch too) come from there.",
        _static("unset PYTHONHOME"),
    ),
    "ptx-jit-forced": Cause(
        "Every kernel is JIT-compiled",
        "CUDA_FORCE_PTX_JIT=1 makes CUDA ignore the compiled kernels and JIT-compile PTX: a slow "
        "first start, and kernels shipped without PTX fail.",
        _static("unset CUDA_FORCE_PTX_JIT"),
    ),
    "ptx-jit-disabled": Cause(
        "PTX JIT is off",
        "CUDA_DISABLE_PTX_JIT=1 stops CUDA from compiling PTX: on a GPU torch has no compiled "
        "kernels for, every kernel fails with 'no kernel image is available'.",
        _static("unset CUDA_DISABLE_PTX_JIT"),
    ),
    "nvml-based-check": Cause(
        "torch.cuda.is_available() asks NVML",
        "With PYTORCH_NVML_BASED_CUDA_CHECK=1, is_available() counts GPUs through NVML without "
        "initialising CUDA: it can say True and the first CUDA call still fail.",
        _static("unset PYTORCH_NVML_BASED_CUDA_CHECK   # to see the real CUDA error"),
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
    "malformed-variable": Cause(
        "A variable CUDA, torch or NCCL reads at start is malformed",
        "A variable that changes how CUDA, torch or NCCL start holds a value they do not accept: "
        "depending on the variable they stop with an error, crash (torch segfaults on a malformed "
        "PYTORCH_CUDA_ALLOC_CONF in some versions) or ignore it silently.",
        _static("Correct or unset it (the fix above names each one and what is wrong)"),
    ),
    "memory-held": Cause(
        "GPU memory held by other processes",
        "Other processes hold nearly all of this GPU's memory: CUDA works, but a job started here "
        "runs out of memory at its first large allocation.",
        _static(
            "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv   # who holds it",
            "export CUDA_VISIBLE_DEVICES=N   # pick a GPU with free memory (gputui shows them)",
            "Or wait for the processes named above to finish (or ask their owners)",
        ),
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
    "check-error": Cause(
        "The check itself failed",
        "This check raised an unexpected error (traceback in the evidence); the checks that do "
        "not depend on it still ran.  Often the interpreter's packages are not what they seem.",
        _static(
            "Read the traceback in this check's evidence (gputui diag --json)",
            "If it is gputui's fault, report it at the project's issue tracker with that evidence",
        ),
    ),
    "bad-interpreter": Cause(
        "Not a usable Python interpreter",
        "The interpreter could not be started, or it is older than Python 3.8.",
        _static("Pick another interpreter (the path to a `python` executable)"),
    ),
}
