"""Recordings: exact round trips of the real captures, validation errors that say where, replay."""

from __future__ import annotations

import dataclasses
import gzip
import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import X1_RECORDING, X2_RECORDING

from gputui import __version__
from gputui.telemetry.codec import decode_machine, decode_snapshot, dumps, encode_machine, encode_snapshot
from gputui.telemetry.model import GpuProcess, GpuSample, HostSample, MachineInfo, Snapshot
from gputui.telemetry.recording import (
    FORMAT_VERSION,
    RecordingError,
    RecordingHeader,
    RecordingWriter,
    ReplaySource,
    iter_recording,
    read_recording,
)

RECORDINGS = [X2_RECORDING, X1_RECORDING]


def raw_lines(path: Path) -> list[str]:
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def x2_lines() -> list[str]:
    return raw_lines(X2_RECORDING)


def write_text(path: Path, lines: list[str], *, final_newline: bool = True) -> Path:
    path.write_text("\n".join(lines) + ("\n" if final_newline else ""), encoding="utf-8")
    return path


def expect_error(path: Path, line: int | None, *fragments: str) -> RecordingError:
    with pytest.raises(RecordingError) as info:
        read_recording(path)
    err = info.value
    message = str(err)
    assert err.line == line, message
    assert err.path == str(path)
    where = f"{path}:{line}: " if line is not None else f"{path}: "
    assert message.startswith(where), message
    for fragment in fragments:
        assert fragment in message, message
    return err


# --------------------------------------------------------------------------------------
# Round trips of the real recordings
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
@pytest.mark.parametrize("source", RECORDINGS, ids=["h200-x2", "h200-x1"])
def test_real_recording_round_trips_exactly(source: Path, suffix: str, tmp_path: Path) -> None:
    header, ticks = read_recording(source)
    assert len(ticks) > 100
    out = tmp_path / f"copy{suffix}"
    with RecordingWriter(out, header.machine, header.interval, derived=header.derived, note=header.note) as w:
        for snap in ticks:
            w.write(snap)
    assert w.ticks == len(ticks)
    assert (out.read_bytes()[:2] == b"\x1f\x8b") == suffix.endswith(".gz")

    header2, ticks2 = read_recording(out)
    assert header2.machine == header.machine
    assert header2.interval == header.interval
    assert header2.note == header.note
    assert header2.derived == header.derived
    assert header2.gputui_version == __version__
    assert ticks2 == ticks
    assert [t.seq for t in ticks2] == [t.seq for t in ticks]
    # and at the byte level: every tick line is written exactly as the capture wrote it
    assert raw_lines(out)[1:] == raw_lines(source)[1:]
    assert json.loads(raw_lines(out)[0])["machine"] == json.loads(raw_lines(source)[0])["machine"]


def test_real_recording_contents_are_what_was_captured(
    x2_recording: tuple[RecordingHeader, list[Snapshot]],
) -> None:
    header, ticks = x2_recording
    assert header.machine.system.device_count == 2
    assert [d.name for d in header.machine.devices] == ["NVIDIA H200", "NVIDIA H200"]
    assert header.machine.devices[0].compute_capability == (9, 0)
    assert header.interval == 1.0
    assert [t.seq for t in ticks] == list(range(1, len(ticks) + 1))
    assert all(b.timestamp > a.timestamp for a, b in itertools.pairwise(ticks))
    first = ticks[0].gpus[0]
    assert (first.temperature, first.power_draw, first.sm_clock) == (39, 124.267, 405)
    busy = ticks[58]
    assert busy.gpus[0].gpu_util == 99
    assert {p.pid for p in busy.processes} == {650, 567, 651}
    assert busy.processes[1].cmdline == (
        "python3",
        "bench/load/hold_memory.py",
        "--gib",
        "8",
        "--seconds",
        "80",
        "--device",
        "1",
    )


# --------------------------------------------------------------------------------------
# Encoding and decoding
# --------------------------------------------------------------------------------------


def through_json(obj: Any) -> Any:
    return json.loads(dumps(obj))


