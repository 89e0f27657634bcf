"""The input_bound hint (issue 26 item 5): a GPU working in bursts while its rank's
DataLoader workers are pegged.

The boundary cases start from the real torchrun-like job recorded on an H100
(tests/fixtures/h100-x1-job: 3 ranks on GPU 0, each with a worker child), its ticks
replayed one second apart with NVML's utilization and the ranks' `worker_cpu` replaced:
every other figure is the real GPU's.  The real recordings of bench/load/input_bound.py
(tests/fixtures/h100-input-bound) are read at the end; those tests skip until the files are
there.  The config's words are the rule: "below" is <, "at or above" is >=."""

from __future__ import annotations

import dataclasses
import re
from functools import cache
from pathlib import Path

import pytest

from gputui.telemetry.hints import HintConfig, HintEngine, input_bound_hint, pegged_workers
from gputui.telemetry.model import GpuProcess, Snapshot
from gputui.telemetry.recording import read_recording

FIXTURES = Path(__file__).parent / "fixtures"
JOB = FIXTURES / "h100-x1-job" / "recording.jsonl.gz"
REAL = FIXTURES / "h100-input-bound"
CFG = HintConfig()
PEGGED = (99.0, 98.5, 97.0, 96.5)
EPS = 0.01

SHORT = re.compile(r"input-bound: \d+ loader workers? at \d+ % CPU")


@cache
def job_ticks() -> tuple[Snapshot, ...]:
    return tuple(read_recording(JOB)[1])


def tick(k: int, util: int | None, workers: dict[int, tuple[float, ...] | None] | None = None) -> Snapshot:
    """Real tick k (cycled) at t0 + k seconds with GPU 0's utilization `util` and the
    ranks' (PIDs 458, 459, 460) children's CPU `workers` (rank PID -> worker_cpu); the
    other processes keep None."""
    ticks = job_ticks()
    s = ticks[k % len(ticks)]
    gpus = tuple(dataclasses.replace(g, gpu_util=util) if g.index == 0 else g for g in s.gpus)
    w = workers if workers is not None else {458: PEGGED}
    procs = tuple(dataclasses.replace(p, worker_cpu=w.get(p.pid)) for p in s.processes)
    return dataclasses.replace(s, seq=k + 1, timestamp=ticks[0].timestamp + k, gpus=gpus, processes=procs)


def run(
    utils: list[int | None],
    workers: dict[int, tuple[float, ...] | None] | None = None,
    cfg: HintConfig = CFG,
) -> list[set[str]]:
    """The hint kinds on GPU 0 at each tick of a run with these utilizations."""
    engine = HintEngine(cfg)
    out = []
    for k, u in enumerate(utils):
        hints = engine.update(tick(k, u, workers)).get(0, ())
        out.append({h.kind for h in hints})
    return out


def fires(utils: list[int | None], workers: dict[int, tuple[float, ...] | None] | None = None) -> bool:
    return "input_bound" in run(utils, workers)[-1]


# ---- the workers: pegged, most of the working ones, at least one ----------------------


@pytest.mark.parametrize(
    ("cpu", "want"),
    [
        ((CFG.input_bound_worker_cpu,), (1, CFG.input_bound_worker_cpu)),  # exactly at "pegged"
        ((CFG.input_bound_worker_cpu - EPS,), None),
        ((99.0, 99.0, 50.0, 50.0), (2, 99.0)),  # 2 of 4 working: exactly the share
        ((99.0, 50.0, 50.0), None),  # 1 of 3 working: under half
        # idle children (a forkserver, compile workers) are not working: 2 of 2
        ((99.0, 99.0, CFG.input_bound_working_cpu - EPS, 0.0, 0.0), (2, 99.0)),
        ((99.0, 99.0, CFG.input_bound_working_cpu, 50.0, 50.0), None),  # 2 of 5 working
        ((), None),  # no children
        (None, None),  # the children could not be read: None is never "idle"
    ],
)
def test_pegged_workers_at_their_thresholds(cpu: tuple[float, ...] | None, want: object) -> None:
    assert pegged_workers(cpu, CFG) == want


