#!/usr/bin/env bash
# Issue 12's done-when check on a real machine of 2+ GPUs (run from the repo root):
#   bench/device_overview_two_jobs.sh OUTDIR PTYBENCH
# bf16 training on GPU 0 and float32 training (TF32 off) on GPU 1; while both run, the live
# Overview at 160x50 and 80x24 (ptybench --screen: processes and GPM without a key press),
# `gputui snapshot --json` with the GPM fields and the processes, and the exporter's /metrics.
set -u
out=$1; ptybench=$2; mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
$py bench/load/train_like.py --device 0 --precision bf16 --seconds 45 --pause-every 1000 > "$out/train-bf16.log" 2>&1 &
a=$!
$py bench/load/train_like.py --device 1 --precision fp32 --seconds 45 --pause-every 1000 > "$out/train-fp32.log" 2>&1 &
b=$!
sleep 12
$py "$ptybench" --seconds 12 --cols 160 --rows 50 --screen "$out/overview-160x50.txt" --json -- $py -m gputui > "$out/overview-160x50.json" 2>&1
$py "$ptybench" --seconds 8 --cols 80 --rows 24 --screen "$out/overview-80x24.txt" --json -- $py -m gputui > "$out/overview-80x24.json" 2>&1
fields=index,utilization.gpu,gpm.sm_active,gpm.tensor_active,gpm.dram_active,gpm.fp32_active,gpm.unavailable
$py -m gputui snapshot --json --processes --fields $fields > "$out/snapshot.json" 2> "$out/snapshot.err"
$py -m gputui export --listen 127.0.0.1:9400 --interval 1 > "$out/export.log" 2>&1 &
e=$!
sleep 6
$py -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:9400/metrics', timeout=10).read().decode())" > "$out/metrics.txt" 2>&1
kill $e; wait $a $b 2>/dev/null
grep -E 'DCGM_FI_PROF_(PIPE_TENSOR|PIPE_FP32|SM)_ACTIVE|gputui_gpu_efficiency_hint' "$out/metrics.txt" > "$out/metrics-gpm.txt"