def test_encoding_leaves_out_defaults_and_sample_cost(
    x2_recording: tuple[RecordingHeader, list[Snapshot]],
) -> None:
    _, ticks = x2_recording
    snap = dataclasses.replace(ticks[0], sample_cost=0.25)
    encoded = encode_snapshot(snap)
    assert "sample_cost" not in encoded
    assert "processes" not in encoded  # empty tuple: the default
    gpu = encoded["gpus"][0]
    assert "lost" not in gpu  # False: the default
    assert "pcie_rx" not in gpu  # None before the first slow pass
    assert gpu["temperature"] == 39
    decoded = decode_snapshot(through_json(encoded))
    assert decoded == ticks[0]
    assert decoded.sample_cost is None


def test_encode_decode_none_tuples_and_nesting(x2_recording: tuple[RecordingHeader, list[Snapshot]]) -> None:
    header, ticks = x2_recording
    busy = ticks[58]
    proc = dataclasses.replace(busy.processes[0], cmdline=None, user=None, cpu_percent=None, visible=False)
    gpu = dataclasses.replace(busy.gpus[1], temperature=None, power_draw=None, lost=True)
    host = dataclasses.replace(busy.host, load_avg=None, per_cpu=())
    snap = dataclasses.replace(
        busy, gpus=(busy.gpus[0], gpu), processes=(proc, *busy.processes[1:]), host=host
    )
    decoded = decode_snapshot(through_json(encode_snapshot(snap)))
    assert decoded == snap
    assert decoded.processes[0].cmdline is None
    assert decoded.processes[0].visible is False
    assert decoded.gpus[1].lost is True
    assert decoded.gpus[1].temperature is None
    assert decoded.host is not None
    assert decoded.host.load_avg is None
    assert decoded.host.per_cpu == ()
    # tuples come back as tuples, not lists
    assert isinstance(decoded.processes[1].cmdline, tuple)
    assert busy.host is not None
    assert decode_snapshot(through_json(encode_snapshot(busy))).host.load_avg == busy.host.load_avg  # type: ignore[union-attr]

    machine = decode_machine(through_json(encode_machine(header.machine)))
    assert machine == header.machine
    topo = machine.topology
    assert topo is not None
    assert isinstance(topo.levels, tuple)
    assert topo.levels == ((None, 30), (30, None))
    assert all(isinstance(row, tuple) for row in topo.p2p_read)
    assert isinstance(machine.devices[0].compute_capability, tuple)
    assert len(topo.nvlinks) == 2
    assert len(topo.nvlinks[0]) == 18
    assert all(link.active for link in topo.nvlinks[0])

    no_cc = dataclasses.replace(header.machine.devices[0], compute_capability=None, cpu_affinity=None)
    machine = dataclasses.replace(header.machine, devices=(no_cc,), topology=None)
    assert decode_machine(through_json(encode_machine(machine))) == machine


def test_decoding_converts_integers_for_float_fields_but_rejects_booleans(tmp_path: Path) -> None:
    snap = decode_snapshot({"seq": 1, "timestamp": 5, "gpus": [{"index": 0, "power_draw": 100}]})
    assert snap.timestamp == 5.0
    assert isinstance(snap.timestamp, float)
    assert isinstance(snap.gpus[0].power_draw, float)
    header = x2_lines()[0]
    path = write_text(tmp_path / "a.jsonl", [header, '{"seq": 1, "timestamp": 5, "gpus": [{"index": true}]}'])
    expect_error(path, 2, "gpus[0].index: expected an integer, got bool")
    path = write_text(
        tmp_path / "b.jsonl", [header, '{"seq": 1, "timestamp": 5, "gpus": [{"index": 0, "lost": 1}]}']
    )
    expect_error(path, 2, "gpus[0].lost: expected true/false, got int")


