#!/usr/bin/env bash
# On a GPU machine, from the repo root (about 2 minutes):
#   bash bench/device_snapshot.sh OUTDIR WHEELDIR
# `gputui snapshot` wall time next to nvidia-smi and gpustat (bench/snapshot_timing.py),
# in two interpreters:
#   1. the machine's own python3 (there: the torch venv, whose site-packages hold .pth hooks
#      and whose pynvml/psutil were installed without .pyc files);
#   2. a fresh venv made from the same python with only what the tools need, installed as
#      pip installs them (compiled): what `pip install gputui gpustat` in a new venv gives.
# WHEELDIR holds the wheels for the fresh venv: nvidia-ml-py, psutil, gpustat, blessed, jinxed,
# wcwidth.  Then the phases of one snapshot (bench/snapshot_phases.py) in both.
set -u
out=$1; wheels=$2; mkdir -p "$out"
base=$(command -v python3)
{ nvidia-smi -L; $base -VV; } > "$out/env.txt" 2>&1
echo "== 1. $base (PYTHONPATH=${PYTHONPATH:-})"
$base bench/snapshot_timing.py --runs 15 | tee "$out/timing-machine-python.txt"
$base bench/snapshot_phases.py --runs 7 | tee "$out/phases-machine-python.txt"
venv=/tmp/gputui-bench-venv; rm -rf "$venv"
$base -m venv --without-pip "$venv"
site=$($venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
$base -m pip install -q --no-index --no-deps --no-cache-dir --target "$site" "$wheels"/*.whl
cp -r gputui "$site/"
$venv/bin/python -m compileall -q "$site"
echo "== 2. fresh venv $venv"
(cd /tmp && env -u PYTHONPATH $venv/bin/python "$OLDPWD/bench/snapshot_timing.py" --runs 15) | tee "$out/timing-fresh-venv.txt"
(cd /tmp && env -u PYTHONPATH $venv/bin/python "$OLDPWD/bench/snapshot_phases.py" --runs 7) | tee "$out/phases-fresh-venv.txt"
env -u PYTHONPATH $venv/bin/python -m gputui snapshot --json > "$out/snapshot.json"
env -u PYTHONPATH $venv/bin/python -m gpustat --json > "$out/gpustat.json"
