"""What one endless line of child output costs gputui (issue 13: one 100 MB line took 329 MB
of RSS and made a 105 MB `--json` report).

    python bench/bench_child_output.py [--mb 100] [--repo PATH]

Runs `gputui diag --json` (from the checkout at --repo, default this one) on this Python
with a `sitecustomize` on the child's PYTHONPATH that prints one line of MB megabytes of
"x" to stdout before the probe starts, and reports the command's peak RSS (ru_maxrss of the
child process, via os.wait4), its exit status, and the size of the JSON report it printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--repo", default=str(ROOT))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp)
        (site / "sitecustomize.py").write_text(
            "import os, sys\n"
            "if 'probe' in ' '.join(sys.argv):\n"
            f"    sys.stdout.write('x' * ({a.mb} << 20) + '\\n')\n"
            "    sys.stdout.flush()\n"
        )
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), a.repo]), PYTHONDONTWRITEBYTECODE="1")
        out = site / "report.json"
        with out.open("wb") as f:
            proc = subprocess.Popen(
                [sys.executable, "-m", "gputui", "diag", "--json", "--no-nccl", "--python", sys.executable],
                stdout=f,
                stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=a.repo,
            )
            _, status, usage = os.wait4(proc.pid, 0)
        size = out.stat().st_size
        try:
            report = json.loads(out.read_text())
            dropped = report.get("child", {}).get("dropped_output_bytes")
        except ValueError:
            dropped = "report not JSON"
        print(
            json.dumps(
                {
                    "line_mb": a.mb,
                    "repo": a.repo,
                    "exit": os.waitstatus_to_exitcode(status),
                    "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
                    "report_bytes": size,
                    "dropped_output_bytes": dropped,
                }
            )
        )


if __name__ == "__main__":
    main()
