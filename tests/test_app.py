"""The app driven like a user would: real key presses against replays of real GPUs."""

from __future__ import annotations

import asyncio
import re

import pytest
from conftest import H200_X1, H200_X2, replay_app, run_to_tick, screen_lines, wait_for

from gputui.telemetry.poller import MAX_INTERVAL
from gputui.telemetry.recording import read_recording
from gputui.ui.overview.cadence import HOLD_FRACTION
from gputui.ui.render import fmt_gib, fmt_pct


def run(coro):
    return asyncio.run(coro)


def test_cards_show_every_gpu_with_the_recorded_values():
    header, ticks = read_recording(H200_X2)
    tick = 60  # both GPUs training
    snap = ticks[tick - 1]

    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, tick)
            text = "\n".join(screen_lines(app))
            # the power and SM clock readings move past their jitter only (ui/overview/cadence)
            watts = [int(w) for w in re.findall(r"PWR [^0-9]*?(\d+)/\d+ W", text)]
            mhz = [int(c) for c in re.findall(r"SMCLK[^0-9]*?(\d+)/\d+ MHz", text)]
            for dev, g in zip(header.machine.devices, snap.gpus, strict=True):
                assert f"{dev.index} NVIDIA H200" in text
                for expected in (
                    fmt_pct(g.gpu_util),
                    fmt_gib(g.mem_used, dev.memory_total),
                    f"/{g.power_limit:.0f} W",
                    f"/{dev.max_sm_clock} MHz",
                    f"{g.temperature}°C",
                ):
                    assert expected in text, expected
                assert abs(watts[dev.index] - g.power_draw) <= HOLD_FRACTION * g.power_limit + 0.5
                assert abs(mhz[dev.index] - g.sm_clock) < HOLD_FRACTION * dev.max_sm_clock
            assert "clocks: SW power cap" in text  # the real reason NVML gave under load
            assert "2 processes" in text  # GPU 1: the DDP rank and the idle holder
            assert "recorded 2026-11-21" in text and "UTC" in text
            assert f"{tick}/{len(ticks)}" in text

    run(go())


def test_interval_keys_change_the_cadence():
    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.snapshot is not None)
            assert app.poller.interval == MAX_INTERVAL == app.interval
            app.poller.set_interval(1.0)
            app.interval = 1.0
            await pilot.press("plus")
            assert app.poller.interval == 0.5
            await pilot.press("plus")
            assert app.poller.interval == 0.25
            await pilot.press("plus")  # the shortest: stays
            assert app.poller.interval == 0.25
            await pilot.press("minus", "minus", "minus")
            assert app.poller.interval == 2.0
            assert "every 2s" in screen_lines(app)[0]
            # and the poller really ticks at the new cadence: at 0.25 s several ticks arrive
            await pilot.press("plus", "plus", "plus")
            assert app.poller.interval == 0.25
            start = app.poller.ticks
            await wait_for(pilot, lambda: app.poller.ticks >= start + 3, timeout=10)

    run(go())


def test_pause_freezes_and_step_advances_one_tick():
    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(120, 40)) as pilot:
            await run_to_tick(pilot, 5)
            app.poller.set_interval(0.1)
            await pilot.press("space")
            assert app.poller.paused
            assert "PAUSED" in screen_lines(app)[0]
            await pilot.pause(0.3)
            pos = app.query_one("HeaderBar").position[0]
            await pilot.pause(0.3)
            assert app.query_one("HeaderBar").position[0] == pos  # frozen
            await pilot.press("full_stop")
            await wait_for(pilot, lambda: app.query_one("HeaderBar").position[0] == pos + 1)
            await pilot.press("comma")  # back one recorded tick
            await wait_for(pilot, lambda: app.query_one("HeaderBar").position[0] == pos)
            await pilot.press("space")
            assert not app.poller.paused
            await wait_for(pilot, lambda: app.query_one("HeaderBar").position[0] > pos)

    run(go())


