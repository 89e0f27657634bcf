"""The derived scale-test recordings in tests/fixtures/derived: they read back, promise what
their names say, invent no GPU telemetry, and are exactly what `bench/derive.py scale` makes."""

from __future__ import annotations

import dataclasses
import gzip
import itertools
import json
import os
import subprocess
import sys
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest

from gputui.telemetry.model import GpuSample, Snapshot
from gputui.telemetry.recording import FORMAT_VERSION, READABLE_VERSIONS, RecordingHeader, read_recording

REPO = Path(__file__).resolve().parents[1]
DERIVED = REPO / "tests/fixtures/derived"
BASE = "tests/fixtures/h200-x2/recording.jsonl.gz"
SCRIPT = REPO / "bench/derive.py"

#: file -> the generator's arguments (the README's commands) and what the file promises
FIXTURES: dict[str, dict[str, int | str]] = {
    "h200x8-nvswitch-240procs.jsonl.gz": {
        "gpus": 8,
        "processes": 240,
        "ticks": 121,
        "topology": "nvswitch",
        "stagger": 7,
        "cpus": 128,
    },
    "h200x8-mixed-topology.jsonl.gz": {
        "gpus": 8,
        "processes": 40,
        "ticks": 121,
        "topology": "mixed",
        "stagger": 7,
        "cpus": 128,
    },
    "h200x16-nvswitch-256procs.jsonl.gz": {
        "gpus": 16,
        "processes": 256,
        "ticks": 100,
        "topology": "nvswitch",
        "stagger": 4,
        "cpus": 256,
    },
}
NAMES = sorted(FIXTURES)


@cache
def load(path: str) -> tuple[RecordingHeader, list[Snapshot]]:
    return read_recording(path)


def derived(name: str) -> tuple[RecordingHeader, list[Snapshot]]:
    return load(str(DERIVED / name))


def base() -> tuple[RecordingHeader, list[Snapshot]]:
    return load(str(REPO / BASE))


def gpu_fields(g: GpuSample) -> tuple[object, ...]:
    """A sample's values, all but its index."""
    return tuple(getattr(g, f.name) for f in dataclasses.fields(g) if f.name != "index")


def generate(name: str, out: Path) -> None:
    args = FIXTURES[name]
    cmd = [sys.executable, str(SCRIPT), "scale", "--out", str(out)]
    for key in ("gpus", "processes", "ticks", "topology", "stagger"):
        cmd += [f"--{key}", str(args[key])]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    subprocess.run(cmd, check=True, cwd=REPO, env=env, capture_output=True)


# --------------------------------------------------------------------------------------
# Header and counts
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_reads_back_and_says_it_is_derived(name: str) -> None:
    header, ticks = derived(name)
    assert (DERIVED / name).stat().st_size <= 300 * 1024
    assert header.note is not None
    assert header.note.startswith("DERIVED (not a real machine)")
    d = header.derived
    assert d is not None
    assert d["from"] == [BASE]
    assert d["generator"] == "bench/derive_recording.py"  # `derive.py scale` keeps its former name
    assert isinstance(d["seed"], int)
    assert isinstance(d["how"], str)
    assert len(d["how"]) > 200
    assert d["args"] == FIXTURES[name]
    assert header.interval == base()[0].interval
    assert len(ticks) == FIXTURES[name]["ticks"]
    assert [s.seq for s in ticks] == list(range(1, len(ticks) + 1))
    assert all(a.timestamp < b.timestamp for a, b in itertools.pairwise(ticks))


@pytest.mark.parametrize("name", NAMES)
def test_gpu_count(name: str) -> None:
    header, ticks = derived(name)
    n = FIXTURES[name]["gpus"]
    assert header.machine.system.device_count == n
    assert [d.index for d in header.machine.devices] == list(range(n))
    for snap in ticks:
        assert [g.index for g in snap.gpus] == list(range(n))


def process_counts(ticks: list[Snapshot]) -> tuple[int, int]:
    distinct = {(p.pid, p.create_time) for s in ticks for p in s.processes}
    return len(distinct), max(len(s.processes) for s in ticks)


def test_process_counts() -> None:
    distinct, peak = process_counts(derived("h200x8-nvswitch-240procs.jsonl.gz")[1])
    assert distinct >= 200
    assert peak >= 200
    _, peak = process_counts(derived("h200x16-nvswitch-256procs.jsonl.gz")[1])
    assert peak >= 200
    distinct, peak = process_counts(derived("h200x8-mixed-topology.jsonl.gz")[1])
    assert 30 <= peak <= 40
    assert distinct >= 40


