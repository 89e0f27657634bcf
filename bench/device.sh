#!/usr/bin/env bash
# Checks and figures that need a real GPU machine; run from the repo root, as root.  Each mode
# writes everything under OUTDIR and prints the part to read.  Needs python3 with torch (CUDA),
# nvidia-ml-py, psutil, textual, rich and pyte; PYTHON picks another interpreter, PTYBENCH
# the terminal benchmark (default ../shared/bench/ptybench.py).
#
#   bench/device.sh peers OUTDIR [ROUNDS]  live vs peers: bench/live_check.py (the screen
#       against nvidia-smi), then ROUNDS (default 3) rounds of gputui, nvtop, nvitop and
#       nvidia-smi -l 1, each 20 s at 160x50 and 1 Hz, with a 12 GiB holder and a bf16 training
#       job on GPU 0; prints medians and gputui over nvtop (NVTOP=PATH picks the nvtop binary)
#   bench/device.sh diag OUTDIR       `gputui diag`: versions vs nvidia-smi and torch, wall time
#       against `python -c "import torch; torch.zeros(1, device='cuda')"` (about 1 minute)
#   bench/device.sh stress OUTDIR     `gputui stress --duration 60`, monitor on and off, against
#       plain-torch references on each GPU (about 3.5 minutes)
#   bench/device.sh export OUTDIR     snapshot wall time vs nvidia-smi and gpustat; the exporter
#       live under load (bench_export.py --live); `gputui watch` alerts firing (about 3 minutes)
#   bench/device.sh namespace OUTDIR  gputui inside a new PID namespace (a container without
#       --pid=host) while a process holds GPU memory in the host's (about 40 s)
#   bench/device.sh xid OUTDIR        a real Xid 43 (a device-side assert in a throwaway torch
#       process) seen by the exporter and the TUI; no GPU reset (about 40 s)
#   bench/device.sh gpm-loads OUTDIR  one GPU: a GPM recording under bench/load/gpm_loads.py's
#       known loads (as tests/fixtures/h100-gpm), nvidia-smi dmon beside it, GPM's cost per GPU
#   bench/device.sh gpm-train2 OUTDIR two GPUs: bf16 training on GPU 0, float32 (TF32 off) on
#       GPU 1, recorded (as tests/fixtures/h200-x2-gpm); the live Overview's screens, a
#       snapshot, /metrics and nvidia-smi captured during it
#   bench/device.sh topo OUTDIR       2+ GPUs with NVLink: a recording with known peer copies;
#       topology, NVLink bytes and memory health checked against nvidia-smi (about 1.5 minutes)
set -u
mode=${1:?usage: bench/device.sh MODE OUTDIR (the modes are in its header)}
out=${2:?usage: bench/device.sh MODE OUTDIR}
mkdir -p "$out"
cd "$(dirname "$0")/.." || exit 2
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
py=$(command -v "${PYTHON:-python3}")
PTYBENCH=${PTYBENCH:-../shared/bench/ptybench.py}

mode_peers() {
rounds=$1
nvtop=${NVTOP:-$(command -v nvtop)}
$py bench/load/hold_memory.py --gib 12 --seconds 100000 > "$out/hold.log" 2>&1 &
hold=$!
$py bench/load/train_like.py --seconds 100000 --pause-every 10000 > "$out/train.log" 2>&1 &
train=$!
sleep 12
$py bench/live_check.py --samples 6 --every 3 --json "$out/live_check.json" --screen "$out/live_screen.txt" > "$out/live_check.txt" 2>&1
{ nvidia-smi -L; "$nvtop" --version; $py -m nvitop --version; $py -c "import textual; print('textual', textual.__version__)"; } > "$out/versions.txt" 2>&1
pb="$py $PTYBENCH --seconds 20 --cols 160 --rows 50 --json"
for _ in $(seq "$rounds"); do
  $pb --screen "$out/screen-gputui.txt" -- $py -m gputui --interval 1 --no-remember | sed 's/^{/{"what": "gputui", /'
  $pb --screen "$out/screen-nvtop.txt" -- "$nvtop" -d 10 | sed 's/^{/{"what": "nvtop", /'
  $pb --screen "$out/screen-nvitop.txt" -- $py -m nvitop --interval 1 | sed 's/^{/{"what": "nvitop", /'
  $pb -- nvidia-smi -l 1 | sed 's/^{/{"what": "nvidia-smi -l 1", /'
done > "$out/peers.jsonl" 2> "$out/peers.err"
kill $hold $train 2>/dev/null; wait
cat "$out/live_check.txt"
$py - "$out/peers.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
med = {}
for what in dict.fromkeys(r["what"] for r in rows):
    rs = [r for r in rows if r["what"] == what]
    keys = ("settle_s", "steady_cpu_pct", "bytes_per_s", "rss_mb")
    med[what] = {k: statistics.median(r[k] for r in rs) for k in keys if all(r.get(k) is not None for r in rs)}
    print(f"{what}: {len(rs)} runs, medians {med[what]}")
g, n = med.get("gputui", {}), med.get("nvtop", {})
if g.get("steady_cpu_pct") and n.get("steady_cpu_pct") and n.get("bytes_per_s"):
    cpu, b = g["steady_cpu_pct"] / n["steady_cpu_pct"], g["bytes_per_s"] / n["bytes_per_s"]
    print(f"gputui / nvtop: steady CPU {cpu:.2f}x (target <= 2), bytes/s {b:.2f}x (target <= 1.2)")
PY
}

