"""Record a real diagnosis as a fixture: every protocol event the probe child sends, then how
the child ended, one JSON object per line — what the tests replay into the Diagnostics tab
to picture it (tests/test_snapshots.py).

    python bench/record_diag.py OUT.jsonl [--python PATH]

Runs the diagnosis exactly as the tab does (gputui.diag.session.DiagnosisSession).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputui.diag.runner import ChildResult
from gputui.diag.session import DiagnosisSession


class RecordingSession(DiagnosisSession):
    def __init__(self, python: str) -> None:
        super().__init__(python)
        self.lines: list[dict[str, Any]] = []

    def _event(self, event: dict[str, Any]) -> None:
        self.lines.append(event)
        super()._event(event)

    def _exit(self, result: ChildResult) -> None:
        self.lines.append({"child": result.to_json()})
        super()._exit(result)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    session = RecordingSession(args.python).start()
    diagnosis = session.wait()
    Path(args.out).write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in session.lines))
    print(f"{len(session.lines)} lines; {diagnosis.status}; {diagnosis.counts()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
