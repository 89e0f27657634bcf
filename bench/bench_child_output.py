"""What one endless line of child output costs gputui (issue 13: one 100 MB line took 329 MB
of RSS and made a 105 MB `--json` report).

    python bench/bench_child_output.py [--mb 100] [--repo PATH]

Runs a diagnosis (gputui's DiagnosisSession from the checkout at --repo, default this one,
as `gputui diag --json` does) of this Python, with a `sitecustomize` on the child's
PYTHONPATH that prints one line of MB megabytes of "x" before the probe starts; reports the
gputui side's peak RSS (RUSAGE_SELF: the probe building the line is not counted), the size
of the JSON report, and the bytes the runner says it dropped.
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
            "import sys\n"
            "if 'probe' in ' '.join(sys.argv):\n"
            f"    sys.stdout.write('x' * ({a.mb} << 20) + '\\n')\n"
            "    sys.stdout.flush()\n"
        )
        # gputui's side in a process of its own, measured with RUSAGE_SELF (the probe, which
        # builds the line, is not counted)
        code = (
            "import json, resource, sys\n"
            "from gputui.diag.session import DiagnosisSession\n"
            "from gputui.diag.verdicts import report_json\n"
            f"s = DiagnosisSession(sys.executable, env_overrides={{'PYTHONPATH': {str(site)!r}}},"
            " probe_args=['--no-nccl'])\n"
            "d = s.start().wait(600)\n"
            "report = report_json(d.to_json())\n"
            "print(json.dumps({'peak_rss_mb': round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),"
            " 'report_bytes': len(report.encode()), 'dropped_output_bytes': d.child.get('dropped_output_bytes'),"
            " 'child_status': d.child.get('returncode')}))\n"
        )
        env = dict(os.environ, PYTHONPATH=a.repo, PYTHONDONTWRITEBYTECODE="1")
        out = subprocess.run(
            [sys.executable, "-c", code], check=False, env=env, cwd=a.repo, capture_output=True, text=True
        )
        row = {"line_mb": a.mb, "repo": a.repo}
        row.update(
            json.loads(out.stdout.strip().splitlines()[-1])
            if out.returncode == 0
            else {"error": out.stderr[-500:]}
        )
        print(json.dumps(row))


if __name__ == "__main__":
    main()
