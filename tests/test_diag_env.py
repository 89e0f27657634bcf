"""Issue 13 item 8: what the diagnosis says about the environment, the stress verdict without
torch, the count of CUDA library wheels, and the Markdown report's fixes.  Each was a bug; each
test failed before its fix."""

from __future__ import annotations

import json
import re

import pytest
from diag_support import fake_torch, make_bare_venv, run_probe_checks

from gputui.diag.session import StressSession
from gputui.diag.verdicts import CAUSES, Diagnosis, report_json, report_markdown, stress_markdown
from gputui.ui.diagnostics.lines import stress_lines


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_bare_venv(tmp_path_factory.mktemp("bare") / "venv")


def said(checks: dict[str, dict]) -> str:
    """What a person reads: every check's summary and note."""
    return "\n".join(f"{c['summary']}\n{c.get('note') or ''}" for c in checks.values())


#: Variables that change which libraries or which torch get loaded, or how CUDA picks and
#: loads its devices and kernels: each must be named where a person reads the result.
LOADER_VARIABLES = {
    "LD_PRELOAD": "/opt/hook/libhook.so",
    "LD_LIBRARY_PATH": "/opt/cuda-11.8/lib64",
    "PYTHONPATH": "/opt/shadow-site",
    "PYTHONNOUSERSITE": "1",
    "PYTHONSAFEPATH": "1",
    "PYTHONUSERBASE": "/opt/userbase",
    "CUDA_HOME": "/usr/local/cuda-11.8",
    "CUDA_PATH": "/usr/local/cuda-11.8",
    "CUDA_MODULE_LOADING": "EAGER",
    "CUDA_FORCE_PTX_JIT": "1",
    "CUDA_DISABLE_PTX_JIT": "1",
    "PYTORCH_NVML_BASED_CUDA_CHECK": "1",
    "TORCH_CUDA_ARCH_LIST": "8.0;9.0",
    "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
    "NVIDIA_VISIBLE_DEVICES": "all",
    "CUDA_MPS_PIPE_DIRECTORY": "/tmp/mps",
}


@pytest.mark.parametrize(("name", "value"), sorted(LOADER_VARIABLES.items()))
def test_every_loader_variable_is_named(bare_python: str, name: str, value: str) -> None:
    checks = run_probe_checks(bare_python, {name: value})
    assert f"{name}={value}" in said(checks), name


@pytest.mark.parametrize("name", ["PYTHONHOME", "PYTHONPLATLIBDIR", "LD_AUDIT"])
def test_variables_that_change_the_interpreter_itself_are_named(bare_python: str, name: str) -> None:
    # PYTHONHOME would stop the interpreter from starting at all: give it its own prefix
    value = {"PYTHONHOME": "{prefix}", "PYTHONPLATLIBDIR": "lib", "LD_AUDIT": ""}[name]
    import sys

    checks = run_probe_checks(bare_python, {name: value.format(prefix=sys.base_prefix)})
    assert name in said(checks)


@pytest.mark.parametrize(
    ("value", "words"),
    [("NoDevFiles", "Slurm"), ("-1", "-1"), ("all", "NVIDIA_VISIBLE_DEVICES"), ("0,0", "already listed")],
)
def test_cuda_visible_devices_forms_cuda_treats_specially(bare_python: str, value: str, words: str) -> None:
    vis = run_probe_checks(bare_python, {"CUDA_VISIBLE_DEVICES": value})["visibility.env"]
    assert vis["status"] == "FAIL"
    assert words in f"{vis['summary']} {vis.get('note')}"
    assert vis["cause"] in CAUSES


def test_a_torch_on_pythonpath_is_named_as_shadowing(bare_python: str, tmp_path) -> None:
    site = fake_torch(tmp_path, "raise ImportError('not this one')\n")
    checks = run_probe_checks(bare_python, {"PYTHONPATH": str(site)})
    loader = checks["env.loader"]
    assert loader["status"] == "WARN"
    assert str(site / "torch") in loader["summary"] and "PYTHONPATH" in loader["summary"]
    assert loader["cause"] in CAUSES


def test_nothing_set_is_a_plain_pass(bare_python: str) -> None:
    unset: dict[str, str | None] = dict.fromkeys([*LOADER_VARIABLES, "PYTHONHOME", "LD_AUDIT"])
    loader = run_probe_checks(bare_python, unset)["env.loader"]
    assert loader["status"] == "PASS"
    assert "nothing set that changes which libraries or which torch load" in loader["summary"]


# ---- wheels ---------------------------------------------------------------------------------


def dist_info(site, name: str, version: str) -> None:
    d = site / f"{name.replace('-', '_')}-{version}.dist-info"
    d.mkdir(parents=True)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_nvidia_ml_py_is_not_a_cuda_library_wheel(bare_python: str, tmp_path) -> None:
    dist_info(tmp_path, "nvidia-ml-py", "13.580.82")
    wheels = run_probe_checks(bare_python, {"PYTHONPATH": str(tmp_path)})["env.wheels"]
    assert wheels["status"] == "PASS"
    assert "1 NVIDIA wheels" not in wheels["summary"]
    assert "no CUDA library wheels" in wheels["summary"]
    assert "nvidia-ml-py" not in wheels["evidence"]["cuda_wheels"]


