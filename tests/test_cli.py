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


def test_replay_start_out_of_range():
    r = gputui("--replay", str(H200_X2), "--start", "999")
    assert r.returncode == 2
    assert "ticks 1 to 121" in r.stderr


def test_bad_interval_is_a_usage_error():
    r = gputui("--interval", "0")
    assert r.returncode == 2
    assert "must be greater than 0" in r.stderr


def test_the_monitor_needs_a_terminal():
    r = gputui("--demo", stdin=subprocess.DEVNULL)
    assert r.returncode == 2
    assert "needs a terminal" in r.stderr
