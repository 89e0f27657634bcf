"""Issue 24 item 16 (a): GPU memory held by other processes.  The probe's verdict
(`probe/memory.py`'s `judge_memory`, loaded by path as the child loads it) fed the values of a
real H100 recording (tests/fixtures/h100-x1-job: a job of three ranks, a bystander, a holder
in a Slurm-like cgroup), and the same recording with one holder grown to 77 GiB (the case a
real H100 showed: the diagnosis said PASS); then the event through the parent's verdicts."""

from __future__ import annotations

import copy
import gzip
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from conftest import H200_X1
from diag_support import make_bare_venv, run_probe_checks

from gputui.commands.diag import format_finding
from gputui.diag import PROBE
from gputui.diag.verdicts import CAUSES, Diagnosis, load_schema, report_markdown

JOB = Path(__file__).parent / "fixtures" / "h100-x1-job" / "recording.jsonl.gz"
GIB = 1 << 30


def probe_module(name: str):
    """A module of the probe package, loaded by path as the diagnosis child loads it."""
    package = "_gputui_probe_mem"
    if package not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            package, PROBE / "__init__.py", submodule_search_locations=[str(PROBE)]
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[package] = module
        spec.loader.exec_module(module)
    return importlib.import_module(f"{package}.{name}")


@pytest.fixture(scope="module")
def mem():
    return probe_module("memory")


@pytest.fixture(scope="module")
def recorded() -> tuple[dict, list[dict]]:
    """GPU 0 of the recording's third sample as NVML gives it to the probe: {"total", "free",
    "used"} and the processes (pid, used bytes, name, user)."""
    with gzip.open(JOB, "rt") as f:
        header = json.loads(f.readline())
        f.readline()
        sample = json.loads(f.readline())
    gpu = sample["gpus"][0]
    total = header["machine"]["devices"][0]["memory_total"]
    memory = {"total": total, "free": gpu["mem_free"], "used": gpu["mem_used"] + gpu["mem_reserved"]}
    procs = [
        {"pid": p["pid"], "used_bytes": p["gpu_memory"], "name": p["name"], "user": p["user"]}
        for p in sample["processes"]
        if p["gpu_index"] == 0
    ]
    assert total == 85520809984 and len(procs) == 5  # what the recording holds
    return memory, procs


def grown(recorded, pid: int, free_after: int) -> tuple[dict, list[dict]]:
    """The recording with one holder grown until `free_after` bytes are free."""
    memory, procs = copy.deepcopy(recorded)
    (proc,) = [p for p in procs if p["pid"] == pid]
    more = memory["free"] - free_after
    memory["free"], memory["used"] = free_after, memory["used"] + more
    proc["used_bytes"] += more
    return memory, procs


#: What the real H100 showed: 77 of its 80 GiB held by another process.
HELD = 3 * GIB


def test_the_recorded_job_passes_and_names_who_holds_what(mem, recorded) -> None:
    memory, procs = recorded
    status, cause, summary, ev = mem.judge_memory(memory, procs)
    assert (status, cause) == ("PASS", None)
    assert summary.startswith("67.8 GiB of 79.6 GiB free; held by PID ")
    for p in procs:
        assert f"PID {p['pid']} (python3, root) {p['used_bytes'] / GIB:.1f} GiB" in summary
    assert ev["free_bytes"] == memory["free"] and ev["total_bytes"] == memory["total"]


def test_77_of_80_gib_held_by_another_process_warns_naming_it(mem, recorded) -> None:
    memory, procs = grown(recorded, 458, HELD)
    assert memory["free"] < 0.10 * memory["total"]
    status, cause, summary, ev = mem.judge_memory(memory, procs)
    assert (status, cause) == ("WARN", "memory-held") and cause in CAUSES
    # the largest holder first, with its memory; a job started here will not fit
    assert summary.startswith(
        "only 3.0 GiB of 79.6 GiB free: held by other processes: PID 458 (python3, root) "
    )
    held = next(p for p in procs if p["pid"] == 458)
    assert f"PID 458 (python3, root) {held['used_bytes'] / GIB:.1f} GiB; PID " in summary
    assert "will run out of memory" in summary
    assert ev["processes"][0]["pid"] == 458


