"""Check a live run of issue 32's matrix (bench/device_matrix.sh with CHECK=1): each job's
verdicts in its slot's `gputui snapshot --processes --json --watch 5` documents, against the
truth of its case (a job that recovers, the loader stall, the checkpoint, has its verdict
only while it waits).  One line per job (PASS / FAIL and what gputui said), then a
summary; exit status 0 when every job passed.

    python3 bench/matrix_check.py OUT            (OUT: device_matrix.sh's output directory)

A slot directory is "N-CASE_A-CASE_B"; its pids.txt gives the ranks and launchers.  The truth
(tests/fixtures/h100-x4-matrix/README.md): the bad rank is rank 1 (rank 0 for checkpoint).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

CASES = (
    "healthy",
    "stopped",
    "exit-early",
    "killed",
    "mismatch",
    "slow-gpu",
    "slow-host",
    "loader-stall",
    "checkpoint",
)
WANT: dict[str, tuple[tuple[str, ...], str | None]] = {
    # case: (verdict kinds accepted, the rank named: "bad", or None for nobody)
    "healthy": ((), None),
    "stopped": (("culprit",), "bad"),
    "exit-early": (("exited",), "bad"),
    "killed": (("exited",), "bad"),
    "mismatch": (("mismatch",), None),
    "slow-gpu": (("straggler",), "bad"),
    "slow-host": (("straggler",), "bad"),
    "loader-stall": (("culprit",), "bad"),
    "checkpoint": (("culprit", "stalled"), "bad"),  # "writing a checkpoint?", or it cannot tell
}


def _cases(name: str) -> tuple[str, str]:
    rest = name.split("-", 1)[1]
    for a in CASES:
        if rest.startswith(a + "-") and rest[len(a) + 1 :] in CASES:
            return a, rest[len(a) + 1 :]
    raise ValueError(f"not a slot directory: {name}")


def _ok(v: dict | None, kinds: tuple[str, ...], bad: int | None) -> bool:
    if v is None:
        return False
    culprits = [c["pid"] for c in v["culprits"]]
    names_bad = bad is not None and v["kind"] != "stalled"
    return v["kind"] in kinds and culprits == ([bad] if names_bad else [])


def check(slot: Path) -> list[tuple[bool, str]]:
    """Per job: PASS when some document gives the accepted verdict naming the right rank (a
    healthy job: none ever), and no document ever names another rank."""
    docs = [json.loads(line) for line in (slot / "snapshots.jsonl").read_text().splitlines() if line.strip()]
    return check_documents(slot.name, (slot / "pids.txt").read_text(), docs)


def check_documents(name: str, pids: str, docs: list[dict]) -> list[tuple[bool, str]]:
    """`check` of a slot named `name` (its pids.txt's text) over `snapshot --json` documents
    (the live run's, or a replay's of its recording)."""
    words = pids.split()
    ranks = {"a": (int(words[2]), int(words[3])), "b": (int(words[5]), int(words[6].rstrip(";")))}
    launchers = {"a": words[8], "b": words[9]}
    out = []
    for job, case in zip(("a", "b"), _cases(name), strict=True):
        kinds, named = WANT[case]
        bad = ranks[job][0 if case == "checkpoint" else 1]
        seen = []
        for d in docs:
            j = next(
                (j for j in d.get("health", {}).get("jobs", []) if j["key"] == ["launcher", launchers[job]]),
                None,
            )
            if j is not None and j["verdict"] is not None:
                seen.append(j["verdict"])
        wrong = [v for v in seen if any(c["pid"] != bad for c in v["culprits"])]
        if not kinds:
            ok = not seen
        else:
            ok = not wrong and any(_ok(v, kinds, bad if named == "bad" else None) for v in seen)
        last = seen[-1] if seen else None
        said = "no verdict" if last is None else f"{last['kind']}: {last['text']}"
        if wrong:
            said += f" (and wrongly: {wrong[0]['kind']}: {wrong[0]['text']})"
        out.append((ok, f"{name} job {job} ({case}): {said}"))
    return out


def main() -> int:
    root = Path(sys.argv[1])
    results = [
        r for slot in sorted(p for p in root.iterdir() if (p / "pids.txt").exists()) for r in check(slot)
    ]
    for ok, line in results:
        print(("PASS " if ok else "FAIL ") + line)
    passed = sum(ok for ok, _ in results)
    print(f"{passed} of {len(results)} PASS")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
