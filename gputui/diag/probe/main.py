"""The run: the checks in the order their layers depend on each other, with the slow starts
(NCCL ranks, cuInit) begun early so they overlap `import torch`."""

from __future__ import annotations

import sys
import time

from . import compute, devices, environment, health, loader, memory, system, torch_layer, visibility
from .protocol import emit, first_line, hello, take_stdout
from .registry import Runner
from .state import Probe


def _start(p, fn):
    """A starter (not a check): its failure is kept for the check that waits on it."""
    try:
        fn(p)
    except Exception as exc:
        p.start_errors[fn.__name__] = "%s: %s" % (type(exc).__name__, first_line(str(exc)))


#: What runs, in order: declared checks, and starters (marked) that begin slow work early.
PLAN = (
    system.python,
    system.driver,
    system.device_nodes,
    visibility.visibility,
    memory.memory,  # before anything here starts CUDA: the probe holds no GPU memory yet
    environment.variables,
    environment.start_variables,  # before any CUDA call: a malformed value named, not a crash
    loader.loader,
    environment.library_path,
    ("start", compute.start_nccl),
    ("start", system.start_cuinit),
    environment.wheels,
    torch_layer.import_torch,
    system.driver_api,
    torch_layer.torch_build,
    torch_layer.cuda_vs_driver,
    torch_layer.cuda_available,
    torch_layer.device_count_check,
    devices.devices,
    devices.cudnn,
    devices.flags,
    compute.matmul,
    compute.amp,
    compute.peers,
    compute.nccl,
    environment.loaded_libraries,
    health.health,
)


def run(options):
    start = time.monotonic()
    hello("probe")
    p = Probe(options)
    _start(p, Probe.container)
    runner = Runner(p)
    try:
        for step in PLAN:
            if isinstance(step, tuple):
                _start(p, step[1])
            else:
                runner.run(step)
    finally:
        p.stop_workers()
    emit("done", seconds=round(time.monotonic() - start, 3))


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--nccl-worker"]:
        compute.nccl_worker(int(argv[1]), int(argv[2]), int(argv[3]))
        return 0
    take_stdout()
    run({"no_nccl": "--no-nccl" in argv})
    return 0
