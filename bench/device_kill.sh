#!/usr/bin/env bash
# On a GPU machine, from the repo root: kill a real GPU process (an idle memory holder) from
# gputui's Processes tab by key presses, and check with nvidia-smi that it is gone, its GPU
# memory released, and a training process on the same GPU still runs.  About 1-2 minutes.
#   bash bench/device_kill.sh OUTDIR [GPU]
# Needs: torch (CUDA), nvidia-ml-py, psutil, textual, rich, pyte.  Results: OUTDIR/result.json
# ("passed": true, "failed": []), OUTDIR/screen-*.txt, OUTDIR/nvidia-smi-*.csv.
set -u
out=$1; gpu=${2:-0}; mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH=${PYTHONPATH:-}:$PWD
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
python3 bench/device_kill.py "$out" --gpu "$gpu" --gib 8 > "$out/device_kill.log" 2>&1
rc=$?
cat "$out/device_kill.log"
exit $rc
