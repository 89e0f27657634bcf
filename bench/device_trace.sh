#!/usr/bin/env bash
# On a GPU machine, from the repo root: what gputui's live start-up waits for, moment by moment
# (bench/first_frame_profile.py --trace in a 160x50 pseudo-terminal), with one process holding
# GPU memory; and whether the interpreter's packages have their bytecode compiled, as `pip
# install` leaves them (a package without it is compiled again at every start).
#     bench/device_trace.sh OUTDIR [RUNS]
set -u
out=$1; runs=${2:-3}; mkdir -p "$out"
site=$(python3 -c 'import site; print(site.getsitepackages()[0])')
python3 -m pip install -q --no-index --no-deps --upgrade .whl/*.whl > "$out/pip.log" 2>&1
echo "$PWD" > "$site/gputui-repo.pth"
python3 -m compileall -q gputui bench > /dev/null 2>&1
python3 - > "$out/bytecode.txt" 2>&1 <<'PY'
import importlib.util, os, sys
for name in ("pynvml", "psutil", "textual", "rich", "platformdirs", "nvitop"):
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        print(name, "not installed"); continue
    src = spec.origin
    cached = importlib.util.cache_from_source(src)
    print(f"{name}: {src} bytecode {'present' if os.path.exists(cached) else 'MISSING'}")
print("PYTHONDONTWRITEBYTECODE", os.environ.get("PYTHONDONTWRITEBYTECODE"), sys.version.split()[0])
PY
python3 bench/load/hold_memory.py --gib 8 --seconds 200 > "$out/hold.log" 2>&1 &
for _ in $(seq 60); do nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -q . && break; sleep 0.5; done
python3 -m gputui --help > /dev/null 2>&1
for i in $(seq "$runs"); do
  T0=$(date +%s.%N) python3 bench/pty_timeline.py --start --seconds 3 -- python3 bench/first_frame_profile.py --trace "$out/trace$i.txt" > "$out/timeline$i.txt" 2>&1
done
kill %1 2>/dev/null; wait
cat "$out/bytecode.txt"
for i in $(seq "$runs"); do echo "== run $i"; grep -v ' write [0-9] B$\| write 1[0-9] B$' "$out/trace$i.txt" | head -40; tail -1 "$out/timeline$i.txt"; done
