#!/usr/bin/env bash
# Checks and figures that need a real GPU machine; run from the repo root, as root.  Each mode
# writes everything under OUTDIR and prints the part to read.  Needs python3 with torch (CUDA),
# nvidia-ml-py, psutil, textual, rich and pyte; PYTHON picks another interpreter, PTYBENCH
# the terminal benchmark (default ../shared/bench/ptybench.py).
#
#   bench/device.sh all OUTDIR [BASEDIR]  issue 33's figures in one run (about 7 minutes, on
#       one GPU or four): the first frame (8 interleaved rounds of the one-line Textual app,
#       this tree's gputui, BASEDIR's, nvitop and nvtop), the steady CPU and bytes (3 rounds of
#       15 s: gputui, BASEDIR's, nvtop), the bytes of each screen row (bench/pty_rows.py,
#       gputui and nvtop), `gputui snapshot --json` and CSV against `nvitop -1` (5 rounds),
#       all under a 12 GiB holder and a bf16 training job on GPU 0; then without them: what
#       each NVML read costs (bench/nvml_cost.py), what NVML's read-ahead costs the start-up
#       imports (bench/start_profile.py), and GPM's stability over 0.1/0.2/0.5/1 s windows
#       under bf16, float32 and copy loads (bench/gpm_window.py).  Needs only .whl/'s wheels
#       (installed first: textual, rich, pyte, nvitop and their needs), the machine's python3
#       with torch, nvidia-ml-py and psutil, and nvtop: the PATH's, NVTOP=PATH, or the folder
#       `bash bench/fetch_nvtop.sh` makes here (.device/nvtop: Debian's nvtop 3.0.1, the
#       figures' build, with ncurses; carry it with the device tool: carry .whl, .device/base,
#       .device/nvtop).  A missing peer (nvtop, nvitop, nvidia-smi) stops the run at once with
#       exit 2 and one line each, before any figure is taken.
#       Each gputui runs as `python3 -P` with its own PYTHONPATH (checked to import its own
#       package); BASEDIR holds a `gputui` package (e.g. `git archive main gputui` extracted).
#       Writes 8 files to OUTDIR; OUTDIR/summary.txt has every figure against its target
#   bench/device.sh peers OUTDIR [ROUNDS]  live vs peers: bench/live_check.py (the screen
#       against nvidia-smi), then ROUNDS (default 3) rounds of gputui, nvtop, nvitop and
#       nvidia-smi -l 1, each 20 s at 160x50 and 1 Hz, with a 12 GiB holder and a bf16 training
#       job on GPU 0; prints medians and gputui over nvtop (NVTOP=PATH picks the nvtop binary)
#   bench/device.sh steady OUTDIR [ROUNDS] [BASEDIR]  the steady-cost and first-frame figures:
#       this tree's gputui (and BASEDIR's, a `git archive REV gputui` extract), nvtop and
#       bench/minimal_textual.py interleaved, ROUNDS (default 2) rounds of 20 s under load
#   (peers, steady, all and first-frame check their peers first: see need_peers)
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
#   bench/device.sh start-trace OUTDIR [ROUNDS]  where one live start spends its time, ROUNDS
#       (default 4) starts traced by bench/start_trace.py beside the one-line Textual app, an
#       8 GiB holder on the GPU (LOAD=1: the 12 GiB holder and bf16 training job of `all`);
#       OUTDIR/report.txt, and `-X importtime` of the start's imports
#   bench/device.sh first-frame OUTDIR ROUNDS DIR [DIR...]  the live first frame of one or more
#       versions of gputui (each DIR holds a `gputui` package, e.g. from `git archive REV gputui`,
#       named in the results by its last path component), interleaved round by round with
#       bench/minimal_textual.py (a one-line Textual app) and nvitop, an 8 GiB holder on the GPU,
#       through bench/pty_timeline.py --start --json at 160x50 (first byte, "complete", "settled").
#       Each variant runs with `python3 -P` and is checked to import its own package.  Wheels in
#       .whl/ are installed first; the packages' bytecode is compiled, as `pip install` leaves it.
#       Prints each program's medians, each variant over the one-line app, and every later DIR
#       against the first paired round by round.  Run from the repo root, DIRs absolute or
#       relative to it; the caller's PYTHONPATH is left as it was
#   bench/device.sh diag-env OUTDIR   the two environments the diagnosis once passed in silence
#       (issue 24): a process holding all but 4 % of GPU 0's memory (`gputui diag` must WARN on
#       memory.0 naming its PID) and PYTORCH_CUDA_ALLOC_CONF=expandable_segments:maybe (it must
#       name the variable); OUTDIR/summary.txt; exit 0 when both are named (about 1 minute)
#   bench/device.sh health OUTDIR     real recordings for job health (tests/fixtures/h100-health),
#       each `gputui record` at 1 s for 45 s, the load started after 5 s: idle; spin (one kernel,
#       1 block x 1 thread, polling a flag nothing sets: NCCL's wait, bench/load/spin.py);
#       spin-wide (32 x 512); spin-busy (spin.py and bf16 matmuls in a second process); tiny
#       (64x64 float32 matmuls, a synchronize after each); jobrank-stopped (torchrun, 3 gloo
#       ranks on GPU 0, bench/load/jobrank.py, rank 1 SIGSTOPped 10 s in; each rank's state,
#       wchan and py-spy dump in OUTDIR/jobrank-stopped.procs.txt); nccl-stopped (2+ GPUs: one
#       NCCL rank per GPU, rank 1 stopped); then what the health engine says of each, in
#       OUTDIR/device_health.log (about 6 minutes, +1.5 with 2 or more GPUs; needs py-spy
#       for the dumps)
#   bench/device.sh snapshot-gpm OUTDIR  `gputui snapshot --json` (no --fields) under a bf16
#       load: on Hopper or newer a measured GPM window (gpm.unavailable null, gpm.sm_active a
#       number), or a reason in gpm.unavailable, never every gpm.* null without one; three
#       runs' wall time (one GPM window: about 1 s more); exit 0 on PASS (about 40 s)
#   bench/device.sh slow-child OUTDIR [ROUNDS]  the read-ahead's child not answered at mount,
#       live: each start traced (bench/start_trace.py) with its child stopped (SIGSTOP) for
#       1.5 s as soon as it is forked; OUTDIR/report.txt says whether gputui killed it, when
#       the first frame and the first data were drawn, and what was left running (about 10 s
#       a round, default 2)
set -u
mode=${1:?usage: bench/device.sh MODE OUTDIR (the modes are in its header)}
out=${2:?usage: bench/device.sh MODE OUTDIR}
mkdir -p "$out"
cd "$(dirname "$0")/.." || exit 2
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
caller_pythonpath=${PYTHONPATH-}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
py=$(command -v "${PYTHON:-python3}")
PTYBENCH=${PTYBENCH:-bench/ptybench.py}  # (a copy of ../shared/bench/ptybench.py)

