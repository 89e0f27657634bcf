#!/usr/bin/env bash
# On a GPU machine, from the repo root: the live first frame of several versions of gputui,
# one process holding GPU memory, interleaved round by round with a one-line Textual app and
# nvitop (pty_timeline --start --json at 160x50: ptybench's first byte and "settled", and
# "complete", when the screen first showed the settled picture); then traces of each
# version (first_frame_profile --trace) and a profile of the NVML read-ahead.
#     bench/device_first_frame_variants.sh OUTDIR TOOLS ROUNDS DIR [DIR...]
# Each DIR holds a `gputui` package (e.g. from `git archive REV gputui`, or a copy with one
# change) and is named in the results by its last path component.  The packages' bytecode is
# compiled first, as `pip install` leaves it.
set -u
out=$1; tools=$2; rounds=$3; shift 3; mkdir -p "$out"
export PYTHONUNBUFFERED=1
site=$(python3 -c 'import site; print(site.getsitepackages()[0])')
python3 -m pip install -q --no-index --no-deps --upgrade .whl/*.whl > "$out/pip.log" 2>&1
echo "$PWD" > "$site/gputui-repo.pth"
python3 -m compileall -q gputui bench "$@" "$site/pynvml.py" "$site/psutil" > /dev/null 2>&1
python3 bench/load/hold_memory.py --gib 8 --seconds 400 > "$out/hold.log" 2>&1 &
for _ in $(seq 60); do nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -q . && break; sleep 0.5; done
python3 -m gputui --help > /dev/null 2>&1
# `python3 -m` puts the current directory first on sys.path, ahead of PYTHONPATH: run from the
# repo root, every variant would be the working tree's gputui.  -P (Python 3.11+) leaves it
# out; and each variant is checked to import its own package before anything is measured.
for dir in "$@"; do
  got=$(PYTHONPATH=$dir python3 -P -c 'import gputui, os; print(os.path.dirname(os.path.dirname(os.path.abspath(gputui.__file__))))')
  if [ "$got" != "$(cd "$dir" && pwd)" ]; then echo "variant $dir imports gputui from $got" >&2; exit 2; fi
done
pb="python3 bench/pty_timeline.py --start --json --seconds 2.5"
for _ in $(seq "$rounds"); do
  $pb -- python3 bench/minimal_textual.py | sed 's/^{/{"what": "one-line Textual app", /'
  for dir in "$@"; do
    PYTHONPATH=$dir $pb -- python3 -P -m gputui --no-remember | sed "s/^{/{\"what\": \"gputui $(basename "$dir")\", /"
  done
  $pb -- python3 -m nvitop --interval 1 | sed 's/^{/{"what": "nvitop", /'
done > "$out/ab.jsonl" 2> "$out/ab.err"
for dir in "$@"; do
  name=$(basename "$dir")
  for i in 1 2; do
    T0=$(date +%s.%N) PYTHONPATH=$dir python3 bench/pty_timeline.py --start --seconds 3 -- \
      python3 bench/first_frame_profile.py --trace "$out/trace-$name-$i.txt" > "$out/timeline-$name-$i.txt" 2>&1
  done
done
python3 bench/prefetch_profile.py 30 > "$out/prefetch-profile.txt" 2>&1
kill %1 2>/dev/null; wait
python3 - "$out/ab.jsonl" <<'PY'
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
PY
for f in "$out"/trace-*-1.txt; do echo "== $f"; grep -v ' write [0-9] B$\| write 1[0-9] B$' "$f" | head -40; done
