"""The diagnosis against real interpreters: CPU torch, no torch, a torch whose import raises,
hangs or segfaults, CUDA_VISIBLE_DEVICES empty or invalid; the runner's timeout, cancel and
crash reports; the rules, fixes, report schema and exit codes."""

from __future__ import annotations

import ast
import gzip
import json
import os
import sys
import threading
import time

import jsonschema
import pytest
from conftest import H200_X2
from diag_support import (
    BROKEN,
    HANGS,
    ROOT,
    SEGFAULTS,
    driver_present,
    fake_torch,
    gputui_cli,
    make_bare_venv,
    need_torch_python,
    torch_cuda_build,
)

from gputui.diag import PROBE, STRESS
from gputui.diag.childenv import child_env
from gputui.diag.interpreters import default_interpreter, find_interpreters
from gputui.diag.reaper import group_members
from gputui.diag.runner import ChildRun
from gputui.diag.session import DiagnosisSession
from gputui.diag.verdicts import (
    CAUSES,
    Diagnosis,
    load_schema,
    min_driver_for,
    report_json,
    report_markdown,
    torch_index_for,
)
from gputui.rules import MULTICAST_OFF


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    return make_bare_venv(tmp_path_factory.mktemp("bare") / "venv")


def diagnose(python: str, **kw) -> Diagnosis:
    return DiagnosisSession(python, timeout=kw.pop("timeout", 60), **kw).start().wait(120)


def by_id(diagnosis: Diagnosis) -> dict:
    return {f.id: f for f in diagnosis.findings}


def validate(report: dict) -> None:
    jsonschema.validate(report, load_schema())


# ---- real interpreters -------------------------------------------------------------------


def test_cpu_torch_is_named_with_the_install_line():
    python = need_torch_python()
    seen: list[tuple[float, str]] = []
    t0 = time.monotonic()
    d = diagnose(python, on_finding=lambda f: seen.append((time.monotonic() - t0, f.id)))
    checks = by_id(d)
    assert checks["torch.import"].status == "PASS"
    assert checks["torch.import"].evidence["version"].startswith("2.")
    build = checks["torch.build"]
    assert build.evidence.get("cuda") == torch_cuda_build(python)  # what is installed
    if torch_cuda_build(python) is not None:  # the CUDA build: the rest is the CPU build's case
        assert build.cause != "cpu-only-wheel"
        pytest.skip(f"torch here is the CUDA {torch_cuda_build(python)} build, not the CPU build")
    assert build.status == "FAIL"
    assert build.cause == "cpu-only-wheel"
    assert "CPU-only" in build.summary
    assert any("pip uninstall -y torch" in line for line in build.fix)
    install = [line for line in build.fix if "pip install torch --index-url" in line]
    assert install == [f"{python} -m pip install torch --index-url https://download.pytorch.org/whl/cu130"]
    for skipped in ("torch.cuda_available", "cudnn.conv", "compute.matmul"):
        assert checks[skipped].status == "SKIP"
    assert d.status == "FAIL" and d.exit_code == 2
    assert d.done and d.child["returncode"] == 0
    # streamed: the first checks arrived well before the last (torch's import sits between)
    assert seen[0][1] == "system.python"
    assert seen[0][0] < seen[-1][0]
    # the report of a real run validates against its schema
    report = d.to_json()
    validate(report)
    md = report_markdown(report)
    assert md.startswith("# gputui diagnosis: FAIL")
    assert "pip install torch --index-url https://download.pytorch.org/whl/cu130" in md
    # gputui's own process never imported torch
    assert "torch" not in sys.modules


def test_no_torch(bare_python):
    d = diagnose(bare_python)
    imp = by_id(d)["torch.import"]
    assert imp.status == "FAIL"
    assert imp.cause == "torch-missing"
    assert bare_python in imp.summary
    assert f"{bare_python} -m pip install torch --index-url https://download.pytorch.org/whl/cu130" in imp.fix
    assert by_id(d)["torch.build"].status == "SKIP"
    assert d.exit_code == 2
    validate(d.to_json())


def test_broken_torch_shows_the_real_import_error(bare_python, tmp_path):
    site = fake_torch(tmp_path, "print('torch says hello on stdout')\n" + BROKEN)
    d = diagnose(bare_python, env_overrides={"PYTHONPATH": str(site)})
    imp = by_id(d)["torch.import"]
    assert imp.status == "FAIL"
    assert imp.cause == "cuda-libs-missing"
    assert "libcudnn.so.9: cannot open shared object file" in imp.summary
    assert "Traceback" in imp.evidence["traceback"]
    assert str(site / "torch" / "__init__.py") in imp.evidence["traceback"]
    # a library printing on stdout does not break the protocol: it lands on stderr
    assert not d.stray
    assert "torch says hello on stdout" in d.child["stderr_tail"]