start_load() {  # a 12 GiB holder and a bf16 training job on GPU 0 (PIDs in $hold, $train); logs in $1 or OUTDIR
$py bench/load/hold_memory.py --gib 12 --seconds 100000 > "${1:-$out}/hold.log" 2>&1 &
hold=$!
$py bench/load/train_like.py --seconds 100000 --pause-every 10000 > "${1:-$out}/train.log" 2>&1 &
train=$!
sleep 12
}

hold_gib() {  # hold_gib GIB SECONDS: a memory holder on GPU 0 (PID in $hold), once NVML lists it
$py bench/load/hold_memory.py --gib "$1" --seconds "$2" > "$out/hold.log" 2>&1 &
hold=$!
for _ in $(seq 60); do nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -q . && break; sleep 0.5; done
}

need_peers() {  # need_peers PEER...: find each program gputui is measured against, or stop here
# (exit 2, one line a missing peer): a run without a peer prints no figure against it, never
# empty rows.  nvtop: NVTOP=PATH, else the PATH's, else the folder bench/fetch_nvtop.sh makes
# (.device/nvtop, carried); it runs as $nvtop_run (with the carried libraries where it needs
# them).  nvitop: python3 -m nvitop (a wheel in .whl/, installed first where the mode does).
local missing=() bin libs
for peer in "$@"; do
  case $peer in
    nvtop)
      bin=${NVTOP:-$(command -v nvtop || true)}
      [ -n "$bin" ] || [ ! -x .device/nvtop/usr/bin/nvtop ] || bin=$PWD/.device/nvtop/usr/bin/nvtop
      if [ -z "$bin" ]; then
        missing+=("nvtop: not on PATH and no .device/nvtop (run bash bench/fetch_nvtop.sh where apt works, carry .device/nvtop; or NVTOP=PATH)")
      elif "$bin" --version > /dev/null 2>&1; then
        nvtop_run=$bin
      else
        libs=$(dirname "$(dirname "$(dirname "$bin")")")
        libs="$libs/lib/x86_64-linux-gnu:$libs/usr/lib/x86_64-linux-gnu"
        if LD_LIBRARY_PATH=$libs "$bin" --version > /dev/null 2>&1; then
          nvtop_run="env LD_LIBRARY_PATH=$libs $bin"
        else
          missing+=("nvtop: $bin does not start: $("$bin" --version 2>&1 | head -1)")
        fi
      fi ;;
    nvitop) $py -m nvitop --version > /dev/null 2>&1 || missing+=("nvitop: $py -m nvitop fails (put its wheel and its needs in .whl/)") ;;
    nvidia-smi) command -v nvidia-smi > /dev/null || missing+=("nvidia-smi: not on PATH") ;;
  esac
