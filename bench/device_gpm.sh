#!/usr/bin/env bash
# GPM recordings under known loads, for tests/fixtures and bench/RESULTS.md (on a GPU machine,
# from the repo root).
#   bench/device_gpm.sh loads OUTDIR   one GPU: gpm_loads.py's phases (idle, bf16 matmul, float32
#                                       matmul with TF32 off, copies, tiny kernels with and without
#                                       synchronize, idle holding memory), recorded with
#                                       `gputui record`; nvidia-smi dmon's GPM view alongside;
#                                       the GPM cost per GPU per slow tick (bench/gpm_cost.py)
#   bench/device_gpm.sh train2 OUTDIR   two GPUs: bf16 training on GPU 0, float32 training
#                                       (TF32 off) on GPU 1; `gputui snapshot --json`, the
#                                       exporter's /metrics and nvidia-smi captured during it
set -u
mode=$1; out=$2; mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used,power.draw,clocks.sm --format=csv -lms 1000 > "$out/$mode-nvidia-smi-query.csv" 2>&1 &
smi=$!
nvidia-smi dmon -d 1 --gpm-metrics 1,2,3,5,7,10,11,12,13 > "$out/$mode-nvidia-smi-dmon-gpm.txt" 2>&1 &
dmon=$!
if [ "$mode" = loads ]; then
  $py -m gputui record "$out/$mode.jsonl.gz" --force --duration 170 --interval 1 \
     --note "real $name, GPM: bench/load/gpm_loads.py phases (phase times in gpm-loads-phases.json): idle; bf16 8192 matmul; float32 8192 matmul, TF32 off; 2 GiB device copies; 64x64 matmul + synchronize; 64x64 matmul without synchronize; idle holding 8 GiB" &
  rec=$!
  sleep 3
  $py bench/load/gpm_loads.py --phases "$out/gpm-loads-phases.json" --seconds 16 --gap 4 > "$out/loads.log" 2>&1
  wait $rec
  $py bench/load/train_like.py --seconds 25 --precision fp32 > "$out/cost-load.log" 2>&1 &
  load=$!
  sleep 8; $py bench/gpm_cost.py --passes 15 --json "$out/gpm-cost.json" > /dev/null 2> "$out/gpm-cost.err"
  wait $load
else
  $py -m gputui record "$out/$mode.jsonl.gz" --force --duration 75 --interval 1 \
     --note "real 2x $name, GPM: bf16 training (train_like.py --precision bf16) on GPU 0 and float32 training with TF32 off (train_like.py --precision fp32) on GPU 1, started 8 s in, 55 s long" &
  rec=$!
  sleep 8
  $py bench/load/train_like.py --device 0 --precision bf16 --seconds 55 --pause-every 1000 > "$out/train-bf16.log" 2>&1 &
  t0=$!
  $py bench/load/train_like.py --device 1 --precision fp32 --seconds 55 --pause-every 1000 > "$out/train-fp32.log" 2>&1 &
  t1=$!
  $py -m gputui export --listen 127.0.0.1:9400 > "$out/export.log" 2>&1 &
  exp=$!
  sleep 30
  $py -m gputui snapshot --json --processes > "$out/$mode-snapshot.json" 2> "$out/$mode-snapshot.err"
  gpmf=index,utilization.gpu,gpm.sm_active,gpm.sm_occupancy,gpm.tensor_active,gpm.dram_active,gpm.fp32_active,gpm.fp16_active,gpm.pcie_tx,gpm.pcie_rx,gpm.nvlink_tx,gpm.nvlink_rx,gpm.unavailable
  snap0=$(date +%s.%N)
  $py -m gputui snapshot --json --fields $gpmf > "$out/$mode-snapshot-gpm.json" 2> "$out/$mode-snapshot-gpm.err"
  echo "gputui snapshot --json --fields (GPM): $snap0 -> $(date +%s.%N)" >> "$out/$mode-snapshot-gpm.err"
  $py -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:9400/metrics').read().decode())" > "$out/$mode-metrics.txt" 2>&1
  nvidia-smi > "$out/$mode-nvidia-smi.txt" 2>&1
  $py bench/gpm_cost.py --passes 10 --json "$out/gpm-cost.json" > /dev/null 2> "$out/gpm-cost.err"
  kill $exp
  wait $rec $t0 $t1
fi
kill $smi $dmon 2>/dev/null
ls -la "$out"
