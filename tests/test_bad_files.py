"""Bad files crash or hang (issue 24, item 5): numbers too long for Python to convert,
nesting deep enough to exhaust the stack, escapes in key and file names.  Each is one line
with the file and line, escaped, and the defaults; never a traceback."""

from __future__ import annotations

import json

import pytest
from conftest import gputui

from gputui import state
from gputui.config import Config, load, parse

ESC = "\x1b]2;PWNED\x07"


def one_clean_line(errors) -> str:
    assert len(errors) == 1, errors
    line = errors[0]
    assert "\n" not in line and "\x1b" not in line and "\x07" not in line
    return line


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Python refuses to convert more than 4300 digits: a ValueError traceback before
        ("[ui]\ninterval = " + "1" * 5000 + "\n", "c.toml:2: a number longer than 40 characters"),
        ("[alerts.memory]\n\nabove = -" + "9" * 5000 + "\n", "c.toml:3: a number longer than 40 characters"),
        # converts, then overflows float() (watch.rate_limit_minutes has no maximum)
        ("[watch]\nrate_limit_minutes = " + "9" * 400 + "\n", "c.toml:2: a number longer than 40"),
        ("[watch]\nrate_limit_minutes = 0x" + "f" * 400 + "\n", "c.toml:2: a number longer than 40"),
        # a RecursionError traceback before
        ("[ui]\ntheme = " + "[" * 5000 + "]" * 5000 + "\n", "c.toml:2: nested more than 32 deep"),
        ("a = " + "{b = " * 3000 + "1" + "}" * 3000 + "\n", "c.toml:1: nested more than 32 deep"),
    ],
    ids=lambda v: v[:40] if isinstance(v, str) else None,
)
def test_numbers_too_long_and_nesting_too_deep_are_one_line_with_the_line(text, expected):
    cfg, errors = parse(text, "c.toml")
    assert cfg == Config()
    assert one_clean_line(errors).startswith(expected), errors


@pytest.mark.parametrize(
    "text",
    [
        # inside strings and comments, brackets and digits are text
        "[watch]\nalert_cmd = 'echo " + "[" * 100 + "'\n",
        '[watch]\nalert_cmd = "echo ' + "1" * 5000 + '"  # ' + "{" * 100 + "\n",
        '[watch]\nalert_cmd = """\n' + "[" * 100 + '\\"""\n"""\n',
        "[watch]\nalert_cmd = '''\n" + "1" * 5000 + "\n'''\n",
        "[ui]\ninterval = 1_000.000_000_000_1\n",
    ],
    ids=lambda v: v[:40],
)
def test_brackets_and_digits_in_strings_and_comments_are_not_counted(text):
    _, errors = parse(text, "c.toml")
    assert not any("nested" in e or "longer than" in e for e in errors), errors


def test_a_realistic_file_is_well_within_the_bounds():
    _, errors = parse(
        "[cluster]\ntargets = ['n1:9400', 'n2:9400']\n[ui.colors]\nred = '#d70000'\n"
        "[alerts.memory]\nabove = 95.000_000_000_000_000_000_000_000_000_001\n",
        "c.toml",
    )
    assert errors == []


def test_escapes_in_key_names_and_values_are_shown_escaped():
    text = (
        '"\\u001b]2;PWNED\\u0007" = 1\n[ui]\ntheme = "\\u001b[2J\\u202e"\n'
        '[ui.colors]\n"x\\u009b31m" = "#000000"\n'
    )
    _, errors = parse(text, "c.toml")
    assert len(errors) == 3, errors
    for line in errors:
        assert not any(c in line for c in "\x1b\x07\x9b\u202e"), line
    assert errors[0].startswith("c.toml:1: \\x1b]2;PWNED\\x07: unknown key in the top level")
    assert "\\x1b[2J\\u202e" in errors[1]
    assert "x\\x9b31m" in errors[2]


def test_a_very_long_key_name_is_cut_in_the_message():
    _, errors = parse("k" * 100_000 + " = 1\n", "c.toml")
    assert len(one_clean_line(errors)) < 1000


def test_a_config_file_name_with_escapes_is_shown_escaped(tmp_path):
    path = tmp_path / f"junk{ESC}.toml"
    path.write_text("[ui]\ninterval = 'x'\n")
    loaded = load(path)
    line = one_clean_line(loaded.errors)
    assert "junk\\x1b]2;PWNED\\x07.toml:2: ui.interval" in line


