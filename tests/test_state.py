"""Settings that persist (gputui/state.py): saved at exit, restored by the next run; a
corrupt or hostile state file is one line and the defaults, never a traceback."""

from __future__ import annotations

import asyncio
import json
import stat

import pytest
from conftest import H200_X2, replay_app, run_to_tick, screen_lines, wait_for

from gputui import state
from gputui.config import Config, UiConfig
from gputui.state import Filters, SavedState
from gputui.ui.overview.chart_picker import ChartPicker
from gputui.ui.overview.widgets import GpuBoard
from gputui.ui.processes.pane import ProcessesPane


def run(coro):
    return asyncio.run(coro)


def app_with(path, **kwargs):
    saved, warning = state.load(path)
    return replay_app(H200_X2, saved=saved, state_path=path, state_warning=warning, **kwargs), warning


def test_layout_sort_and_filters_survive_a_restart(tmp_path):
    path = tmp_path / "gputui" / "state.json"

    async def first():
        app, warning = app_with(path)
        assert warning is None  # no file yet: the defaults, silently
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 60)
            await pilot.press("c")  # auto -> cards
            await pilot.press("2")
            await pilot.pause()
            await pilot.press("s", "r", "u", "t")  # next sort column, reversed, mine, compute only
            await pilot.pause()
            pane = app.query_one("#processes", ProcessesPane).list
            chosen = (pane.state.sort_key, pane.state.descending)
            await pilot.press("q")
        return chosen

    sort_key, descending = run(first())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert not [p for p in path.parent.iterdir() if p.name != "state.json"]  # no temporary left

    async def second():
        app, warning = app_with(path)
        assert warning is None
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 60)
            assert app.query_one(GpuBoard).mode == "cards"
            await pilot.press("2")
            await pilot.pause()
            s = app.query_one("#processes", ProcessesPane).list.state
            assert (s.sort_key, s.descending, s.mine, s.compute_only) == (sort_key, descending, True, True)

    run(second())


def test_the_interval_is_remembered_for_live_data(tmp_path):
    """A replay keeps its recorded interval; the saved interval is what the next live run
    starts with (cli: -i, else the saved one, else the config file's)."""
    saved = SavedState(interval=5.0)
    path = tmp_path / "state.json"
    state.save(saved, path)
    loaded, warning = state.load(path)
    assert warning is None and loaded.interval == 5.0
    from gputui.cli import _top_level_parser

    args = _top_level_parser().parse_args(["--no-remember"])
    assert args.remember is False
    assert _top_level_parser().parse_args([]).remember is None


def test_round_trip_of_every_field(tmp_path):
    path = tmp_path / "state.json"
    saved = SavedState(2.0, "compact", "-gpu_memory", Filters(True, False, 1, "train.py"), ("util", "mem"))
    assert state.save(saved, path) is None
    assert state.load(path) == (saved, None)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b"[]", "not a JSON object"),
        (json.dumps({"version": 99}).encode(), "version"),
        (json.dumps({"version": 1, "interval": -3}).encode(), "interval"),
        (json.dumps({"version": 1, "interval": True}).encode(), "interval"),
        (json.dumps({"version": 1, "layout": "\x1b[2J"}).encode(), "layout"),
        (json.dumps({"version": 1, "sort": "rm -rf"}).encode(), "sort"),
        (json.dumps({"version": 1, "filters": {"search": "\x1b]0;pwned\x07"}}).encode(), "search"),
        (json.dumps({"version": 1, "filters": {"gpu": -1}}).encode(), "gpu"),
        (json.dumps({"version": 1, "sparklines": ["util", "nope"]}).encode(), "sparklines"),
        (json.dumps({"version": 1, "evil": 1}).encode(), "unknown key"),
        (b"[" * 100000, "larger than"),
    ],
)
def test_a_corrupt_or_hostile_file_is_one_line_and_the_defaults(tmp_path, content, why):
    path = tmp_path / "state.json"
    path.write_bytes(content)
    loaded, warning = state.load(path)
    assert loaded == SavedState()
    assert warning is not None and "\n" not in warning and why in warning
    assert "\x1b" not in warning


def test_a_symlink_or_a_directory_is_refused(tmp_path):
    target = tmp_path / "elsewhere.json"
    state.save(SavedState(layout="cards"), target)
    link = tmp_path / "state.json"
    link.symlink_to(target)
    loaded, warning = state.load(link)
    assert loaded == SavedState() and warning is not None
    (tmp_path / "dir").mkdir()
    loaded, warning = state.load(tmp_path / "dir")
    assert loaded == SavedState() and warning is not None