def test_replay_loops_at_the_end():
    _, ticks = read_recording(H200_X1)

    async def go():
        app = replay_app(H200_X1)
        async with app.run_test(size=(120, 40)) as pilot:
            await run_to_tick(pilot, len(ticks))
            app.poller.step(1)
            await wait_for(pilot, lambda: app.query_one("HeaderBar").position[0] == 1)
            assert app.source.loops == 1

    run(go())


def test_help_lists_every_key():
    async def go():
        from gputui.ui.help import HelpScreen, key_names, own_bindings

        app = replay_app(H200_X2)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("question_mark")
            await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
            # the keys that work everywhere (after the Overview tab's own, issue 31) and
            # every tab's keys, in the (scrolling) dialog; in a replay the signal and mark
            # keys are left out (nothing to signal: docs/keys.md)
            everything = app.screen.help_text()
            assert "ctrl+l" in everything  # (the redraw key, from the base class of gputui's apps)
            for binding in own_bindings(app):
                assert f"{key_names(binding)}  {binding.tooltip or binding.description}" in everything
            for pane in app.PANES:
                for heading, bindings in pane.help_sections():
                    assert heading in everything
                    for binding in bindings:
                        row = f"{key_names(binding)}  {binding.tooltip or binding.description}"
                        if binding.action.split("(")[0] in ("signal", "mark"):
                            assert row not in everything
                        else:
                            assert row in everything
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen))

    run(go())


@pytest.mark.parametrize("live", [False, True], ids=["replay", "signals-possible"])
def test_every_key_the_help_lists_says_what_it_does(live, monkeypatch):
    """In a replay the help listed `T / K / I / m` and `T / K / I` with no words at all
    (the bindings that say why nothing is signalled had no description; review of issue
    31): every row names what its key does."""

    from gputui.ui.processes.process_list import ProcessList

    if live:  # as live data would: the signal keys offered instead
        monkeypatch.setattr(ProcessList, "signals_possible", property(lambda self: True))

    async def go():
        from gputui.ui.help import HelpScreen

        app = replay_app(H200_X2)
        async with app.run_test(size=(120, 40)) as pilot:
            await run_to_tick(pilot, 3)
            await pilot.press("2")
            await pilot.press("question_mark")
            await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
            empty = [(h, keys) for h, rows in app.screen.sections for keys, what in rows if not what.strip()]
            assert not empty, empty
            text = app.screen.help_text()
            assert "T K I /" not in text  # (the Overview's tab key spelt them as one word with /)

    run(go())


def test_layout_key_cycles_cards_and_compact():
    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 40)
            board = app.query_one("GpuBoard")
            assert not board.plan.compact
            await pilot.press("c")  # cards
            assert board.mode == "cards" and not board.plan.compact
            await pilot.press("c")  # compact
            assert board.mode == "compact" and board.plan.compact
            lines = [ln for ln in screen_lines(app) if ln.lstrip().startswith(("0 H200", "1 H200"))]
            assert len(lines) == 2
            await pilot.press("c")
            assert board.mode == "auto"

    run(go())


def test_quit_key_exits_cleanly():
    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.snapshot is not None)
            await pilot.press("q")
        assert app.return_code == 0
        await asyncio.sleep(0.1)
        assert not app.poller.alive

    run(go())


def test_a_broken_tick_later_in_a_replay_is_reported_with_its_line(tmp_path):
    import gzip

    with gzip.open(H200_X2, "rt") as f:
        lines = f.read().splitlines()
    lines[3] = lines[3].replace('"temperature":', '"temperature":"hot","x":', 1)  # tick 3
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines[:8]) + "\n")

    async def go():
        app = replay_app(bad)
        async with app.run_test(size=(120, 40)) as pilot:
            await run_to_tick(pilot, 2)
            app.poller.step(1)
            await wait_for(pilot, lambda: app.error is not None)
            assert f"{bad}:4:" in str(app.error)
            assert "unknown field(s) for GpuSample: x" in str(app.error)
            assert app.poller.alive  # the replay goes on; the bad tick is skipped
            assert app.query_one("HeaderBar").position[0] == 2

    run(go())


