"""Bad input from outside (a recording, the command line) gives a one-line message with
the file and line: never a traceback, never an unbounded amount of memory."""

from __future__ import annotations

import gzip
import json
import math
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import H200_X2, gputui

from gputui.telemetry.recording import MAX_LINE_CHARS, RecordingError, read_recording


def lines_of(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def with_tick(tmp_path: Path, n: int, edit, name: str = "r.jsonl") -> Path:
    """`n` ticks of the real 2x H200 recording (from its training stretch, with processes),
    the second edited by `edit(text) -> text`."""
    all_lines = lines_of(H200_X2)
    lines = [all_lines[0], *all_lines[60 : 60 + n]]
    lines[2] = edit(lines[2])
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def set_field(field: str, value: str):
    def edit(line: str) -> str:
        obj = json.loads(line)
        target = obj
        *parents, last = field.split(".")
        for p in parents:
            target = target[int(p)] if p.isdigit() else target[p]
        target[last] = "@@"
        return json.dumps(obj).replace('"@@"', value)

    return edit


def one_line_error(stderr: str, path: Path, line: int, *fragments: str) -> None:
    assert "Traceback" not in stderr, stderr
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert f"{path}:{line}: " in lines[0], stderr
    for f in fragments:
        assert f in lines[0], stderr


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("timestamp", "1e18", "timestamp: 1e+18 is not a time gputui can show"),
        ("host.uptime", "Infinity", "host.uptime: expected a finite number, got inf"),
        ("gpus.0.power_draw", "NaN", "gpus[0].power_draw: expected a finite number, got nan"),
        ("processes.0.create_time", "-1e300", "processes[0].create_time: -1e+300 is not a time"),
        # Python 3.11+ refuses to convert it (int max str digits); 3.10 converts it, then
        # the reader's 64-bit bound refuses it
        (
            "gpus.0.temperature",
            "1" * 5000,
            "number too long" if sys.version_info >= (3, 11) else "out of range",
        ),
        ("whole_line_ignored", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ],
    ids=["timestamp", "uptime-inf", "nan", "create-time", "5000-digits", "nested-100000"],
)
def test_bad_values_are_one_line_errors_with_file_and_line(tmp_path, field, value, message):
    path = with_tick(tmp_path, 3, set_field(field, value) if "ignored" not in field else (lambda _: value))
    with pytest.raises(RecordingError) as info:
        read_recording(path)
    assert str(info.value).startswith(f"{path}:3: "), info.value
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    r = gputui("snapshot", "--replay", str(path), "--tick", "2", "--json")
    assert r.returncode == 2
    one_line_error(r.stderr, path, 3, message)


