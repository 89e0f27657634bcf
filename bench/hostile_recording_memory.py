"""Peak memory of opening a small gzip that holds one huge line (a decompression bomb for
`gputui --replay`): build the file, open it with ReplaySource in a fresh interpreter, and
print the compressed size, the outcome and the peak RSS of that interpreter.

    python bench/hostile_recording_memory.py [--mib 300]

Run it with PYTHONPATH pointing at another checkout to measure that code instead."""

from __future__ import annotations

import argparse
import gzip
import subprocess
import sys
import tempfile
from pathlib import Path

HEADER = Path(__file__).parent.parent / "tests" / "fixtures" / "h200-x2" / "recording.jsonl.gz"

PROBE = """
import resource, sys
from gputui.telemetry.recording import RecordingError, ReplaySource
try:
    ReplaySource(sys.argv[1])
    outcome = "opened"
except RecordingError as exc:
    outcome = str(exc).split(": ", 1)[1]
except BaseException as exc:
    outcome = f"{type(exc).__name__}: {exc}"[:100]
print(outcome)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=300, help="length of the huge line (MiB)")
    args = parser.parse_args()
    with gzip.open(HEADER, "rt", encoding="utf-8") as f:
        header = f.readline()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bomb.jsonl.gz"
        with gzip.open(path, "wb", compresslevel=9) as out:
            out.write(header.encode() + b'{"seq": 1, "note": "')
            chunk = b"a" * 2**20
            for _ in range(args.mib):
                out.write(chunk)
            out.write(b'"}\n')
        size = path.stat().st_size
        r = subprocess.run(
            [sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, check=False, timeout=600
        )
    lines = r.stdout.splitlines()
    if r.returncode != 0 or len(lines) != 2:
        print(f"probe failed (status {r.returncode}): {r.stderr[-400:]}")
        return 1
    print(f"line of {args.mib} MiB in a gzip of {size / 1024:.0f} KiB: {lines[0]}; peak RSS {lines[1]} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
