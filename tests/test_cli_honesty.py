"""The command line says what it does (issue 24, item 14): a global --replay or --demo is
honoured by the subcommands that can replay and refused by the others; `watch --duration`
says when the recording ended first; `stress` without a GPU says so instead of printing an
empty table."""

from __future__ import annotations

import json
import os
import sys

import pytest
from conftest import H200_X1, H200_X2, gputui

from gputui.telemetry.recording import ReplaySource


def test_a_global_replay_is_honoured_by_snapshot():
    """Before: `gputui --replay F snapshot` read NVML (here: 'NVML unavailable', exit 2)."""
    r = gputui("--replay", str(H200_X2), "snapshot", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["source"]["kind"] == "replay" and doc["source"]["file"] == str(H200_X2)
    assert len(doc["gpus"]) == 2


def test_the_subcommands_own_replay_wins_over_the_global_one():
    r = gputui("--replay", str(H200_X2), "snapshot", "--json", "--replay", str(H200_X1))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["source"]["file"] == str(H200_X1)


def test_a_global_replay_is_honoured_by_watch(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[alerts.temperature]\nabove = 55.0\nclear_below = 50.0\nfor_seconds = 0.0\n")
    r = gputui("--replay", str(H200_X2), "watch", "--config", str(cfg), "--interval", "0.001")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 4  # the same 4 alerts as `watch --replay`


def test_demo_is_honoured_by_snapshot():
    from gputui.cli import DEMO_RECORDING

    r = gputui("--demo", "snapshot", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["source"]["file"] == DEMO_RECORDING


@pytest.mark.parametrize("command", ["diag", "stress", "record", "stacks"])
@pytest.mark.parametrize("flag", ["--replay", "--demo"])
def test_a_global_replay_is_refused_by_commands_that_cannot_replay(command, flag, tmp_path):
    args = [flag, str(H200_X2)] if flag == "--replay" else [flag]
    extra = {"record": [str(tmp_path / "out.jsonl")], "stacks": [str(os.getpid())]}.get(command, [])
    r = gputui(*args, command, *extra)
    assert r.returncode == 2
    why = "it reads this machine's processes" if command == "stacks" else "it works on this machine's GPUs"
    assert r.stderr == f"gputui {command}: {flag} does not apply: {why}\n"
    assert not (tmp_path / "out.jsonl").exists()


def test_serve_says_where_the_flag_goes():
    r = gputui("--demo", "serve")
    assert r.returncode == 2
    assert r.stderr == "gputui serve: --demo goes after --: gputui serve -- --demo\n"


def test_watch_says_when_the_recording_ends_before_duration():
    ticks = len(ReplaySource(H200_X1).ticks)
    r = gputui("watch", "--replay", str(H200_X1), "--interval", "0.001", "--duration", "20")
    assert r.returncode == 0
    assert r.stderr == (
        f"gputui watch: the recording ended after its {ticks} samples, before --duration 20 s\n"
    )


def test_watch_says_nothing_when_duration_ends_first():
    r = gputui("watch", "--replay", str(H200_X1), "--interval", "0.05", "--duration", "0.2")
    assert r.returncode == 0 and r.stderr == ""
    r = gputui("watch", "--replay", str(H200_X1), "--interval", "0.001")  # no --duration: as recorded
    assert r.returncode == 0 and r.stderr == ""


def test_stress_without_a_gpu_says_so_instead_of_an_empty_table():
    """CUDA_VISIBLE_DEVICES= hides every GPU from torch, on a GPU machine too."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:  # (not imported here: gputui's own process never does)
        pytest.skip("torch is not installed in this interpreter")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    r = gputui("stress", "--duration", "1", "--monitor-interval", "0", "--python", sys.executable, env=env)
    assert r.returncode == 2
    assert "| GPU |" not in r.stdout  # no table of nothing
    assert "No GPU was stress-tested: torch sees no CUDA GPU" in r.stdout, r.stdout