def test_model_defaults_are_what_the_encoder_leaves_out() -> None:
    # the format relies on these: a missing field means "not available"
    assert encode_snapshot(Snapshot(seq=1, timestamp=2.0)) == {"seq": 1, "timestamp": 2.0}
    assert _encode_gpu(GpuSample(index=3)) == {"index": 3}
    assert _encode_proc(GpuProcess(gpu_index=0, pid=7)) == {"gpu_index": 0, "pid": 7}
    assert encode_snapshot(Snapshot(seq=1, timestamp=2.0, host=HostSample()))["host"] == {}


def _encode_gpu(g: GpuSample) -> Any:
    return encode_snapshot(Snapshot(seq=0, timestamp=0.0, gpus=(g,)))["gpus"][0]


def _encode_proc(p: GpuProcess) -> Any:
    return encode_snapshot(Snapshot(seq=0, timestamp=0.0, processes=(p,)))["processes"][0]


# --------------------------------------------------------------------------------------
# Errors say file:line and the field
# --------------------------------------------------------------------------------------


def header_with(**changes: Any) -> str:
    obj = json.loads(x2_lines()[0])
    for key, value in changes.items():
        if value is _DELETE:
            del obj[key]
        else:
            obj[key] = value
    return json.dumps(obj)


_DELETE = object()


def tick_with(index: int, edit: Any) -> str:
    obj = json.loads(x2_lines()[1 + index])
    edit(obj)
    return json.dumps(obj)


def test_empty_file(tmp_path: Path) -> None:
    expect_error(write_text(tmp_path / "empty.jsonl", [], final_newline=False), 1, "empty file")
    expect_error(write_text(tmp_path / "blank.jsonl", ["", "  "]), 1, "empty file")
    empty_gz = tmp_path / "empty.jsonl.gz"
    empty_gz.write_bytes(gzip.compress(b""))
    expect_error(empty_gz, 1, "empty file")


def test_missing_file(tmp_path: Path) -> None:
    expect_error(tmp_path / "nope.jsonl", None, "No such file")


def test_not_json_on_line_1(tmp_path: Path) -> None:
    expect_error(write_text(tmp_path / "r.jsonl", ["hello world"]), 1, "not JSON", "gputui recording")
    # a real nvidia-smi CSV log is not a recording either
    csv_copy = tmp_path / "query.csv"
    shutil.copy(X2_RECORDING.parent / "nvidia-smi-query.csv", csv_copy)
    expect_error(csv_copy, 1, "not JSON")


@pytest.mark.parametrize("line", ['{"hello": 1}', "[1, 2, 3]", '"gputui-recording"', '{"format": "other"}'])
def test_json_but_not_a_recording(tmp_path: Path, line: str) -> None:
    expect_error(
        write_text(tmp_path / "r.jsonl", [line]),
        1,
        'not a gputui recording (no "format": "gputui-recording")',
    )


@pytest.mark.parametrize("version", [FORMAT_VERSION + 1, 0, "1", "2", None, True])
def test_unsupported_version(tmp_path: Path, version: Any) -> None:
    path = write_text(tmp_path / "r.jsonl", [header_with(version=version), x2_lines()[1]])
    expect_error(path, 1, f"recording format version {version!r}", "reads versions 1, 2, 3")


def test_version_1_recordings_still_load_without_gpm(tmp_path: Path) -> None:
    """Version 2 added GPM; the version-1 captures read as before, GPM not recorded (None),
    and are written back as the current version with the same tick lines."""
    assert json.loads(x2_lines()[0])["version"] == 1
    header, ticks = read_recording(X2_RECORDING)
    assert all(g.gpm is None for t in ticks for g in t.gpus)
    out = tmp_path / "v2.jsonl"
    with RecordingWriter(out, header.machine, header.interval) as w:
        w.write(ticks[0])
    assert json.loads(raw_lines(out)[0])["version"] == FORMAT_VERSION
    assert raw_lines(out)[1] == x2_lines()[1]


def test_unknown_header_field(tmp_path: Path) -> None:
    path = write_text(tmp_path / "r.jsonl", [header_with(bogus=1, zzz=None), x2_lines()[1]])
    expect_error(path, 1, "unknown header field(s): bogus, zzz")


