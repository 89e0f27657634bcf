"""The probe as a package of declared, isolated checks: a torch module that lacks part of its
API (a fake torch package on PYTHONPATH: a Python module, not a GPU) costs only the checks
that need that part; the FAIL says what was missing and where that torch came from."""

from __future__ import annotations

import subprocess
import sys

import pytest
from diag_support import fake_torch, make_bare_venv

from gputui.diag import PROBE
from gputui.diag.session import DiagnosisSession
from gputui.diag.verdicts import CAUSES, Diagnosis, load_schema

#: A torch whose import works, built for CUDA 12.8, with cuDNN and NCCL, and no GPU.
FAKE_TORCH = """
__version__ = "2.99.0+fake"


class _Version:
    cuda = "12.8"
    hip = None
    git_version = "0" * 40
    debug = False


class _Cudnn:
    enabled = True
    benchmark = False
    deterministic = False
    allow_tf32 = True

    @staticmethod
    def version():
        return 91000

    @staticmethod
    def is_available():
        return True


class _Matmul:
    allow_tf32 = False


class _BackendsCuda:
    matmul = _Matmul()


class _Backends:
    cudnn = _Cudnn()
    cuda = _BackendsCuda()


class _Nccl:
    @staticmethod
    def version():
        return (2, 27, 3)


class _Cuda:
    nccl = _Nccl()

    @staticmethod
    def is_available():
        return False

    @staticmethod
    def device_count():
        return 0

    @staticmethod
    def init():
        raise RuntimeError("Found no NVIDIA driver on your system.")


version = _Version()
backends = _Backends()
cuda = _Cuda()
"""

#: Checks that need nothing from torch, or only the module itself: they must all report.
INDEPENDENT = (
    "system.python",
    "driver.nvml",
    "driver.devices",
    "visibility.env",
    "memory",
    "env.variables",
    "env.start",
    "env.libpath",
    "env.wheels",
    "torch.import",
    "cuda.driver",
    "compute.nccl",
    "env.loaded",
    "health",
)


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_bare_venv(tmp_path_factory.mktemp("bare") / "venv")


def diagnose(python: str, site: str) -> Diagnosis:
    session = DiagnosisSession(
        python, timeout=60, env_overrides={"PYTHONPATH": site}, probe_args=["--no-nccl"]
    )
    return session.start().wait(120)


@pytest.mark.parametrize("missing", ["cuda", "backends", "version"])
def test_a_torch_lacking_part_of_its_api_costs_only_the_checks_that_need_it(
    bare_python: str, tmp_path, missing: str
) -> None:
    site = fake_torch(tmp_path, FAKE_TORCH + f"\ndel {missing}\n")
    init = str(site / "torch" / "__init__.py")
    d = diagnose(bare_python, str(site))
    checks = {f.id: f for f in d.findings}
    # the run finished: no "exited before it finished", every independent check is there
    assert d.done and d.child["returncode"] == 0
    assert "diag.child" not in checks
    for cid in INDEPENDENT:
        # per-GPU checks report as id.N where there are GPUs (health.0, ...)
        found = [f for f in d.findings if f.id == cid or f.id.startswith(cid + ".")]
        assert found, cid
        assert all("failed unexpectedly" not in f.summary for f in found), cid
    assert checks["torch.import"].status == "PASS"
    # one FAIL names what was missing and where this torch came from
    crashed = [f for f in d.findings if f.evidence.get("missing_attribute") == missing]
    assert len(crashed) == 1
    fail = crashed[0]
    assert fail.status == "FAIL"
    assert fail.cause == "torch-broken" and fail.cause in CAUSES
    assert f"torch.{missing}" in fail.summary and init in fail.summary
    assert fail.evidence["torch"]["file"] == init
    assert missing in fail.evidence["torch"]["lacks"]
    assert "Traceback" in fail.evidence["traceback"]
    # the checks that need what it would have given are skipped, saying why
    after = [
        f
        for f in d.findings
        if f.group in ("devices", "compute", "cudnn")
        and f.id != "compute.nccl"
        and f.id.split(".")[0] != "memory"
    ]
    assert after and all(f.status == "SKIP" for f in after)
    assert all("failed unexpectedly" in f.summary or "not available" in f.summary for f in after)
    import jsonschema

    jsonschema.validate(d.to_json(), load_schema())


