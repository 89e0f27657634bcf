"""The PyTorch wheel indexes and the minimum drivers for each CUDA version, which the fixes name."""

from __future__ import annotations

from gputui.rules.versions import version_tuple

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