def test_cuda_visible_devices_empty(bare_python):
    d = diagnose(bare_python, env_overrides={"CUDA_VISIBLE_DEVICES": ""})
    vis = by_id(d)["visibility.env"]
    assert vis.status == "FAIL"
    assert vis.cause == "cvd-empty"
    assert "set to nothing" in vis.summary
    assert any(line.startswith("unset CUDA_VISIBLE_DEVICES") for line in vis.fix)


@pytest.mark.parametrize(
    ("value", "status", "ignored"),
    [("abc", "FAIL", []), ("0,GPU0,1", "WARN", ["1"])],
)
def test_cuda_visible_devices_invalid(bare_python, value, status, ignored):
    d = diagnose(bare_python, env_overrides={"CUDA_VISIBLE_DEVICES": value})
    vis = by_id(d)["visibility.env"]
    assert vis.status == status
    assert vis.cause == "cvd-invalid"
    assert vis.evidence["ignored_entries"] == ignored
    assert "nvidia-smi -L" in " ".join(vis.fix)


def test_hung_child_is_killed_at_the_timeout(bare_python, tmp_path):
    site = fake_torch(tmp_path, HANGS)
    t0 = time.monotonic()
    d = diagnose(bare_python, timeout=3, env_overrides={"PYTHONPATH": str(site)})
    assert time.monotonic() - t0 < 30
    child = by_id(d)["diag.child"]
    assert child.status == "FAIL"
    assert child.cause == "child-timeout"
    assert "timed out after 3" in child.summary
    assert "import torch" in child.summary  # what was running
    assert d.child["timed_out"] and d.child["signal"] == "SIGKILL"
    assert d.child["leftover_pids"] == []
    # the checks before the hang were kept
    assert by_id(d)["driver.nvml"].status == ("PASS" if driver_present() else "FAIL")
    validate(d.to_json())


def test_segfaulting_child_is_reported_with_signal_and_stderr(bare_python, tmp_path):
    site = fake_torch(tmp_path, SEGFAULTS)
    d = diagnose(bare_python, env_overrides={"PYTHONPATH": str(site)})
    child = by_id(d)["diag.child"]
    assert child.status == "FAIL"
    assert child.cause == "child-crashed"
    assert "SIGSEGV" in child.summary
    assert "import torch" in child.summary
    assert d.child["signal"] == "SIGSEGV"
    # faulthandler (set in the child's environment) names the crash and where
    assert "Segmentation fault" in d.child["stderr_tail"]
    assert "torch/__init__.py" in d.child["stderr_tail"]
    validate(d.to_json())
    assert "Segmentation fault" in report_markdown(d.to_json())


def test_cancel_kills_the_whole_group(bare_python, tmp_path):
    site = fake_torch(
        tmp_path,
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "time.sleep(600)\n",
    )
    importing = threading.Event()

    def on_phase(title):
        if title == "import torch":
            importing.set()

    session = DiagnosisSession(
        bare_python, timeout=120, env_overrides={"PYTHONPATH": str(site)}, on_phase=on_phase
    )
    session.start()
    assert importing.wait(60)
    pgid = session.child.pid
    deadline = time.monotonic() + 60
    while len(group_members(pgid)) < 2:  # until the grandchild has started
        assert time.monotonic() < deadline, "the grandchild never started"
        time.sleep(0.01)
    session.cancel()
    d = session.wait(30)
    assert d.child["cancelled"] and not d.child["timed_out"]
    assert d.child["pending_phase"] == "import torch"
    assert d.child["leftover_pids"] == []
    assert group_members(pgid) == []
    assert "diag.child" not in by_id(d)  # a cancel is not a finding


def test_not_an_interpreter():
    d = diagnose("/nonexistent/python3")
    child = by_id(d)["diag.child"]
    assert child.status == "FAIL" and child.cause == "bad-interpreter"
    assert "No such file" in child.summary
    validate(d.to_json())


CHILD_FILES = [
    *sorted(PROBE.glob("*.py")),
    STRESS,
    ROOT / "gputui" / "rules.py",
    ROOT / "gputui" / "startvars.py",
]


