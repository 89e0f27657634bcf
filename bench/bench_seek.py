"""What judging a replay at any tick costs (issue 31: a verdict is a function of the recording
up to the tick, whatever was stepped or skipped).

    python bench/bench_seek.py [--hours 1] [--source F] [--seeks 50]

Builds a long recording in a temporary directory by playing a real one (default: the 2x H200
NCCL job with a stopped rank, tests/fixtures/h200-x2-nccl) over and over, each pass shifted in
time by its length (a DERIVED file for timing only: the judging cost depends on the number of
ticks, GPUs and processes, not on what they show).  Then, as `gputui --start N` or `snapshot
--tick N` does, through a Hub that follows the replay with the default engines:

  first      the first seek to the last tick: every tick decoded and judged once
  again      seeks to random ticks afterwards (median and worst): a checkpoint, then at most
             `CHECKPOINT_EVERY` ticks
  step back  one tick back from random ticks
  in order   one tick played in order (no catch-up): the cost of keeping checkpoints

CPU time of this process; prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gputui.telemetry.alerts import AlertEngine  # noqa: E402
from gputui.telemetry.health import HealthEngine  # noqa: E402
from gputui.telemetry.hints import HintEngine  # noqa: E402
from gputui.telemetry.hub import Hub  # noqa: E402
from gputui.telemetry.recording import RecordingWriter, ReplaySource, read_recording  # noqa: E402
from gputui.telemetry.replay_judge import CHECKPOINT_EVERY  # noqa: E402

DEFAULT = ROOT / "tests" / "fixtures" / "h200-x2-nccl" / "stopped.jsonl.gz"


def build(src: Path, hours: float, out: Path) -> int:
    header, ticks = read_recording(src)
    span = ticks[-1].timestamp - ticks[0].timestamp + header.interval
    n = int(hours * 3600 / header.interval)
    derived = {"from": src.name, "how": "the ticks repeated, each pass shifted by its length (timing only)"}
    with RecordingWriter(out, header.machine, header.interval, derived=derived) as w:
        for k in range(n):
            t = ticks[k % len(ticks)]
            shift = (k // len(ticks)) * span
            procs = tuple(
                replace(p, create_time=None if p.create_time is None else p.create_time + shift)
                for p in t.processes
            )
            w.write(replace(t, seq=k, timestamp=t.timestamp + shift, processes=procs))
    return n


def hub_for(source: ReplaySource) -> Hub:
    hub = Hub(alerts=AlertEngine(), hints=HintEngine(), health=HealthEngine())
    hub.set_info(source.open())
    hub.follow(source)
    return hub


def seek(hub: Hub, source: ReplaySource, tick: int) -> float:
    t0 = time.process_time()
    source.seek(tick - 2)
    hub.publish(source.sample())
    return time.process_time() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--source", type=Path, default=DEFAULT)
    ap.add_argument("--seeks", type=int, default=50)
    a = ap.parse_args()
    rng = random.Random(31)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "long.jsonl.gz"
        n = build(a.source, a.hours, path)
        source = ReplaySource(path, loop=False)
        hub = hub_for(source)
        first = seek(hub, source, n)
        again = [seek(hub, source, rng.randrange(1, n + 1)) for _ in range(a.seeks)]
        back = []
        for _ in range(a.seeks):
            tick = rng.randrange(2, n + 1)
            seek(hub, source, tick)
            back.append(seek(hub, source, tick - 1))
        source.seek(-1)
        hub.publish(source.sample())
        t0 = time.process_time()
        played = min(n - 1, 2000)
        for _ in range(played):
            hub.publish(source.sample())
        in_order = (time.process_time() - t0) / played
        assert hub.judge is not None
        print(
            json.dumps(
                {
                    "source": a.source.name,
                    "ticks": n,
                    "gpus": len(source.header.machine.devices),
                    "checkpoint_every": hub.judge.every,
                    "checkpoints": hub.judge.checkpoints,
                    "default_every": CHECKPOINT_EVERY,
                    "first_seek_s": round(first, 3),
                    "seek_median_ms": round(1e3 * statistics.median(again), 2),
                    "seek_worst_ms": round(1e3 * max(again), 2),
                    "step_back_median_ms": round(1e3 * statistics.median(back), 2),
                    "step_back_worst_ms": round(1e3 * max(back), 2),
                    "tick_in_order_ms": round(1e3 * in_order, 3),
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