@pytest.mark.parametrize(
    "interval", [0, -1, "1", True, None, _DELETE], ids=["0", "-1", "str", "bool", "null", "absent"]
)
def test_bad_interval(tmp_path: Path, interval: Any) -> None:
    path = write_text(tmp_path / "r.jsonl", [header_with(interval=interval), x2_lines()[1]])
    expect_error(path, 1, "interval: expected a positive number")


def test_bad_note_and_derived(tmp_path: Path) -> None:
    expect_error(
        write_text(tmp_path / "a.jsonl", [header_with(note=5), x2_lines()[1]]), 1, "note: expected a string"
    )
    expect_error(
        write_text(tmp_path / "b.jsonl", [header_with(derived=[1]), x2_lines()[1]]), 1, "derived: expected"
    )


def test_bad_field_in_the_header_machine(tmp_path: Path) -> None:
    obj = json.loads(x2_lines()[0])
    obj["machine"]["devices"][1]["name"] = 42
    path = write_text(tmp_path / "r.jsonl", [json.dumps(obj), x2_lines()[1]])
    expect_error(path, 1, "machine.devices[1].name: expected a string, got int")
    obj = json.loads(x2_lines()[0])
    obj["machine"]["topology"]["nvlinks"][0][3]["speed"] = 1
    path = write_text(tmp_path / "r.jsonl", [json.dumps(obj), x2_lines()[1]])
    expect_error(path, 1, "machine.topology.nvlinks[0][3]", "unknown field(s) for NvLink: speed")


def test_tick_line_that_is_not_json(tmp_path: Path) -> None:
    lines = x2_lines()
    path = write_text(tmp_path / "r.jsonl", [lines[0], lines[1], '{"seq": 3, "timestamp": ', lines[3]])
    expect_error(path, 3, "not JSON", "column")


def test_unknown_field_in_a_gpu_sample(tmp_path: Path) -> None:
    lines = x2_lines()
    bad = tick_with(0, lambda t: t["gpus"][0].update(bogus=1))
    path = write_text(tmp_path / "r.jsonl", [lines[0], lines[1], lines[2], bad])
    # the object's path and the unknown field's name (the message is "gpus[0]: unknown ... bogus")
    expect_error(path, 4, "gpus[0]: unknown field(s) for GpuSample: bogus")


def test_wrong_types_name_the_field_path(tmp_path: Path) -> None:
    lines = x2_lines()
    cases = [
        (
            lambda t: t["gpus"][1].update(temperature="hot"),
            "gpus[1].temperature: expected an integer, got str 'hot'",
        ),
        (lambda t: t["host"].update(load_avg=[1.0, 2.0]), "host.load_avg: expected a list of 3 values"),
        (lambda t: t["host"]["per_cpu"].__setitem__(4, "x"), "host.per_cpu[4]: expected a number, got str"),
        (lambda t: t.update(gpus={"index": 0}), "gpus: expected a list, got dict"),
        (lambda t: t.pop("seq"), "missing field 'seq' for Snapshot"),
    ]
    for k, (edit, message) in enumerate(cases):
        path = write_text(tmp_path / f"r{k}.jsonl", [lines[0], tick_with(0, edit)])
        expect_error(path, 2, message)
    busy = 58  # a tick with processes
    edit_cmd = tick_with(busy, lambda t: t["processes"][2].update(cmdline="python train.py"))
    path = write_text(tmp_path / "cmd.jsonl", [lines[0], lines[1], edit_cmd])
    expect_error(path, 3, "processes[2].cmdline: expected a list, got str")


def test_gpu_index_beyond_the_header(tmp_path: Path) -> None:
    lines = x2_lines()
    path = write_text(
        tmp_path / "g.jsonl", [lines[0], lines[1], tick_with(1, lambda t: t["gpus"][1].update(index=2))]
    )
    expect_error(path, 3, "gpus: GPU index 2 but the header lists 2 GPU(s)")
    path = write_text(tmp_path / "n.jsonl", [lines[0], tick_with(0, lambda t: t["gpus"][0].update(index=-1))])
    expect_error(path, 2, "GPU index -1")
    bad_proc = tick_with(58, lambda t: t["processes"][0].update(gpu_index=7))
    path = write_text(tmp_path / "p.jsonl", [lines[0], lines[1], lines[2], bad_proc])
    expect_error(path, 4, "processes: GPU index 7 but the header lists 2 GPU(s)")


