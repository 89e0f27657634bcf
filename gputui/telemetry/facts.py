"""Facts NVML does not give directly but that follow exactly from what it gives."""

from __future__ import annotations

from gputui.telemetry.model import DeviceInfo

#: FP32 CUDA cores per streaming multiprocessor, by compute capability: NVIDIA's own table
#: (`_ConvertSMVer2Cores` in the CUDA samples' helper_cuda.h; the CUDA C Programming Guide's
#: "Arithmetic Instructions" throughput table says the same).  Only capabilities listed
#: there: anything else gives no SM count rather than a guess.
CORES_PER_SM: dict[tuple[int, int], int] = {
    (3, 0): 192,
    (3, 2): 192,
    (3, 5): 192,
    (3, 7): 192,
    (5, 0): 128,
    (5, 2): 128,
    (5, 3): 128,
    (6, 0): 64,
    (6, 1): 128,
    (6, 2): 128,
    (7, 0): 64,
    (7, 2): 64,
    (7, 5): 64,
    (8, 0): 64,
    (8, 6): 128,
    (8, 7): 128,
    (8, 9): 128,
    (9, 0): 128,
    (10, 0): 128,
    (12, 0): 128,
}


def sm_count(dev: DeviceInfo) -> int | None:
    """Streaming multiprocessors: NVML's CUDA core count over the cores per SM of the GPU's
    compute capability (H100/H200, 9.0: 16896 / 128 = 132).  None when either is unknown
    or they do not divide."""
    if dev.cuda_cores is None or dev.compute_capability is None:
        return None
    per_sm = CORES_PER_SM.get(dev.compute_capability)
    if not per_sm or dev.cuda_cores % per_sm:
        return None
    return dev.cuda_cores // per_sm
