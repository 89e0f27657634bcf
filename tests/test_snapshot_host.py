"""`gputui snapshot --json`: the host block's values and units, and the JSON writer's fast
path for text whose only unusual character is DEL (issue 24, tests that let bugs through).
Through the real command on real recordings."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import FIXTURES, H200_X2, gputui

from gputui.export.snapshot import schema
from gputui.telemetry.recording import read_recording

MIB = 2**20
JOB_REC = FIXTURES / "h100-x1-job" / "recording.jsonl.gz"


@pytest.mark.parametrize(("recording", "tick"), [(H200_X2, 50), (JOB_REC, 1), (JOB_REC, 3)])
def test_the_host_block_is_the_recorded_host_in_the_schemas_units(recording, tick):
    r = gputui("snapshot", "--replay", str(recording), "--tick", str(tick), "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)["host"]
    host = read_recording(recording)[1][tick - 1].host
    assert host is not None
    want = {
        # a replay never counts this machine's CPUs: the recorded count, or unknown
        "cpu_count": len(host.per_cpu) or None,
        "cpu_percent": host.cpu_percent,
        "memory.total": host.mem_total // MIB,  # [MiB], whole
        "memory.used": host.mem_used // MIB,
        "memory.available": host.mem_available // MIB,
        "swap.total": host.swap_total // MIB,
        "swap.used": host.swap_used // MIB,
        "load_average": list(host.load_avg),
        "uptime": host.uptime,  # [s]
    }
    assert got == want
    units = {k: v.get("description", "") for k, v in schema()["properties"]["host"]["properties"].items()}
    assert all(units[k].startswith("[MiB]") for k in want if k.startswith(("memory.", "swap.")))
    assert units["uptime"].startswith("[s]")
    if (recording, tick) == (JOB_REC, 1):  # recorded without CPU figures: null, never 0 or ours
        assert got["cpu_count"] is None and got["cpu_percent"] is None


def test_a_name_whose_only_unusual_character_is_del_is_escaped(tmp_path: Path):
    """DEL (0x7f) is ASCII, so an "all ASCII, nothing to escape" shortcut would let it
    through raw; the document must carry it as \\u007f and read back exactly."""
    with gzip.open(JOB_REC, "rt") as f:
        lines = f.read().splitlines()
    tick = json.loads(lines[1])
    for p in tick["processes"]:
        p["name"] = "python\x7f3"
        p["user"] = "root"
        p["cmdline"] = ["python3", "train.py"]
        p.pop("job", None)
    path = tmp_path / "del.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write("\n".join([lines[0], json.dumps(tick)]) + "\n")
    r = gputui("snapshot", "--replay", str(path), "--tick", "1", "--json", "--processes")
    assert r.returncode == 0, r.stderr
    assert "\x7f" not in r.stdout
    assert "python\\u007f3" in r.stdout
    doc = json.loads(r.stdout)
    assert {p["process_name"] for p in doc["processes"]} == {"python\x7f3"}
