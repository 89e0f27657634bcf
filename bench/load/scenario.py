"""One rank of a synchronous NCCL job that goes wrong in a known way, for the verdict matrix
(issue 32).  One GPU per rank; each step is STEP_MATMULS bf16 8192x8192 matmuls, an
all_reduce of 128 MiB and a synchronize, as REFERENCE.md's measurements.

    torchrun --nproc-per-node 2 bench/load/scenario.py --case CASE [--bad-rank 1] [--seconds 90]
    (or one process per rank with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT set: a launcher
    that, as srun does, leaves the others running when one rank dies)

Cases (the bad rank is --bad-rank, default 1; the fault starts --fault-at seconds after the
first step, default 10):
  healthy       every rank alike
  stopped       healthy; the harness SIGSTOPs the bad rank
  killed        healthy; the harness SIGKILLs the bad rank
  exit-early    the bad rank leaves its loop at the fault and exits 0 (uneven batches)
  mismatch      at the fault the bad rank calls recv(src=0) where the others all_reduce
  slow-gpu      the bad rank does 3x the matmuls per step (a slower GPU, unbalanced work)
  slow-host     the bad rank's host sleeps 0.25 s per step (a slow input pipeline)
  loader-stall  the bad rank's DataLoader worker stalls for --stall seconds at the fault
  checkpoint    at the fault rank 0 writes a checkpoint for --stall seconds (torch.save in a
                loop) while the others wait in a barrier; then the job goes on
Each rank prints "rank R pid P gpu G ready" once set up and "rank R step N" every 50 steps.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import torch
import torch.distributed as dist

CASES = (
    "healthy",
    "stopped",
    "killed",
    "exit-early",
    "mismatch",
    "slow-gpu",
    "slow-host",
    "loader-stall",
    "checkpoint",
)
STEP_MATMULS = 40


class Batches(torch.utils.data.Dataset):  # type: ignore[misc]
    """A data set whose first item read after the wall time `stall_from` takes `stall`
    seconds, once per worker (a stalled reader: a network file system, a slow bucket)."""

    def __init__(self, stall_from: float, stall: float) -> None:
        self.stall_from, self.stall, self.stalled = stall_from, stall, False

    def __len__(self) -> int:
        return 1 << 30

    def __getitem__(self, i: int) -> torch.Tensor:
        if not self.stalled and time.time() >= self.stall_from:
            self.stalled = True
            time.sleep(self.stall)
        return torch.zeros(16)


def save_checkpoint(seconds: float, blob: torch.Tensor) -> None:
    end = time.monotonic() + seconds
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "ckpt.pt")
        while time.monotonic() < end:
            torch.save({"weights": blob}, path)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", choices=CASES, required=True)
    ap.add_argument("--bad-rank", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=90.0)
    ap.add_argument("--fault-at", type=float, default=10.0)
    ap.add_argument("--stall", type=float, default=45.0)
    a = ap.parse_args()
    assert os.environ.get("NCCL_NVLS_ENABLE") == "0", "keep NVLink multicast off"
    local = int(os.environ.get("LOCAL_RANK", "0"))
    gpu = int(os.environ.get("SCENARIO_GPU_BASE", "0")) + local
    dev = torch.device("cuda", gpu)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    rank = dist.get_rank()
    bad = rank == a.bad_rank
    x = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    y = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    grad = torch.ones(64 << 20, device=dev, dtype=torch.bfloat16)  # 128 MiB
    matmuls = STEP_MATMULS * (3 if bad and a.case == "slow-gpu" else 1)
    blob = torch.zeros(256 << 20, dtype=torch.uint8) if a.case == "checkpoint" and rank == 0 else None
    print(f"rank {rank} pid {os.getpid()} gpu {gpu} ready", flush=True)
    dist.barrier()
    start = time.monotonic()
    batches = None
    if a.case == "loader-stall":  # every rank reads through 2 workers; the bad rank's stall
        stall_from = time.time() + a.fault_at if bad else float("inf")
        ds = Batches(stall_from, a.stall)
        batches = iter(torch.utils.data.DataLoader(ds, batch_size=1, num_workers=2))
    step = 0
    faulted = False
    while time.monotonic() - start < a.seconds:
        at_fault = not faulted and time.monotonic() - start >= a.fault_at
        if at_fault:
            faulted = True
            print(f"rank {rank} fault {a.case} at step {step} t={time.time():.3f}", flush=True)
        if batches is not None:
            next(batches)
        if a.case == "exit-early" and bad and faulted:
            print(f"rank {rank} out of batches: exiting", flush=True)
            return
        if a.case == "slow-host" and bad:
            time.sleep(0.25)
        if a.case == "checkpoint" and at_fault:
            if rank == 0:
                assert blob is not None
                save_checkpoint(a.stall, blob)
            dist.barrier()
        for _ in range(matmuls):
            torch.mm(x, y)
        if a.case == "mismatch" and faulted and bad:
            dist.recv(grad, src=0)
        else:
            dist.all_reduce(grad)
        grad.fill_(1.0)
        torch.cuda.synchronize(dev)
        step += 1
        if step % 50 == 0:
            print(f"rank {rank} step {step}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