def test_a_check_that_crashes_for_another_reason_is_its_own_fail(bare_python: str, tmp_path) -> None:
    """Not a torch attribute: a torch whose CUDA query raises something else."""
    body = FAKE_TORCH.replace(
        "    def is_available():\n        return False",
        "    def is_available():\n        raise ZeroDivisionError('inside is_available')",
    )
    site = fake_torch(tmp_path, body)
    d = diagnose(bare_python, str(site))
    avail = {f.id: f for f in d.findings}["torch.cuda_available"]
    assert avail.status == "FAIL"
    assert "ZeroDivisionError: inside is_available" in avail.summary
    assert avail.cause == "check-error" and avail.cause in CAUSES
    assert "is_available" in avail.evidence["traceback"]
    assert d.done


def test_runs_as_a_directory_and_as_a_module(tmp_path) -> None:
    """`python DIR` and `python -m gputui.diag.probe` run the same checks."""
    as_dir = subprocess.run(
        [sys.executable, str(PROBE), "--no-nccl"], capture_output=True, text=True, timeout=120, check=True
    )
    as_module = subprocess.run(
        [sys.executable, "-m", "gputui.diag.probe", "--no-nccl"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=PROBE.parents[2],
    )

    def ids(out: str) -> list[str]:
        import json

        return [e["id"] for e in map(json.loads, out.splitlines()) if e["event"] == "check"]

    assert ids(as_dir.stdout) == ids(as_module.stdout)
    assert "torch.import" in ids(as_dir.stdout)


def test_every_declared_check_is_planned_after_what_it_needs() -> None:
    spec_dir = str(PROBE)
    code = (
        "import sys, importlib.util, json\n"
        f"d = {spec_dir!r}\n"
        "s = importlib.util.spec_from_file_location('_gputui_probe', d + '/__init__.py', "
        "submodule_search_locations=[d])\n"
        "m = importlib.util.module_from_spec(s); sys.modules['_gputui_probe'] = m; s.loader.exec_module(m)\n"
        "from _gputui_probe import main, registry\n"
        "plan = [s.declared for s in main.PLAN if not isinstance(s, tuple)]\n"
        "print(json.dumps({'plan': [[c.id, list(c.needs), c.gives] for c in plan], "
        "'declared': sorted(registry.CHECKS)}))\n"
    )
    import json

    out = json.loads(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    )
    assert sorted(cid for cid, _, _ in out["plan"]) == out["declared"]
    given: set[str] = set()
    for cid, needs, gives in out["plan"]:
        assert set(needs) <= given, (cid, needs)
        if gives:
            given.add(gives)


def test_the_libraries_really_loaded_are_read_from_this_process(bare_python: str, tmp_path) -> None:
    """env.loaded reads the probe's own /proc/self/maps: a CUDA runtime loaded from outside
    torch's packages (here a real shared library copied under that name and loaded by the
    torch module) is named.  It read /proc/p/maps, which never exists: always "none loaded"."""
    import glob
    import shutil

    libs = sorted(glob.glob("/lib/x86_64-linux-gnu/libm.so.*") + glob.glob("/usr/lib*/libm.so.*"))
    if not libs:
        pytest.skip("no libm to load")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(libs[0], elsewhere / "libcudart.so.12")
    site = fake_torch(
        tmp_path / "site",
        FAKE_TORCH + f"\nimport ctypes\nctypes.CDLL({str(elsewhere / 'libcudart.so.12')!r})\n",
    )
    checks = {f.id: f for f in diagnose(bare_python, str(site)).findings}
    loaded = checks["env.loaded"]
    # (on a GPU machine the probe's own NVML check has loaded the driver's libcuda too)
    others = {
        k: v for k, v in loaded.evidence["loaded"].items() if not k.startswith(("libcuda.so", "libnvidia"))
    }
    assert others == {"libcudart.so.12": str(elsewhere / "libcudart.so.12")}
    assert loaded.status == "WARN" and str(elsewhere) in loaded.summary
