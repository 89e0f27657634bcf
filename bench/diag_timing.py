"""Helper of device_diag.sh: versions (torch, nvidia-smi) vs what gputui diag reports, and
wall times of the diagnosis against the import-torch-and-init-CUDA floor."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

out, py = Path(sys.argv[1]), sys.argv[2]
FLOOR = "import torch; torch.zeros(1, device='cuda')"
TORCH = (
    "import torch, json; print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, "
    "'cudnn': torch.backends.cudnn.version(), 'nccl': '.'.join(map(str, torch.cuda.nccl.version())), "
    "'count': torch.cuda.device_count(), "
    "'names': [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]}))"
)


def timed(cmd: list[str], stdout_path: Path | None = None) -> tuple[float, int]:
    t0 = time.perf_counter()
    with open(stdout_path, "w") if stdout_path else open("/dev/null", "w") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.DEVNULL, check=False).returncode
    return time.perf_counter() - t0, rc


torch_facts = json.loads(subprocess.run([py, "-c", TORCH], capture_output=True, text=True, check=True).stdout)
(out / "torch-versions.json").write_text(json.dumps(torch_facts, indent=1))
floor = [timed([py, "-c", FLOOR])[0] for _ in range(3)]
diag = []
for k in range(3):
    seconds, rc = timed([py, "-m", "gputui", "diag", "--python", py, "--json"], out / f"diag-{k + 1}.json")
    diag.append((seconds, rc))
timed([py, "-m", "gputui", "diag", "--python", py, "--markdown"], out / "diag.md")
report = json.loads((out / "diag-1.json").read_text())
checks = {c["id"]: c for c in report["checks"]}
smi = (out / "nvidia-smi.txt").read_text()
m_driver = re.search(r"Driver Version:\s*([\d.]+)", smi)
m_cuda = re.search(r"CUDA Version:\s*([\d.]+)", smi)
nvml = checks.get("driver.nvml", {}).get("evidence", {})
build = checks.get("torch.build", {}).get("evidence", {})
nccl = checks.get("compute.nccl", {}).get("evidence", {})
rows = [
    ("driver", m_driver.group(1) if m_driver else None, nvml.get("driver_version")),
    ("CUDA (driver)", m_cuda.group(1) if m_cuda else None, nvml.get("cuda_driver_version")),
    ("GPU count", torch_facts["count"], nvml.get("device_count")),
    ("torch", torch_facts["torch"], build.get("version")),
    ("torch CUDA", torch_facts["cuda"], build.get("cuda")),
    ("cuDNN", torch_facts["cudnn"], build.get("cudnn_compiled")),
    ("NCCL", torch_facts["nccl"], build.get("nccl")),
]
print("versions: reference vs gputui diag")
for name, ref, got in rows:
    print(f"  {name:14} {ref!s:>16} {got!s:>16}  {'same' if str(ref) == str(got) else 'DIFFERENT'}")
print(f"\nverdict: {report['status']} (exit {diag[0][1]}); {report['counts']}")
for c in report["checks"]:
    if c["status"] != "PASS":
        print(f"  {c['status']} {c['id']}: {c['summary']}")
print(f"  NCCL check: {checks.get('compute.nccl', {}).get('status')} {nccl.get('world_size')} ranks")
print("\nwall time (s), 3 runs each:")
print('  floor `python -c "' + FLOOR + '"`: ' + ", ".join(f"{x:.2f}" for x in floor))
print("  gputui diag --json:                    " + ", ".join(f"{x:.2f}" for x, _ in diag))
best_floor, best_diag = min(floor), min(x for x, _ in diag)
print(f"  best diag / best floor = {best_diag / best_floor:.2f} (target <= 1.5)")
(out / "summary.json").write_text(
    json.dumps(
        {"floor": floor, "diag": [x for x, _ in diag], "exit": [rc for _, rc in diag], "versions": rows},
        indent=1,
    )
)