@pytest.mark.parametrize("name", NAMES)
def test_processes_are_stable_and_change(name: str) -> None:
    _, ticks = derived(name)
    first: dict[int, tuple[object, ...]] = {}
    seen_at: dict[int, list[int]] = defaultdict(list)
    for t, snap in enumerate(ticks):
        pids = [p.pid for p in snap.processes]
        assert len(pids) == len(set(pids)), f"tick {t}: a PID twice"
        for p in snap.processes:
            ident = (p.gpu_index, p.create_time, p.cmdline, p.name, p.user)
            assert first.setdefault(p.pid, ident) == ident, f"PID {p.pid} changed identity"
            seen_at[p.pid].append(t)
            assert p.visible
            assert p.user == "root"
            assert p.cmdline
            assert p.create_time is not None
            assert p.create_time <= snap.timestamp + 1
            assert p.gpu_memory is not None
            assert p.gpu_memory >= 0
    for pid, ts in seen_at.items():
        assert ts == list(range(ts[0], ts[-1] + 1)), f"PID {pid} comes back after it ended"
    last = len(ticks) - 1
    assert any(ts[0] > 0 for ts in seen_at.values()), "no process starts mid-file"
    assert any(ts[-1] < last for ts in seen_at.values()), "no process ends mid-file"
    kinds = {p.cmdline[1] if p.cmdline[0] == "python3" else p.cmdline[2] for s in ticks for p in s.processes}
    assert kinds == {"bench/load/hold_memory.py", "bench/load/ddp_like.py"}


@pytest.mark.parametrize("name", NAMES)
def test_process_memory_fits_in_mem_used(name: str) -> None:
    _, ticks = derived(name)
    for t, snap in enumerate(ticks):
        used: dict[int, int] = defaultdict(int)
        for p in snap.processes:
            used[p.gpu_index] += p.gpu_memory or 0
        for g in snap.gpus:
            assert g.mem_used is not None
            assert used[g.index] <= g.mem_used, f"tick {t} GPU {g.index}"


# --------------------------------------------------------------------------------------
# Nothing invented: GPU samples, devices and host come from the real recording
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_every_gpu_sample_is_a_real_one(name: str) -> None:
    _, real = base()
    real_values = {gpu_fields(g) for s in real for g in s.gpus}
    header, ticks = derived(name)
    stagger = FIXTURES[name]["stagger"]
    assert isinstance(stagger, int)
    n, n_real = len(real), len(real[0].gpus)
    for t, snap in enumerate(ticks):
        for g in snap.gpus:
            assert gpu_fields(g) in real_values, f"tick {t} GPU {g.index}: not a real sample"
            # and exactly the one the header's recipe names
            twin = real[(t + stagger * g.index) % n].gpus[g.index % n_real]
            assert gpu_fields(g) == gpu_fields(twin)
    busy = {g.index for s in ticks for g in s.gpus if (g.gpu_util or 0) > 90}
    idle = {g.index for s in ticks for g in s.gpus if g.gpu_util == 0}
    assert busy == idle == set(range(len(header.machine.devices)))
    # not in lockstep: somewhere one GPU is busy while another idles
    utils = [[g.gpu_util or 0 for g in s.gpus] for s in ticks]
    assert any(min(u) == 0 and max(u) > 90 for u in utils)


@pytest.mark.parametrize("name", NAMES)
def test_devices_copy_the_real_ones(name: str) -> None:
    real_header, _ = base()
    header, _ = derived(name)
    devs = header.machine.devices
    changed = {"index", "uuid", "bus_id", "minor_number", "numa_node", "cpu_affinity"}
    for d in devs:
        r = real_header.machine.devices[d.index % len(real_header.machine.devices)]
        for f in dataclasses.fields(d):
            if f.name not in changed:
                assert getattr(d, f.name) == getattr(r, f.name), f.name
        assert d.minor_number == d.index
        assert d.uuid is not None
        assert d.uuid.startswith("GPU-derived-")
    assert len({d.uuid for d in devs}) == len(devs)
    assert len({d.bus_id for d in devs}) == len(devs)
    assert not {d.uuid for d in devs} & {d.uuid for d in real_header.machine.devices}


@pytest.mark.parametrize("name", NAMES)
def test_host_is_the_real_host_on_more_cpus(name: str) -> None:
    _, real = base()
    _, ticks = derived(name)
    cpus = FIXTURES[name]["cpus"]
    for t, snap in enumerate(ticks):
        r = real[t % len(real)].host
        h = snap.host
        assert r is not None
        assert h is not None
        assert len(h.per_cpu) == cpus
        assert dataclasses.replace(h, per_cpu=r.per_cpu) == r
        k = len(r.per_cpu)
        for start in range(0, len(h.per_cpu), k):
            assert sorted(h.per_cpu[start : start + k]) == sorted(r.per_cpu)


