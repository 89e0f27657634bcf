"""The monitor with settings: alerts on a real recording colour the GPU and are counted in the
header; card options, themes and config errors; command-line flags override the file."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from conftest import H200_X2, X8_240, replay_app, run_to_tick, screen_lines, wait_for
from rich.segment import Segment
from rich.style import Style
from textual.color import Color as TColor
from textual.filter import NoColor

from gputui import cli
from gputui.config import CardConfig, Config, UiConfig
from gputui.telemetry.alert_config import AlertConfig, ThresholdRule
from gputui.ui import render
from gputui.ui.overview.lines import board_lines
from gputui.ui.render import S
from gputui.ui.theme import ColorRemap
from gputui.ui.widgets.header import header_line

HOT = Config(alerts=AlertConfig(temperature=ThresholdRule(True, 55.0, 50.0, 0.0)))


def test_alerts_fire_and_clear_in_the_tui(x2_recording):
    _, ticks = x2_recording

    async def go() -> None:
        app = replay_app(H200_X2, config=HOT)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 20)
            text = "\n".join(screen_lines(app))
            assert "alert" not in text
            await run_to_tick(pilot, 60)
            lines = screen_lines(app)
            assert "⚠ 2 alerts" in lines[0]
            temps = [g.temperature for g in ticks[59].gpus]
            card_tops = [line for line in lines if "NVIDIA H200" in line]
            assert f"⚠ {temps[0]}°C" in card_tops[0]
            assert f"⚠ {temps[1]}°C" in card_tops[0] or f"⚠ {temps[1]}°C" in card_tops[-1]
            assert "00000000:00:06.0" not in card_tops[0]  # the alert takes the bus id's place
            await run_to_tick(pilot, 115)  # cooled below 50 °C
            lines = screen_lines(app)
            assert "alert" not in lines[0]
            assert "00000000:00:06.0" in "\n".join(lines)

    asyncio.run(go())


def test_compact_rows_show_the_alert():
    async def go() -> None:
        hot8 = Config(alerts=AlertConfig(temperature=ThresholdRule(True, 50.0, 45.0, 0.0)))
        app = replay_app(X8_240, config=hot8)
        async with app.run_test(size=(100, 24)) as pilot:
            await run_to_tick(pilot, 40)
            lines = screen_lines(app)
            assert "⚠ 8 alerts" in lines[0]
            assert sum("⚠ " in line and "°C" in line for line in lines[1:]) == 8

    asyncio.run(go())


def test_alert_border_and_header_as_data(x2_recording):
    header, ticks = x2_recording
    from gputui.telemetry.alerts import AlertEngine

    engine = AlertEngine(HOT.alerts)
    for t in ticks[:60]:
        engine.update(header.machine, t)
    alerts = {0: [engine.active["temperature:gpu0"]]}
    gpus = {g.index: g for g in ticks[59].gpus}
    _, lines = board_lines(header.machine, gpus, {}, lambda i, m, n: [], 160, 50, alerts=alerts)
    top = lines[0]
    assert top[0] == ("╭─ ", S.border_alert)  # GPU 0's card: warning colour
    assert any(style == S.border for text, style in top if "╮" in text)  # GPU 1's: normal

    header_info = header.machine

    def header_at(width: int, alerts: int):
        return header_line(
            header_info, width, live=False, label="x", interval=1, paused=False, position=None,
            timestamp=None, alerts=alerts,
        )  # fmt: skip

    assert ("⚠ 3 alerts", S.warn) in header_at(160, 3)
    narrow = header_at(40, 1)
    assert ("⚠ 1 alert", S.warn) in narrow  # kept when the host, driver and CUDA are dropped


def test_card_options_choose_the_charts_and_the_info_line():
    cards = CardConfig(sparklines=("util", "temp", "sm_clock", "pcie_rx"), info=("ecc", "pstate"))

    async def go() -> None:
        app = replay_app(H200_X2, config=Config(cards=cards))
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 60)
            text = "\n".join(screen_lines(app))
            for label in ("TEMP  ", "SMCLK ", "RX    "):
                assert f"│ {label}" in text
            assert "│ PWR   " not in text  # bars keep PWR; the power chart is gone
            assert "ECC 0  P-state P0" in text
            assert "PCIe Gen" not in text

    asyncio.run(go())


def test_config_errors_are_shown_in_the_tui():
    async def go() -> None:
        app = replay_app(
            H200_X2, config_errors=("/home/u/.config/gputui/config.toml:3: ui.theme: bad [red]x[/]",)
        )
        async with app.run_test(size=(160, 50), notifications=True) as pilot:
            await run_to_tick(pilot, 2)
            await wait_for(pilot, lambda: "running with the defaults" in "\n".join(screen_lines(app)))
            text = "\n".join(screen_lines(app))
            assert "config.toml:3: ui.theme: bad" in text
            assert "[red]x[/]" in text  # literally, not as markup

    asyncio.run(go())


def test_themes_add_a_line_filter():
    app = replay_app(H200_X2, config=Config(ui=UiConfig(theme="colorblind", colors={"cyan": "#00afff"})))
    remap = [f for f in app.get_line_filters() if isinstance(f, ColorRemap)]
    assert len(remap) == 1
    out = remap[0].apply(
        [
            Segment("█", Style(color=render.GREEN, bgcolor=render.TRACK)),
            Segment("x", Style(color=render.CYAN)),
        ],
        TColor(0, 0, 0),
    )
    assert out[0].style.color.triplet.hex == "#5fafff"  # green -> blue for red/green colour-blindness
    assert out[0].style.bgcolor.triplet.hex == render.TRACK  # unchanged
    assert out[1].style.color.triplet.hex == "#00afff"  # a single override
    mono = replay_app(H200_X2, config=Config(ui=UiConfig(theme="mono")))
    assert any(isinstance(f, NoColor) for f in mono.get_line_filters())
    plain = replay_app(H200_X2)
    assert not any(isinstance(f, ColorRemap | NoColor) for f in plain.get_line_filters())


def test_each_theme_is_a_registered_textual_theme_carrying_the_palette():
    from gputui.palette import PALETTE_NAMES, THEME_COLORS

    for name in THEME_COLORS:
        app = replay_app(H200_X2, config=Config(ui=UiConfig(theme=name, colors={"red": "#d70000"})))
        current = app.current_theme
        assert current.name == f"gputui-{name}"
        assert current.dark is (name != "light")
        assert {k.removeprefix("gputui-") for k in current.variables if k.startswith("gputui-")} == set(
            PALETTE_NAMES
        )
        assert current.variables["gputui-red"] == "#d70000"  # [ui.colors] goes into the theme
    light = replay_app(H200_X2, config=Config(ui=UiConfig(theme="light")))
    (remap,) = [f for f in light.get_line_filters() if isinstance(f, ColorRemap)]
    out = remap.apply([Segment("x", Style(color=render.TEXT))], TColor(0, 0, 0))
    assert out[0].style.color.triplet.hex == "#262626"  # dark text on the light background


def test_flags_override_the_file(tmp_path, monkeypatch):
    cfg = tmp_path / "config.toml"
    cfg.write_text("[ui]\nreadonly = false\ndefault_sort = 'pid'\ntheme = 'mono'\ninterval = 5.0\n")
    seen = {}

    def fake_run(self, *a, **k):
        seen["app"] = self

    monkeypatch.setattr("gputui.ui.app.GpuTuiApp.run", fake_run)
    monkeypatch.setenv("GPUTUI_ALLOW_NOTTY", "1")
    assert cli.main(["--config", str(cfg), "--readonly", "--replay", str(H200_X2), "--interval", "2"]) == 0
    app = seen["app"]
    assert app.readonly is True  # the flag
    assert app.default_sort == "pid"  # the file
    assert app.config.ui.theme == "mono"
    assert app.interval == 2.0  # the flag
    assert cli.main(["--config", str(cfg), "--replay", str(H200_X2)]) == 0
    assert seen["app"].readonly is False
    assert seen["app"].interval == 1.0  # a replay plays at its recorded interval


@pytest.mark.parametrize("bad", ["[ui]\ninterval = 'x'\n", "[ui\n"])
def test_a_bad_file_still_starts_the_tui_with_defaults(tmp_path, monkeypatch, capsys, bad):
    cfg = tmp_path / "config.toml"
    cfg.write_text(bad)
    seen = {}
    monkeypatch.setattr("gputui.ui.app.GpuTuiApp.run", lambda self: seen.setdefault("app", self))
    monkeypatch.setenv("GPUTUI_ALLOW_NOTTY", "1")
    assert cli.main(["--config", str(cfg), "--replay", str(H200_X2)]) == 0
    app = seen["app"]
    assert app.config == Config()
    assert len(app.config_errors) == 1
    assert app.config_errors[0].startswith(f"{cfg}:")
    assert f"gputui: config: {cfg}:" in capsys.readouterr().err


def test_a_card_shows_the_last_xid_in_the_error_colour(x2_recording):
    header, ticks = x2_recording
    gpus = {g.index: g for g in ticks[59].gpus}

    def info_line(gpus):
        _, lines = board_lines(header.machine, gpus, {}, lambda i, m, n: [], 160, 50)
        return next(line for line in lines if any(t == "P-state " for t, _ in line))

    quiet = info_line({**gpus, 0: dataclasses.replace(gpus[0], xid_count=0, xid_last=None)})
    assert not any("XID" in t for t, _ in quiet)  # watched, none seen: nothing to say
    hit = info_line({**gpus, 0: dataclasses.replace(gpus[0], xid_count=3, xid_last=79)})
    assert ("XID ", S.label) in hit and ("79 ×3", S.bad) in hit  # first: a narrow card keeps it
    assert [t for t, _ in hit].index("XID ") < [t for t, _ in hit].index("P-state ")


def test_an_alert_of_the_first_tick_shows_without_waiting_for_the_next(x2_recording):
    """The engines are made after the first frame (the start does not wait for them), and
    they judge the tick that frame shows at once: an alert true at the first tick is on
    screen before the poller's next tick (the replay is frozen: there is none)."""
    _, ticks = x2_recording
    first = min(g.temperature for g in ticks[0].gpus if g.temperature is not None)
    cold = Config(alerts=AlertConfig(temperature=ThresholdRule(True, first - 10.0, first - 20.0, 0.0)))

    async def go() -> tuple[str, int]:
        app = replay_app(H200_X2, config=cold)
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_for(pilot, lambda: "alert" in screen_lines(app)[0])
            return screen_lines(app)[0], app.poller.ticks

    header, poller_ticks = asyncio.run(go())
    assert "⚠ 2 alerts" in header
    assert poller_ticks == 0
