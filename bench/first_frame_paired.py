"""Round-by-round differences between two versions in a `device_first_frame_variants.sh` run.

    python bench/first_frame_paired.py AB.jsonl BEFORE AFTER

The run interleaves every program once per round, so the round is the unit: each round's
"after" minus its "before" takes out what the lease and the moment add to both.  Prints, for
the first byte, "complete" and "settled": the median of those differences, how many rounds
"after" was the faster, and each version's median and count at or under 0.5 s.  Last, each
version's median of "settled" minus its own first byte: the part after the terminal is set
up (mount, layout, paint), which the start-up's run-to-run spread does not reach.
"""

from __future__ import annotations

import json
import statistics
import sys


def main(path: str, before: str, after: str) -> int:
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.startswith("{")]
    names = {f"gputui {before}": "before", f"gputui {after}": "after"}
    rounds: list[dict[str, dict]] = []
    current: dict[str, dict] = {}
    for row in rows:
        which = names.get(row["what"])
        if which is None:
            continue
        if which in current:  # a new round starts
            rounds.append(current)
            current = {}
        current[which] = row
    rounds.append(current)
    pairs = [r for r in rounds if "before" in r and "after" in r]
    print(f"{len(pairs)} rounds with both {before} (before) and {after} (after)")
    for key in ("first_byte_s", "complete_s", "settle_s"):
        both = [(r["before"].get(key), r["after"].get(key)) for r in pairs]
        both = [(b, a) for b, a in both if b is not None and a is not None]
        if not both:
            continue
        diffs = [a - b for b, a in both]
        faster = sum(1 for d in diffs if d < 0)
        med_b = statistics.median(b for b, _ in both)
        med_a = statistics.median(a for _, a in both)
        under_b = sum(1 for b, _ in both if b <= 0.5)
        under_a = sum(1 for _, a in both if a <= 0.5)
        print(
            f"{key:13s} before {med_b:.3f} s ({under_b}/{len(both)} <= 0.5)  after {med_a:.3f} s "
            f"({under_a}/{len(both)})  paired median {1000 * statistics.median(diffs):+.1f} ms, "
            f"after faster in {faster}/{len(both)}"
        )
    for name, which in (("before", before), ("after", after)):
        spans = [r[name]["settle_s"] - r[name]["first_byte_s"] for r in pairs]
        print(f"{which}: settled minus first byte, median {1000 * statistics.median(spans):.1f} ms")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