# --------------------------------------------------------------------------------------
# Topology
# --------------------------------------------------------------------------------------


def test_nvswitch_topology_is_the_real_shape() -> None:
    real_topo = base()[0].machine.topology
    assert real_topo is not None
    for name in ("h200x8-nvswitch-240procs.jsonl.gz", "h200x16-nvswitch-256procs.jsonl.gz"):
        topo = derived(name)[0].machine.topology
        assert topo is not None
        n = len(topo.levels)
        for i in range(n):
            for j in range(n):
                want = None if i == j else "OK"
                assert topo.levels[i][j] == (None if i == j else 30)
                assert topo.p2p_read[i][j] == topo.p2p_write[i][j] == want
                assert topo.p2p_atomics[i][j] == topo.p2p_nvlink[i][j] == want
        for links in topo.nvlinks:
            assert links == real_topo.nvlinks[0]
            assert len(links) == 18
            assert all(
                lk.active and lk.version == 6 and lk.remote_bus_id == "FFFFFFFF:FF:FF.0" for lk in links
            )


def test_mixed_topology() -> None:
    header, _ = derived("h200x8-mixed-topology.jsonl.gz")
    topo = header.machine.topology
    devs = header.machine.devices
    assert topo is not None
    n = len(devs)
    matrices = {
        "levels": topo.levels,
        "p2p_read": topo.p2p_read,
        "p2p_write": topo.p2p_write,
        "p2p_atomics": topo.p2p_atomics,
        "p2p_nvlink": topo.p2p_nvlink,
    }
    for what, m in matrices.items():
        assert len(m) == n
        for i in range(n):
            assert m[i][i] is None
            for j in range(n):
                assert m[i][j] == m[j][i], f"{what} not symmetric at {i},{j}"
    by_bus = {d.bus_id: d.index for d in devs}
    links = [[0] * n for _ in range(n)]
    for i, gl in enumerate(topo.nvlinks):
        for lk in gl:
            if lk.active:
                links[i][by_bus[lk.remote_bus_id]] += 1
    nvlink_pairs, sys_pairs, pix_pairs = set(), set(), set()
    for i in range(n):
        for j in range(i + 1, n):
            assert links[i][j] == links[j][i], f"NVLink {i}-{j} not symmetric"
            same_group = (i < 4) == (j < 4)
            if links[i][j]:
                assert same_group
                assert links[i][j] == 4
                assert topo.p2p_nvlink[i][j] == "OK"
                assert topo.p2p_read[i][j] == "OK"
                nvlink_pairs.add((i, j))
            else:
                assert topo.p2p_nvlink[i][j] == "not supported"
            if topo.levels[i][j] == 50:
                assert not same_group
                assert topo.p2p_read[i][j] == "topology not supported"
                sys_pairs.add((i, j))
            if topo.levels[i][j] == 10:
                pix_pairs.add((i, j))
    assert len(nvlink_pairs) == 11
    assert len(sys_pairs) == 16
    assert pix_pairs == {(6, 7)}
    assert [sum(1 for lk in gl if lk.active) for gl in topo.nvlinks] == [12] * 6 + [8, 8]
    assert [d.numa_node for d in devs] == [0] * 4 + [1] * 4
    assert [d.cpu_affinity for d in devs] == ["0-63"] * 4 + ["64-127"] * 4


# --------------------------------------------------------------------------------------
# Determinism: the committed files are what the script makes
# --------------------------------------------------------------------------------------


def lines(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


@pytest.mark.parametrize("name", NAMES)
def test_regenerating_gives_the_same_file(name: str, tmp_path: Path) -> None:
    out = tmp_path / name
    generate(name, out)
    committed, fresh = lines(DERIVED / name), lines(out)
    h1, h2 = json.loads(committed[0]), json.loads(fresh[0])
    del h1["created"], h2["created"]
    # the format version is the writer's current one (3 since GpuProcess.state); the files
    # were made as version 2, and nothing a version-3 writer adds is in them
    assert h1.pop("version") in READABLE_VERSIONS and h2.pop("version") == FORMAT_VERSION
    assert h1 == h2
    assert committed[1:] == fresh[1:]  # byte-identical ticks
    assert read_recording(out)[1] == derived(name)[1]


def test_mixed_needs_an_even_number_of_gpus(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, str(SCRIPT), "scale", "--gpus", "5", "--processes", "10", "--topology", "mixed"]
    cmd += ["--out", str(tmp_path / "x.jsonl")]
    res = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True)
    assert res.returncode != 0
    assert "even number" in res.stderr