mode_diag() {
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id,uuid,persistence_mode --format=csv \
  > "$out/nvidia-smi-gpus.csv" 2>&1
$py bench/device_report.py diag "$out" "$py" 2>&1 | tee "$out/summary.txt"
}

mode_stress() {
nvidia-smi > "$out/nvidia-smi-before.txt" 2>&1
$py bench/device_report.py stress-reference > "$out/reference.json" 2> "$out/reference.err"
$py -m gputui stress --python "$py" --duration 60 --json --monitor-interval 1 \
  > "$out/stress-monitor-on.json" 2> "$out/stress-monitor-on.err"
echo "exit $?" >> "$out/stress-monitor-on.err"
$py -m gputui stress --python "$py" --duration 60 --json --monitor-interval 0 \
  > "$out/stress-monitor-off.json" 2> "$out/stress-monitor-off.err"
echo "exit $?" >> "$out/stress-monitor-off.err"
nvidia-smi > "$out/nvidia-smi-after.txt" 2>&1
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > "$out/gpu-processes-after.csv" 2>&1
$py bench/device_report.py stress-summary "$out" 2>&1 | tee "$out/summary.txt"
}

mode_namespace() {
$py bench/load/hold_memory.py --gib 4 --seconds 40 > "$out/hold.log" 2>&1 &
holder=$!
for _ in $(seq 60); do nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -q . && break; sleep 0.5; done
echo "holder pid $holder; NVML lists: $(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader)" | tee "$out/summary.txt"
$py -m gputui snapshot --json --processes > "$out/snapshot-host-ns.json"
unshare --pid --fork --mount-proc $py -m gputui snapshot --json --processes > "$out/snapshot-new-ns.json" 2> "$out/snapshot-new-ns.err"
unshare --pid --fork --mount-proc $py "$PTYBENCH" --seconds 6 --cols 160 --rows 30 \
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
}