# ---- the GPU: mean utilization over the window ------------------------------------------


def test_bursty_gpu_with_pegged_workers_gives_the_hint() -> None:
    kinds = run([0, 90, 0, 60, 10] * 7)  # mean 32 %
    assert "input_bound" in kinds[-1]


def test_the_window_must_be_full_before_a_claim() -> None:
    n = int(CFG.input_bound_seconds)  # one tick a second: tick n is n seconds after the first
    kinds = run([30] * (n + 1))
    assert all("input_bound" not in k for k in kinds[:n])
    assert "input_bound" in kinds[n]


@pytest.mark.parametrize(
    ("util", "claimed"),
    [
        (round(CFG.input_bound_max_util), False),  # mean exactly at the limit: not "below"
        (round(CFG.input_bound_max_util) - 1, True),
        (round(CFG.input_bound_min_util), True),  # mean exactly at "in use"
        (0, False),  # a GPU that did nothing is idle, not waiting for data
        (100, False),  # GPU-bound
    ],
)
def test_mean_utilization_at_its_thresholds(util: int, claimed: bool) -> None:
    assert fires([util] * 40) is claimed


def test_mean_just_under_the_limit_over_mixed_ticks() -> None:
    # 31 ticks in the window: 21 at 100 %, 10 at 0 % -> 67.7 % (under 70), 22 at 100 -> 71 %
    assert fires([100] * 21 + [0] * 10)
    assert not fires([100] * 22 + [0] * 9)


def test_a_tick_without_utilization_restarts_the_window() -> None:
    """None is not 0: a tick whose utilization is unknown neither lowers the mean nor counts
    as seconds of evidence."""
    n = int(CFG.input_bound_seconds)
    kinds = run([30] * (n + 1) + [None] + [30] * n + [30])
    assert "input_bound" in kinds[n]
    assert "input_bound" not in kinds[n + 1]
    assert all("input_bound" not in k for k in kinds[n + 1 : 2 * n + 1])
    assert "input_bound" in kinds[-1]


# ---- the evidence that is missing -------------------------------------------------------


def test_children_unreadable_gives_no_claim() -> None:
    assert not fires([30] * 40, {458: None, 459: None, 460: None})


def test_idle_workers_give_no_claim() -> None:
    assert not fires([30] * 40, {458: (3.0, 2.0, 0.0, 0.0)})


def test_no_children_give_no_claim() -> None:
    assert not fires([30] * 40, {458: (), 459: (), 460: ()})


def test_an_older_recording_without_worker_cpu_gives_no_claim() -> None:
    engine = HintEngine()
    for k, old in enumerate(job_ticks() * 5):
        s = dataclasses.replace(old, timestamp=job_ticks()[0].timestamp + k)
        assert all(p.worker_cpu is None for p in s.processes)
        assert "input_bound" not in {h.kind for h in engine.update(s).get(0, ())}


def test_disabled_hints_give_no_claim() -> None:
    assert run([30] * 40, cfg=dataclasses.replace(CFG, enabled=False))[-1] == set()


# ---- what it says -----------------------------------------------------------------------


def hint_at_end(workers: dict[int, tuple[float, ...] | None], procs: tuple[GpuProcess, ...] = ()):
    engine = HintEngine()
    hints = ()
    for k in range(40):
        s = tick(k, 30, workers)
        if procs:
            s = dataclasses.replace(s, processes=s.processes + procs)
        hints = engine.update(s).get(0, ())
    (hint,) = [h for h in hints if h.kind == "input_bound"]
    return hint


