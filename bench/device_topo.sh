#!/usr/bin/env bash
# On the 2x H200 machine (NVSwitch), from the repo root: capture what the topology tab and the
# detail view need checking on real hardware, next to nvidia-smi's view of the same run.
#   bash bench/device_topo.sh OUTDIR [TOOLS]
# TOOLS (optional): a directory holding ptybench.py; with Textual importable (carried wheels)
# the Topology tab and the detail view are also captured as screens under load.
# About 1.5 minutes.  Writes everything under OUTDIR; `bench/topo_check.py OUTDIR` (run at the
# end, output in topo_check.txt) says OK/MISMATCH per check.
set -u
out=$1; tools=${2:-}; mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH=${PYTHONPATH:-}:$PWD
py=${PYTHON:-python3}
ngpu=$(nvidia-smi -L | wc -l)

# static views, as nvidia-smi prints them
nvidia-smi topo -m > "$out/nvidia-smi-topo.txt" 2>&1
nvidia-smi topo -p2p rw > "$out/nvidia-smi-topo-p2p.txt" 2>&1
nvidia-smi nvlink -s > "$out/nvidia-smi-nvlink.txt" 2>&1
nvidia-smi nvlink -R > "$out/nvidia-smi-nvlink-remote.txt" 2>&1
nvidia-smi -q -d ROW_REMAPPER > "$out/nvidia-smi-q-row-remapper.txt" 2>&1
nvidia-smi -q -d PAGE_RETIREMENT > "$out/nvidia-smi-q-page-retirement.txt" 2>&1
$py bench/nvml_probe_topo.py > "$out/nvml-probe-topo.json" 2> "$out/nvml-probe-topo.err"

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
if [ -n "$tools" ] && [ -f "$tools/ptybench.py" ] && $py -c "import textual, pyte" 2>/dev/null; then
  $py bench/load/p2p_copy.py --seconds 40 > "$out/p2p_copy_screens.log" 2>&1 &
  load=$!
  sleep 3
  pb="$py $tools/ptybench.py --seconds 12 --cols 160 --rows 50 --json"
  {
    $pb --keys "2.0:3" --screen "$out/screen-topology.txt" -- $py -m gputui --interval 1
    $pb --keys "2.0:\r,8.0:\x1b[F" --screen "$out/screen-detail.txt" -- $py -m gputui --interval 1
  } > "$out/ptybench.jsonl" 2> "$out/ptybench.err"
  wait $load
fi

$py bench/topo_check.py "$out" > "$out/topo_check.txt" 2>&1
cat "$out/topo_check.txt"
ls -la "$out"
