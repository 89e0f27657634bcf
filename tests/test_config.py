"""The config file: defaults round-trip, every kind of bad file names its line and key and
leaves the defaults, command-line flags override the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import H200_X2, gputui

from gputui import config
from gputui.config import Config, default_text, key_lines, load, parse


def test_defaults_round_trip():
    text = default_text()
    parsed, errors = parse(text, "defaults.toml")
    assert errors == []
    assert parsed == Config()
    # every setting is written out (none only implied), each with a comment
    lines = key_lines(text)
    assert "alerts.idle_memory.minutes" in lines
    assert "export.listen" in lines
    assert text.count("#") > 40


def test_print_config_is_the_defaults(tmp_path):
    r = gputui("--print-config")
    assert r.returncode == 0
    assert r.stdout == default_text()
    f = tmp_path / "config.toml"
    f.write_text(r.stdout)
    loaded = load(f)
    assert loaded == config.LoadedConfig(Config(), f, keys=loaded.keys)
    assert "health.stuck_seconds" in loaded.keys  # every key is written: each one is the user's


def test_an_edited_file_is_read():
    text = (
        default_text()
        .replace("interval = 1.0", "interval = 2.5", 1)
        .replace('sparklines = ["util", "mem", "power"]', 'sparklines = ["util", "temp"]')
    )
    text += "\n[ui.colors]\nred = '#ff0000'\n" if "[ui.colors]" not in text else ""
    text = text.replace('# red = "#ff5f5f"', 'red = "#d70000"')
    cfg, errors = parse(text, "c.toml")
    assert errors == []
    assert cfg.ui.interval == 2.5
    assert cfg.cards.sparklines == ("util", "temp")
    assert cfg.ui.colors == {"red": "#d70000"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[ui]\ninterval = 1\nrefresh = 2\n", "c.toml:3: ui.refresh: unknown key in [ui]"),
        ("[ui]\ncolour = {}\n", "c.toml:2: ui.colour: unknown key in [ui] (did you mean 'colors'?)"),
        ("\n\nthemes = 'x'\n", "c.toml:3: themes: unknown key in the top level"),
        (
            "[alert.memory]\nabove = 1\n",
            "c.toml:1: alert: unknown key in the top level (did you mean 'alerts'?)",
        ),
        ("[ui]\n\ninterval = 'fast'\n", "c.toml:3: ui.interval: expected a number, got a string 'fast'"),
        ("[ui]\nreadonly = 1\n", "c.toml:2: ui.readonly: expected true or false, got an integer 1"),
        (
            "[alerts.idle_memory]\nmax_util = 0.5\n",
            "c.toml:2: alerts.idle_memory.max_util: expected an integer, got a number 0.5",
        ),
        ("[ui]\ninterval = 0.01\n", "c.toml:2: ui.interval: must be at least 0.1, got 0.01"),
        (
            "[ui]\ntheme = 'neon'\n",
            "c.toml:2: ui.theme: expected one of default, colorblind, light, mono, got 'neon'",
        ),
        ("[ui]\ndefault_sort = '-vram'\n", "c.toml:2: ui.default_sort: expected one of gpu_index"),
        ("[cards]\nsparklines = ['util', 'fps']\n", "c.toml:2: cards.sparklines: unknown item(s) 'fps'"),
        ("[cards]\nsparklines = []\n", "c.toml:2: cards.sparklines: needs at least 1 item(s)"),
        ("[cards]\ninfo = 'ecc'\n", "c.toml:2: cards.info: expected an array of strings"),
        ("[alerts]\nmemory = 95\n", "c.toml:2: alerts.memory: expected a table, got an integer"),
        (
            "[alerts.temperature]\nabove = 70\nclear_below = 75\n",
            "c.toml:3: alerts.temperature.clear_below (75) must not be above alerts.temperature.above (70)",
        ),
        (
            "[ui.colors]\n# a comment\nred = 'red'\n",
            'c.toml:3: ui.colors.red: expected a colour as "#rrggbb"',
        ),
        ("[ui.colors]\npink = '#ff00ff'\n", "c.toml:2: ui.colors.pink: unknown name"),
        ("[export]\nlisten = '9400'\n", "c.toml:2: export.listen: expected HOST:PORT"),
        ("alerts.memory.above = 'x'\n", "c.toml:1: alerts.memory.above: expected a number"),
        ("[ui]\ninterval = \n", "c.toml:2: TOML syntax: Invalid value (column 12)"),
        ("[ui\n", "c.toml:1: TOML syntax:"),
    ],
)
def test_each_kind_of_bad_file_names_line_and_key_and_gives_the_defaults(text, expected):
    cfg, errors = parse(text, "c.toml")
    assert cfg == Config()
    assert any(e.startswith(expected) for e in errors), errors


def test_every_problem_is_reported_at_once():
    cfg, errors = parse("[ui]\ninterval = 'x'\ntheme = 'y'\nbogus = 1\n", "c.toml")
    assert cfg == Config()
    assert [e.split(":")[1] for e in errors] == ["4", "2", "3"]


def test_load_missing_default_is_silent_and_explicit_missing_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert config.default_path() == tmp_path / "gputui" / "config.toml"
    assert load() == config.LoadedConfig(Config(), None)
    loaded = load(tmp_path / "nope.toml")
    assert loaded.config == Config()
    assert loaded.errors == (f"{tmp_path / 'nope.toml'}: no such file; using the defaults",)
    (tmp_path / "gputui").mkdir()
    (tmp_path / "gputui" / "config.toml").write_text("[ui]\ninterval = 3.0\n")
    assert load().config.ui.interval == 3.0
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/path")  # ignored, as the spec says
    assert config.default_path() == config.Path.home() / ".config" / "gputui" / "config.toml"


def test_key_lines_handles_quoted_and_dotted_keys():
    text = '[alerts."memory"]\n  above = 1\n[ui]\ncolors.red = "#000000"\n'
    lines = key_lines(text)
    assert lines["alerts.memory"] == 1
    assert lines["alerts.memory.above"] == 2
    assert lines["ui.colors.red"] == 4


def test_headless_command_reports_a_bad_file_on_stderr_and_runs_with_defaults(tmp_path):
    bad = tmp_path / "config.toml"
    bad.write_text("[alerts.temperature]\nabove = 'hot'\n")
    r = gputui("--config", str(bad), "watch", "--replay", str(H200_X2), "--interval", "0.001")
    assert f"{bad}:2: alerts.temperature.above: expected a number, got a string 'hot'" in r.stderr
    assert "using the defaults for every setting" in r.stderr
    assert r.returncode == 0  # it ran, with the defaults: no alert on this healthy recording
    assert r.stdout == ""


def test_config_option_after_the_subcommand_and_flags_override_it(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[alerts.temperature]\nabove = 55.0\nclear_below = 50.0\nfor_seconds = 0.0\n")
    r = gputui("watch", "--config", str(cfg), "--replay", str(H200_X2), "--interval", "0.001")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    kinds = [json.loads(line)["kind"] for line in r.stdout.splitlines()]
    assert kinds.count("temperature") == 4  # 2 GPUs heat past 55 °C and cool down again
    cfg.write_text("nonsense = 1\n")
    r = gputui("export", "--config", str(cfg), "--listen", "0.0.0.0:0")
    assert f"{cfg}:1: nonsense: unknown key" in r.stderr
    assert "refusing to listen on 0.0.0.0:0" in r.stderr


def test_xdg_config_home_is_read_by_the_cli(tmp_path):
    (tmp_path / "gputui").mkdir()
    (tmp_path / "gputui" / "config.toml").write_text("[export]\nlisten = '10.1.2.3:9400'\n")
    env = {"PATH": "/usr/bin:/bin", "XDG_CONFIG_HOME": str(tmp_path), "HOME": str(tmp_path)}
    r = gputui("export", env=env)
    assert r.returncode == 2
    assert "refusing to listen on 10.1.2.3:9400" in r.stderr  # the file's address was used


def test_the_documented_example_is_a_valid_file():
    page = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text()
    block = page.split("## The config file", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    cfg, errors = parse(block, "configuration.md")
    assert errors == []
    assert cfg.ui.colors == {"red": "#d70000"}
    assert cfg.alerts.temperature.above == 83.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[alerts.memory]\nabove = nan\n", "c.toml:2: alerts.memory.above: must be a finite number, got nan"),
        (
            "[alerts.temperature]\nabove = 85.0\nclear_below = -inf\n",
            "c.toml:3: alerts.temperature.clear_below: must be a finite number, got -inf",
        ),
        (
            "[alerts.temperature]\nfor_seconds = inf\n",
            "c.toml:2: alerts.temperature.for_seconds: must be a finite",
        ),
        ("[ui]\ninterval = nan\n", "c.toml:2: ui.interval: must be a finite number, got nan"),
        ("[export]\ninterval = +inf\n", "c.toml:2: export.interval: must be a finite number, got inf"),
        ("[watch]\ntimeout_seconds = inf\n", "c.toml:2: watch.timeout_seconds: must be a finite number"),
        ("[alerts.idle_memory]\nminutes = nan\n", "c.toml:2: alerts.idle_memory.minutes: must be a finite"),
    ],
)
def test_nan_and_infinity_are_refused_with_the_line(text, expected):
    """TOML has nan and inf; a nan threshold compares false with everything, so the rule
    would silently never fire, and an infinite interval overflows the timers."""
    cfg, errors = parse(text, "c.toml")
    assert cfg == Config()
    assert any(e.startswith(expected) for e in errors), errors


def test_health_thresholds_are_read_from_the_file_and_printed():
    """[health] (HealthConfig) is a table of the config file like [hints]: in --print-config,
    read back, and a bad value names its line."""
    text = default_text()
    assert "[health]" in text and "stuck_seconds = 120.0" in text
    cfg, errors = parse("[health]\nstuck_seconds = 30\nspin_max_sm = 5\n", "c.toml")
    assert errors == []
    assert cfg.health.stuck_seconds == 30.0 and cfg.health.spin_max_sm == 5.0
    cfg, errors = parse("[health]\nstuck_seconds = -1\n", "c.toml")
    assert errors and errors[0].startswith("c.toml:2: health.stuck_seconds:")
    assert cfg == Config()
