"""Which GPUs the process may see: CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, Slurm, the device order."""

from __future__ import annotations

from gputui.diag.verdicts.causes.base import Cause, static

VISIBILITY: dict[str, Cause] = {
    "cvd-empty": Cause(
        "CUDA_VISIBLE_DEVICES is empty",
        "CUDA_VISIBLE_DEVICES is set but empty, which hides every GPU from CUDA.",
        static("unset CUDA_VISIBLE_DEVICES   (or set it to the GPUs you want, e.g. 0,1)"),
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
        static(
            "srun --gpus=1 ...   # or --gres=gpu:1 / --gpus-per-node (sbatch, salloc too)",
            "scontrol show job $SLURM_JOB_ID | grep -i -E 'tres|gres'",
        ),
    ),
    "nvd-none": Cause(
        "NVIDIA_VISIBLE_DEVICES asks for no GPU",
        "The NVIDIA container runtime reads NVIDIA_VISIBLE_DEVICES; 'void', 'none' or empty gives "
        "the container no GPU.",
        static("Start the container with NVIDIA_VISIBLE_DEVICES=all (or `--gpus all`)"),
    ),
    "device-order": Cause(
        "CUDA and nvidia-smi number the GPUs differently",
        "With different GPU models CUDA numbers the fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID.",
        static("export CUDA_DEVICE_ORDER=PCI_BUS_ID"),
    ),
}
