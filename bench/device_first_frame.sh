#!/usr/bin/env bash
# On a GPU machine, from the repo root: the live first frame, measured as an SSH user gets it
# (ptybench in a 160x50 pseudo-terminal), with one process holding GPU memory; next to nvitop
# and nvidia-smi in the same run; plus where the start-up time goes (pty_timeline --start,
# first_frame_profile).   bench/device_first_frame.sh OUTDIR TOOLS  (TOOLS holds ptybench.py)
set -u
out=$1; tools=$2; mkdir -p "$out"
export PYTHONUNBUFFERED=1
site=$(python3 -c 'import site; print(site.getsitepackages()[0])')
# the wheels into the interpreter (bytecode compiled, as `pip install` leaves it), the repo on its path
python3 -m pip install -q --no-index --no-deps --upgrade .whl/*.whl > "$out/pip.log" 2>&1
echo "$PWD" > "$site/gputui-repo.pth"
python3 -m compileall -q gputui > /dev/null 2>&1
nvidia-smi -L > "$out/gpus.txt"
python3 -c 'import textual, rich, nvitop; print("textual", textual.__version__)' >> "$out/gpus.txt" 2>&1
python3 bench/load/hold_memory.py --gib 8 --seconds 200 > "$out/hold.log" 2>&1 &
for _ in $(seq 60); do nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -q . && break; sleep 0.5; done
pb="python3 $tools/ptybench.py --seconds 3 --json"
python3 -m gputui --help > /dev/null 2>&1   # warm the page cache (not measured)
{
  for _ in 1 2 3 4 5; do $pb -- python3 -m gputui --no-remember; done
  for _ in 1 2 3; do $pb -- python3 -m nvitop --interval 1; done
  for _ in 1 2; do $pb -- python3 -m gputui --no-remember --demo; done
  $pb -- nvidia-smi -l 1
} > "$out/ptybench.jsonl" 2> "$out/ptybench.err"
python3 bench/pty_timeline.py --start -- python3 -m gputui --no-remember > "$out/timeline.txt" 2>&1
for _ in 1 2 3; do
  script -qc "T0=\$(date +%s.%N) python3 bench/first_frame_profile.py --no-profile" /dev/null 2>&1 | tr -d '\r' | grep -a ' s  ' | sed 's/.*\[?1006l//'
  echo
done > "$out/phases.txt"
script -qc "T0=\$(date +%s.%N) python3 bench/first_frame_profile.py --out $out/first-frame.prof" /dev/null > "$out/profile.txt" 2>&1
kill %1 2>/dev/null; wait
cat "$out/gpus.txt" "$out/ptybench.jsonl" "$out/timeline.txt" "$out/phases.txt"
