#!/usr/bin/env bash
# On a GPU machine, from the repo root (about 3 minutes):
#   bash bench/device_export.sh OUTDIR
# 1. `gputui snapshot --json` wall time next to `nvidia-smi --query-gpu ... --format=csv` and
#    `gpustat --json` (if installed), interleaved, 20 runs each, idle GPUs;
# 2. live output kept for review: snapshot JSON/CSV and nvidia-smi's CSV of the same fields;
# 3. the exporter on live NVML with an idle 4 GiB holder and a training-like job running:
#    bench/bench_export.py --live (CPU idle / scraped each second, scrape latency);
# 4. `gputui watch` on live NVML: an idle-with-memory alert (0.2 min) and a temperature
#    alert at the idle temperature + 5 °C; the alert command appends its stdin to a file.
# Needs python3 with torch, nvidia-ml-py, psutil, rich, prometheus-client (wheels), tomli on
# Python 3.10.  Everything is written under OUTDIR.
set -u
out=$1; mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH=${PYTHONPATH:-}:$PWD
py=python3
{ nvidia-smi -L; $py -c 'import prometheus_client, sys; print("prometheus_client", prometheus_client.__version__ if hasattr(prometheus_client, "__version__") else "?", sys.version)'; } > "$out/env.txt" 2>&1

# ---- 1. snapshot wall time vs nvidia-smi and gpustat -------------------------------------
fields=index,name,uuid,pci.bus_id,utilization.gpu,utilization.memory,memory.used,memory.total,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.mem,pstate
$py - "$out" "$fields" <<'EOF' > "$out/snapshot_timing.txt" 2>&1
import json, shutil, statistics, subprocess, sys, time
out, fields = sys.argv[1], sys.argv[2]
cmds = {
    "gputui snapshot --json": [sys.executable, "-m", "gputui", "snapshot", "--json"],
    "gputui snapshot --csv (same fields)": [sys.executable, "-m", "gputui", "snapshot", "--fields", fields],
    "nvidia-smi --query-gpu --format=csv": ["nvidia-smi", f"--query-gpu={fields}", "--format=csv"],
}
if shutil.which("gpustat"):
    cmds["gpustat --json"] = ["gpustat", "--json"]
else:
    print("gpustat not installed: skipped")
times = {k: [] for k in cmds}
for _ in range(20):
    for name, cmd in cmds.items():  # interleaved: the same conditions for each tool
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True)
        times[name].append((time.perf_counter() - t0) * 1000)
        assert r.returncode == 0, (name, r.stderr[-500:])
for name, t in times.items():
    row = {"tool": name, "median_ms": round(statistics.median(t), 1), "min_ms": round(min(t), 1), "max_ms": round(max(t), 1)}
    print(json.dumps(row))
EOF
$py -m gputui snapshot --json --processes > "$out/snapshot.json" 2> "$out/snapshot.err"
$py -m gputui snapshot --fields "$fields" > "$out/snapshot.csv" 2>> "$out/snapshot.err"
nvidia-smi --query-gpu="$fields" --format=csv > "$out/nvidia-smi.csv" 2>&1
$py -m gputui snapshot --json --fields pcie.throughput.rx,pcie.throughput.tx,energy.consumption > "$out/snapshot-slow-fields.json" 2>> "$out/snapshot.err"

# ---- 3. exporter on live NVML under load ---------------------------------------------------
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

# ---- 4. watch on live NVML: idle-with-memory (the holder) and temperature --------------------
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
