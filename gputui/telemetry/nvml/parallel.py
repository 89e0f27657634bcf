"""NVML's calls for several GPUs at once: NVML is thread-safe and its Python bindings release
the GIL in every call, so a call that waits (PCIe throughput's 20 ms window, the static facts'
millisecond reads) on one GPU overlaps the same call on the others."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def each_gpu(work: Callable[[int, Any], T], gpus: Sequence[tuple[int, Any]]) -> list[T | BaseException]:
    """`work(index, handle)` for each of `gpus`, one thread a GPU (on this thread when there is
    one GPU); each result in its GPU's place, or the exception it raised there."""
    results: list[T | BaseException | None] = [None] * len(gpus)

    def run(k: int) -> None:
        try:
            results[k] = work(*gpus[k])
        except Exception as exc:  # handed back, raised (or not) by the caller
            results[k] = exc

    if len(gpus) < 2:
        for k in range(len(gpus)):
            run(k)
    else:
        threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(len(gpus))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return results  # type: ignore[return-value]  # (every place filled by its run)
