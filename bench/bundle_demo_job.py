"""Make gputui/data/demo-job.jsonl.gz, the stuck-job demo (`gputui --demo-job`), from the real
recording tests/fixtures/h200-x2-nccl/stopped.jsonl.gz (issue 31).

    python bench/bundle_demo_job.py [--check]

Every tick line is copied byte for byte; only the header changes: the format version that
knows `settings`, and `settings` itself, the `[health]` waits the 76-second recording is
judged with (30 s, as its device run was: the defaults' 120 s are longer than the file).
The output is the same bytes each time (gzip mtime 0).  --check: exit 1 when the committed
file differs from what this makes.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gputui.telemetry.codec import dumps  # noqa: E402
from gputui.telemetry.recording import FORMAT_VERSION  # noqa: E402

SOURCE = ROOT / "tests" / "fixtures" / "h200-x2-nccl" / "stopped.jsonl.gz"
OUT = ROOT / "gputui" / "data" / "demo-job.jsonl.gz"
SETTINGS = {"health": {"stuck_seconds": 30, "spin_seconds": 30}}


def make() -> bytes:
    with gzip.open(SOURCE, "rt", encoding="utf-8") as f:
        header, *ticks = f.read().splitlines(keepends=True)
    head = json.loads(header)
    head["version"] = FORMAT_VERSION
    head["settings"] = SETTINGS
    buf = io.BytesIO()
    with gzip.GzipFile(OUT.name.removesuffix(".gz"), "wb", compresslevel=9, fileobj=buf, mtime=0) as z:
        z.write((dumps(head) + "\n").encode())
        for line in ticks:
            z.write(line.encode())
    return buf.getvalue()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    data = make()
    if a.check:
        same = OUT.is_file() and OUT.read_bytes() == data
        print(f"{OUT.relative_to(ROOT)}: {'up to date' if same else 'DIFFERS'}")
        return 0 if same else 1
    OUT.write_bytes(data)
    print(f"{OUT.relative_to(ROOT)}: {len(data)} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
