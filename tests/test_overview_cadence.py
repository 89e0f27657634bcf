"""What the Overview redraws each tick (issue 33 item 2: bytes within 1.2x nvtop's at 4 GPUs),
on the real 4x H100 recording (tests/fixtures/h100-x4-matrix/1-healthy-stopped: four busy
GPUs whose power moves a few watts every second):

- the cards' history charts move at their own cadence: a column is CHART_STEP_S of data (at
  1 Hz, the mean of two ticks), drawn once complete, so a chart scrolls once every two ticks
  and a drawn column never changes;
- the power and clock readings (the figure and its bar) move when the value moves by
  HOLD_FRACTION of the bar's scale (7 W of a 700 W limit), not on the jitter below it; what
  is shown is never further than that from the latest sample."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import math

import pytest
from conftest import FIXTURES, replay_app, run_to_tick

from gputui.telemetry.history import History
from gputui.telemetry.recording import read_recording
from gputui.ui.overview import cadence
from gputui.ui.overview.widgets import GpuBoard

X4 = FIXTURES / "h100-x4-matrix" / "1-healthy-stopped" / "recording.jsonl.gz"


@pytest.fixture(scope="module")
def x4():  # type: ignore[no-untyped-def]
    return read_recording(X4)


def fed(ticks, n: int) -> History:  # type: ignore[no-untyped-def]
    history = History()
    for snap in ticks[:n]:
        history.append(snap)
    return history


def same(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(
        (math.isnan(x) and math.isnan(y)) or x == y for x, y in zip(a, b, strict=True)
    )


def test_a_column_is_the_mean_of_its_ticks_aligned_on_the_tick_count(x4) -> None:  # type: ignore[no-untyped-def]
    _, ticks = x4
    power = [t.gpus[0].power_draw for t in ticks]
    for n in (9, 10):  # an odd count: its newest tick is not a column yet
        history = fed(ticks, n)
        got = history.columns(0, "power_draw", 3, 2)
        last = n - n % 2
        want = [(power[k] + power[k + 1]) / 2 for k in range(last - 6, last, 2)]
        assert got == pytest.approx(want)
    assert same(history.columns(0, "power_draw", 50, 2)[:1], [(power[0] + power[1]) / 2])
    assert history.columns(0, "power_draw", 4, 1) == history.series(0, "power_draw", 4)
    assert history.columns(7, "power_draw", 4, 2) == []  # no such GPU


def test_a_drawn_column_never_changes_and_the_chart_moves_every_second_tick(x4) -> None:  # type: ignore[no-untyped-def]
    _, ticks = x4
    charts = [fed(ticks, n).columns(1, "power_draw", 40, 2) for n in range(2, 30)]
    moved = [not same(a, b) for a, b in itertools.pairwise(charts)]
    assert moved == [k % 2 == 1 for k in range(len(moved))]  # 2 -> 3 no, 3 -> 4 yes, ...
    for a, b in itertools.pairwise(charts):  # what was drawn stays (shifted left once full)
        if not same(a, b):
            assert same(b[:-1], a[1:] if len(a) == len(b) else a)


def test_a_column_without_a_value_is_blank_not_zero() -> None:
    from gputui.telemetry.model import GpuSample, Snapshot

    history = History()
    for k, power in enumerate([None, None, 100.0, None]):
        history.append(Snapshot(seq=k + 1, timestamp=float(k), gpus=(GpuSample(index=0, power_draw=power),)))
    first, second = history.columns(0, "power_draw", 2, 2)
    assert math.isnan(first) and second == 100.0


@pytest.mark.parametrize(("spacing", "per"), [(1.0, 2), (0.5, 4), (0.25, 8), (2.0, 1), (5.0, 1), (0.75, 3)])
def test_a_column_is_two_seconds_of_data_whatever_the_refresh(spacing: float, per: int) -> None:
    from gputui.telemetry.model import Snapshot

    history = History()
    for k in range(12):
        history.append(Snapshot(seq=k + 1, timestamp=1000.0 + k * spacing))
    assert cadence.chart_ticks(history) == per
    assert cadence.chart_ticks(History()) == 1


def test_a_reading_moves_past_the_jitter_and_stays_near_the_truth(x4) -> None:  # type: ignore[no-untyped-def]
    """Over the whole recording, every GPU: the shown power and SM clock are always within
    HOLD_FRACTION of their scale of the sample; they change only when the sample moved that
    far from what was shown; and they change on far fewer ticks than the samples do."""
    header, ticks = x4
    devices = header.machine.devices
    held = cadence.Held()
    shown_before: dict[tuple[int, str], float] = {}
    changes = {"shown": 0, "sampled": 0}
    for before, snap in zip([None, *ticks], ticks, strict=False):
        shown = held.apply(header.machine, snap)
        for g, s in zip(snap.gpus, shown.gpus, strict=True):
            dev = devices[g.index]
            for field, scale in (
                ("power_draw", g.power_limit or dev.power_limit),
                ("sm_clock", dev.max_sm_clock),
            ):
                value, display = getattr(g, field), getattr(s, field)
                assert abs(display - value) < cadence.HOLD_FRACTION * scale, (g.index, field)
                key = (g.index, field)
                if key in shown_before and display != shown_before[key]:
                    changes["shown"] += 1
                    assert display == value  # moved: to the sample itself
                if key in shown_before and display == shown_before[key] and value != display:
                    assert abs(value - display) < cadence.HOLD_FRACTION * scale
                if before is not None and getattr(before.gpus[g.index], field) != value:
                    changes["sampled"] += 1
                shown_before[key] = display
        assert shown.gpus[0].gpu_util == snap.gpus[0].gpu_util  # the rest as sampled
    assert changes["shown"] < changes["sampled"] / 2


def test_a_quiet_pcie_link_holds_its_figure_and_traffic_shows_at_once() -> None:
    """A GPU without work reads 0.4-0.7 MB/s each way over PCIe (NVML's 20 ms sample, every
    2 s: the driver's own traffic), a new figure each pass: bytes at 4 GPUs for nothing. The
    card holds what it shows while the sample stays within PCIE_QUIET (1 MB/s, of a link of
    ~64 GB/s) of it; real traffic moves it at once. Real 4x H100 recording: GPU 1 idle
    beside the mismatched job (409-678 KB/s), GPUs 0, 2 and 3 carrying it."""
    header, ticks = read_recording(FIXTURES / "h100-x4-matrix" / "3-mismatch-slow-gpu" / "recording.jsonl.gz")
    held = cadence.Held()
    shown = [held.apply(header.machine, snap) for snap in ticks]
    for field in ("pcie_rx", "pcie_tx"):
        cards = [getattr(s.gpus[1], field) for s in shown]
        sampled = [getattr(t.gpus[1], field) for t in ticks]
        quiet = 9  # from tick 9 on GPU 1 is idle (before: 10-26 MB/s while its job started)
        assert all(v < 700_000 for v in sampled[quiet:])
        assert len(set(sampled[quiet:])) > 15  # the samples jitter (a new figure each pass)...
        assert len(set(cards[quiet:])) == 1  # ...the card does not
        assert len(set(cards[1:quiet])) >= 2  # the start's real traffic moved it
        for value, display in zip(sampled, cards, strict=True):
            if value is None:
                assert display is None  # None is not 0, nor the last figure
            else:
                assert abs(display - value) < cadence.PCIE_QUIET
    moved = dataclasses.replace(
        ticks[-1],
        gpus=tuple(
            dataclasses.replace(g, pcie_rx=(g.pcie_rx or 0) + 2 * cadence.PCIE_QUIET) for g in ticks[-1].gpus
        ),
    )
    after = held.apply(header.machine, moved)
    assert [g.pcie_rx for g in after.gpus] == [g.pcie_rx for g in moved.gpus]  # traffic: at once


def test_none_is_shown_as_none_and_the_next_value_as_it_is(x4) -> None:  # type: ignore[no-untyped-def]
    import dataclasses

    header, ticks = x4
    held = cadence.Held()
    held.apply(header.machine, ticks[10])
    gone = dataclasses.replace(
        ticks[11], gpus=tuple(dataclasses.replace(g, power_draw=None) for g in ticks[11].gpus)
    )
    assert [g.power_draw for g in held.apply(header.machine, gone).gpus] == [None] * 4
    back = held.apply(header.machine, ticks[12])
    assert [g.power_draw for g in back.gpus] == [g.power_draw for g in ticks[12].gpus]


def test_the_cards_redraw_their_charts_every_second_tick_in_the_app() -> None:
    """The replay stepped tick by tick (the app's own keys while paused): the card rows of
    the charts change on every second tick only; the power figure on the card stays within
    HOLD_FRACTION of the recorded one."""

    async def go():  # type: ignore[no-untyped-def]
        app = replay_app(X4)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 4)
            board = app.query_one(GpuBoard)
            frames = []
            for tick in range(5, 13):
                await run_to_tick(pilot, tick)
                frames.append((board.plain_lines(), app.snapshot))
            return frames

    frames = asyncio.run(go())
    chart_rows = range(6, 15)  # the first row of cards: util, mem and power charts, 3 rows each
    moved = [any(a[r] != b[r] for r in chart_rows) for (a, _), (b, _) in itertools.pairwise(frames)]
    assert moved == [k % 2 == 1 for k in range(len(moved))] or moved == [
        k % 2 == 0 for k in range(len(moved))
    ]
    for lines, snap in frames:
        watts = int(lines[2].split("/")[0].split()[-1])  # 'PWR  ███  665/700 W' of GPU 0
        assert abs(watts - snap.gpus[0].power_draw) <= cadence.HOLD_FRACTION * 700 + 0.5


def test_a_stale_tick_drawn_late_never_moves_what_later_ticks_show() -> None:
    """A lagging screen may draw a tick the hub published long before (it has left the
    ticks kept): held against what is shown, it must not move the held readings, or what
    every later tick shows would depend on which ticks the screen had time to draw (the
    Overview's selected-card snapshot differed one run in five)."""
    from conftest import H200_X2

    from gputui.telemetry.recording import read_recording
    from gputui.ui.overview.cadence import Held

    header, ticks = read_recording(H200_X2)
    info = header.machine
    plain, drawn = Held(), Held()
    out_plain, out_drawn = [], []
    for k, snap in enumerate(ticks[:80]):
        plain.observe(info, snap)
        drawn.observe(info, snap)
        if k >= 20:  # the screen draws a tick from 15 ticks back, long out of the kept ones
            drawn.shown(info, ticks[k - 15])
        out_plain.append(plain.shown(info, snap).gpus)
        out_drawn.append(drawn.shown(info, snap).gpus)
    assert out_drawn == out_plain