def test_truncated_gzip_header(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(X2_RECORDING.read_bytes()[:300])
    expect_error(path, 1, "compressed file ends inside the header line")


def test_corrupt_gzip_says_where(tmp_path: Path) -> None:
    lines = x2_lines()
    good = gzip.compress(("\n".join(lines[:4]) + "\n").encode())
    bad = bytearray(gzip.compress(("\n".join(lines[4:8]) + "\n").encode()))
    bad[10] |= 0b110  # first deflate block type 3: reserved, invalid in every zlib
    path = tmp_path / "corrupt.jsonl.gz"
    path.write_bytes(good + bytes(bad))  # two gzip members: lines 1-4 fine, then garbage
    err = expect_error(path, 5, "unreadable", "invalid block type")
    assert isinstance(err, ValueError)


def test_gzip_crc_mismatch(tmp_path: Path) -> None:
    data = bytearray(X1_RECORDING.read_bytes())
    data[-8] ^= 1  # the CRC32 in the trailer
    path = tmp_path / "crc.jsonl.gz"
    path.write_bytes(bytes(data))
    expect_error(path, len(raw_lines(X1_RECORDING)) + 1, "unreadable", "CRC check failed")


def test_every_single_byte_corruption_gives_a_recording_error(tmp_path: Path) -> None:
    """Whatever a flipped byte does to the gzip stream, the reader says so as a RecordingError
    (zlib.error used to escape), or reads a recording that still validates."""
    data = X1_RECORDING.read_bytes()
    path = tmp_path / "flip.jsonl.gz"
    errors: list[RecordingError] = []
    for offset in range(20, len(data) - 8, 331):
        flipped = bytearray(data)
        flipped[offset] ^= 0xFF
        path.write_bytes(bytes(flipped))
        try:
            read_recording(path)
        except RecordingError as exc:  # anything else fails the test
            errors.append(exc)
    assert len(errors) >= 30
    assert all(str(e).startswith(f"{path}:") for e in errors)


def test_header_but_no_ticks(tmp_path: Path) -> None:
    path = write_text(tmp_path / "h.jsonl", [x2_lines()[0]])
    expect_error(path, None, "the recording has a header but no ticks")
    items = list(iter_recording(path))
    assert len(items) == 1
    assert isinstance(items[0], RecordingHeader)
    with pytest.raises(RecordingError):
        ReplaySource(path)


def test_blank_lines_between_ticks_are_skipped_and_counted(tmp_path: Path) -> None:
    lines = x2_lines()
    bad = tick_with(2, lambda t: t["gpus"][0].update(bogus=1))
    path = write_text(tmp_path / "r.jsonl", [lines[0], "", lines[1], "   ", bad])
    expect_error(path, 5, "bogus")


# --------------------------------------------------------------------------------------
# Interrupted recordings
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_interrupted_recording_is_readable_to_its_last_line(
    x2_recording: tuple[RecordingHeader, list[Snapshot]], tmp_path: Path, suffix: str
) -> None:
    header, ticks = x2_recording
    path = tmp_path / f"live{suffix}"
    writer = RecordingWriter(path, header.machine, header.interval)
    try:
        for snap in ticks[:5]:
            writer.write(snap)
        # what is on disk now, as if the process had been killed (no close, no gzip trailer)
        crashed = tmp_path / f"crashed{suffix}"
        shutil.copyfile(path, crashed)
    finally:
        writer.close()
    header2, ticks2 = read_recording(crashed)
    assert header2.machine == header.machine
    assert ticks2 == ticks[:5]


def test_interrupted_gzip_cut_inside_a_line(
    x2_recording: tuple[RecordingHeader, list[Snapshot]], tmp_path: Path
) -> None:
    header, ticks = x2_recording
    path = tmp_path / "live.jsonl.gz"
    writer = RecordingWriter(path, header.machine, header.interval)
    try:
        for snap in ticks[:4]:
            writer.write(snap)
        size4 = path.stat().st_size
        writer.write(ticks[4])
        size5 = path.stat().st_size
        data = path.read_bytes()
    finally:
        writer.close()
    assert size5 > size4 + 40
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(data[: (size4 + size5) // 2])  # half of tick 5's compressed bytes
    assert read_recording(cut)[1] == ticks[:4]


def test_last_line_cut_short_in_a_plain_file(tmp_path: Path) -> None:
    lines = x2_lines()
    cut = write_text(
        tmp_path / "cut.jsonl", [lines[0], lines[1], lines[2], lines[3][:100]], final_newline=False
    )
    _, ticks = read_recording(cut)
    assert [t.seq for t in ticks] == [1, 2]
    # a complete last line without a newline is still read
    whole = write_text(tmp_path / "whole.jsonl", lines[:4], final_newline=False)
    assert [t.seq for t in read_recording(whole)[1]] == [1, 2, 3]
    # but a broken line that was written whole (it ends with a newline) is an error
    broken = write_text(tmp_path / "broken.jsonl", [lines[0], lines[1], lines[2], lines[3][:100]])
    expect_error(broken, 4, "not JSON")


# --------------------------------------------------------------------------------------
# Replay
# --------------------------------------------------------------------------------------


def test_replay_source_plays_then_loops(x1_recording: tuple[RecordingHeader, list[Snapshot]]) -> None:
    header, ticks = x1_recording
    src = ReplaySource(X1_RECORDING)
    assert src.live is False
    assert src.label == "recording-v1mem.jsonl.gz"
    assert src.open() == header.machine
    assert src.interval == 1.0
    assert src.read_topology() == header.machine.topology
    assert src.notes() == []
    n = len(ticks)
    played = [src.sample() for _ in range(n)]
    assert played == ticks
    assert (src.position, src.loops) == (n - 1, 0)
    assert src.sample() == ticks[0]
    assert (src.position, src.loops) == (0, 1)
    for _ in range(n):
        src.sample()
    assert (src.position, src.loops) == (0, 2)
    src.close()


def test_replay_source_without_loop_holds_the_last_tick() -> None:
    src = ReplaySource(X1_RECORDING, loop=False)
    n = len(src.ticks)
    for _ in range(n + 3):
        last = src.sample()
    assert last.seq == src.ticks[-1].seq
    assert (src.position, src.loops) == (n - 1, 0)


def test_replay_seek(x2_recording: tuple[RecordingHeader, list[Snapshot]]) -> None:
    _, ticks = x2_recording
    n = len(ticks)
    src = ReplaySource(X2_RECORDING)
    src.seek(9)
    assert src.sample() == ticks[10]
    assert src.position == 10
    src.seek(-1)  # the next sample is the first tick; seeking is not looping
    assert src.sample() == ticks[0]
    assert src.loops == 0
    src.seek(-2)  # wraps backwards to the last tick
    assert src.sample() == ticks[n - 1]
    assert src.loops == 0
    src.seek(n + 4)  # wraps forwards
    assert src.sample() == ticks[5]
    src.seek(n - 1)
    assert src.sample() == ticks[0]
    assert src.loops == 0
    # playing through the end does count
    src.seek(n - 2)
    assert src.sample() == ticks[n - 1]
    assert src.sample() == ticks[0]
    assert src.loops == 1


def test_machine_info_equality_is_by_value(x2_recording: tuple[RecordingHeader, list[Snapshot]]) -> None:
    header, _ = x2_recording
    other = read_recording(X2_RECORDING)[0].machine
    assert other == header.machine
    assert other is not header.machine
    changed = dataclasses.replace(header.machine, devices=header.machine.devices[:1])
    assert changed != header.machine
    assert isinstance(changed, MachineInfo)