def test_a_missing_config_file_name_with_escapes_is_shown_escaped(tmp_path):
    one_clean_line(load(tmp_path / f"nope{ESC}.toml").errors)


def test_a_recording_file_name_with_escapes_is_shown_escaped(tmp_path):
    """The red team's line: `gputui snapshot: …junk\\x1b]2;PWNED\\x07.jsonl:1: not JSON`
    reached the terminal raw."""
    path = tmp_path / f"junk{ESC}.jsonl"
    path.write_text("junk\n")
    r = gputui("snapshot", "--replay", str(path))
    assert r.returncode == 2
    assert "\x1b" not in r.stderr and "\x07" not in r.stderr
    assert "junk\\x1b]2;PWNED\\x07.jsonl:1:" in r.stderr
    assert len(r.stderr.splitlines()) == 1


def test_unknown_header_fields_of_a_recording_are_shown_escaped(tmp_path):
    from gputui.telemetry.recording import RecordingError, ReplaySource

    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"format": "gputui-recording", "version": 1, f"evil{ESC}": 1}) + "\n")
    with pytest.raises(RecordingError) as info:
        ReplaySource(path)
    assert "\x1b" not in str(info.value)


# ----------------------------------------------------------------------------------------
# the state file's value bounds
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "why"),
    [
        # a ValueError traceback at every start before
        ('{"version": 1, "interval": ' + "1" * 5000 + "}", "a number longer than 20 digits"),
        ('{"version": 1, "filters": {"gpu": ' + "1" * 5000 + "}}", "a number longer than 20 digits"),
        ('{"version": 1, "filters": {"gpu": 1' + "0" * 20 + "}}", "a number longer than 20 digits"),
        ('{"version": -' + "1" * 5000 + "}", "a number longer than 20 digits"),
        ('{"version": 1, "interval": 1e400}', "interval must be a number from 0.1 to 60"),
        ('{"version": 1, "interval": NaN}', "interval must be a number from 0.1 to 60"),
        ('{"version": 1, "interval": 0.099}', "interval must be a number from 0.1 to 60"),
        ('{"version": 1, "interval": 60.001}', "interval must be a number from 0.1 to 60"),
        ('{"version": 1, "filters": {"gpu": 1024}}', "filters.gpu is not a GPU index"),
        ('{"version": 1, "filters": {"gpu": 1.0}}', "filters.gpu is not a GPU index"),
        ('{"version": 1, "filters": {"search": "' + "x" * 201 + '"}}', "filters.search"),
        ('{"version": 1, "sparklines": []}', "sparklines must be 1 to 4"),
        (
            '{"version": 1, "sparklines": ["util", "mem", "power", "temp", "mem_temp"]}',
            "sparklines must be 1",
        ),
        ("[" * 10_000 + "]" * 10_000, "larger than"),
        # (Python 3.11's json gives up on the nesting, 3.12's parses a list: one line either way)
        ("[" * 5_000 + "]" * 5_000, ("not valid JSON", "not a JSON object")),
    ],
    ids=lambda v: v[:40] if isinstance(v, str) else None,
)
def test_the_state_files_values_are_bounded(tmp_path, content, why):
    path = tmp_path / "state.json"
    path.write_text(content)
    saved, warning = state.load(path)
    assert saved == state.SavedState()
    reasons = (why,) if isinstance(why, str) else why
    assert warning is not None and "\n" not in warning and any(r in warning for r in reasons), warning


@pytest.mark.parametrize(
    "content",
    [
        '{"version": 1, "interval": 0.1, "filters": {"gpu": 1023, "search": "' + "x" * 200 + '"}}',
        '{"version": 1, "interval": 60, "filters": {"gpu": 0}}',
        '{"version": 1, "filters": {"gpu": 12345678901234567890}}',
    ],
    ids=lambda v: v[:40],
)
def test_the_bounds_themselves_are_accepted(tmp_path, content):
    path = tmp_path / "state.json"
    path.write_text(content)
    saved, warning = state.load(path)
    if "12345678901234567890" in content:  # 20 digits parse; the GPU index bound refuses it
        assert warning is not None and "filters.gpu is not a GPU index" in warning
    else:
        assert warning is None and saved != state.SavedState()


def test_record_names_an_existing_file_escaped(tmp_path):
    path = tmp_path / f"out{ESC}.jsonl"
    path.write_text("")
    r = gputui("record", str(path))
    assert r.returncode == 2
    assert "\x1b" not in r.stderr and "out\\x1b]2;PWNED\\x07.jsonl exists" in r.stderr