@pytest.mark.parametrize("script", CHILD_FILES, ids=lambda p: p.name)
def test_child_files_are_python38_and_standalone(script):
    """What the children run (the probe package, stress.py, the shared rules they load by path)
    parses as Python 3.8 and imports only the standard library, torch and the package itself."""
    tree = ast.parse(script.read_text(), feature_version=(3, 8))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom) and not node.level)
        for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")])
    }
    assert "gputui" not in imported, script
    allowed = set(sys.stdlib_module_names) | {"torch", "__future__", "_gputui_probe"}
    assert imported <= allowed, (script, imported)


# ---- pieces ------------------------------------------------------------------------------


def test_wheel_index_and_minimum_driver():
    with gzip.open(H200_X2, "rt") as f:
        system = json.loads(f.readline())["machine"]["system"]
    assert (system["driver_version"], system["cuda_driver_version"]) == ("580.159.04", "13.0")
    assert torch_index_for(system["cuda_driver_version"]) == ("cu130", None)
    assert torch_index_for("12.9") == ("cu128", None)
    assert torch_index_for("12.6") == ("cu126", None)
    assert torch_index_for("12.4") == ("cu124", "2.6.0")
    assert torch_index_for("12.2") == ("cu121", "2.5.1")
    assert torch_index_for("11.8") == ("cu118", "2.7.1")
    assert torch_index_for(None) == ("cu130", None)
    assert min_driver_for("13.0") == "580.65.06"
    assert min_driver_for("12.8") == "570.26"
    assert min_driver_for("12.7") == "560.28.03"


def _events(*checks):
    yield {"v": 1, "event": "hello", "python": "3.11.7", "executable": "/x/python"}
    for c in checks:
        yield {"v": 1, "event": "check", "evidence": {}, "fix": [], **c}
    yield {"v": 1, "event": "done", "seconds": 1.0}


def test_driver_too_old_fix_names_the_minimum_driver_and_the_matching_wheel():
    d = Diagnosis(python="/env/bin/python")
    for e in _events(
        {
            "id": "driver.nvml",
            "group": "driver",
            "title": "t",
            "status": "PASS",
            "summary": "s",
            "evidence": {"driver_version": "550.54.15", "cuda_driver_version": "12.4"},
        },
        {
            "id": "torch.build",
            "group": "torch",
            "title": "t",
            "status": "PASS",
            "summary": "s",
            "evidence": {"version": "2.13.0+cu130", "cuda": "13.0"},
        },
        {
            "id": "torch.cuda_vs_driver",
            "group": "torch",
            "title": "t",
            "status": "FAIL",
            "summary": "s",
            "cause": "driver-too-old",
        },
    ):
        d.feed(e)
    fix = by_id(d)["torch.cuda_vs_driver"].fix
    assert "580.65.06 or newer" in fix[0]
    assert (
        "/env/bin/python -m pip install torch==2.6.0 --index-url https://download.pytorch.org/whl/cu124"
        in fix
    )


def test_exit_codes_and_primary_by_layer():
    def run(*statuses):
        d = Diagnosis()
        groups = ["health", "environment", "driver", "torch"]
        for k, st in enumerate(statuses):
            d.feed(
                {
                    "v": 1,
                    "event": "check",
                    "id": f"c{k}",
                    "group": groups[k % 4],
                    "title": "t",
                    "status": st,
                    "summary": "s",
                    "evidence": {},
                    "cause": None,
                    "fix": [],
                }
            )
        return d

    assert run("PASS", "SKIP").exit_code == 0
    assert run("PASS", "WARN").exit_code == 1
    d = run("FAIL", "WARN", "FAIL", "PASS")
    assert d.exit_code == 2
    assert d.primary().id == "c2"  # the driver layer comes before health
    assert d.summary_line() == "1 pass · 1 warn · 2 fail · 0 skip"


def test_every_cause_the_probe_names_is_explained():
    import re

    source = "\n".join(f.read_text() for f in PROBE.glob("*.py"))
    names = set(re.findall(r'"([a-z0-9]+(?:-[a-z0-9]+)+)"', source))
    causes = {n for n in names if n in CAUSES or n.endswith(("-wheel", "-mismatch", "-shadow"))}
    missing = sorted(n for n in causes if n not in CAUSES)
    assert not missing
    for cause in (
        "cvd-empty",
        "fabric-manager",
        "forward-compat",
        "cuda-unknown",
        "driver-too-old",
        "no-kernel-image",
        "cudnn-shadow",
        "two-nccl",
        "driver-library-mismatch",
        "tf32-off",
        "container-no-gpus",
        "cpu-only-wheel",
    ):
        assert cause in CAUSES