def test_the_threshold_is_ten_percent_free_exactly(mem, recorded) -> None:
    memory, procs = recorded
    total = memory["total"]
    at = dict(memory, free=total // 10 + (1 if total % 10 else 0))  # the smallest free >= 10 %
    assert at["free"] >= 0.10 * total
    assert mem.judge_memory(at, procs)[0] == "PASS"
    below = dict(memory, free=at["free"] - 1)
    assert mem.judge_memory(below, procs)[0] == "WARN"


def test_none_is_not_zero(mem, recorded) -> None:
    memory, procs = grown(recorded, 458, HELD)
    # NVML cannot say how much one process holds (containers): named, its memory not 0
    unknown = [dict(p, used_bytes=None) if p["pid"] == 460 else p for p in procs]
    summary = mem.judge_memory(memory, unknown)[2]
    assert "PID 460 (python3, root) (memory not reported)" in summary
    assert "PID 460 (python3, root) 0.0 GiB" not in summary
    # NVML cannot list the processes at all / lists none (another container holds it)
    assert "NVML cannot list" in mem.judge_memory(memory, None)[2]
    assert "does not list here" in mem.judge_memory(memory, [])[2]
    # no memory figures: SKIP, never a PASS claiming free memory
    assert mem.judge_memory(None, procs)[0] == "SKIP"
    assert mem.judge_memory({"total": 0, "free": 0, "used": 0}, procs)[0] == "SKIP"
    assert mem.judge_memory(dict(memory, free=None), procs)[0] == "SKIP"


def test_the_probe_itself_is_not_another_process(mem, recorded) -> None:
    memory, procs = grown(recorded, 458, HELD)
    summary = mem.judge_memory(memory, procs, own_pids={458})[2]
    assert "PID 458" not in summary and "PID 459" in summary


def test_a_gpu_this_process_cannot_see_does_not_warn(mem, recorded) -> None:
    memory, procs = grown(recorded, 458, HELD)
    status, _, summary, ev = mem.judge_memory(memory, procs, visible=False)
    assert status == "PASS" and "not visible to this process" in summary
    assert ev["visible_here"] is False


def test_a_process_name_is_untrusted_text_on_the_terminal(mem, recorded) -> None:
    memory, procs = grown(recorded, 458, HELD)
    procs = [dict(p, name="x\x1b]52;c;AAAA\x07") if p["pid"] == 458 else p for p in procs]
    event = probe_event(mem, memory, procs)
    d = Diagnosis()
    finding = d.add_check(event)
    line = format_finding(finding)
    assert "\x1b" not in line and "\x07" not in line
    assert "x\\x1b]52;c;AAAA\\x07" in line


def probe_event(mem, memory, procs) -> dict:
    status, cause, summary, ev = mem.judge_memory(memory, procs)
    return {
        "v": 1,
        "event": "check",
        "id": "memory.0",
        "group": "devices",
        "title": "GPU 0 memory",
        "status": status,
        "summary": summary,
        "evidence": ev,
        "cause": cause,
        "fix": [],
        "note": None,
        "seconds": 0.001,
    }


def test_the_report_of_a_real_h200_diagnosis_with_the_gpu_held(mem, recorded) -> None:
    """The recorded H200 diagnosis (every check passing) plus the memory check of a GPU that
    another process holds: the report's status, first problem, fix and Markdown say so."""
    memory, procs = grown(recorded, 458, HELD)
    events = [json.loads(line) for line in (H200_X1.parent / "diag-events.jsonl").read_text().splitlines()]
    d = Diagnosis("/opt/torch/.venv/bin/python3")
    for e in events:
        d.feed(e)
    assert d.status == "PASS"
    d.feed(probe_event(mem, memory, procs))
    d.finish({"returncode": 0})
    assert d.status == "WARN" and d.exit_code == 1
    primary = d.primary()
    assert primary is not None and primary.id == "memory.0"
    assert any("nvidia-smi --query-compute-apps" in line for line in primary.fix)
    report = d.to_json()
    jsonschema.validate(report, load_schema())
    md = report_markdown(report)
    assert "GPU memory held by other processes" in md
    assert "only 3.0 GiB of 79.6 GiB free: held by other processes: PID 458 (python3, root) " in md


def test_the_memory_check_runs_before_the_probe_starts_cuda() -> None:
    """Planned before the starters (cuInit, the NCCL ranks) and torch: the probe holds no GPU
    memory of its own when it reads what the others hold."""
    code = (
        "import sys, importlib.util, json\n"
        f"d = {str(PROBE)!r}\n"
        "s = importlib.util.spec_from_file_location('_gputui_probe', d + '/__init__.py', "
        "submodule_search_locations=[d])\n"
        "m = importlib.util.module_from_spec(s); sys.modules['_gputui_probe'] = m; s.loader.exec_module(m)\n"
        "from _gputui_probe import main\n"
        "print(json.dumps([s[1].__name__ if isinstance(s, tuple) else s.declared.id for s in main.PLAN]))\n"
    )
    plan = json.loads(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    )
    for step in ("memory", "env.start"):
        assert plan.index(step) < plan.index("start_nccl")
        assert plan.index(step) < plan.index("start_cuinit")
        assert plan.index(step) < plan.index("torch.import")


def test_without_a_driver_the_memory_check_says_why_it_skipped(tmp_path) -> None:
    checks = run_probe_checks(make_bare_venv(tmp_path / "venv"), {})
    if checks["driver.nvml"]["status"] == "PASS":
        pytest.skip("a driver is present: the checks run for real (bench/device.sh diag-env)")
    assert checks["memory"]["status"] == "SKIP" and checks["memory"]["summary"] == "no NVML"
