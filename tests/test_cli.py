"""The command line as a user types it: real subprocesses, real (absent) NVML."""

from __future__ import annotations

import gzip
import subprocess
import sys

import pytest
from conftest import H200_X2
from diag_support import driver_present

from gputui import __version__


def gputui(*args: str, **kw):
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args], capture_output=True, text=True, timeout=60, check=False, **kw
    )


def test_version_and_python_m():
    r = gputui("--version")
    assert r.returncode == 0
    assert r.stdout.strip() == f"gputui {__version__}"


def test_help_lists_the_subcommands_and_options():
    r = gputui("--help")
    assert r.returncode == 0
    for word in ("--replay", "--demo", "--interval", "--start", "record"):
        assert word in r.stdout


@pytest.mark.skipif(driver_present(), reason="a GPU driver is installed here: NVML is available")
def test_record_without_nvml_says_why(tmp_path):
    out = tmp_path / "x.jsonl"
    r = gputui("record", str(out), "--duration", "1")
    assert r.returncode == 2
    assert "NVML unavailable" in r.stderr
    assert "NVML Shared Library Not Found" in r.stderr
    assert not out.exists()


def test_record_refuses_to_overwrite(tmp_path):
    out = tmp_path / "keep.jsonl"
    out.write_text("precious")
    r = gputui("record", str(out), "--duration", "1")
    assert r.returncode == 2
    assert "--force" in r.stderr
    assert out.read_text() == "precious"


def test_replay_of_a_broken_file_names_the_line(tmp_path):
    with gzip.open(H200_X2, "rt") as f:
        lines = f.read().splitlines()
    lines[1] = lines[1].replace('"temperature":', '"temperature":"hot","x":', 1)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines[:5]) + "\n")
    r = gputui("--replay", str(bad))
    assert r.returncode == 2
    assert f"{bad}:2: gpus[0]: unknown field(s) for GpuSample: x" in r.stderr
    not_json = tmp_path / "not.jsonl"
    not_json.write_text("hello\n")
    r = gputui("--replay", str(not_json))
    assert r.returncode == 2
    assert f"{not_json}:1: not JSON" in r.stderr


@pytest.mark.parametrize("start", ["999", "0", "-1"])
def test_replay_start_out_of_range(start):
    r = gputui("--replay", str(H200_X2), "--start", start)
    assert r.returncode == 2
    assert f"--start {start}: the recording has ticks 1 to 121" in r.stderr


def test_demo_job_start_out_of_range():
    r = gputui("--demo-job", "--start", "0")
    assert r.returncode == 2 and "--start 0: the recording has ticks 1 to 76" in r.stderr


def test_bad_interval_is_a_usage_error():
    r = gputui("--interval", "0")
    assert r.returncode == 2
    assert "must be greater than 0" in r.stderr


def test_the_monitor_needs_a_terminal():
    r = gputui("--demo", stdin=subprocess.DEVNULL)
    assert r.returncode == 2
    assert "needs a terminal" in r.stderr


def test_the_monitor_registers_no_subcommand():
    """`gputui [options]` parses without importing a subcommand's module (their parsers are
    built only when a word on the line could be one, or help is asked for)."""
    code = (
        "import sys; from gputui import cli\n"
        "cli.run_tui = lambda args: print(args.command, args.demo, args.interval)\n"
        "cli.main(['--demo', '-i', '2'])\n"
        "names = [m for m in sys.modules if m.startswith('gputui.commands.')]\n"
        "print(sorted(m for m in names if m != 'gputui.commands.common'))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["None True 2.0", "[]"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("snapshto",), "invalid choice: 'snapshto'"),  # a mistyped command: the list of them
        (("--bogus",), "unrecognized arguments: --bogus"),
        (("--demo", "extra"), "invalid choice: 'extra'"),
    ],
)
def test_a_bad_line_still_names_the_subcommands(args, says):
    r = gputui(*args)
    assert r.returncode == 2
    assert says in r.stderr
    assert "COMMAND ..." in r.stderr  # the usage line offers them
    if "invalid choice" in says:
        assert all(f"'{name}'" in r.stderr for name in ("record", "snapshot", "cluster", "serve"))


def test_help_by_abbreviation_lists_the_subcommands():
    for flag in ("-h", "--he"):
        r = gputui(flag)
        assert r.returncode == 0
        assert "snapshot" in r.stdout and "cluster" in r.stdout


@pytest.mark.parametrize("command", [["watch"], ["export"], ["record", "out.jsonl.gz"]])
@pytest.mark.parametrize(
    ("argv", "want"),
    [
        (["--interval", "3"], 3.0),  # before the command: the global option
        (["-i", "3"], 3.0),
        ([], None),  # neither: the command's own default (record: 1 s; the others: the config's)
    ],
)
def test_the_global_interval_reaches_every_command(command, argv, want):
    """`gputui -i 3 watch` must sample every 3 s: a subcommand's own --interval default once
    overwrote the global one, silently (argparse's subparser defaults win)."""
    from gputui.cli import _parse

    args = _parse([*argv, *command])
    assert getattr(args, "interval", None) == want


@pytest.mark.parametrize("command", [["watch"], ["export"], ["record", "out.jsonl.gz"]])
def test_the_commands_own_interval_wins_over_the_global_one(command):
    from gputui.cli import _parse

    assert _parse(["-i", "3", *command[:1], "--interval", "2", *command[1:]]).interval == 2.0
