#!/usr/bin/env bash
# issue 24 item 15, on a GPU machine from the repo root (about 40 s; needs torch for the load):
#   bash bench/snapshot_gpm.sh [OUTDIR]
# `gputui snapshot --json` (no --fields) under a bf16 load must carry a measured GPM window
# on a Hopper or newer GPU (gpm.unavailable null, gpm.sm_active and gpm.tensor_active
# numbers), or say why not (gpm.unavailable a reason): never every gpm.* null beside a null
# gpm.unavailable.  Also prints its wall time (one GPM window: about 1 s more than before).
set -u
out=${1:-/tmp/snapshot-gpm}; mkdir -p "$out"
py=${PYTHON:-python3}
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
