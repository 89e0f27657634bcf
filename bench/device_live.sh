#!/usr/bin/env bash
# On a GPU machine, from the repo root: re-record the single-GPU fixture, check the live app
# against nvidia-smi, and measure gputui next to nvitop, nvtop and nvidia-smi in one run.
#   bench/device_live.sh OUTDIR TOOLS   (TOOLS holds ptybench.py and an extracted nvtop)
set -u
out=$1; tools=$2; mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH=${PYTHONPATH:-}:$PWD
bash bench/record_real.sh single "$out/rec" > "$out/record.log" 2>&1
python3 bench/load/hold_memory.py --gib 12 --seconds 220 > "$out/hold.log" 2>&1 &
python3 bench/load/train_like.py --seconds 220 --pause-every 10000 > "$out/train.log" 2>&1 &
sleep 12
python3 bench/live_check.py --samples 6 --every 3 --json "$out/live_check.json" --screen "$out/live_screen.txt" > "$out/live_check.txt" 2>&1
nvtop="$tools/x/usr/bin/nvtop"
if ! "$nvtop" --version > /dev/null 2>&1; then export LD_LIBRARY_PATH="$tools/libs/lib/x86_64-linux-gnu"; fi
"$nvtop" --version > "$out/nvtop-version.txt" 2>&1
pb="python3 $tools/ptybench.py --seconds 20 --json"
{
  $pb --screen "$out/screen-gputui.txt" -- python3 -m gputui --interval 1
  $pb --screen "$out/screen-nvitop.txt" -- python3 -m nvitop --interval 1
  $pb --screen "$out/screen-nvtop.txt" -- "$nvtop" -d 10
  $pb -- nvidia-smi -l 1
  $pb -- python3 -m gputui --interval 1
} > "$out/ptybench.jsonl" 2> "$out/ptybench.err"
kill %1 %2 2>/dev/null; wait
cat "$out/live_check.txt" "$out/ptybench.jsonl"