def test_other_tabs_load_only_when_opened():
    """The first frame needs only the overview, with its process list (the ProcessList the
    Processes tab composes too): the tabs' modules are imported when first shown (a fresh interpreter, since
    other tests import them)."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(f"""
        import asyncio, sys
        sys.path.insert(0, {str(H200_X2.parents[2])!r})
        from conftest import H200_X2, replay_app, run_to_tick
        from gputui.ui.overview.pane import OverviewPane
        LAZY = (
            "gputui.ui.processes.process_list",
            "gputui.ui.processes.pane",
            "gputui.ui.topology.pane",
            "gputui.ui.diagnostics.pane",
        )
        first = []
        show = OverviewPane.show_snapshot

        def spy(self, info, snapshot):
            if not first:  # the first frame's data
                first.append([m for m in LAZY if m in sys.modules])
            show(self, info, snapshot)

        OverviewPane.show_snapshot = spy

        async def go():
            app = replay_app(H200_X2)
            async with app.run_test(size=(120, 40)) as pilot:
                await run_to_tick(pilot, 3)
                print("first frame", first[0])
                print("before", [m for m in LAZY if m in sys.modules])
                await pilot.press("2")
                await pilot.pause()
                print("after", [m for m in LAZY if m in sys.modules], app.current_pane().PANE_ID)
        asyncio.run(go())
    """)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    # the Overview's process list is in the first frame (the ProcessList, which the
    # Processes tab composes too); the tabs' panes are not
    assert "first frame ['gputui.ui.processes.process_list']" in out
    assert "before ['gputui.ui.processes.process_list']" in out
    assert "after ['gputui.ui.processes.process_list', 'gputui.ui.processes.pane'] processes" in out


def test_stepping_back_then_resuming_plays_on_from_there_with_no_future_in_the_history():
    _, ticks = read_recording(H200_X2)

    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(120, 40)) as pilot:
            await run_to_tick(pilot, 10)
            await pilot.press("space")
            for _ in range(3):
                await pilot.press("comma")
            await wait_for(pilot, lambda: app.query_one("HeaderBar").position[0] == 7)
            # the sparklines' history ends at the tick on screen
            assert app.hub.history.timestamps.last() == [s.timestamp for s in ticks[:7]]
            assert app.hub.series(0, "power_draw")[-1] == ticks[6].gpus[0].power_draw
            played: list[int] = []
            app.hub.subscribe(lambda snap: played.append(snap.seq))  # every tick, on the poller's thread
            app.poller.set_interval(0.1)
            await pilot.press("space")
            await wait_for(pilot, lambda: len(played) >= 3)
            assert played[:3] == [s.seq for s in ticks[7:10]]
            await pilot.press("space")
            n = len(app.hub.history.timestamps)
            assert app.hub.history.timestamps.last() == [s.timestamp for s in ticks[:n]]

    run(go())


def test_a_loop_of_the_replay_starts_a_new_history():
    _, ticks = read_recording(H200_X1)

    async def go():
        app = replay_app(H200_X1)
        async with app.run_test(size=(120, 40)) as pilot:
            await run_to_tick(pilot, len(ticks))
            assert len(app.hub.history.timestamps) == len(ticks)
            app.poller.step(1)
            await wait_for(pilot, lambda: app.query_one("HeaderBar").position[0] == 1)
            app.poller.step(1)
            await wait_for(pilot, lambda: app.query_one("HeaderBar").position[0] == 2)
            assert app.hub.history.timestamps.last() == [ticks[0].timestamp, ticks[1].timestamp]

    run(go())


def test_footer_shows_whole_keys_only_at_80_columns():
    """At 80 columns each tab's footer ends with a whole key and its whole description
    (never `g Diagnos` or `? H`); the keys that do not fit are left out, first ones kept."""

    async def go():
        app = replay_app(H200_X2)
        footers = {}
        async with app.run_test(size=(80, 24)) as pilot:
            await run_to_tick(pilot, 5)
            for key in ("1", "2", "3", "4"):
                await pilot.press(key)
                await pilot.pause()
                await pilot.pause()
                by_action = {}  # the footer shows one key per action (the first binding's)
                for _, b, _, _ in app.screen.active_bindings.values():
                    if b.show:
                        by_action.setdefault(b.action, (app.get_key_display(b), b.description))
                shown = list(by_action.values())
                footers[key] = (screen_lines(app)[-1], shown)
        return footers

    for key, (line, shown) in asyncio.run(go()).items():
        text = line.strip()
        words = " ".join(f"{k} {d}" for k, d in shown)
        assert text, key
        assert words.startswith(" ".join(text.split())), (key, line)  # a prefix of the keys...
        assert any(text.endswith(f"{k} {d}") for k, d in shown), (key, line)  # ...ending whole


def test_a_tick_arriving_while_the_app_shuts_down_is_dropped():
    """The poller's last tick can reach the app after its widgets are gone (seen under
    load: NoMatches for HeaderBar when the test's app closed); it is dropped, not an error."""
    from gputui.ui.app import InfoReady, SnapshotReady

    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(120, 40)) as pilot:
            await run_to_tick(pilot, 2)
            snap, info, gen = app.snapshot, app.info, app.generation
        app.on_info_ready(InfoReady(info, gen))
        app.on_snapshot_ready(SnapshotReady(snap, gen, (3, 100)))

    run(go())


