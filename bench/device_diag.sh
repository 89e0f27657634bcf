#!/usr/bin/env bash
# On a GPU machine: the full `gputui diag` (JSON + Markdown), its versions against nvidia-smi
# and torch, and its wall time (3 runs) against the floor
# `python -c "import torch; torch.zeros(1, device='cuda')"` (3 runs).  Everything goes to OUTDIR;
# OUTDIR/summary.txt is the part to read.  About 1 minute.
#   bash bench/device_diag.sh OUTDIR        (PYTHON=... to pick the interpreter; default python3)
set -uo pipefail
OUT=${1:?usage: bash bench/device_diag.sh OUTDIR}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=$(command -v "${PYTHON:-python3}")
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id,uuid,persistence_mode --format=csv \
  > "$OUT/nvidia-smi-gpus.csv" 2>&1
"$PY" bench/diag_timing.py "$OUT" "$PY" 2>&1 | tee "$OUT/summary.txt"
