"""The system and the driver: the driver installed, loaded and reachable, the device nodes, NVML, libcuda."""

from __future__ import annotations

from typing import Any

from gputui.diag.verdicts.causes.base import Cause, Context, static


def _fix_container(ctx: Context, ev: dict[str, Any]) -> list[str]:
    return [
        "Docker: start the container with `--gpus all` (or `--runtime=nvidia`), with the NVIDIA "
        "Container Toolkit installed on the host (`nvidia-ctk runtime configure --runtime=docker`)",
        "Kubernetes: request the GPU in the pod spec (`resources.limits: nvidia.com/gpu: 1`) "
        "and run the NVIDIA device plugin",
        "Check on the host first: `nvidia-smi` must work there",
    ]


SYSTEM: dict[str, Cause] = {
    "no-driver": Cause(
        "No NVIDIA driver",
        "libnvidia-ml.so.1, part of the NVIDIA driver, is not installed or not on the loader's path: "
        "nothing on this machine can use a GPU.",
        static(
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
        static("Run `sudo nvidia-modprobe -u -c=0` (or reboot) to create them"),
    ),
    "uvm-missing": Cause(
        "nvidia-uvm not loaded",
        "CUDA needs the nvidia-uvm kernel module (/dev/nvidia-uvm) for memory management; "
        "without it CUDA initialisation fails (often as error 999 or 'no device').",
        static("sudo modprobe nvidia-uvm   (or `sudo nvidia-modprobe -u -c=0`)"),
    ),
    "nouveau": Cause(
        "nouveau holds the GPU",
        "The open-source nouveau driver is loaded, so the NVIDIA driver cannot take the GPU.",
        static(
            "Blacklist nouveau: echo 'blacklist nouveau' | sudo tee /etc/modprobe.d/blacklist-nouveau.conf",
            "sudo update-initramfs -u && sudo reboot   # then install or reload the NVIDIA driver",
        ),
    ),
    "driver-library-mismatch": Cause(
        "Driver/library version mismatch",
        "The loaded NVIDIA kernel module and the user-space driver libraries are different versions: "
        "almost always the driver was upgraded (often unattended) and the machine not rebooted.",
        static(
            "Reboot (or, with no GPU job running, unload and reload the nvidia modules)",
            "Compare `cat /proc/driver/nvidia/version` with `ls /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.*`",
            "Hold the driver out of unattended upgrades (e.g. `sudo apt-mark hold 'nvidia-*'`)",
        ),
    ),
    "driver-not-loaded": Cause(
        "Kernel driver not loaded",
        "The NVIDIA libraries are installed but the kernel module is not loaded.",
        static(
            "sudo modprobe nvidia; check `dmesg | grep -i nvidia` for why it failed",
            "Secure Boot blocks unsigned modules: sign the module or disable Secure Boot",
            "After a kernel update: reinstall the driver (DKMS) for the running kernel",
        ),
    ),
    "no-permission": Cause(
        "No permission on the GPU device files",
        "This user may not open /dev/nvidia*.",
        static(
            "ls -l /dev/nvidia*; add the user to the owning group (often `video`) or ask an admin",
        ),
    ),
    "nvml-error": Cause(
        "NVML failed",
        "The driver's management library failed to initialise.",
        static("Run `nvidia-smi`; check `dmesg | grep -i -E 'nvidia|xid'`"),
    ),
    "no-gpu": Cause(
        "The driver sees no GPU",
        "The driver is loaded but lists no GPU: the GPU is not on the PCI bus, fell off it, or is "
        "bound to another driver (vfio).",
        static("lspci | grep -i nvidia; dmesg | grep -i -E 'nvidia|xid|NVRM'"),
    ),
    "no-libcuda": Cause(
        "libcuda.so.1 missing",
        "NVML works but the CUDA driver library is not found: an incomplete driver install, or a "
        "container that mounted only the utility libraries (NVIDIA_DRIVER_CAPABILITIES without compute).",
        static(
            "Reinstall the driver's CUDA component (libnvidia-compute / nvidia-driver package)",
            "In a container: NVIDIA_DRIVER_CAPABILITIES=compute,utility",
        ),
    ),
}