def test_clicking_a_footer_key_presses_it():
    async def go():
        from gputui.ui.overview.widgets import GpuBoard
        from gputui.ui.widgets.footer import KeyFooter, fitting

        app = replay_app(H200_X2)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 5)
            footer = app.query_one(KeyFooter)
            x = next(x for x, key in fitting(footer.keys, 160) if key.description == "Layout")
            assert app.query_one(GpuBoard).mode == "auto"
            await pilot.click(KeyFooter, offset=(x + 3, 0))  # on its description
            await wait_for(pilot, lambda: app.query_one(GpuBoard).mode == "cards")
            # the footer follows the focus: the Processes tab's keys
            await pilot.press("2")
            await wait_for(pilot, lambda: any(k.description == "Sort" for k in footer.keys))
            assert "s Sort" in screen_lines(app)[-1]

    run(go())


def test_help_starts_with_the_keys_of_the_tab_on_screen():
    """`?` on a tab lists that tab's keys first (visible without scrolling), then the keys
    that work everywhere, then the other tabs' (issue 31)."""
    from gputui.ui.help import HelpScreen
    from gputui.ui.processes.pane import ProcessesPane

    async def go():
        app = replay_app(H200_X2)
        seen = {}
        async with app.run_test(size=(120, 40)) as pilot:
            await run_to_tick(pilot, 3)
            for key, pane_id in (("2", "processes"), ("3", "topology"), ("1", "overview")):
                await pilot.press(key)
                await wait_for(pilot, lambda pane_id=pane_id: pane_id == app.current_pane().PANE_ID)
                await pilot.press("question_mark")
                await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
                headings = [h for h, _ in app.screen.sections]
                seen[pane_id] = (headings, app.screen.help_text(), screen_lines(app))
                seen[pane_id + " rows"] = app.screen.sections[0][1]
                await pilot.press("escape")
                await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen))
        return seen

    seen = run(go())
    headings, text, lines = seen["processes"]
    assert headings[0] == "Processes tab (2)"
    assert headings.index("Everywhere") == len(ProcessesPane.help_sections())  # its sections first
    screen = " ".join(" ".join(ln.replace("│", " ").split()) for ln in lines)
    for keys, what in seen["processes rows"][:3]:  # on screen, not scrolled to
        assert f"{keys} {what}" in screen
    assert text.index("Processes tab (2)") < text.index("Everywhere") < text.index("Quit gputui")
    assert seen["topology"][0][0] == "Topology tab (3)"
    assert seen["overview"][0][0] == "Overview tab (1)"
    for headings, _, _ in (seen[p] for p in ("processes", "topology", "overview")):
        assert headings.count("Everywhere") == 1 and headings.index("Everywhere") <= 2