mode_xid() {
$py -m gputui export --listen 127.0.0.1:9477 --interval 1 > "$out/export.log" 2>&1 &
exp=$!
$py "$PTYBENCH" --seconds 18 --cols 160 --rows 45 --screen "$out/tui-screen.txt" \
  --json -- $py -m gputui > "$out/tui-pty.json" 2>&1 &
tui=$!
scrape() { $py -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:9477/metrics').read().decode())" | grep -E "^(DCGM_FI_DEV_XID_ERRORS|gputui_gpu_xid_events)"; }
sleep 6; echo "== before" | tee "$out/xid.txt"; scrape | tee -a "$out/xid.txt"
$py - > "$out/fault-torch.log" 2>&1 <<'PY'
import torch
x = torch.zeros(4, device="cuda")
i = torch.tensor([100], device="cuda")
print(x[i])
torch.cuda.synchronize()
PY
echo "torch fault: exit $?" | tee -a "$out/xid.txt"; tail -1 "$out/fault-torch.log" | tee -a "$out/xid.txt"
sleep 3; echo "== after the device-side assert" | tee -a "$out/xid.txt"; scrape | tee -a "$out/xid.txt"
(dmesg 2>&1 | grep -i xid | tail -5) | tee "$out/dmesg-xid.txt"
wait $tui
kill $exp; wait $exp 2>/dev/null
grep -n "XID" "$out/tui-screen.txt" | head -3 | tee -a "$out/xid.txt"
nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv | tee -a "$out/xid.txt"
}

mode_export() {
{ nvidia-smi -L; $py -c 'import prometheus_client, sys; print("prometheus_client", prometheus_client.__version__ if hasattr(prometheus_client, "__version__") else "?", sys.version)'; } > "$out/env.txt" 2>&1

# 1. snapshot wall time vs nvidia-smi and gpustat
fields=index,name,uuid,pci.bus_id,utilization.gpu,utilization.memory,memory.used,memory.total,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.mem,pstate
$py bench/snapshot_timing.py --runs 21 > "$out/snapshot_timing.txt" 2>&1
$py -m gputui snapshot --json --processes > "$out/snapshot.json" 2> "$out/snapshot.err"
$py -m gputui snapshot --fields "$fields" > "$out/snapshot.csv" 2>> "$out/snapshot.err"
nvidia-smi --query-gpu="$fields" --format=csv > "$out/nvidia-smi.csv" 2>&1
$py -m gputui snapshot --json --fields pcie.throughput.rx,pcie.throughput.tx,energy.consumption > "$out/snapshot-slow-fields.json" 2>> "$out/snapshot.err"

# 3. exporter on live NVML under load
$py bench/load/hold_memory.py --gib 4 --seconds 150 > "$out/hold.log" 2>&1 &
hold=$!
$py bench/load/train_like.py --seconds 150 > "$out/train.log" 2>&1 &
train=$!
sleep 10
$py bench/bench_export.py --live --seconds 15 > "$out/bench_export_live.txt" 2>&1
port_log="$out/export.log"
$py -m gputui export --listen 127.0.0.1:9401 --interval 1 > "$port_log" 2>&1 &
exp=$!
sleep 3
curl -s -H 'Accept: application/openmetrics-text;version=1.0.0' http://127.0.0.1:9401/metrics > "$out/metrics-openmetrics.txt"
curl -s http://127.0.0.1:9401/metrics > "$out/metrics.txt"
kill $exp; wait $exp 2>/dev/null
kill $train 2>/dev/null; wait $train 2>/dev/null

# 4. watch on live NVML: idle-with-memory (the holder) and temperature
idle_temp=$(nvidia-smi --query-gpu=temperature.gpu --format=csv,noheader,nounits | sort -n | head -1)
cat > "$out/watch.toml" <<EOF
[alerts.idle_memory]
minutes = 0.2
max_util = 0
min_memory_mib = 1024
[alerts.temperature]
above = $((idle_temp + 5)).0
clear_below = $((idle_temp + 3)).0
for_seconds = 0.0
EOF
$py bench/load/train_like.py --seconds 25 > "$out/train2.log" 2>&1 &
$py -m gputui watch --config "$out/watch.toml" --duration 50 --interval 1 \
  --shell --alert-cmd "cat >> '$out/alerts-received.jsonl'" > "$out/watch-stdout.jsonl" 2> "$out/watch-stderr.txt"
kill $hold 2>/dev/null; wait
echo "== snapshot timing"; cat "$out/snapshot_timing.txt"
echo "== exporter (live)"; tail -14 "$out/bench_export_live.txt"
echo "== alerts printed by watch"; cat "$out/watch-stdout.jsonl"
echo "== alerts received by the command: $(wc -l < "$out/alerts-received.jsonl" 2>/dev/null || echo 0)"
}

mode_gpm() {
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used,power.draw,clocks.sm --format=csv -lms 1000 > "$out/$mode-nvidia-smi-query.csv" 2>&1 &
smi=$!
nvidia-smi dmon -d 1 --gpm-metrics 1,2,3,5,7,10,11,12,13 > "$out/$mode-nvidia-smi-dmon-gpm.txt" 2>&1 &
dmon=$!
if [ "$mode" = gpm-loads ]; then
  $py -m gputui record "$out/$mode.jsonl.gz" --force --duration 170 --interval 1 \
     --note "real $name, GPM: bench/load/gpm_loads.py phases (phase times in gpm-loads-phases.json): idle; bf16 8192 matmul; float32 8192 matmul, TF32 off; 2 GiB device copies; 64x64 matmul + synchronize; 64x64 matmul without synchronize; idle holding 8 GiB" &
  rec=$!
  sleep 3
  $py bench/load/gpm_loads.py --phases "$out/gpm-loads-phases.json" --seconds 16 --gap 4 > "$out/loads.log" 2>&1
  wait $rec
  $py bench/load/train_like.py --seconds 25 --precision fp32 > "$out/cost-load.log" 2>&1 &
  load=$!
  sleep 8; $py bench/nvml_cost.py --gpm --passes 15 --json "$out/gpm-cost.json" > /dev/null 2> "$out/gpm-cost.err"
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
  sleep 10
  if [ -f "$PTYBENCH" ] && $py -c "import textual, pyte" 2>/dev/null; then
    # the live Overview while both train, without a key press: cards with GPM and the hint, processes
    $py "$PTYBENCH" --seconds 12 --cols 160 --rows 50 --screen "$out/overview-160x50.txt" --json -- $py -m gputui > "$out/overview-160x50.json" 2>&1
    $py "$PTYBENCH" --seconds 8 --cols 80 --rows 24 --screen "$out/overview-80x24.txt" --json -- $py -m gputui > "$out/overview-80x24.json" 2>&1
  else
    sleep 20
  fi
  $py -m gputui snapshot --json --processes > "$out/$mode-snapshot.json" 2> "$out/$mode-snapshot.err"
  gpmf=index,utilization.gpu,gpm.sm_active,gpm.sm_occupancy,gpm.tensor_active,gpm.dram_active,gpm.fp32_active,gpm.fp16_active,gpm.pcie_tx,gpm.pcie_rx,gpm.nvlink_tx,gpm.nvlink_rx,gpm.unavailable
  snap0=$(date +%s.%N)
  $py -m gputui snapshot --json --fields $gpmf > "$out/$mode-snapshot-gpm.json" 2> "$out/$mode-snapshot-gpm.err"
  echo "gputui snapshot --json --fields (GPM): $snap0 -> $(date +%s.%N)" >> "$out/$mode-snapshot-gpm.err"
  $py -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:9400/metrics').read().decode())" > "$out/$mode-metrics.txt" 2>&1
  nvidia-smi > "$out/$mode-nvidia-smi.txt" 2>&1
  $py bench/nvml_cost.py --gpm --passes 10 --json "$out/gpm-cost.json" > /dev/null 2> "$out/gpm-cost.err"
  kill $exp
  wait $rec $t0 $t1
fi
kill $smi $dmon 2>/dev/null
ls -la "$out"
}

mode_topo() {
ngpu=$(nvidia-smi -L | wc -l)

# static views, as nvidia-smi prints them
nvidia-smi topo -m > "$out/nvidia-smi-topo.txt" 2>&1
nvidia-smi topo -p2p rw > "$out/nvidia-smi-topo-p2p.txt" 2>&1
nvidia-smi nvlink -s > "$out/nvidia-smi-nvlink.txt" 2>&1
nvidia-smi nvlink -R > "$out/nvidia-smi-nvlink-remote.txt" 2>&1
nvidia-smi -q -d ROW_REMAPPER > "$out/nvidia-smi-q-row-remapper.txt" 2>&1
nvidia-smi -q -d PAGE_RETIREMENT > "$out/nvidia-smi-q-page-retirement.txt" 2>&1

# a recording with a known NVLink load in the middle: GPU 0 -> GPU 1 peer copies for 20 s
$py -m gputui record "$out/recording.jsonl.gz" --force --duration 45 --interval 1 \
   --note "real ${ngpu}x $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1): idle, then peer-to-peer copies GPU 0 -> GPU 1 for 20 s (p2p_copy.py), then idle" \
   > "$out/record.log" 2>&1 &
rec=$!
sleep 8
nvidia-smi nvlink -gt d > "$out/nvlink-gt-before.txt" 2>&1; date +%s.%N > "$out/nvlink-gt-before.time"
$py bench/load/p2p_copy.py --seconds 20 --json "$out/p2p_copy.json" > "$out/p2p_copy.log" 2>&1
sleep 3  # two slow-cadence passes after the copies stop
nvidia-smi nvlink -gt d > "$out/nvlink-gt-after.txt" 2>&1; date +%s.%N > "$out/nvlink-gt-after.time"
wait $rec
nvidia-smi -q > "$out/nvidia-smi-q.txt" 2>&1

# the screens under load (needs Textual and pyte: carried wheels) and ptybench
if [ -f "$PTYBENCH" ] && $py -c "import textual, pyte" 2>/dev/null; then
  $py bench/load/p2p_copy.py --seconds 40 > "$out/p2p_copy_screens.log" 2>&1 &
  load=$!
  sleep 3
  pb="$py $PTYBENCH --seconds 12 --cols 160 --rows 50 --json"
  {
    $pb --keys "2.0:3" --screen "$out/screen-topology.txt" -- $py -m gputui --interval 1
    $pb --keys "2.0:\r,8.0:\x1b[F" --screen "$out/screen-detail.txt" -- $py -m gputui --interval 1
  } > "$out/ptybench.jsonl" 2> "$out/ptybench.err"
  wait $load
fi

$py bench/device_report.py topo-check "$out" > "$out/topo_check.txt" 2>&1
cat "$out/topo_check.txt"
ls -la "$out"
}

case $mode in
  peers) mode_peers "${3:-3}" ;;
  diag | stress | export | namespace | xid | topo) "mode_$mode" ;;
  gpm-loads | gpm-train2) mode_gpm ;;
  *) echo "unknown mode $mode (see the header of $0)" >&2; exit 2 ;;
esac
