"""The GPU's health: memory held, NCCL, ECC and row remapping, resets, slowdowns,
persistence, the PCIe link."""

from __future__ import annotations

from gputui.diag.verdicts.causes.base import Cause, static

HEALTH: dict[str, Cause] = {
    "memory-held": Cause(
        "GPU memory held by other processes",
        "Other processes hold nearly all of this GPU's memory: CUDA works, but a job started here "
        "runs out of memory at its first large allocation.",
        static(
            "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv   # who holds it",
            "export CUDA_VISIBLE_DEVICES=N   # pick a GPU with free memory (gputui shows them)",
            "Or wait for the processes named above to finish (or ask their owners)",
        ),
    ),
    "nccl-timeout": Cause(
        "NCCL all-reduce timed out",
        "The ranks did not complete the all-reduce: a hang in NCCL's setup (P2P/IB/shared memory).",
        static("Run with NCCL_DEBUG=INFO; try NCCL_P2P_DISABLE=1 to test whether P2P is the cause"),
    ),
    "nccl-error": Cause(
        "NCCL all-reduce failed",
        "The multi-GPU all-reduce raised an error.",
        static("Run with NCCL_DEBUG=INFO to see where it fails"),
    ),
    "row-remap-failed": Cause(
        "Row remapping failed",
        "The GPU ran out of spare memory rows: it needs service (RMA).",
        static("Drain the GPU from scheduling and contact the vendor"),
    ),
    "ecc-uncorrected": Cause(
        "Uncorrected ECC errors",
        "The GPU memory returned wrong data since the driver loaded; applications on it may have crashed "
        "(Xid 48/63/64/94/95).",
        static(
            "Drain the GPU, reset it (`sudo nvidia-smi -r -i N`) and run `gputui stress`; RMA if it recurs"
        ),
    ),
    "ecc-history": Cause(
        "ECC errors in the GPU's history",
        "Uncorrected errors happened in this GPU's lifetime (not since this boot).",
        static("Watch it: `nvidia-smi -q -d ECC,ROW_REMAPPER`"),
    ),
    "reset-pending": Cause(
        "GPU reset pending",
        "A memory row remap or page retirement waits for a GPU reset to take effect.",
        static("Drain the GPU, then `sudo nvidia-smi -r -i N` (or reboot)"),
    ),
    "slowdown": Cause(
        "Clocks held back",
        "Thermal slowdown or a power brake is active now: the GPU runs slower than it can.",
        static("Check cooling and airflow, `nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER`"),
    ),
    "persistence-off": Cause(
        "Persistence mode off",
        "Without persistence (or nvidia-persistenced) the driver tears the GPU down when no process "
        "uses it; each CUDA start pays the initialisation again.",
        static("sudo systemctl enable --now nvidia-persistenced   (or `sudo nvidia-smi -pm 1`)"),
    ),
    "pcie-downgraded": Cause(
        "PCIe link below its maximum",
        "The link runs at a lower generation or width than the GPU and slot support under load: "
        "a badly seated card, riser or BIOS setting.",
        static("nvidia-smi -q -d PCIE (and `lspci -vv` LnkSta vs LnkCap); reseat the card / check the BIOS"),
    ),
}