def test_snapshot_and_watch_report_a_bad_line_mid_file_in_one_line(tmp_path):
    path = with_tick(tmp_path, 4, lambda line: line[: len(line) // 2])
    r = gputui("snapshot", "--replay", str(path), "--tick", "2")
    assert r.returncode == 2
    one_line_error(r.stderr, path, 3, "not JSON")
    r = gputui("snapshot", "--replay", str(path), "--tick", "1", "--watch", "0.1", "--json")
    assert r.returncode == 2
    one_line_error(r.stderr, path, 3, "not JSON")
    assert len(r.stdout.splitlines()) == 1  # tick 1 was printed before the bad line
    r = gputui("watch", "--replay", str(path), "--interval", "0.1")
    assert r.returncode == 2
    one_line_error(r.stderr, path, 3, "not JSON")


def test_export_says_once_that_a_line_is_bad_however_often_it_loops(tmp_path):
    path = with_tick(tmp_path, 3, lambda line: line[: len(line) // 2])
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gputui",
            "export",
            "--replay",
            str(path),
            "--listen",
            "127.0.0.1:0",
            "--interval",
            "0.1",
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        ready, _, _ = select.select([proc.stderr], [], [], 30)
        assert ready
        assert "serving http://" in proc.stderr.readline()
        # wait until the replay has looped past the bad line several times (3 ticks at 0.1 s)
        time.sleep(2.0)
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    one_line_error(err, path, 3, "not JSON")


def test_a_line_longer_than_the_limit_is_refused_with_bounded_memory(tmp_path):
    """A small gzip holding one huge line: refused at MAX_LINE_CHARS, without reading the
    line into memory (peak RSS of the reading process measured)."""
    size = 100 * 2**20
    path = tmp_path / "bomb.jsonl.gz"
    header = lines_of(H200_X2)[0]
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(header.encode() + b"\n" + b'{"seq": 1, "note": "')
        chunk = b"a" * 2**20
        for _ in range(size // len(chunk)):
            f.write(chunk)
        f.write(b'"}\n')
    assert path.stat().st_size < 2 * 2**20
    code = (
        "import sys\n"
        "from gputui.telemetry.recording import RecordingError, ReplaySource\n"
        "try:\n    ReplaySource(sys.argv[1])\nexcept RecordingError as e:\n    print(e)\n"
        # VmHWM is this address space's own peak; ru_maxrss is not: Linux carries it over
        # fork and exec, so it reported the pytest parent's RSS in a full run
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
        "print(int(hwm.split()[1]) // 1024)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert r.returncode == 0, r.stderr
    message, peak_mib = r.stdout.splitlines()
    assert f"{path}:2: line longer than {MAX_LINE_CHARS // 2**20} MiB" in message
    # the line itself is 100 MiB; reading it whole took 3x that before the limit
    assert int(peak_mib) < 100, r.stdout


def test_a_file_that_is_not_a_recording_says_so(tmp_path):
    smi = Path(__file__).parent / "fixtures" / "h200-x2" / "nvidia-smi-q.txt"
    r = gputui("--replay", str(smi))
    assert r.returncode == 2
    one_line_error(r.stderr, smi, 2, "not a gputui recording", "NVSMI LOG")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    r = gputui("--replay", str(empty))
    one_line_error(r.stderr, empty, 1, "empty file")


@pytest.mark.parametrize("value", ["inf", "nan", "-inf", "1e400"])
@pytest.mark.parametrize(
    "args",
    [
        ("watch", "--interval"),
        ("watch", "--timeout"),
        ("export", "--interval"),
        ("snapshot", "--watch"),
        ("--interval",),
        ("watch", "--rate-limit"),
        ("stress", "--monitor-interval"),
    ],
)
def test_non_finite_numbers_on_the_command_line_are_refused(args, value):
    *command, flag = args
    r = gputui(*command, f"{flag}={value}", timeout=60)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert "finite" in r.stderr or "greater than 0" in r.stderr, r.stderr


def test_json_documents_write_non_finite_numbers_as_null():
    from gputui.export.snapshot import dumps

    text = dumps({"a": math.nan, "b": [math.inf, 1.5], "c": {"d": -math.inf}}, pretty=True)
    assert json.loads(text) == {"a": None, "b": [None, 1.5], "c": {"d": None}}


@pytest.mark.parametrize("tick", [2, 4])
def test_snapshot_processes_past_a_bad_line_is_one_line_not_a_traceback(tmp_path, tick):
    """`snapshot --json --processes --tick N` judges every tick before N (job health): a bad
    line among them, or at N itself, is the same one line as for the other readers (issue
    31: a RecordingError traceback)."""
    path = with_tick(tmp_path, 4, lambda line: line[: len(line) // 2])
    r = gputui("snapshot", "--replay", str(path), "--tick", str(tick), "--json", "--processes")
    assert r.returncode == 2 and r.stdout == ""
    one_line_error(r.stderr, path, 3, "not JSON")
    bad = with_tick(tmp_path, 4, set_field("gpus.0.power_draw", "NaN"), name="nan.jsonl")
    r = gputui("snapshot", "--replay", str(bad), "--tick", str(tick), "--json", "--processes")
    assert r.returncode == 2
    one_line_error(r.stderr, bad, 3, "expected a finite number")
