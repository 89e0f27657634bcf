#!/usr/bin/env bash
# On a GPU machine, from the repo root: the live first frame of several versions of gputui,
# one process holding GPU memory, interleaved round by round with a one-line Textual app and
# nvitop (pty_timeline --start --json at 160x50: ptybench's first byte and "settled", and
# "complete", when the screen first showed the settled picture).  Prints each program's
# medians, then every later DIR against the first round by round (the round is the unit: a
# paired difference takes out what the machine and the moment add to both).
#     bench/device_first_frame_variants.sh OUTDIR ROUNDS DIR [DIR...]
# Each DIR holds a `gputui` package (e.g. from `git archive REV gputui`, or a copy with one
# change) and is named in the results by its last path component.  Wheels in .whl/ (Textual,
# nvitop, ...) are installed first; the packages' bytecode is compiled, as `pip install`
# leaves it.
set -u
out=$1; rounds=$2; shift 2; mkdir -p "$out"
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
kill %1 2>/dev/null; wait
python3 - "$out/ab.jsonl" $(for d in "$@"; do basename "$d"; done) <<'PY'
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
