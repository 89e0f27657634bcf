#!/usr/bin/env bash
# On a GPU machine (issue 24 item 16): the two environments the diagnosis once passed in silence.
#  (1) another process holds nearly all of GPU 0's memory (a torch process allocates all but 4 %
#      of it, ~77 GiB on an 80 GiB H100): `gputui diag --json` beside it must WARN on memory.0 and
#      name that process's PID;
#  (2) PYTORCH_CUDA_ALLOC_CONF=expandable_segments:maybe: the diagnosis must name the variable
#      (env.start FAIL before any CUDA call; and, if torch then crashes, as a suspect of the crash).
# Needs torch with CUDA in $PYTHON; not textual or plotext.  Everything goes to OUTDIR;
# OUTDIR/summary.txt is the part to read; exit status 0 when both are named.  About 1 minute.
#   bash bench/device_diag_env.sh OUTDIR        (PYTHON=... to pick the interpreter; default python3)
set -uo pipefail
OUT=${1:?usage: bash bench/device_diag_env.sh OUTDIR}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=$(command -v "${PYTHON:-python3}")
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
ok=0

# ---- (1) a holder of nearly all of GPU 0's memory -------------------------------------------
"$PY" - > "$OUT/holder.txt" 2> "$OUT/holder.err" <<'EOF' &
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
for _ in $(seq 120); do grep -q ready "$OUT/holder.txt" 2>/dev/null && break; kill -0 "$HOLDER" 2>/dev/null || break; sleep 0.5; done
say "$(head -1 "$OUT/holder.txt")"
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > "$OUT/apps-held.csv" 2>&1
"$PY" -m gputui diag --json --no-nccl --python "$PY" > "$OUT/diag-held.json" 2> "$OUT/diag-held.err"
say "diag beside the holder: exit $?"
kill "$HOLDER" 2>/dev/null; wait "$HOLDER" 2>/dev/null; trap - EXIT
"$PY" - "$OUT/diag-held.json" "$HOLDER" <<'EOF' | tee -a "$SUMMARY" || ok=1
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
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:maybe "$PY" -X faulthandler -c \
  "import torch; torch.zeros(1, device='cuda'); print('torch accepted it')" > "$OUT/torch-alone.txt" 2>&1
say "torch alone with expandable_segments:maybe: exit $? ($(tail -1 "$OUT/torch-alone.txt"))"
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:maybe "$PY" -m gputui diag --json --no-nccl --python "$PY" \
  > "$OUT/diag-alloc.json" 2> "$OUT/diag-alloc.err"
say "diag with expandable_segments:maybe: exit $?"
"$PY" - "$OUT/diag-alloc.json" <<'EOF' | tee -a "$SUMMARY" || ok=1
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
exit $ok
