"""`gputui snapshot`: nvidia-smi's CSV (names, units, formatting) checked against nvidia-smi's
own output recorded on the same machines, the JSON document against its committed schema,
and the exit status without NVML (real: there is no driver here)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from conftest import FIXTURES, H100_GPM, H200_X1, H200_X2, NOGPU, gputui
from diag_support import driver_present

from gputui.export import snapshot as fmt
from gputui.export import snapshot_fields as fields_fmt
from gputui.telemetry.recording import read_recording

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_FILE = ROOT / "gputui" / "schemas" / "snapshot-v1.json"
MIB = 2**20


def smi_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    rows = list(csv.reader(path.read_text().splitlines(), skipinitialspace=True))
    return rows[0], rows[1:]


def recorded_query_fields() -> list[str]:
    """The --query-gpu list bench/record_real.sh gave nvidia-smi (with its aliases)."""
    m = re.search(r"^fields=(\S+)", (ROOT / "bench" / "record_real.sh").read_text(), re.M)
    assert m
    return m.group(1).split(",")


# ---- CSV against nvidia-smi ------------------------------------------------------------


@pytest.mark.parametrize("fixture", ["h200-x2", "h200-x1-v2"])
def test_csv_header_is_nvidia_smis_for_the_same_query(fixture):
    fields = recorded_query_fields()
    smi_header, _ = smi_csv(FIXTURES / fixture / "nvidia-smi-query.csv")
    r = gputui(
        "snapshot", "--replay", str(FIXTURES / fixture / "recording.jsonl.gz"), "--fields", ",".join(fields)
    )
    assert r.returncode == 0, r.stderr
    ours = r.stdout.splitlines()[0]
    # nvidia-smi names the column by the field's canonical name (clocks.sm -> clocks.current.sm)
    assert ours == ", ".join(smi_header)


@pytest.mark.parametrize("fixture", ["h200-x2", "h200-x1-v2"])
def test_static_fields_print_exactly_what_nvidia_smi_printed(fixture):
    """nvidia-smi-static.csv was written on the recording machine: the same query through
    gputui gives byte-identical rows (static facts do not change between the two runs)."""
    path = FIXTURES / fixture / "nvidia-smi-static.csv"
    text = path.read_text()
    header, _ = smi_csv(path)
    query = [h.split(" [")[0] for h in header]
    r = gputui(
        "snapshot", "--replay", str(FIXTURES / fixture / "recording.jsonl.gz"), "--fields", ",".join(query)
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == text


def test_dynamic_fields_are_formatted_as_nvidia_smi_formats_them():
    _, smi_rows = smi_csv(FIXTURES / "h200-x2" / "nvidia-smi-query.csv")
    r = gputui(
        "snapshot", "--replay", str(H200_X2), "--tick", "60", "--fields", ",".join(recorded_query_fields())
    )
    header, *rows = list(csv.reader(r.stdout.splitlines(), skipinitialspace=True))
    assert len(rows) == 2

    def shape(value: str) -> str:
        return re.sub(r"\d", "9", re.sub(r"0x[0-9a-f]{16}", "0xMASK", value))

    busy = [row for row in smi_rows if row[2] == "99 %"]  # nvidia-smi rows from the same busy phase
    for column, name in enumerate(header):
        if name == "timestamp":
            assert re.fullmatch(r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}", rows[0][column])
            continue
        smi_shapes = {re.sub(r"9+", "9", shape(row[column])) for row in busy}
        for row in rows:
            assert re.sub(r"9+", "9", shape(row[column])) in smi_shapes, (name, row[column], smi_shapes)


def test_csv_values_are_the_recorded_tick(x2_recording):
    _, ticks = x2_recording
    tick = ticks[59]
    r = gputui(
        "snapshot",
        "--replay",
        str(H200_X2),
        "--tick",
        "60",
        "--format",
        "csv,noheader,nounits",
        "--fields",
        "index,memory.used,memory.free,utilization.gpu,power.draw,temperature.gpu,clocks.sm,pstate,"
        "clocks_event_reasons.active,pcie.throughput.rx,energy.consumption",
    )
    assert r.returncode == 0, r.stderr
    rows = list(csv.reader(r.stdout.splitlines(), skipinitialspace=True))
    for row, g in zip(rows, tick.gpus, strict=True):
        assert row == [
            str(g.index),
            str(-(-g.mem_used // MIB)),  # nvidia-smi rounds MiB up
            str(-(-g.mem_free // MIB)),
            str(g.gpu_util),
            f"{g.power_draw:.2f}",
            str(g.temperature),
            str(g.sm_clock),
            f"P{g.pstate}",
            f"0x{g.clock_event_reasons:016x}",
            str(g.pcie_rx // 1024),
            str(g.energy),
        ]


def test_units_noheader_and_na():
    r = gputui("snapshot", "--replay", str(H200_X1), "--fields", "index,fan.speed,memory.used,power.draw")
    lines = r.stdout.splitlines()
    assert lines[0] == "index, fan.speed [%], memory.used [MiB], power.draw [W]"
    assert re.fullmatch(r"0, \[N/A\], \d+ MiB, \d+\.\d\d W", lines[1])  # no fan on an H200
    r2 = gputui(
        "snapshot",
        "--replay",
        str(H200_X1),
        "--fields",
        "index,fan.speed,memory.used",
        "--nounits",
        "--noheader",
    )
    assert re.fullmatch(r"0, \[N/A\], \d+\n", r2.stdout)


def test_processes_csv_one_row_per_process(x2_recording):
    _, ticks = x2_recording
    r = gputui("snapshot", "--replay", str(H200_X2), "--tick", "50", "--processes", "--nounits")
    assert r.returncode == 0, r.stderr
    header, *rows = list(csv.reader(r.stdout.splitlines(), skipinitialspace=True))
    assert header[:5] == ["gpu_index", "gpu_uuid", "pid", "process_name", "used_gpu_memory [MiB]"]
    procs = sorted(ticks[49].processes, key=lambda p: (p.gpu_index, p.pid))
    assert [(int(row[0]), int(row[2]), int(row[4])) for row in rows] == [
        (p.gpu_index, p.pid, p.gpu_memory // MIB) for p in procs
    ]
    assert rows[1][-1] == "python3 bench/load/hold_memory.py --gib 8 --seconds 80 --device 1"


def test_a_comma_in_a_command_line_is_quoted(x2_recording):
    """Derived: a real tick whose process command line is given a comma and a quote."""
    header, ticks = x2_recording
    tick = ticks[49]
    p = dataclasses.replace(tick.processes[0], cmdline=("python", "train.py", "--tags=a,b", 'say "hi"'))
    snap = dataclasses.replace(tick, processes=(p,))
    text = fmt.csv_text(
        header.machine,
        snap,
        fields_fmt.select(["pid", "command"], fields_fmt.PROCESS_BY_NAME, "process"),
        processes=True,
    )
    rows = list(csv.reader(io.StringIO(text), skipinitialspace=True))
    assert rows[1] == [str(p.pid), "python train.py --tags=a,b 'say \"hi\"'"]


def test_watch_repeats_with_one_header():
    r = gputui(
        "snapshot",
        "--replay",
        str(H200_X2),
        "--tick",
        "118",
        "--watch",
        "0.01",
        "--fields",
        "index,memory.used",
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "index, memory.used [MiB]"
    assert len(lines) == 1 + 4 * 2  # ticks 118..121, two GPUs each
    r = gputui("snapshot", "--replay", str(H200_X2), "--tick", "119", "--watch", "0.01", "--json")
    docs = [json.loads(line) for line in r.stdout.splitlines()]  # one compact document per line
    assert [d["source"]["tick"] for d in docs] == [119, 120, 121]


# ---- JSON --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


def test_committed_schema_is_the_one_gputui_prints():
    assert json.loads(SCHEMA_FILE.read_text()) == fmt.schema()
    r = gputui("snapshot", "--schema")
    assert json.loads(r.stdout) == fmt.schema()


@pytest.mark.parametrize(
    ("recording", "tick"),
    [
        (H200_X2, 1),
        (H200_X2, 50),
        (H200_X1, 100),
        (FIXTURES / "derived" / "h200x8-nvswitch-240procs.jsonl.gz", 5),
        (H100_GPM, 50),
    ],
)
def test_json_validates_against_the_schema(validator, recording, tick):
    r = gputui("snapshot", "--replay", str(recording), "--tick", str(tick), "--json", "--processes")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    validator.validate(doc)
    assert doc["source"] == {"kind": "replay", "file": str(recording), "tick": tick}
    header, ticks = read_recording(recording)
    snap = ticks[tick - 1]
    assert doc["timestamp"] == snap.timestamp
    assert len(doc["gpus"]) == len(header.machine.devices)
    assert len(doc["processes"]) == len(snap.processes)
    for obj, g in zip(doc["gpus"], snap.gpus, strict=True):
        assert obj["memory.used"] == -(-g.mem_used // MIB)  # nvidia-smi's MiB: rounded up
        assert obj["utilization.gpu"] == g.gpu_util
        assert obj["power.draw"] == g.power_draw  # full precision in JSON
        assert "timestamp" not in obj  # document-level facts are not repeated per GPU


def test_json_fields_select_gpu_and_process_fields(validator):
    r = gputui(
        "snapshot", "--replay", str(H200_X2), "--tick", "50", "--json", "--processes",
        "--fields", "memory.used,utilization.gpu,used_gpu_memory,user",
    )  # fmt: skip
    doc = json.loads(r.stdout)
    validator.validate(doc)
    assert set(doc["gpus"][0]) == {"index", "memory.used", "utilization.gpu"}
    assert set(doc["processes"][0]) == {"gpu_index", "pid", "used_gpu_memory", "user"}


def test_a_validator_rejects_what_the_schema_forbids(validator):
    r = gputui("snapshot", "--replay", str(H200_X2), "--json")
    doc = json.loads(r.stdout)
    doc["gpus"][0]["memory.used"] = "10 GiB"
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(doc)
    doc = json.loads(r.stdout)
    doc["gpus"][0]["vram"] = 1
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(doc)


# ---- errors and exit codes ------------------------------------------------------------------


@pytest.mark.skipif(driver_present(), reason="a GPU driver is installed here: NVML is available")
def test_without_nvml_exit_2_with_the_reason_on_stderr(validator):
    r = gputui("snapshot", "--csv")
    assert r.returncode == 2
    assert r.stdout == ""
    assert "gputui snapshot: NVML unavailable: NVML Shared Library Not Found (NVML error 12)" in r.stderr
    r = gputui("snapshot", "--json")  # a script reading the JSON gets JSON that says why
    assert r.returncode == 2
    doc = json.loads(r.stdout)
    validator.validate(doc)
    assert doc["gpus"] == [] and doc["error"]["code"] == 12
    assert "NVML Shared Library Not Found (NVML error 12)" in r.stderr


@pytest.mark.parametrize("flags", [("--json",), ("--json", "--processes"), ("--format", "json")])
def test_json_without_nvml_is_json_with_the_reason_and_exit_2(validator, flags):
    """A recording of a machine without a driver (as a live run there): the document, valid
    against the schema, with no GPUs and `error` saying why; exit status 2 (issue 31: it
    printed nothing)."""
    r = gputui("snapshot", "--replay", str(NOGPU), *flags)
    assert r.returncode == 2
    doc = json.loads(r.stdout)
    validator.validate(doc)
    assert doc["gpus"] == [] and doc["source"]["kind"] == "replay"
    e = doc["error"]
    assert e["kind"] == "nvml_unavailable" and e["error"] and e["meaning"] and isinstance(e["advice"], list)
    assert f"gputui snapshot: NVML unavailable: {e['error']}" in r.stderr
    r = gputui("snapshot", "--replay", str(NOGPU))  # CSV: nothing on stdout, the reason on stderr
    assert r.returncode == 2 and r.stdout == "" and "NVML unavailable" in r.stderr


def test_bad_arguments():
    r = gputui("snapshot", "--replay", str(H200_X2), "--fields", "index,vram")
    assert r.returncode == 2
    assert "unknown GPU field 'vram'" in r.stderr
    r = gputui("snapshot", "--replay", str(H200_X2), "--json", "--fields", "vram")
    assert r.returncode == 2
    assert "'vram'" in r.stderr
    r = gputui("snapshot", "--replay", str(H200_X2), "--format", "csv,nocolor")
    assert r.returncode == 2
    assert "expected json or csv[,noheader][,nounits]" in r.stderr
    r = gputui("snapshot", "--replay", str(H200_X2), "--tick", "500")
    assert r.returncode == 2
    assert "ticks 1 to 121" in r.stderr


def test_list_fields_marks_gputuis_own():
    r = gputui("snapshot", "--list-fields")
    assert r.returncode == 0
    assert re.search(r"^    memory\.used \[MiB\]\s+memory used", r.stdout, re.M)
    assert re.search(r"^  \* pcie\.throughput\.rx \[KB/s\]", r.stdout, re.M)


def test_headless_commands_never_import_textual():
    code = (
        "import sys, contextlib, io\n"
        "from gputui.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main(['snapshot', '--replay', {str(H200_X2)!r}, '--json'])\n"
        f"    main(['watch', '--replay', {str(H200_X2)!r}, '--interval', '0.001'])\n"
        "    main(['--print-config'])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'prometheus_client')))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_the_readme_prologue_picks_the_freest_idle_gpu(x2_recording):
    """The documented job prologue (docs/exporter.md), run on snapshots of real ticks (idle,
    then both busy)."""
    readme = (ROOT / "docs" / "exporter.md").read_text()
    script = readme.split("python3 -c '", 1)[1].split("')", 1)[0]
    _, ticks = x2_recording
    idle = gputui("snapshot", "--replay", str(H200_X2), "--tick", "25", "--json")
    r = subprocess.run(
        [sys.executable, "-c", script], input=idle.stdout, capture_output=True, text=True, check=False
    )
    free = {g.index: g.mem_free for g in ticks[24].gpus}
    assert r.returncode == 0
    assert int(r.stdout) == max(free, key=free.get)
    busy = gputui("snapshot", "--replay", str(H200_X2), "--tick", "60", "--json")
    r = subprocess.run(
        [sys.executable, "-c", script], input=busy.stdout, capture_output=True, text=True, check=False
    )
    assert r.returncode == 1
    assert "no idle GPU" in r.stderr


@pytest.mark.parametrize("table", [fields_fmt.GPU_FIELDS, fields_fmt.PROCESS_FIELDS], ids=["gpu", "process"])
def test_each_field_declares_the_static_facts_it_reads(x2_recording, table):
    """A live snapshot reads only the static facts its fields declare (NvmlSource's static=):
    a field that read an undeclared fact would print null.  Every field must give the same
    value from a DeviceInfo holding only index, name, UUID, bus id and what it declares."""
    header, ticks = x2_recording
    snap = ticks[59]
    assert snap.processes
    checked = 0
    for f in table:
        for dev in header.machine.devices:
            keep = {"index", "name", "uuid", "bus_id", *f.static}
            trimmed = dataclasses.replace(
                dev, **{x.name: x.default for x in dataclasses.fields(dev) if x.name not in keep}
            )
            assert trimmed != dev or not f.static  # the trimming removes something
            gpu = next(g for g in snap.gpus if g.index == dev.index)
            for proc in [p for p in snap.processes if p.gpu_index == dev.index] or [None]:
                full = fields_fmt.Ctx(header.machine, snap, dev, gpu, proc)
                part = fields_fmt.Ctx(header.machine, snap, trimmed, gpu, proc)
                assert f.get(part) == f.get(full), f.name
                checked += 1
    assert checked >= len(table) * 2
    everything = fields_fmt.static_facts(fields_fmt.GPU_FIELDS)
    assert {"memory_total", "vbios_version", "ecc_mode", "max_sm_clock"} <= everything
    assert not {"numa_node", "cpu_affinity", "temp_slowdown", "bar1_total"} & everything  # never printed


def test_a_snapshot_imports_no_other_subcommand():
    code = (
        "import sys, contextlib, io\n"
        "from gputui.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main(['snapshot', '--replay', {str(H200_X2)!r}, '--json'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('gputui.commands.')))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "['gputui.commands.common', 'gputui.commands.snapshot']"


def test_a_subcommand_name_as_an_option_value_is_not_the_subcommand(tmp_path):
    """`gputui --replay watch snapshot ...`: a recording named "watch", then the snapshot."""
    (tmp_path / "watch").write_bytes(H200_X2.read_bytes())
    argv = ["--replay", "watch", "snapshot", "--replay", "watch", "--fields", "index"]
    r = subprocess.run(
        [sys.executable, "-m", "gputui", *argv],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["index", "0", "1"]
    r = gputui("snapshto")
    assert r.returncode == 2
    assert "invalid choice: 'snapshto' (choose from 'record', 'snapshot', 'watch', 'export'" in r.stderr


def test_gpm_fields_are_the_recorded_window(validator):
    """The H100 under a float32 matmul: GPM figures in the JSON (percent, bytes/s) and CSV."""
    from gpm_support import FP32, phase_ticks

    tick = phase_ticks(FP32)[3]
    w = tick.gpus[0].gpm
    assert w is not None
    r = gputui("snapshot", "--replay", str(H100_GPM), "--tick", str(tick.seq), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    validator.validate(doc)
    gpu = doc["gpus"][0]
    assert gpu["gpm.unavailable"] is None
    assert gpu["gpm.sm_active"] == w.sm_active
    assert gpu["gpm.tensor_active"] == w.tensor_active == 0.0  # a measured 0, not N/A
    assert gpu["gpm.fp32_active"] == w.fp32_active
    assert gpu["gpm.pcie_rx"] == w.pcie_rx
    fields = "index,gpm.sm_active,gpm.tensor_active,gpm.dram_active,gpm.pcie_rx"
    r = gputui("snapshot", "--replay", str(H100_GPM), "--tick", str(tick.seq), "--fields", fields)
    assert r.stdout.splitlines() == [
        "index, gpm.sm_active [%], gpm.tensor_active [%], gpm.dram_active [%], gpm.pcie_rx [B/s]",
        f"0, {w.sm_active} %, 0.0 %, {w.dram_active} %, {w.pcie_rx} B/s",
    ]


def test_gpm_fields_are_null_where_not_recorded():
    r = gputui("snapshot", "--replay", str(H200_X2), "--tick", "50", "--json")
    gpus = json.loads(r.stdout)["gpus"]
    assert {g["gpm.sm_active"] for g in gpus} == {None}
    # null figures come with the reason: a null gpm.unavailable means "measured"
    assert {g["gpm.unavailable"] for g in gpus} == {fields_fmt.NO_WINDOW_REPLAY}
