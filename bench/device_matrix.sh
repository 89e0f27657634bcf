#!/usr/bin/env bash
# Issue 32's scenario matrix, live on a 4-GPU machine, from the repo root, as root (about 8
# minutes).  Two 2-rank NCCL jobs at a time, one on GPUs 0-1 and one on GPUs 2-3
# (CUDA_VISIBLE_DEVICES), each its own RAS port (NCCL_RAS_ADDR localhost:28028 / 28029),
# bench/load/scenario.py with one case each; the bad rank is rank 1 (rank 0 for checkpoint).
#
#   bash bench/device_matrix.sh OUT [SLOTS...]      (a slot: "CASE_A CASE_B")
#
# Per slot, in OUT/SLOT/: `gputui record` at 1 s for RECORD seconds (default 65) of both jobs
# (recording.jsonl.gz); NCCL RAS's answers every 5 s, JSON and text, raw (ras.jsonl,
# bench/ras_capture.py); at 35 s and 55 s every rank's `py-spy dump` (and --native at 35 s),
# its state, wchan and CPU, and nvidia-smi (stacks-35.txt, stacks-55.txt); each job's log.
# With CHECK=1 (the new code) also `gputui snapshot --processes --json --watch 5` with
# [health] stuck_seconds = 30 (snapshots.jsonl) and `/metrics` at the end (metrics.txt);
# `python3 bench/matrix_check.py OUT` then checks each job's verdict against its case.
# `gputui record` reads the same [health] settings: a suspected job's ranks' stacks, read by
# gputui itself from half of stuck_seconds on, are in the recording (Snapshot.stacks).
# The stopped and killed cases are faulted from here 10 s into the recording; `killed` runs
# under a stand-in srun (bench/load/rank_launcher.py), which leaves the others running.
# Everything goes to OUT/matrix.tar.gz.
set -u
out=${1:?usage: bash bench/device_matrix.sh OUT [SLOTS...]}
shift
mkdir -p "$out"
cd "$(dirname "$0")/.." || exit 2
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
py=$(command -v "${PYTHON:-python3}")
record=${RECORD:-65}
if [ $# -eq 0 ]; then
  set -- "healthy stopped" "exit-early killed" "mismatch slow-gpu" "slow-host loader-stall" "checkpoint healthy"
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
mkdir -p "$out/bin"
cp bench/load/rank_launcher.py "$out/bin/srun"
cfg="$out/fast.toml"
printf '[health]\nstuck_seconds = 30\nstraggler_seconds = 30\n' > "$cfg"
chmod 600 "$cfg"

start_job() {  # start_job DIR NAME CASE GPUS RASPORT MASTERPORT -> prints the launcher's PID
  local dir=$1 name=$2 case=$3 gpus=$4 ras=$5 mport=$6 bad=1
  [ "$case" = checkpoint ] && bad=0
  local args=(bench/load/scenario.py --case "$case" --bad-rank "$bad" --seconds 300)
  if [ "$case" = killed ]; then
    CUDA_VISIBLE_DEVICES=$gpus NCCL_RAS_ADDR=localhost:$ras setsid "$py" "$out/bin/srun" --nproc 2 --port "$mport" \
      "${args[@]}" > "$dir/$name.log" 2>&1 &
  else
    CUDA_VISIBLE_DEVICES=$gpus NCCL_RAS_ADDR=localhost:$ras setsid "$py" -m torch.distributed.run --nproc-per-node 2 \
      --master-port "$mport" "${args[@]}" > "$dir/$name.log" 2>&1 &
  fi
  echo $!
}

rank_pid() { awk -v r="$2" '$1 == "rank" && $2 == r && $3 == "pid" {print $4; exit}' "$1"; }

dump_stacks() {  # dump_stacks FILE PIDS... (py-spy of every rank, state, nvidia-smi)
  local f=$1; shift
  {
    echo "# $(date +%s.%N) $(date +%T)"
    ps -o pid,stat,pcpu,nlwp,wchan:32,args -p "$(IFS=,; echo "$*")"
    for p in "$@"; do
      echo "## py-spy dump --pid $p"
      timeout 10 py-spy dump --pid "$p" 2>&1
      if [ "${NATIVE:-0}" = 1 ]; then echo "## py-spy dump --native --pid $p"; timeout 15 py-spy dump --native --pid "$p" 2>&1; fi
    done
    nvidia-smi
  } > "$f" 2>&1
}

n=0
for slot in "$@"; do
  n=$((n + 1))
  read -r case_a case_b <<< "$slot"
  dir="$out/$n-$case_a-$case_b"
  mkdir -p "$dir"
  echo "== slot $n: $case_a (GPUs 0,1, RAS 28028) | $case_b (GPUs 2,3, RAS 28029) $(date +%T)"
  la=$(start_job "$dir" a "$case_a" 0,1 28028 29510)
  lb=$(start_job "$dir" b "$case_b" 2,3 28029 29520)
  for _ in $(seq 1200); do
    [ "$(grep -c ready "$dir/a.log")" -ge 2 ] && [ "$(grep -c ready "$dir/b.log")" -ge 2 ] && break
    sleep 0.1
  done
  pids=()
  for j in a b; do for r in 0 1; do pids+=("$(rank_pid "$dir/$j.log" $r)"); done; done
  echo "ranks: a ${pids[0]} ${pids[1]} b ${pids[2]} ${pids[3]}; launchers $la $lb" | tee "$dir/pids.txt"
  "$py" -m gputui --config "$cfg" record "$dir/recording.jsonl.gz" --force --duration "$record" --interval 1 \
    --note "real $gpu x4: two torchrun/srun jobs of 2 NCCL ranks: $case_a on GPUs 0-1 (ranks ${pids[0]} ${pids[1]}), $case_b on GPUs 2-3 (ranks ${pids[2]} ${pids[3]}); bench/device_matrix.sh" \
    > "$dir/record.log" 2>&1 &
  rec=$!
  "$py" bench/ras_capture.py "$dir/ras.jsonl" --addr localhost:28028 --addr localhost:28029 --every 5 \
    --duration "$record" > "$dir/ras.log" 2>&1 &
  ras=$!
  if [ "${CHECK:-0}" = 1 ]; then
    "$py" -m gputui --config "$cfg" snapshot --processes --json --watch 5 > "$dir/snapshots.jsonl" 2> "$dir/snapshots.err" &
    snaps=$!
  fi
  sleep 10
  for j in a b; do
    c=$case_a; [ $j = b ] && c=$case_b
    p=${pids[1]}; [ $j = b ] && p=${pids[3]}
    case $c in
      stopped) kill -STOP "$p"; echo "$(date +%s.%N) SIGSTOP $p ($j rank 1)" >> "$dir/faults.txt" ;;
      killed) kill -KILL "$p"; echo "$(date +%s.%N) SIGKILL $p ($j rank 1)" >> "$dir/faults.txt" ;;
    esac
  done
  sleep 25
  NATIVE=1 dump_stacks "$dir/stacks-35.txt" "${pids[@]}"
  sleep 18
  dump_stacks "$dir/stacks-55.txt" "${pids[@]}"
  wait "$rec" "$ras"
  if [ "${CHECK:-0}" = 1 ]; then
    kill "$snaps" 2>/dev/null
    "$py" -m gputui --config "$cfg" snapshot --processes --json > "$dir/snapshot-end.json" 2>&1
  fi
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null; done
  kill -TERM -- "-$la" "-$lb" 2>/dev/null
  sleep 3
  kill -KILL -- "-$la" "-$lb" 2>/dev/null
  pkill -KILL -f bench/load/scenario.py 2>/dev/null
  sleep 2
done
tar -C "$out" -czf "$out/matrix.tar.gz" --exclude=matrix.tar.gz --exclude=bin .
ls -la "$out"
