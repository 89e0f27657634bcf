#!/usr/bin/env bash
# Record real GPUs for gputui's fixtures and demo (run on a GPU machine, from the repo root).
#   bench/record_real.sh single OUTDIR   one GPU: idle -> an idle process holding memory ->
#                                         a training-like job -> idle again (150 s)
#   bench/record_real.sh multi OUTDIR    all GPUs: data-parallel training over NCCL plus an
#                                         idle memory holder on the last GPU (120 s)
# Alongside: nvidia-smi's view of the same seconds (for comparison), its -q, topo -m and the
# NVML cost benchmark.
set -u
mode=$1; out=$2; mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
ngpu=$(nvidia-smi -L | wc -l)
fields=timestamp,index,utilization.gpu,utilization.memory,memory.used,memory.total,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.mem,pstate,pcie.link.gen.current,pcie.link.width.current,clocks_event_reasons.active
nvidia-smi --query-gpu=$fields --format=csv -lms 1000 > "$out/$mode-nvidia-smi-query.csv" 2>&1 &
smi=$!
if [ "$mode" = single ]; then
  dur=150
  $py -m gputui record "$out/$mode.jsonl.gz" --force --duration $dur --interval 1 \
     --note "real $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1): idle, then an idle process holding 12 GiB (hold_memory.py), then a training-like bf16 job (train_like.py) with eval pauses, then idle" &
  rec=$!
  sleep 15; $py bench/load/hold_memory.py --gib 12 --seconds 95 > "$out/hold.log" 2>&1 &
  sleep 15; $py bench/load/train_like.py --seconds 70 > "$out/train.log" 2>&1 &
  sleep 30; $py bench/nvml_cost.py --json "$out/$mode-nvml-cost.json" > /dev/null 2> "$out/nvml-cost.err"
else
  dur=120
  last=$((ngpu - 1))
  $py -m gputui record "$out/$mode.jsonl.gz" --force --duration $dur --interval 1 \
     --note "real ${ngpu}x $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1): idle, then data-parallel bf16 training over NCCL on all GPUs (ddp_like.py) and an idle process holding 8 GiB on GPU $last, then idle" &
  rec=$!
  sleep 12; $py bench/load/hold_memory.py --gib 8 --seconds 80 --device $last > "$out/hold.log" 2>&1 &
  sleep 8; $py -m torch.distributed.run --standalone --nproc_per_node=$ngpu bench/load/ddp_like.py --seconds 70 > "$out/ddp.log" 2>&1 &
  sleep 30; $py bench/nvml_cost.py --json "$out/$mode-nvml-cost.json" > /dev/null 2> "$out/nvml-cost.err"
fi
wait $rec
kill $smi
nvidia-smi -q > "$out/$mode-nvidia-smi-q.txt" 2>&1
nvidia-smi topo -m > "$out/$mode-nvidia-smi-topo.txt" 2>&1
nvidia-smi topo -p2p rw > "$out/$mode-nvidia-smi-topo-p2p.txt" 2>&1
nvidia-smi nvlink -s > "$out/$mode-nvidia-smi-nvlink.txt" 2>&1
nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit,compute_cap,pcie.link.gen.max,pcie.link.width.max --format=csv > "$out/$mode-nvidia-smi-static.csv" 2>&1
wait
ls -la "$out"
