#!/usr/bin/env bash
# On a GPU machine (1 or more GPUs): a real `gputui stress --duration 60 --json` with the
# monitor sampling every second, the same with the monitor off, and the plain-torch references
# the issue compares with (8192^3 bf16 torch.matmul loop timed with CUDA events; 2 GiB copy_),
# each GPU alone.  OUTDIR/summary.txt is the part to read.  About 3.5 minutes.
#   bash bench/device_stress.sh OUTDIR       (PYTHON=... to pick the interpreter; default python3)
set -uo pipefail
OUT=${1:?usage: bash bench/device_stress.sh OUTDIR}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=$(command -v "${PYTHON:-python3}")
nvidia-smi > "$OUT/nvidia-smi-before.txt" 2>&1
"$PY" bench/stress_reference.py > "$OUT/reference.json" 2> "$OUT/reference.err"
"$PY" -m gputui stress --python "$PY" --duration 60 --json --monitor-interval 1 \
  > "$OUT/stress-monitor-on.json" 2> "$OUT/stress-monitor-on.err"
echo "exit $?" >> "$OUT/stress-monitor-on.err"
"$PY" -m gputui stress --python "$PY" --duration 60 --json --monitor-interval 0 \
  > "$OUT/stress-monitor-off.json" 2> "$OUT/stress-monitor-off.err"
echo "exit $?" >> "$OUT/stress-monitor-off.err"
nvidia-smi > "$OUT/nvidia-smi-after.txt" 2>&1
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > "$OUT/gpu-processes-after.csv" 2>&1
"$PY" bench/stress_summary.py "$OUT" 2>&1 | tee "$OUT/summary.txt"
