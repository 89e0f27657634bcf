#!/usr/bin/env bash
# Real recordings for job health (telemetry/health.py), on a GPU machine, from the repo root,
# as root (py-spy and /proc/PID/wchan of other processes).  About 6 minutes on one GPU
# (+1.5 with 2 or more GPUs).  Needs python3 with torch (CUDA), nvidia-ml-py and psutil
# (`gputui record` needs no textual); PYTHON picks another interpreter.
#
#   bench/device_health.sh OUT
#
# Each recording: `gputui record` at 1 s, 45 s, the load started after 5 s of nothing (so a
# recording shows the GPU's idle power first), into OUT/NAME.jsonl.gz, with OUT/NAME.log:
#   idle            nothing
#   spin            bench/load/spin.py: one kernel (1 block, 1 thread) polling a flag in pinned
#                   host memory that nothing sets (NCCL's wait); falls back to torch.cuda._sleep
#   spin-wide       the same kernel in NCCL's shape: 32 blocks of 512 threads
#   spin-busy       spin.py, and a second process computing bf16 8192^2 matmuls
#   tiny            64x64 float32 matmuls, synchronizing after each
#   jobrank-stopped torchrun, 3 ranks, gloo, all on GPU 0 (bench/load/jobrank.py); rank 1
#                   SIGSTOPped 10 s into the recording; OUT/jobrank-stopped.procs.txt has
#                   each rank's state and wchan before and after, and py-spy dumps if present
#   nccl-stopped    (2+ GPUs) torchrun, one rank per GPU, NCCL; rank 1 stopped after 10 s
set -u
out=${1:?usage: bench/device_health.sh OUT}
mkdir -p "$out"
cd "$(dirname "$0")/.." || exit 2
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
py=$(command -v "${PYTHON:-python3}")
ngpu=$(nvidia-smi -L | wc -l)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
DUR=45
LEAD=5

wait_ready() {  # wait_ready LOG N: until N "ready" lines are in LOG (60 s at most)
  for _ in $(seq 600); do
    [ "$(grep -c ready "$1" 2>/dev/null)" -ge "$2" ] && return 0
    sleep 0.1
  done
  echo "timed out waiting for $2 ready line(s) in $1" >&2
  return 1
}

record() {  # record NAME NOTE: start `gputui record` in the background (pid in $rec)
  "$py" -m gputui record "$out/$1.jsonl.gz" --force --duration $DUR --interval 1 \
    --note "real $gpu: $2 (bench/device_health.sh)" > "$out/$1.record.log" 2>&1 &
  rec=$!
}

procs() {  # procs LABEL PIDS...: each process's state and wchan, py-spy dump if installed
  local label=$1; shift
  for pid in "$@"; do
    echo "== $label pid $pid: state $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" \
      "wchan $(cat "/proc/$pid/wchan" 2>/dev/null)"
    if command -v py-spy > /dev/null; then timeout 10 py-spy dump --pid "$pid" 2>&1 | head -30; fi
  done
}

echo "== $(date -u +%FT%TZ) $gpu x$ngpu, $("$py" -c 'import torch; print("torch", torch.__version__)')" | tee "$out/device_health.log"

# idle
record idle "idle, nothing running"
wait $rec

# spin alone; spin in NCCL's shape
for shape in "spin 1 1" "spin-wide 32 512"; do
  set -- $shape
  record "$1" "$2 block(s) x $3 thread(s) polling a flag in pinned host memory (bench/load/spin.py), from ${LEAD} s"
  sleep $LEAD
  "$py" bench/load/spin.py --seconds $((DUR - LEAD)) --blocks "$2" --threads "$3" > "$out/$1.log" 2>&1 &
  load=$!
  wait $rec; wait $load
  grep -h "spin" "$out/$1.log" | tee -a "$out/device_health.log"
done

# spin and a second process computing
record spin-busy "one kernel spinning (spin.py) from ${LEAD} s and bf16 8192^2 matmuls in a second process from ~15 s"
sleep $LEAD
"$py" bench/load/spin.py --seconds $((DUR - LEAD)) > "$out/spin-busy.log" 2>&1 &
load=$!
wait_ready "$out/spin-busy.log" 1
sleep 5
"$py" bench/load/matmul_loop.py --seconds $((DUR - LEAD - 15)) --size 8192 --dtype bf16 > "$out/spin-busy.matmul.log" 2>&1 &
busy=$!
wait $rec; wait $load; wait $busy

# tiny kernels
record tiny "64x64 float32 matmuls, synchronizing after each (matmul_loop.py), from ${LEAD} s"
sleep $LEAD
"$py" bench/load/matmul_loop.py --seconds $((DUR - LEAD)) --size 64 --dtype float32 --sync-every 1 > "$out/tiny.log" 2>&1 &
load=$!
wait $rec; wait $load

job() {  # job NAME BACKEND NPROC: torchrun, recorded; rank 1 stopped 10 s in
  local name=$1 backend=$2 n=$3
  "$py" -m torch.distributed.run --standalone --nproc-per-node "$n" bench/load/jobrank.py \
    --backend "$backend" --seconds 300 > "$out/$name.log" 2>&1 &
  local tr=$!
  wait_ready "$out/$name.log" "$n" || { kill $tr; return 1; }
  local pids r1
  pids=$(sed -n 's/^rank [0-9]* pid \([0-9]*\) .*/\1/p' "$out/$name.log" | tr '\n' ' ')
  r1=$(sed -n 's/^rank 1 pid \([0-9]*\) .*/\1/p' "$out/$name.log")
  record "$name" "torchrun $n ranks ($backend, bench/load/jobrank.py); rank 1 (PID $r1) SIGSTOPped at 10 s"
  sleep 10
  kill -STOP "$r1"
  echo "== $(date -u +%T) SIGSTOP rank 1 pid $r1" | tee -a "$out/device_health.log"
  sleep 15
  procs "$(date -u +%T) rank" $pids > "$out/$name.procs.txt" 2>&1
  wait $rec
  kill -CONT "$r1"; kill "$tr"; sleep 2; kill -9 $pids 2> /dev/null; wait $tr 2> /dev/null
  cat "$out/$name.procs.txt" >> "$out/device_health.log"
}

job jobrank-stopped gloo 3
[ "$ngpu" -ge 2 ] && job nccl-stopped nccl "$ngpu"

"$py" - "$out" <<'PY' | tee -a "$out/device_health.log"
import sys
from pathlib import Path
from gputui.telemetry.recording import read_recording
from gputui.telemetry.health import HealthConfig, HealthEngine
for f in sorted(Path(sys.argv[1]).glob("*.jsonl.gz")):
    h, ticks = read_recording(f)
    e = HealthEngine(HealthConfig(spin_seconds=10, stuck_seconds=10))
    for t in ticks:
        r = e.update(t)
    g0 = ticks[-1].gpus[0]
    w = g0.activity
    print(f"{f.name}: {len(ticks)} ticks; last tick util {g0.gpu_util} power {g0.power_draw} "
          f"GR {w and w.graphics_active} SM {w and w.sm_active} DRAM {w and w.dram_active}; "
          f"states {sorted({(p.pid, p.state, p.rank) for p in ticks[-1].processes})}")
    for i, gh in r.gpus.items():
        print(f"   GPU {i}: {gh.short} | {gh.evidence}")
    for j in r.jobs:
        print(f"   job {j.key}: {j.verdict.short + ' | ' + j.verdict.why if j.verdict else 'no verdict'}")
PY
ls -la "$out"