def test_the_words_are_fixed_and_the_figures_counted() -> None:
    hostile = GpuProcess(
        gpu_index=0,
        pid=999,
        name="\x1b[2J evil",
        cmdline=("--rank", "7", "\u202e"),
        worker_cpu=(99.0,),
    )
    hint = hint_at_end({458: PEGGED, 459: (95.0, 1.0), 460: None}, (hostile,))
    assert SHORT.fullmatch(hint.short), hint.short
    assert hint.short == "input-bound: 6 loader workers at 98 % CPU"  # 4 + 1 + 1 more rank; mean 97.5
    assert "its 3 processes" in hint.evidence and "utilization 30%" in hint.evidence
    for text in (hint.short, hint.evidence, *hint.remedies):
        assert "evil" not in text and "\x1b" not in text and "\u202e" not in text
    assert any("num_workers" in r for r in hint.remedies)
    assert any("pin_memory" in r for r in hint.remedies)
    assert any("prefetch" in r for r in hint.remedies)
    assert any("storage" in r for r in hint.remedies)


def test_one_worker_is_singular_and_a_process_on_two_rows_counts_once() -> None:
    twice = GpuProcess(gpu_index=0, pid=458, type="G", worker_cpu=PEGGED)  # C and G rows
    hint = hint_at_end({458: (99.0,)}, (dataclasses.replace(twice, worker_cpu=(99.0,)),))
    assert hint.short == "input-bound: 1 loader worker at 99 % CPU"


def test_input_bound_hint_needs_the_whole_window() -> None:
    cfg = CFG
    assert input_bound_hint(0, 30.0, cfg.input_bound_seconds, [(4, 99.0)], cfg) is not None
    assert input_bound_hint(0, 30.0, cfg.input_bound_seconds - EPS, [(4, 99.0)], cfg) is None
    assert input_bound_hint(0, None, 100.0, [(4, 99.0)], cfg) is None
    assert input_bound_hint(0, 30.0, 100.0, [], cfg) is None


def test_a_replay_that_loops_starts_the_window_again() -> None:
    engine = HintEngine()
    for k in range(40):
        engine.update(tick(k, 30))
    assert "input_bound" in {h.kind for h in engine.current.get(0, ())}
    engine.update(tick(0, 30))  # back to the first tick
    assert "input_bound" not in {h.kind for h in engine.current.get(0, ())}


def test_the_card_and_the_detail_view_show_it() -> None:
    from gputui.ui.cards import activity_items
    from gputui.ui.detail.lines import activity_lines

    engine = HintEngine()
    for k in range(40):
        s = tick(k, 30)
        hints = engine.update(s).get(0, ())
    assert hints[0].kind == "input_bound"  # first: the card shows one hint
    items, _ = activity_items(s.gpus[0].gpm, hints)
    assert "".join(t for t, _ in items[-1]) == "» input-bound: 4 loader workers at 98 % CPU"
    text = "\n".join("".join(t for t, _ in line) for line in activity_lines(s.gpus[0], hints, 200))
    assert "input-bound: 4 loader workers at 98 % CPU" in text
    assert "utilization 30% on average over the last 30 s" in text
    assert "num_workers" in text and "pin_memory" in text


def test_the_exporter_publishes_it() -> None:
    from gputui.export.prometheus import build_families

    engine = HintEngine()
    for k in range(40):
        s = tick(k, 30)
        hints = engine.update(s)
    info = read_recording(JOB)[0].machine
    fams = {f.name: f for f in build_families(info, s, hints=hints)}
    got = [x.labels["hint"] for x in fams["gputui_gpu_efficiency_hint"].samples]
    assert "input_bound" in got


# ---- the real recordings (bench/load/input_bound.py on an H100) --------------------------


def real(name: str) -> list[Snapshot]:
    path = REAL / name
    if not path.exists():
        pytest.skip(
            f"{path.relative_to(FIXTURES.parent.parent)} not recorded yet (bench/load/input_bound.py)"
        )
    return list(read_recording(path)[1])


def test_real_input_bound_run_gives_the_hint() -> None:
    engine = HintEngine()
    seen = [{h.kind: h for h in engine.update(s).get(0, ())} for s in real("input-bound.jsonl.gz")]
    last = seen[-1]
    assert "input_bound" in last
    assert SHORT.fullmatch(last["input_bound"].short)


def test_real_gpu_bound_run_never_gives_it() -> None:
    engine = HintEngine()
    for s in real("gpu-bound.jsonl.gz"):
        assert "input_bound" not in {h.kind for h in engine.update(s).get(0, ())}