def test_the_tui_warns_once_and_starts_with_the_defaults(tmp_path):
    path = tmp_path / "state.json"
    path.write_text('{"version": 1, "layout": 42}')

    async def go():
        app, warning = app_with(path)
        assert warning is not None
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 5)
            assert app.query_one(GpuBoard).mode == "auto"
            assert any("Saved settings ignored" in (n.title or "") for n in app._notifications)

    run(go())


@pytest.mark.parametrize(
    ("argv", "config", "remembers"),
    [
        ([], Config(), True),
        (["--no-remember"], Config(), False),
        ([], Config(ui=UiConfig(remember=False)), False),
        (["--no-remember"], Config(ui=UiConfig(remember=True)), False),
    ],
)
def test_the_switch_neither_reads_nor_writes(tmp_path, monkeypatch, argv, config, remembers):
    """`--no-remember` or `remember = false`: the file is not read (a bad one gives no
    warning) and the app is given nowhere to save; else it is read from $XDG_STATE_HOME."""
    from gputui.cli import _top_level_parser, remembered

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    path = tmp_path / "gputui" / "state.json"
    path.parent.mkdir()
    path.write_text('{"version": 1, "layout": "cards"}')
    saved, warning, where = remembered(_top_level_parser().parse_args(argv), config)
    assert warning is None
    if remembers:
        assert (saved.layout, where) == ("cards", path)
    else:
        assert (saved, where) == (SavedState(), None)


def test_an_app_given_nowhere_to_save_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    app = replay_app(H200_X2)
    assert app.state_path is None

    async def go():
        async with app.run_test(size=(100, 30)) as pilot:
            await run_to_tick(pilot, 3)
            await pilot.press("c", "q")

    run(go())
    assert list(tmp_path.iterdir()) == []


def test_chosen_sparklines_show_at_once_and_survive_a_restart(tmp_path):
    """`C` on the Overview ticks the cards' charts; the cards follow at once, and the next
    run starts with them (the config file's [cards] sparklines is only the first default)."""
    path = tmp_path / "state.json"

    def charts(app) -> str:
        return "\n".join(screen_lines(app))

    async def first():
        app, _ = app_with(path)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 60)
            assert "│ PWR   " in charts(app) and "│ TEMP  " not in charts(app)
            await pilot.press("C")
            await wait_for(pilot, lambda: isinstance(app.screen, ChartPicker))
            # in the registry's order: util, mem, power, temp, ..., tensor_active (12th)
            await pilot.press("down", "down", "space")  # power off
            await pilot.press("down", "space")  # temp on
            await pilot.press(*["down"] * 8, "space")  # tensor_active on
            await wait_for(pilot, lambda: app.query_one(GpuBoard).card.sparklines[-1] == "tensor_active")
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, ChartPicker))
            await wait_for(pilot, lambda: "│ TENSR " in charts(app))
            assert "│ TEMP  " in charts(app) and "│ PWR   " not in charts(app)
            await pilot.press("q")

    run(first())
    assert json.loads(path.read_text())["sparklines"] == ["util", "mem", "temp", "tensor_active"]

    async def second():
        app, _ = app_with(path)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 60)
            assert app.query_one(GpuBoard).card.sparklines == ("util", "mem", "temp", "tensor_active")
            assert "│ TENSR " in charts(app) and "│ PWR   " not in charts(app)

    run(second())


def test_the_chart_picker_keeps_one_to_four_and_says_why():
    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 5)
            board = app.query_one(GpuBoard)
            await pilot.press("C")
            await wait_for(pilot, lambda: isinstance(app.screen, ChartPicker))
            await pilot.press("space", "down", "space")  # util, mem off: power is left
            await pilot.press("down", "space")  # power: the last one stays
            await wait_for(pilot, lambda: "at least 1 chart" in "\n".join(screen_lines(app)))
            assert board.card.sparklines == ("power",)
            await pilot.press("down", "space", "down", "space", "down", "space")  # temp, mem_temp, sm_clock
            assert board.card.sparklines == ("power", "temp", "mem_temp", "sm_clock")
            await pilot.press("down", "space")  # a fifth: refused
            await wait_for(pilot, lambda: "at most 4 charts" in "\n".join(screen_lines(app)))
            assert board.card.sparklines == ("power", "temp", "mem_temp", "sm_clock")
            await pilot.press("C")  # the same key closes it
            await wait_for(pilot, lambda: not isinstance(app.screen, ChartPicker))
            assert app.saved.sparklines == ("power", "temp", "mem_temp", "sm_clock")

    run(go())