def test_child_env_is_controlled(monkeypatch):
    monkeypatch.setenv("GPUTUI_SECRET", "x")
    monkeypatch.setenv("PYTHONSTARTUP", "/tmp/s.py")
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/cudnn/lib")
    env, changes = child_env(sys.executable, {"CUDA_VISIBLE_DEVICES": "", "HOME": None})
    assert "GPUTUI_SECRET" not in env and "PYTHONSTARTUP" not in env
    for k, v in MULTICAST_OFF.items():
        assert env[k] == v
    assert env["PYTHONFAULTHANDLER"] == "1"
    assert env["LD_LIBRARY_PATH"] == "/opt/cudnn/lib"  # the user's environment is what we diagnose
    assert env["CUDA_VISIBLE_DEVICES"] == "" and "HOME" not in env
    assert changes["NCCL_NVLS_ENABLE"] == "0" and changes["GPUTUI_SECRET"] is None


def test_runner_separates_stray_output(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(
        "import json, sys\n"
        "print('not json')\n"
        "print(json.dumps({'v': 1, 'event': 'hello'}))\n"
        "print('{broken json')\n"
        "print(json.dumps({'v': 1, 'event': 'done', 'seconds': 0}))\n"
        "sys.stderr.write('err line\\n')\n"
        "sys.exit(3)\n"
    )
    events, stray = [], []
    run = ChildRun(sys.executable, script, on_event=events.append, on_stray=stray.append).start()
    result = run.wait(30)
    assert [e["event"] for e in events] == ["hello", "done"]
    assert stray == ["not json", "{broken json"]
    assert result.returncode == 3 and result.signal is None
    assert result.stderr_tail == "err line"


def test_interpreters_found(tmp_path):
    home = tmp_path / "home"
    for env_dir in (home / "miniconda3" / "envs" / "train", tmp_path / "venv"):
        (env_dir / "bin").mkdir(parents=True)
        exe = env_dir / "bin" / "python"
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    env = {"VIRTUAL_ENV": str(tmp_path / "venv"), "PATH": "/usr/bin:/bin"}
    found = find_interpreters(env, home)
    labels = [i.label for i in found]
    assert labels[0].startswith("active venv")
    assert found[0].path == str(tmp_path / "venv" / "bin" / "python")
    assert "gputui's own interpreter" in labels
    assert "conda env 'train'" in labels
    assert default_interpreter(env) == str(tmp_path / "venv" / "bin" / "python")
    assert default_interpreter({}) == sys.executable


# ---- the command line --------------------------------------------------------------------


def test_cli_json_validates_and_exits_2(bare_python):
    r = gputui_cli("diag", "--python", bare_python, "--json")
    assert r.returncode == 2, r.stderr
    report = json.loads(r.stdout)
    validate(report)
    assert report["status"] == "FAIL" and report["exit_code"] == 2
    assert report["python"]["executable"] == bare_python
    # the first fix: the driver where there is none, else the missing torch
    assert report["primary"]["group"] == ("torch" if driver_present() else "driver")


def test_cli_markdown_and_text(bare_python):
    r = gputui_cli("diag", "--python", bare_python, "--markdown")
    assert r.returncode == 2
    assert r.stdout.startswith("# gputui diagnosis: FAIL")
    assert "| status | check | result |" in r.stdout
    r = gputui_cli("diag", "--python", bare_python, "--timeout", "60")
    assert r.returncode == 2
    assert "FAIL  import torch: torch is not installed" in r.stdout
    assert "First fix:" in r.stdout


def test_cli_timeout_and_help(bare_python, tmp_path):
    site = fake_torch(tmp_path, HANGS)
    r = gputui_cli("diag", "--python", bare_python, "--timeout", "2", "--json", env={"PYTHONPATH": str(site)})
    assert r.returncode == 2
    report = json.loads(r.stdout)
    assert report["child"]["timed_out"]
    assert report["primary"]["cause"] == "child-timeout" or any(
        c["cause"] == "child-timeout" for c in report["checks"]
    )
    r = gputui_cli("diag", "--help")
    assert "0 all pass, 1 warnings, 2 failures" in " ".join(r.stdout.split())


def test_schema_is_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(load_schema())
    assert (ROOT / "gputui" / "diag" / "report.schema.json").exists()
    assert json.loads(report_json({"a": 1})) == {"a": 1}
    assert os.path.exists(PROBE)
