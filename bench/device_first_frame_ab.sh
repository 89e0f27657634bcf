#!/usr/bin/env bash
# On a GPU machine, from the repo root: the live first frame of two versions of gputui, one
# process holding GPU memory, interleaved in one run with a one-line Textual app and nvitop
# (ptybench, 160x50); then traces of the second version (first_frame_profile --trace).
#     bench/device_first_frame_ab.sh OUTDIR TOOLS BEFORE [ROUNDS] [image]
# BEFORE: a directory holding an older `gputui` package (e.g. from `git archive REV gputui`).
# The packages' bytecode is compiled first, as `pip install` leaves it (some images install
# with PYTHONDONTWRITEBYTECODE, and a module without bytecode is compiled at every start);
# `image` leaves the interpreter's own packages as the machine has them.
set -u
out=$1; tools=$2; before=$3; rounds=${4:-6}; mode=${5:-pip}; mkdir -p "$out"
export PYTHONUNBUFFERED=1
site=$(python3 -c 'import site; print(site.getsitepackages()[0])')
python3 -m pip install -q --no-index --no-deps --upgrade .whl/*.whl > "$out/pip.log" 2>&1
echo "$PWD" > "$site/gputui-repo.pth"
python3 -m compileall -q gputui bench "$before" > /dev/null 2>&1
[ "$mode" = image ] || python3 -m compileall -q "$site/pynvml.py" "$site/psutil" > /dev/null 2>&1
python3 bench/load/hold_memory.py --gib 8 --seconds 300 > "$out/hold.log" 2>&1 &
for _ in $(seq 60); do nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -q . && break; sleep 0.5; done
python3 -m gputui --help > /dev/null 2>&1
pb="python3 $tools/ptybench.py --seconds 2.5 --json"
for _ in $(seq "$rounds"); do
  $pb -- python3 bench/minimal_textual.py | sed 's/^{/{"what": "one-line Textual app", /'
  PYTHONPATH=$before $pb -- python3 -P -m gputui --no-remember | sed 's/^{/{"what": "gputui before", /'
  $pb -- python3 -P -m gputui --no-remember | sed 's/^{/{"what": "gputui after", /'
  $pb -- python3 -m nvitop --interval 1 | sed 's/^{/{"what": "nvitop", /'
  if command -v nvtop > /dev/null; then $pb -- nvtop | sed 's/^{/{"what": "nvtop", /'; fi
done > "$out/ab.jsonl" 2> "$out/ab.err"
[ "$mode" = image ] || for i in 1 2 3; do
  T0=$(date +%s.%N) python3 bench/pty_timeline.py --start --seconds 3 -- python3 bench/first_frame_profile.py --trace "$out/trace$i.txt" > "$out/timeline$i.txt" 2>&1
done
kill %1 2>/dev/null; wait
python3 - "$out/ab.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
for what in dict.fromkeys(r["what"] for r in rows):
    rs = [r for r in rows if r["what"] == what]
    s = sorted(r["settle_s"] for r in rs if r["settle_s"] is not None)
    f = sorted(r["first_byte_s"] for r in rs if r["first_byte_s"] is not None)
    print(f"{what:22s} settled median {statistics.median(s):.3f} s (min {s[0]:.3f}, max {s[-1]:.3f});"
          f" first byte median {statistics.median(f):.3f}; bytes {statistics.median(r['bytes'] for r in rs):.0f}; n={len(rs)}")
PY
for i in 1 2 3; do echo "== trace $i"; grep -v ' write [0-9] B$\| write 1[0-9] B$' "$out/trace$i.txt" | head -32; tail -1 "$out/timeline$i.txt"; done