done
[ ${#missing[@]} -eq 0 ] && return 0
printf 'bench/device.sh %s: a peer is missing, no figures taken:\n' "$mode" >&2
printf '  %s\n' "${missing[@]}" >&2
exit 2
}

mode_peers() {
rounds=$1
need_peers nvtop nvitop nvidia-smi
start_load
$py bench/live_check.py --samples 6 --every 3 --json "$out/live_check.json" --screen "$out/live_screen.txt" > "$out/live_check.txt" 2>&1
{ nvidia-smi -L; $nvtop_run --version; $py -m nvitop --version; $py -c "import textual; print('textual', textual.__version__)"; } > "$out/versions.txt" 2>&1
pb="$py $PTYBENCH --seconds 20 --cols 160 --rows 50 --json"
for _ in $(seq "$rounds"); do
  $pb --screen "$out/screen-gputui.txt" -- $py -m gputui --interval 1 --no-remember | sed 's/^{/{"what": "gputui", /'
  $pb --screen "$out/screen-nvtop.txt" -- $nvtop_run -d 10 | sed 's/^{/{"what": "nvtop", /'
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
hold_gib 4 40
echo "holder pid $hold; NVML lists: $(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader)" | tee "$out/summary.txt"
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
wait $hold
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
$py bench/device_report.py snapshot-timing --runs 21 > "$out/snapshot_timing.txt" 2>&1
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

mode_first_frame() {
rounds=${1:?usage: bench/device.sh first-frame OUTDIR ROUNDS DIR [DIR...]}; shift
[ $# -ge 1 ] || { echo "usage: bench/device.sh first-frame OUTDIR ROUNDS DIR [DIR...]" >&2; return 2; }
if [ -n "$caller_pythonpath" ]; then export PYTHONPATH=$caller_pythonpath; else unset PYTHONPATH; fi
site=$($py -c 'import site; print(site.getsitepackages()[0])')
$py -m pip install -q --no-index --no-deps --upgrade .whl/*.whl > "$out/pip.log" 2>&1
echo "$PWD" > "$site/gputui-repo.pth"
$py -m compileall -q gputui bench "$@" "$site/pynvml.py" "$site/psutil" > /dev/null 2>&1
need_peers nvitop
hold_gib 8 400
$py -m gputui --help > /dev/null 2>&1
# `python3 -m` puts the current directory first on sys.path, ahead of PYTHONPATH: run from the
# repo root, every variant would be the working tree's gputui.  -P (Python 3.11+) leaves it
# out; and each variant is checked to import its own package before anything is measured.
for dir in "$@"; do
  got=$(PYTHONPATH=$dir $py -P -c 'import gputui, os; print(os.path.dirname(os.path.dirname(os.path.abspath(gputui.__file__))))')
  if [ "$got" != "$(cd "$dir" && pwd)" ]; then echo "variant $dir imports gputui from $got" >&2; exit 2; fi
done
pb="$py bench/pty_timeline.py --start --json --seconds 2.5"
for _ in $(seq "$rounds"); do
  $pb -- $py bench/minimal_textual.py | sed 's/^{/{"what": "one-line Textual app", /'
  for dir in "$@"; do
    PYTHONPATH=$dir $pb -- $py -P -m gputui --no-remember | sed "s/^{/{\"what\": \"gputui $(basename "$dir")\", /"
  done
  $pb -- $py -m nvitop --interval 1 | sed 's/^{/{"what": "nvitop", /'
done > "$out/ab.jsonl" 2> "$out/ab.err"
kill $hold 2>/dev/null; wait
$py - "$out/ab.jsonl" $(for d in "$@"; do basename "$d"; done) <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
for what in dict.fromkeys(r["what"] for r in rows):
    rs = [r for r in rows if r["what"] == what]
    print(f"{what}: n={len(rs)}, bytes {statistics.median(r['bytes'] for r in rs):.0f}")
    for key in ("first_byte_s", "complete_s", "settle_s"):
        v = sorted(r[key] for r in rs if r.get(key) is not None)
        if v:
            under = sum(1 for x in v if x <= 0.5)
            print(f"    {key:13s} median {statistics.median(v):.3f} s (min {v[0]:.3f}, max {v[-1]:.3f}, <=0.5 s {under}/{len(v)})")
names = [f"gputui {n}" for n in sys.argv[2:]]
rounds, current = [], {}
for r in rows:
    if r["what"] in names:
        if r["what"] in current:
            rounds.append(current)
            current = {}
        current[r["what"]] = r
rounds.append(current)
def med(what):
    v = [r["settle_s"] for r in rows if r["what"] == what and r.get("settle_s") is not None]
    return statistics.median(v) if v else None
floor = med("one-line Textual app")
for name in names:
    if floor and med(name):
        print(f"{name}: settled median / one-line Textual app's = {med(name) / floor:.2f}x")
base = names[0]
for name in names[1:]:
    pairs = [(r[base], r[name]) for r in rounds if base in r and name in r]
    for key in ("first_byte_s", "settle_s"):
        d = [a[key] - b[key] for b, a in pairs if a.get(key) is not None and b.get(key) is not None]
        if d:
            faster = sum(1 for x in d if x < 0)
            print(f"{name} vs {base}, {key}: paired median {1000 * statistics.median(d):+.1f} ms, faster in {faster}/{len(d)}")
    spans = [a["settle_s"] - a["first_byte_s"] for _, a in pairs if a.get("settle_s") is not None]
    if spans:
        print(f"{name}: settled minus first byte, median {1000 * statistics.median(spans):.1f} ms")
PY
}

mode_start_trace() {  # where one live start spends its time: bench/start_trace.py, ROUNDS rounds
rounds=${1:-4}
if [ -n "$caller_pythonpath" ]; then export PYTHONPATH=$caller_pythonpath; else unset PYTHONPATH; fi
site=$($py -c 'import site; print(site.getsitepackages()[0])')
$py -m pip install -q --no-index --no-deps --upgrade .whl/*.whl > "$out/pip.log" 2>&1
$py -m compileall -q gputui bench "$site/pynvml.py" "$site/psutil" > /dev/null 2>&1
if [ -n "${LOAD:-}" ]; then start_load; else hold_gib 8 300; fi  # LOAD=1: the training job too
$py -P -m gputui --help > /dev/null 2>&1
pb="$py bench/pty_timeline.py --start --json --seconds 2.5"
for r in $(seq "$rounds"); do
  $pb -- $py -P bench/minimal_textual.py | sed 's/^{/{"what": "one-line Textual app", /' >> "$out/minimal.jsonl"
  PYTHONPATH=$PWD $pb -- $py -P bench/start_trace.py "$out/trace-$r.jsonl" --no-remember > "$out/timeline-$r.json"
  { echo "== round $r"; $py bench/start_trace.py --report "$out/trace-$r.jsonl" "$out/timeline-$r.json"; } >> "$out/report.txt"
done
PYTHONPATH=$PWD $py -P -X importtime -c 'from gputui import cli; import gputui.telemetry.nvml.source, gputui.config, gputui.ui.app, pynvml, psutil' 2> "$out/importtime.txt"
kill $hold ${train:-} 2>/dev/null; wait
cat "$out/minimal.jsonl"
cat "$out/report.txt"
}

mode_slow_child() {  # the read-ahead's child stopped as it forks: gputui must go on without it
rounds=${1:-2}
site=$($py -c 'import site; print(site.getsitepackages()[0])')
$py -m pip install -q --no-index --no-deps --upgrade .whl/*.whl > "$out/pip.log" 2>&1
$py -m compileall -q gputui bench "$site/pynvml.py" "$site/psutil" > /dev/null 2>&1
: > "$out/report.txt"
for r in $(seq "$rounds"); do
  PYTHONPATH=$PWD $py bench/pty_timeline.py --start --json --seconds 4 -- \
    $py -P bench/start_trace.py "$out/trace-$r.jsonl" --no-remember > "$out/timeline-$r.json" &
  pt=$! st= child=
  for _ in $(seq 400); do  # the traced start (pty_timeline's child), then its fork
    st=$(pgrep -P $pt | head -1)
    [ -n "$st" ] && child=$(pgrep -P "$st" | head -1)
    [ -n "$child" ] && break
    sleep 0.002
  done
  { echo "== round $r: start $st, read-ahead child ${child:-not seen}"
    if [ -n "$child" ]; then
      kill -STOP "$child"; sleep 1.5
      if kill -CONT "$child" 2> /dev/null; then echo "FAIL: the child was still there 1.5 s on"
      else echo "the child was gone within 1.5 s (killed and reaped by gputui)"; fi
    fi
    wait $pt
    $py bench/start_trace.py --report "$out/trace-$r.jsonl" "$out/timeline-$r.json" |
      grep -E "App.run|on_mount |import pynvml|paint 1 sent|first frame drawn|a sample taken|snapshot shown +\$|pty: " | head -12
    echo "left running: $(pgrep -f "start_trace.py $out" | wc -l)"; } >> "$out/report.txt"
done
cat "$out/report.txt"
}

mode_diag_env() {
set -o pipefail
SUMMARY="$out/summary.txt"
: > "$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
ok=0

# ---- (1) a holder of nearly all of GPU 0's memory -------------------------------------------
"$py" - > "$out/holder.txt" 2> "$out/holder.err" <<'EOF' &
import os, sys, time, torch
free, total = torch.cuda.mem_get_info(0)
size = free - int(total * 0.04)  # leave 4 % free: below the diagnosis's 10 %
block = torch.empty(size, dtype=torch.uint8, device="cuda:0")
free_after, _ = torch.cuda.mem_get_info(0)
print(f"holder pid {os.getpid()} holds {size / 2**30:.1f} GiB; free now {free_after / 2**30:.1f} "
      f"of {total / 2**30:.1f} GiB", flush=True)
print("ready", flush=True)
time.sleep(600)
EOF
HOLDER=$!
trap 'kill "$HOLDER" 2>/dev/null' EXIT
for _ in $(seq 120); do grep -q ready "$out/holder.txt" 2>/dev/null && break; kill -0 "$HOLDER" 2>/dev/null || break; sleep 0.5; done
say "$(head -1 "$out/holder.txt")"
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > "$out/apps-held.csv" 2>&1
"$py" -m gputui diag --json --no-nccl --python "$py" > "$out/diag-held.json" 2> "$out/diag-held.err"
say "diag beside the holder: exit $?"
kill "$HOLDER" 2>/dev/null; wait "$HOLDER" 2>/dev/null; trap - EXIT
"$py" - "$out/diag-held.json" "$HOLDER" <<'EOF' | tee -a "$SUMMARY" || ok=1
import json, sys
report, holder = json.load(open(sys.argv[1])), sys.argv[2]
memory = [c for c in report["checks"] if c["id"].startswith("memory")]
for c in memory:
    print(f"  {c['status']} {c['id']}: {c['summary']}")
hit = [c for c in memory if c["status"] == "WARN" and f"PID {holder} " in c["summary"]]
print(f"(1) memory held by PID {holder}: " + ("NAMED" if hit else "NOT NAMED"))
sys.exit(0 if hit else 1)
EOF

# ---- (2) a malformed PYTORCH_CUDA_ALLOC_CONF -------------------------------------------------
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:maybe "$py" -X faulthandler -c \
  "import torch; torch.zeros(1, device='cuda'); print('torch accepted it')" > "$out/torch-alone.txt" 2>&1
say "torch alone with expandable_segments:maybe: exit $? ($(tail -1 "$out/torch-alone.txt"))"
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:maybe "$py" -m gputui diag --json --no-nccl --python "$py" \
  > "$out/diag-alloc.json" 2> "$out/diag-alloc.err"
say "diag with expandable_segments:maybe: exit $?"
"$py" - "$out/diag-alloc.json" <<'EOF' | tee -a "$SUMMARY" || ok=1
import json, sys
report = json.load(open(sys.argv[1]))
named = False
for c in report["checks"]:
    if c["id"] in ("env.start", "diag.child") or c["id"].startswith("torch.cuda"):
        print(f"  {c['status']} {c['id']}: {c['summary']}")
        if c["status"] == "FAIL" and "PYTORCH_CUDA_ALLOC_CONF" in c["summary"]:
            named = True
print(f"  child: signal {report['child'].get('signal')}, exit {report['child'].get('returncode')}")
print("(2) PYTORCH_CUDA_ALLOC_CONF: " + ("NAMED" if named else "NOT NAMED"))
sys.exit(0 if named else 1)
EOF
say "result: $([ $ok = 0 ] && echo 'both named' || echo 'NOT both named')"
return $ok
}

mode_health() {
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
    --note "real $gpu: $2 (bench/device.sh health)" > "$out/$1.record.log" 2>&1 &
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
}

mode_snapshot_gpm() {
$py bench/load/train_like.py --seconds 30 --precision bf16 > "$out/load.log" 2>&1 &
load=$!
sleep 12
for k in 1 2 3; do
  s=$(date +%s%N)
  $py -m gputui snapshot --json > "$out/snapshot-$k.json" 2> "$out/snapshot-$k.err"
  rc=$?
  e=$(date +%s%N)
  echo "run $k: exit $rc wall $(( (e - s) / 1000000 )) ms"
done
$py -m gputui snapshot --json --fields index,gpm.sm_active,gpm.tensor_active,gpm.unavailable > "$out/snapshot-fields.json"
kill $load 2>/dev/null; wait $load 2>/dev/null
$py - "$out" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
bad = 0
for f in sorted(out.glob("snapshot-*.json")):
    for g in json.loads(f.read_text())["gpus"]:
        figures = {k: v for k, v in g.items() if k.startswith("gpm.") and k != "gpm.unavailable"}
        measured = g["gpm.unavailable"] is None
        ok = (measured and g["gpm.sm_active"] is not None) or (not measured and set(figures.values()) == {None})
        bad += not ok
        print(f"{f.name} GPU {g['index']}: {'OK ' if ok else 'BAD'} unavailable={g['gpm.unavailable']!r} "
              f"sm_active={g.get('gpm.sm_active')} tensor_active={g.get('gpm.tensor_active')}")
print("PASS" if not bad else f"FAIL: {bad} GPU documents null without a reason")
sys.exit(1 if bad else 0)
PY
}

mode_steady() {
# gputui (this tree) and, optionally, a base tree, nvtop and a one-line Textual app,
# interleaved, ROUNDS rounds of 20 s at 160x50 and 1 Hz with a 12 GiB holder and a bf16
# training job on GPU 0; each gputui as `python3 -P` with its own PYTHONPATH.
rounds=$1; base=${2:-}
site=$($py -c 'import site; print(site.getsitepackages()[0])')
$py -m pip install -q --no-index --no-deps --upgrade .whl/*.whl > "$out/pip.log" 2>&1  # (a fresh machine has no Textual)
$py -m compileall -q gputui bench ${base:+"$base"} "$site/pynvml.py" "$site/psutil" > /dev/null 2>&1
need_peers nvtop
start_load
pb="$py $PTYBENCH --seconds 20 --cols 160 --rows 50 --json --steady-from 5"
for r in $(seq "$rounds"); do
  for v in now ${base:+base} nvtop minimal; do
    case $v in
      now) cmd="env PYTHONPATH=$PWD $py -P -m gputui --interval 1 --no-remember" ;;
      base) cmd="env PYTHONPATH=$base $py -P -m gputui --interval 1 --no-remember" ;;
      nvtop) cmd="$nvtop_run -d 10" ;;
      minimal) cmd="$py -P bench/minimal_textual.py" ;;
    esac
    $pb -- $cmd | sed "s/^{/{\"what\": \"$v\", \"round\": $r, /"
  done
done > "$out/steady.jsonl" 2> "$out/steady.err"
kill $hold $train 2>/dev/null; wait
$py - "$out/steady.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
by = {}
for r in rows:
    by.setdefault(r["what"], []).append(r)
for k, rs in by.items():
    def f(key):
        return statistics.median([r[key] for r in rs if r.get(key) is not None] or [float("nan")])
    print(f"{k:8} steady {f('steady_cpu_pct'):.2f}% (from 5 s {f('late_cpu_pct'):.2f}%)  "
          f"bytes/s {f('bytes_per_s'):.0f} (from 5 s {f('late_bytes_per_s'):.0f})  "
          f"first byte {f('first_byte_s'):.3f} s  settled {f('settle_s'):.3f} s  rss {f('rss_mb'):.0f} MB")
PY
}


mode_all() {
base=${1:-}
[ -z "$base" ] || base=$(cd "$base" && pwd) || { echo "no such BASEDIR" >&2; return 2; }
# ALL_QUICK=1: one short round of each part, to check the script itself (no figures)
if [ -n "${ALL_QUICK:-}" ]; then q_ff=1 q_st=1 q_sts=4 q_rows=6 q_snap=1 q_prof=1 q_gpm="--repeats 1 --warmup 0.5"
else q_ff=8 q_st=3 q_sts=15 q_rows=25 q_snap=5 q_prof=5 q_gpm=""; fi
if [ -n "$caller_pythonpath" ]; then export PYTHONPATH=$caller_pythonpath; else unset PYTHONPATH; fi
work=$(mktemp -d)
log="$out/log.txt"
: > "$log"
t_start=$(date +%s)
stamp() { echo "== $(( $(date +%s) - t_start )) s: $*" >> "$log"; }
site=$($py -c 'import site; print(site.getsitepackages()[0])')
$py -m pip install -q --no-index --no-deps --upgrade .whl/*.whl >> "$log" 2>&1
$py -m compileall -q gputui bench ${base:+"$base"} "$site/pynvml.py" "$site/psutil" > /dev/null 2>&1
need_peers nvtop nvitop nvidia-smi
variants="$PWD${base:+ $base}"
for dir in $variants; do
  got=$(PYTHONPATH=$dir $py -P -c 'import gputui, os; print(os.path.dirname(os.path.dirname(os.path.abspath(gputui.__file__))))')
  if [ "$got" != "$dir" ]; then echo "variant $dir imports gputui from $got" >&2; return 2; fi
done
name_of() { if [ "$1" = "$PWD" ]; then echo now; else echo base; fi; }
{ nvidia-smi -L; $nvtop_run --version; $py -m nvitop --version; $py -V
  $py -c "import textual, pynvml; print('textual', textual.__version__)"; git log -1 --format='%h %s' 2>/dev/null
  [ -n "$base" ] && echo "base: $base"; } >> "$log" 2>&1
export XDG_CONFIG_HOME="$work/config" XDG_STATE_HOME="$work/state"
stamp "load"
start_load "$work"
res="$out/results.jsonl"
: > "$res"
tag() { sed "s/^{/{\"part\": \"$1\", \"what\": \"$2\", \"round\": $3, /" >> "$res"; }
# 1. the first frame: 8 interleaved rounds
stamp "first frame"
ff="$py bench/pty_timeline.py --start --json --seconds 2.5"
for r in $(seq $q_ff); do
  $ff -- $py -P bench/minimal_textual.py 2>> "$log" | tag first-frame minimal "$r"
  for dir in $variants; do
    PYTHONPATH=$dir $ff -- $py -P -m gputui --interval 1 --no-remember 2>> "$log" | tag first-frame "gputui $(name_of "$dir")" "$r"
  done
  $ff -- $py -m nvitop --interval 1 2>> "$log" | tag first-frame nvitop "$r"
  $ff -- $nvtop_run -d 10 2>> "$log" | tag first-frame nvtop "$r"
done
# 2. steady CPU and bytes: 3 rounds of 15 s
stamp "steady"
pb="$py $PTYBENCH --seconds $q_sts --cols 160 --rows 50 --json --steady-from 5"
for r in $(seq $q_st); do
  for dir in $variants; do
    PYTHONPATH=$dir $pb --screen "$work/screen-gputui-$(name_of "$dir").txt" -- $py -P -m gputui --interval 1 --no-remember 2>> "$log" | tag steady "gputui $(name_of "$dir")" "$r"
  done
  $pb --screen "$work/screen-nvtop.txt" -- $nvtop_run -d 10 2>> "$log" | tag steady nvtop "$r"
done
# 3. the bytes of each screen row
stamp "rows"
{ echo "== gputui (this tree), 160x50, 25 s, the first 5 s left out"
  PYTHONPATH=$PWD $py bench/pty_rows.py --seconds $q_rows --skip 5 --top 25 -- $py -P -m gputui --interval 1 --no-remember
  echo; echo "== nvtop"
  $py bench/pty_rows.py --seconds $q_rows --skip 5 --top 25 -- $nvtop_run -d 10; } > "$out/rows.txt" 2>> "$log"
# 4. one-shot snapshots: 5 interleaved rounds, wall time
stamp "snapshots"
wall() {  # wall WHAT ROUND CMD...: one run's wall time as a result row
  local what=$1 r=$2; shift 2
  local s e rc
  s=$(date +%s%N); "$@" > "$work/snap.out" 2>> "$log"; rc=$?; e=$(date +%s%N)
  echo "{\"wall_s\": $(( (e - s) / 1000 ))e-6, \"rc\": $rc, \"bytes\": $(wc -c < "$work/snap.out")}" | tag snapshot "$what" "$r"
}
for r in $(seq $q_snap); do
  for dir in $variants; do
    wall "gputui snapshot --json $(name_of "$dir")" "$r" env PYTHONPATH=$dir $py -P -m gputui snapshot --json
  done
  wall "gputui snapshot csv now" "$r" env PYTHONPATH=$PWD $py -P -m gputui snapshot
  wall "nvitop -1" "$r" $py -m nvitop -1
  wall "nvidia-smi --query-gpu" "$r" nvidia-smi --query-gpu=index,name,utilization.gpu,memory.used,temperature.gpu,power.draw --format=csv
done
PYTHONPATH=$PWD $py -P -m gputui snapshot --json > "$work/snapshot.json" 2>> "$log"
kill $hold $train 2>/dev/null; wait 2>/dev/null
sleep 3
# 5. what each NVML read costs, at its cadence
stamp "nvml cost"
PYTHONPATH=$PWD $py -P bench/nvml_cost.py --ticks 20 --json "$out/nvml_cost.json" > "$work/nvml_cost.txt" 2>> "$log"
# 6. NVML's read-ahead against the start-up imports
stamp "start profile"
$py bench/start_profile.py --rounds $q_prof --json "$out/start_profile.jsonl" > "$work/start_profile.txt" 2>> "$log"
# 7. GPM windows under steady loads
stamp "gpm windows"
PYTHONPATH=$PWD $py -P bench/gpm_window.py $q_gpm --json "$out/gpm_window.json" > "$work/gpm_window.txt" 2>> "$log"
stamp "done"
{ for f in "$work"/screen-*.txt; do echo "== $(basename "$f")"; cat "$f"; done
  echo "== gputui snapshot --json (this tree, idle GPUs)"; head -c 4000 "$work/snapshot.json"; } > "$out/screens.txt"
$py - "$res" "$work" <<'PY' | tee "$out/summary.txt"
import json, statistics, sys
from pathlib import Path
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
work = Path(sys.argv[2])
def med(part, what, key):
    v = [r[key] for r in rows if r["part"] == part and r["what"] == what and r.get(key) is not None]
    return statistics.median(v) if v else None
def line(text): print(text)
line("== first frame: settled (output quiet 0.3 s), median of 8 interleaved rounds")
floor = med("first-frame", "minimal", "settle_s")
for what in ("minimal", "gputui now", "gputui base", "nvitop", "nvtop"):
    s = med("first-frame", what, "settle_s")
    if s is None: continue
    fb, c = med("first-frame", what, "first_byte_s"), med("first-frame", what, "complete_s")
    ratio = f"  {s / floor:.2f}x the one-line app" if floor and what.startswith("gputui") else ""
    line(f"  {what:12s} settled {s:.3f} s  complete {c if c is None else round(c, 3)} s  first byte {fb:.3f} s{ratio}")
if floor and med("first-frame", "gputui now", "settle_s"):
    r = med("first-frame", "gputui now", "settle_s") / floor
    line(f"  target <= 1.3x: {'met' if r <= 1.3 else 'NOT met'} ({r:.2f}x)")
line("== steady (15 s after the first frame, 1 Hz, 160x50), median of 3 rounds")
n_cpu, n_b = med("steady", "nvtop", "steady_cpu_pct"), med("steady", "nvtop", "bytes_per_s")
for what in ("gputui now", "gputui base", "nvtop"):
    c, b, rss = med("steady", what, "steady_cpu_pct"), med("steady", what, "bytes_per_s"), med("steady", what, "rss_mb")
    if c is None: continue
    extra = f"  {c / n_cpu:.2f}x nvtop's CPU, {b / n_b:.2f}x its bytes" if n_cpu and n_b and what != "nvtop" else ""
    lc, lb = med("steady", what, "late_cpu_pct"), med("steady", what, "late_bytes_per_s")
    late = f"  (from 5 s: CPU {lc:.2f} %, bytes {lb:.0f}/s)" if lc is not None and lb is not None else ""
    line(f"  {what:12s} CPU {c:.2f} %  bytes {b:.0f}/s  RSS {rss:.0f} MB{extra}{late}")
c, b = med("steady", "gputui now", "steady_cpu_pct"), med("steady", "gputui now", "bytes_per_s")
if not (n_cpu and n_b):
    line("  nvtop: NO steady figures (see log.txt): the CPU and bytes targets are not judged")
elif c and b:
    line(f"  targets: CPU <= 2x nvtop {'met' if c / n_cpu <= 2 else 'NOT met'} ({c / n_cpu:.2f}x); "
         f"bytes <= 1.2x nvtop (4 GPUs) {'met' if b / n_b <= 1.2 else 'NOT met'} ({b / n_b:.2f}x)")
    lc, ln = med("steady", "gputui now", "late_cpu_pct"), med("steady", "nvtop", "late_cpu_pct")
    if lc and ln:
        line(f"  from 5 s on (what the monitor does once, just after its first frame, left out): "
             f"CPU {lc / ln:.2f}x nvtop's")
line("== one-shot snapshots: wall, median of 5 interleaved runs")
for what in ("gputui snapshot --json now", "gputui snapshot --json base", "gputui snapshot csv now", "nvitop -1", "nvidia-smi --query-gpu"):
    w = med("snapshot", what, "wall_s")
    if w is not None: line(f"  {what:28s} {w:.3f} s")
j, nv = med("snapshot", "gputui snapshot --json now", "wall_s"), med("snapshot", "nvitop -1", "wall_s")
if j and nv:
    line(f"  target: --json <= nvitop -1 + the GPM window (0.2 s): {'met' if j <= nv + 0.2 else 'NOT met'} ({j:.3f} vs {nv + 0.2:.3f} s)")
for name in ("start_profile.txt", "gpm_window.txt", "nvml_cost.txt"):
    f = work / name
    line(f"== {name[:-4]}")
    text = f.read_text() if f.exists() else "(missing: see log.txt)\n"
    print("".join("  " + l for l in text.splitlines(True)[:30]), end="")
PY
rm -rf "$work"
}

case $mode in
  all) mode_all "${3:-}" ;;
  steady) mode_steady "${3:-2}" "${4:-}" ;;
  peers) mode_peers "${3:-3}" ;;
  first-frame) shift 2; mode_first_frame "$@" ;;
  start-trace) mode_start_trace "${3:-4}" ;;
  slow-child) mode_slow_child "${3:-2}" ;;
  diag-env) mode_diag_env ;;
  health) mode_health ;;
  snapshot-gpm) mode_snapshot_gpm ;;
  diag | stress | export | namespace | xid | topo) "mode_$mode" ;;
  gpm-loads | gpm-train2) mode_gpm ;;
  *) echo "unknown mode $mode (see the header of $0)" >&2; exit 2 ;;
esac
