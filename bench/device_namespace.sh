#!/usr/bin/env bash
# On a GPU machine, as root, from the repo root (about 40 s):
#   bash bench/device_namespace.sh OUTDIR
# The container case for real: a process holds GPU memory in the host's PID namespace, and
# gputui runs inside a new PID namespace (`unshare --pid --fork --mount-proc`, what a
# container without --pid=host has).  Writes: snapshot JSON from the host namespace and from
# the new one, and the Processes tab's screen inside the new one (ptybench, needs pyte).
set -u
out=$1; mkdir -p "$out"
py=python3
$py bench/load/hold_memory.py --gib 4 --seconds 40 > "$out/hold.log" 2>&1 &
holder=$!
for _ in $(seq 60); do nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -q . && break; sleep 0.5; done
echo "holder pid $holder; NVML lists: $(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader)" | tee "$out/summary.txt"
$py -m gputui snapshot --json --processes > "$out/snapshot-host-ns.json"
unshare --pid --fork --mount-proc $py -m gputui snapshot --json --processes > "$out/snapshot-new-ns.json" 2> "$out/snapshot-new-ns.err"
unshare --pid --fork --mount-proc $py ${PTYBENCH:-../shared/bench/ptybench.py} --seconds 6 --cols 160 --rows 30 \
  --keys "2.5:2" --screen "$out/processes-tab-new-ns.txt" -- $py -m gputui > "$out/pty.json" 2>&1
$py - "$out" <<'PY' | tee -a "$out/summary.txt"
import json, sys
out = sys.argv[1]
for ns in ("host-ns", "new-ns"):
    d = json.load(open(f"{out}/snapshot-{ns}.json"))
    print(ns, [(p["pid"], p["visible"], p["process_name"], p["used_gpu_memory"]) for p in d["processes"]])
PY
grep -n -i "namespace\|not visible\|--pid=host" "$out/processes-tab-new-ns.txt" | tee -a "$out/summary.txt"
wait $holder
