#!/usr/bin/env bash
# On a GPU machine, from the repo root (about 40 s):
#   bash bench/device_xid.sh OUTDIR
# A real Xid event, watched by gputui: `gputui export` and the TUI (in a pty, ptybench) run
# while a throwaway process faults on GPU 0 — a torch index out of range on the GPU (a
# device-side assert, which the driver reports as Xid 43).  The fault ends only that
# process's CUDA context; the GPU is not reset.  Writes the exporter's
# XID series before and after, the TUI's last screen, and the driver's own log of Xids
# (dmesg) where readable.
set -u
out=$1; mkdir -p "$out"
py=python3
$py -m gputui export --listen 127.0.0.1:9477 --interval 1 > "$out/export.log" 2>&1 &
exp=$!
$py ${PTYBENCH:-../shared/bench/ptybench.py} --seconds 18 --cols 160 --rows 45 --screen "$out/tui-screen.txt" \
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
