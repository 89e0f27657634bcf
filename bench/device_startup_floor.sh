#!/usr/bin/env bash
# On a GPU machine, from the repo root: the floor under gputui's live first frame — the
# interpreter's start, a one-line Textual app's first frame, NVML's open and first sample —
# next to gputui's own, in one run.   bench/device_startup_floor.sh OUTDIR TOOLS
set -u
out=$1; tools=$2; mkdir -p "$out"
site=$(python3 -c 'import site; print(site.getsitepackages()[0])')
python3 -m pip install -q --no-index --no-deps --upgrade .whl/*.whl > "$out/pip.log" 2>&1
echo "$PWD" > "$site/gputui-repo.pth"
python3 -m compileall -q gputui bench > /dev/null 2>&1
python3 bench/load/hold_memory.py --gib 8 --seconds 200 > "$out/hold.log" 2>&1 &
for _ in $(seq 60); do nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -q . && break; sleep 0.5; done
python3 -m gputui --help > /dev/null 2>&1
t() { local s; s=$(date +%s.%N); "$@" > /dev/null 2>&1; echo "$(python3 -c "print(f'{$(date +%s.%N) - $s:.3f}')") s: $*"; }
{
  for _ in 1 2 3; do t python3 -c pass; t python3 -S -c pass; t python3 -c "import textual.app"; t python3 -c "import gputui.ui.app"; done
  for _ in 1 2 3; do python3 bench/nvml_open_cost.py --plain 2>&1; done
} > "$out/floor.txt"
pb="python3 $tools/ptybench.py --seconds 3 --json"
{
  for _ in 1 2 3 4; do $pb -- python3 bench/minimal_textual.py; $pb -- python3 -m gputui --no-remember; done
} > "$out/ptybench.jsonl" 2> "$out/ptybench.err"
python3 bench/nvml_open_cost.py > "$out/nvml_profile.txt" 2>&1
python3 -X importtime -c "import gputui.ui.app" 2> "$out/importtime.txt"
kill %1 2>/dev/null; wait
cat "$out/floor.txt" "$out/ptybench.jsonl"; head -45 "$out/nvml_profile.txt"