def test_cuda_library_wheels_are_counted(bare_python: str, tmp_path) -> None:
    dist_info(tmp_path, "nvidia-ml-py", "13.580.82")
    dist_info(tmp_path, "nvidia-cudnn-cu12", "9.10.2.21")
    dist_info(tmp_path, "nvidia-nccl-cu12", "2.27.3")
    wheels = run_probe_checks(bare_python, {"PYTHONPATH": str(tmp_path)})["env.wheels"]
    assert "2 CUDA library wheels" in wheels["summary"]
    assert sorted(wheels["evidence"]["cuda_wheels"]) == ["nvidia-cudnn-cu12", "nvidia-nccl-cu12"]


# ---- stress without torch -------------------------------------------------------------------


def test_stress_without_torch_says_why_in_the_tab_as_the_cli_does(bare_python: str) -> None:
    session = StressSession(bare_python, duration=1, extra_args=["--test-cpu"], timeout=60).start()
    session.wait(90)
    report = session.report()
    assert report["status"] == "FAIL"
    cli = "\n".join(stress_markdown(report))
    assert "No module named 'torch'" in cli
    tab = "\n".join("".join(text for text, _ in line) for line in stress_lines(session, 120, 1.0))
    assert "FAIL" in tab
    assert "No module named 'torch'" in tab
    assert report["errors"][0]["cause"] == "torch-missing"


# ---- Markdown report ------------------------------------------------------------------------

PROSE_START = re.compile(r"^(?:[A-Z][a-z]+\b|or\b|and\b|if\b|\()")


def code_blocks(markdown: str) -> list[list[str]]:
    blocks, current = [], None
    for line in markdown.splitlines():
        if line.startswith("```"):
            if current is None:
                current = [line]
            else:
                blocks.append(current)
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def test_markdown_keeps_prose_out_of_shell_blocks() -> None:
    d = Diagnosis(python="/usr/bin/python3")
    for n, cause in enumerate(sorted(CAUSES)):
        d.feed(
            {
                "v": 1,
                "event": "check",
                "id": f"c{n}",
                "group": "driver",
                "title": cause,
                "status": "FAIL",
                "summary": cause,
                "evidence": {"CUDA_VISIBLE_DEVICES": "0,9"},
                "cause": cause,
            }
        )
    md = report_markdown(d.to_json())
    shell = [b for b in code_blocks(md) if b[0] == "```sh"]
    assert shell
    for block in shell:
        for line in block[1:]:
            assert not PROSE_START.match(line), line
    inside = "\n".join("\n".join(b) for b in shell)
    for prose in (
        "Set CUDA_VISIBLE_DEVICES to indices",
        "or unset it to use every GPU",
        "Look for a directory",
    ):
        assert prose in md and prose not in inside
    for command in ("unset CUDA_VISIBLE_DEVICES", "/usr/bin/python3 -m pip install torch --index-url"):
        assert command in inside


# GPU 0 only, so that a machine with one GPU reads them the same as one without a driver
@pytest.mark.parametrize(("value", "read_as"), [("0 1", "0"), ("0gpu1", "0"), ("+0", "0")])
def test_entries_cuda_reads_loosely_are_explained(bare_python: str, value: str, read_as: str) -> None:
    """CUDA reads the number an entry starts with and ignores the rest: "0 1" (a space instead
    of a comma) is GPU 0 alone.  Valid for CUDA, rarely what was meant: said, with a WARN."""
    vis = run_probe_checks(bare_python, {"CUDA_VISIBLE_DEVICES": value})["visibility.env"]
    assert vis["status"] == "WARN"
    assert vis["cause"] == "cvd-loose" and vis["cause"] in CAUSES
    assert f"{value.strip()!r} is read as {read_as}" in f"{vis['summary']} {vis.get('note')}"


HOSTILE = "evil\x1b]52;c;cm0gLXJmIH4=\x07 \x9b31m red \u202e txt"


def test_reports_render_the_childs_text_literally() -> None:
    """A check's text, its evidence and the child's stderr come from the diagnosed
    interpreter (untrusted): the Markdown report shows them escaped, the JSON report carries
    them exactly but with no raw control character (ESC, C1's CSI, a bidi override)."""
    d = Diagnosis(python="/usr/bin/python3")
    d.feed(
        {
            "v": 1,
            "event": "check",
            "id": "hostile",
            "group": "driver",
            "title": HOSTILE,
            "status": "FAIL",
            "summary": HOSTILE,
            "evidence": {"value": HOSTILE},
            "fix": [HOSTILE],
        }
    )
    report = d.to_json()
    report["child"] = {"returncode": 1, "stderr_tail": HOSTILE}
    for text in (report_markdown(report), report_json(report)):
        assert not any(ch in text for ch in ("\x1b", "\x07", "\x9b", "\u202e")), text
    md = report_markdown(report)
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07" in md
    again = json.loads(report_json(report))
    assert again["checks"][0]["summary"] == HOSTILE
    assert again["child"]["stderr_tail"] == HOSTILE
