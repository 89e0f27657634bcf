#!/usr/bin/env bash
# Issue 26's "done when", live on a GPU machine, from the repo root (about 2 minutes; python3
# with torch, nvidia-ml-py and psutil; py-spy on PATH for the stacks):
#   [BACKEND=nccl NPROC=2] bash bench/device_job_check.sh OUT
# A torchrun job (NPROC ranks, default 3, BACKEND gloo or nccl: one GPU per rank,
# bench/load/jobrank.py) whose rank 1 is SIGSTOPped, recorded at 1 s for the first 75 s
# (OUT/job.jsonl.gz); with
# [health] stuck_seconds = 30, within ~40 s: `gputui watch` fires job_stuck naming rank 1,
# `gputui snapshot --processes --json --watch` gives verdict kind "culprit", /metrics has
# gputui_job_stuck 1, `gputui stacks --job` shows the waiting ranks' all_reduce and says the
# stopped one is stopped, and `gputui diag --pid` diagnoses rank 0's interpreter and
# environment.  Then the TUI, live (PTYBENCH, default ../shared/bench/ptybench.py, with pyte):
# the Overview's screen names the stopped rank; `2`, `J`, `P` shows every rank's stack with the
# waiting line; `2`, `g` diagnoses the selected rank's interpreter.  OUT/summary.txt says PASS
# or FAIL for each.
set -u
out=${1:?usage: bash bench/device_job_check.sh OUT}
mkdir -p "$out"
cd "$(dirname "$0")/.." || exit 2
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
py=$(command -v "${PYTHON:-python3}")
backend=${BACKEND:-gloo}; nproc=${NPROC:-3}
# where a waiting rank's stack is: gloo blocks in all_reduce; NCCL's all_reduce returns at once
# and the host waits for the kernel in the synchronize after it
waitfn=all_reduce; [ "$backend" = nccl ] && waitfn=synchronize
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
sum="$out/summary.txt"; : > "$sum"
say() { echo "$*" | tee -a "$sum"; }
check() { if eval "$2"; then say "PASS $1"; else say "FAIL $1"; fi; }
cfg="$out/fast.toml"
printf '[health]\nstuck_seconds = 30\n' > "$cfg"
chmod 600 "$cfg"

"$py" -m torch.distributed.run --standalone --nproc-per-node "$nproc" bench/load/jobrank.py --backend "$backend" --seconds 400 \
  > "$out/job.log" 2>&1 &
job=$!
for _ in $(seq 900); do [ "$(grep -c ready "$out/job.log")" -ge "$nproc" ] && break; sleep 0.1; done
r0=$(awk '/^rank 0 pid/ {print $4}' "$out/job.log"); r1=$(awk '/^rank 1 pid/ {print $4}' "$out/job.log")
say "job: $nproc $backend ranks, launcher $job, rank 0 pid $r0, rank 1 pid $r1"
"$py" -m gputui record "$out/job.jsonl.gz" --force --duration 75 --interval 1 \
  --note "real $gpu: torchrun $nproc ranks ($backend, bench/load/jobrank.py); rank 1 (PID $r1) SIGSTOPped at ~8 s (bench/device_job_check.sh)" \
  > "$out/record.log" 2>&1 &
"$py" -m gputui --config "$cfg" watch --duration 75 > "$out/watch.jsonl" 2> "$out/watch.err" &
watch=$!
"$py" -m gputui --config "$cfg" snapshot --processes --json --watch 5 > "$out/snapshots.jsonl" 2> "$out/snapshots.err" &
snaps=$!
"$py" -m gputui --config "$cfg" export --listen 127.0.0.1:9477 > "$out/export.log" 2>&1 &
exp=$!
scrape() {
  "$py" -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:9477/metrics').read().decode())" \
    > "$1" 2>&1
}
sleep 8
scrape "$out/metrics-before.txt"
kill -STOP "$r1"
say "rank 1 stopped at $(date +%T)"
sleep 25
{ ps -o pid,stat,pcpu,nlwp,wchan:32,args -p "$(pgrep -d, -f bench/load/jobrank.py)"; nvidia-smi; } > "$out/procs.txt" 2>&1
sleep 25
scrape "$out/metrics.txt"
timeout 60 "$py" -m gputui stacks --job "$job" > "$out/stacks.txt" 2>&1; echo "exit $?" >> "$out/stacks.txt"
timeout 60 "$py" -m gputui stacks --job "$job" --json > "$out/stacks.json" 2> "$out/stacks.err"
r0argv0=$(tr '\0' '\n' < "/proc/$r0/cmdline" | head -1)  # the path rank 0 was started by (a venv's python: kept)
timeout 120 "$py" -m gputui diag --pid "$r0" --no-nccl --markdown > "$out/diag-pid.md" 2> "$out/diag-pid.err"
echo "exit $?" >> "$out/diag-pid.err"
pb="$py ${PTYBENCH:-../shared/bench/ptybench.py} --cols 160 --rows 50 --json"
tui="$py -m gputui --config $cfg --interval 1 --no-remember"
$pb --seconds 48 --screen "$out/tui-overview.txt" -- $tui > "$out/tui-overview.json" 2>&1
$pb --seconds 35 --keys '5:2,6.5:J,8:P' --screen "$out/tui-stacks.txt" -- $tui > "$out/tui-stacks.json" 2>&1
$pb --seconds 70 --keys '5:2,6.5:g' --screen "$out/tui-diag.txt" -- $tui > "$out/tui-diag.json" 2>&1
kill "$snaps" "$exp" 2>/dev/null; wait "$watch" 2>/dev/null
kill -CONT "$r1"; kill "$job" 2>/dev/null; sleep 1; pkill -f bench/load/jobrank.py; wait 2>/dev/null

check "watch: job_stuck fired naming rank 1's PID" "grep -q '\"kind\": *\"job_stuck\"' '$out/watch.jsonl' && grep 'job_stuck' '$out/watch.jsonl' | grep -q 'PID $r1'"
check "snapshot: verdict culprit" "grep -q '\"culprit\"' '$out/snapshots.jsonl'"
check "metrics: gputui_job_stuck 1" "grep -E '^gputui_job_stuck\\{.*\\} 1(\\.0)?$' '$out/metrics.txt' >/dev/null"
check "stacks: $waitfn in the waiting ranks" "grep -q $waitfn '$out/stacks.txt'"
check "stacks: the stopped rank is said stopped" "grep -i 'stopped' '$out/stacks.txt' | grep -q '$r1'"
check "diag --pid: the rank's interpreter" "grep -q 'PID $r0' '$out/diag-pid.md'"
check "diag --pid: run by the path the rank was started by ($r0argv0), torch found" "grep -qF '\`$r0argv0\`' '$out/diag-pid.md' && ! grep -q 'torch is not installed' '$out/diag-pid.md'"
check "TUI: the Overview names the stopped rank" "grep -q 'PID $r1' '$out/tui-overview.txt'"
check "TUI: J, P shows the waiting ranks' $waitfn" "grep -q $waitfn '$out/tui-stacks.txt'"
check "TUI: g diagnoses a rank's interpreter" "grep -Eq 'interpreter: PID ($r0|$r1|[0-9]+)' '$out/tui-diag.txt' && ! grep -q 'torch is not installed' '$out/tui-diag.txt'"
cat "$sum"
