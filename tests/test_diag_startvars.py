"""Issue 24 item 16 (b): the variables that change how CUDA, torch and NCCL start.

Every variable of gputui/startvars.py's table, set to a well-formed and to a malformed value,
in a real diagnosis child: the malformed one is named (with its value and what is wrong)
before any CUDA call.  PYTORCH_CUDA_ALLOC_CONF's rules are compared with torch's own parser
(the CPU build has it).  A child that really dies (a signal, or an exit before it finished)
names the variables set in its environment as the suspects."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import jsonschema
import pytest
from diag_support import (
    ROOT,
    SEGFAULTS,
    fake_torch,
    make_bare_venv,
    need_torch_python,
    run_probe_checks,
)

from gputui.commands.diag import format_finding
from gputui.diag import PROBE
from gputui.diag.childenv import child_env
from gputui.diag.session import DiagnosisSession
from gputui.diag.verdicts import CAUSES, load_schema, report_markdown
from gputui.startvars import ALLOC_CONF_KEYS, START_VARIABLES, alloc_conf, start_problem, start_variable


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_bare_venv(tmp_path_factory.mktemp("bare") / "venv")


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("paths")
    (d / "topo.xml").write_text("<system/>")
    (d / "mps").mkdir()
    (d / "cache-file").write_text("")
    libs = sorted(glob.glob("/lib/x86_64-linux-gnu/libm.so.*") + glob.glob("/usr/lib*/libm.so.*"))
    return {"dir": str(d), "file": str(d / "topo.xml"), "lib": libs[0] if libs else str(d / "topo.xml")}


#: name -> (a well-formed value, a malformed value).  {dir} {file} {lib}: real paths here.
SAMPLES: dict[str, tuple[str, str]] = {
    "CUDA_VISIBLE_DEVICES": ("0", "abc"),
    "CUDA_DEVICE_ORDER": ("PCI_BUS_ID", "PCI"),
    "CUDA_MODULE_LOADING": ("LAZY", "lazy-ish"),
    "CUDA_MODULE_DATA_LOADING": ("EAGER", "SOON"),
    "CUDA_LAUNCH_BLOCKING": ("1", "yes"),
    "CUDA_CACHE_DISABLE": ("0", "true"),
    "CUDA_CACHE_MAXSIZE": ("1073741824", "1G"),
    "CUDA_CACHE_PATH": ("{dir}/nv-cache", "{dir}/cache-file"),
    "CUDA_FORCE_PTX_JIT": ("0", "on"),
    "CUDA_DISABLE_PTX_JIT": ("0", "2"),
    "CUDA_FORCE_JIT": ("0", "enable"),
    "CUDA_DISABLE_JIT": ("0", "-1"),
    "CUDA_DEVICE_MAX_CONNECTIONS": ("8", "64"),
    "CUDA_DEVICE_MAX_COPY_CONNECTIONS": ("8", "0"),
    "CUDA_SCALE_LAUNCH_QUEUES": ("4x", "3x"),
    "CUDA_AUTO_BOOST": ("1", "max"),
    "CUDA_MANAGED_FORCE_DEVICE_ALLOC": ("1", "device"),
    "CUDA_ENABLE_COREDUMP_ON_EXCEPTION": ("1", "y"),
    "CUDA_ENABLE_CPU_COREDUMP_ON_EXCEPTION": ("0", "n"),
    "CUDA_ENABLE_LIGHTWEIGHT_COREDUMP": ("1", "light"),
    "CUDA_DEVICE_WAITS_ON_EXCEPTION": ("0", "wait"),
    "CUDA_INJECTION64_PATH": ("{lib}", "{dir}/no-such-injection.so"),
    "CUDA_MPS_PIPE_DIRECTORY": ("{dir}/mps", "{dir}/no-mps-here"),
    "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": ("50", "150"),
    "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": ("0=1G,1=512MB", "0:1G"),
    "CUDA_MPS_CLIENT_PRIORITY": ("1", "high"),
    "LD_LIBRARY_PATH": ("/usr/lib", "/usr/lib::/opt/cuda/lib64"),
    "LD_PRELOAD": ("{lib}", "{dir}/libmissing.so"),
    "PYTORCH_CUDA_ALLOC_CONF": (
        "expandable_segments:True,max_split_size_mb:512",
        "expandable_segments:maybe",
    ),
    "PYTORCH_ALLOC_CONF": ("garbage_collection_threshold:0.6", "garbage_collection_threshold:1.5"),
    "PYTORCH_HIP_ALLOC_CONF": ("backend:native", "backend:hipMallocAsync"),
    "PYTORCH_NO_CUDA_MEMORY_CACHING": ("1", "true"),
    "PYTORCH_NVML_BASED_CUDA_CHECK": ("1", "True"),
    "TORCH_CUDA_ARCH_LIST": ("8.0;9.0a;9.0+PTX", "sm_90"),
    "TORCH_USE_CUDA_DSA": ("1", "on"),
    "CUBLAS_WORKSPACE_CONFIG": (":4096:8", "4096:8"),
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": ("3", "4"),
    "TORCH_NCCL_BLOCKING_WAIT": ("true", "maybe"),
    "TORCH_NCCL_ENABLE_MONITORING": ("0", "off"),
    "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": ("600", "10m"),
    "TORCH_NCCL_TRACE_BUFFER_SIZE": ("2000", "big"),
    "TORCH_NCCL_DUMP_ON_TIMEOUT": ("1", "2"),
    "NCCL_DEBUG": ("INFO", "VERBOSE"),
    "NCCL_DEBUG_SUBSYS": ("INIT,NET", "INIT,NETWORK"),
    "NCCL_P2P_DISABLE": ("1", "yes"),
    "NCCL_P2P_LEVEL": ("NVL", "NVLINK"),
    "NCCL_SHM_DISABLE": ("1", "true"),
    "NCCL_IB_DISABLE": ("1", "ib"),
    "NCCL_NET_GDR_LEVEL": ("PHB", "PCI"),
    "NCCL_NET_GDR_READ": ("1", "read"),
    "NCCL_SOCKET_IFNAME": ("lo", "gputui-no-such-if0"),
    "NCCL_SOCKET_FAMILY": ("AF_INET6", "IPv6"),
    "NCCL_NVLS_ENABLE": ("1", "3"),
    "NCCL_CUMEM_ENABLE": ("0", "no"),
    "NCCL_ALGO": ("allreduce:tree,ring;broadcast:ring", "fastest"),
    "NCCL_PROTO": ("^LL128", "LL256"),
    "NCCL_BUFFSIZE": ("4194304", "4M"),
    "NCCL_NTHREADS": ("256", "300"),
    "NCCL_MIN_NCHANNELS": ("4", "four"),
    "NCCL_MAX_NCHANNELS": ("16", "0"),
    "NCCL_CROSS_NIC": ("2", "3"),
    "NCCL_IB_TIMEOUT": ("22", "40"),
    "NCCL_IB_RETRY_CNT": ("7", "8"),
    "NCCL_IB_GID_INDEX": ("3", "-2"),
    "NCCL_IB_TC": ("106", "256"),
    "NCCL_IB_SL": ("0", "16"),
    "NCCL_LAUNCH_MODE": ("GROUP", "SERIAL"),
    "NCCL_TOPO_FILE": ("{file}", "{dir}/no-topo.xml"),
}


def test_every_checked_variable_of_the_table_has_samples() -> None:
    """A variable added to the table without a test here fails this."""
    checked = {v.name for v in START_VARIABLES if v.check is not None or v.checked_by}
    assert checked == set(SAMPLES)


def value_of(name: str, which: int, paths: dict[str, str]) -> str:
    return SAMPLES[name][which].format(**paths)


def said(checks: dict[str, dict]) -> str:
    return "\n".join(f"{c['summary']}\n{c.get('note') or ''}" for c in checks.values())


def test_well_formed_values_are_not_named_as_malformed(bare_python: str, paths: dict[str, str]) -> None:
    """Every well-formed sample at once, in one real child: env.start passes and lists them."""
    env = {name: value_of(name, 0, paths) for name in SAMPLES}
    checks = run_probe_checks(bare_python, env)
    start = checks["env.start"]
    assert start["status"] == "PASS", start["summary"]
    assert start["evidence"]["malformed"] == {}
    for name in SAMPLES:
        if start_variable(name).checked_by is None:
            assert f"{name}=" in start["summary"], name
            assert start_problem(name, env[name]) is None, name
    assert checks["visibility.env"]["status"] != "FAIL"


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_malformed_value_is_named_before_any_cuda_call(
    bare_python: str, paths: dict[str, str], name: str
) -> None:
    value = value_of(name, 1, paths)
    spec = start_variable(name)
    assert spec is not None
    checks = run_probe_checks(bare_python, {name: value})
    if spec.checked_by is not None:  # CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER: the visibility check
        judged = checks[spec.checked_by]
        assert value in f"{judged['summary']} {judged.get('note')}", judged
        assert name in checks["env.start"]["evidence"]["judged_elsewhere"]
        return
    start = checks["env.start"]
    assert start["status"] == ("FAIL" if spec.stops else "WARN")
    assert start["cause"] == "malformed-variable" and "malformed-variable" in CAUSES
    assert f"{name}={value!r}" in start["summary"]
    assert start["evidence"]["malformed"][name] == start_problem(name, value)
    assert any(line.startswith(f"unset {name}") for line in start["fix"])


def test_the_check_runs_before_cuda_and_torch_on_a_torch_interpreter() -> None:
    """With torch installed (the CPU build here): the malformed allocator setting is named,
    and its event comes before torch's import and before cuInit starts."""
    python = need_torch_python()
    child, _ = child_env(python, {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:maybe"})
    out = subprocess.run(
        [python, str(PROBE), "--no-nccl"], env=child, capture_output=True, text=True, timeout=300, check=True
    ).stdout
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    order = [(e["event"], e.get("id") or e.get("name")) for e in events]
    start = order.index(("check", "env.start"))
    assert start < order.index(("phase", "cuda-init"))
    assert start < order.index(("phase", "torch-import"))
    assert start < order.index(("check", "torch.import"))
    (found,) = [e for e in events if e.get("id") == "env.start"]
    assert found["status"] == "FAIL"
    assert "PYTORCH_CUDA_ALLOC_CONF='expandable_segments:maybe'" in found["summary"]
    assert "'maybe' is not True or False" in found["summary"]


# ---- PYTORCH_CUDA_ALLOC_CONF against torch's own parser ---------------------------------

#: Values of the keys torch's generic parser reads (the CPU build too).
ALLOC_VALUES = [
    "expandable_segments:True",
    "expandable_segments:False",
    "expandable_segments:maybe",
    "expandable_segments:true",
    "expandable_segments:1",
    "expandable_segments",
    "max_split_size_mb:20",
    "max_split_size_mb:19",
    "max_split_size_mb:512",
    "max_split_size_mb:abc",
    "max_split_size_mb",
    "max_non_split_rounding_mb:256",
    "max_non_split_rounding_mb:x",
    "garbage_collection_threshold:0.6",
    "garbage_collection_threshold:1.5",
    "garbage_collection_threshold:0",
    "garbage_collection_threshold:1",
    "roundup_power2_divisions:4",
    "roundup_power2_divisions:0",
    "roundup_power2_divisions:3",
    "roundup_power2_divisions:[256:1,512:2,>:8]",
    "roundup_power2_divisions:[256:1,512:3]",
    "roundup_power2_divisions:[256:1,>:8",
    "pinned_use_background_threads:True",
    "pinned_use_background_threads:1",
    "pinned_max_cached_size_mb:1024",
    "expandable_segments:True,max_split_size_mb:128",
    "expandable_segments:True;max_split_size_mb:128",
    " max_split_size_mb : 100 ",
    "max_split_size_mb:100,,expandable_segments:True",
]


def test_alloc_conf_agrees_with_torchs_own_parser() -> None:
    python = need_torch_python()
    code = (
        "import json, sys, torch\n"
        "parse = getattr(torch._C, '_accelerator_setAllocatorSettings', None)\n"
        "if parse is None: print('null'); sys.exit()\n"
        "out = {}\n"
        "for v in json.loads(sys.argv[1]):\n"
        "    try: parse(v); out[v] = None\n"
        "    except Exception as e: out[v] = str(e).splitlines()[0]\n"
        "print(json.dumps(out))\n"
    )
    out = subprocess.run(
        [python, "-c", code, json.dumps(ALLOC_VALUES)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    torch_says = json.loads(out.stdout.strip().splitlines()[-1])
    if torch_says is None:
        pytest.skip("this torch has no torch._C._accelerator_setAllocatorSettings (before 2.9)")
    for value in ALLOC_VALUES:
        if (torch_says[value] or "").startswith("Unrecognized key"):
            continue  # a key newer than this torch (torch 2.11 has no pinned_max_cached_size_mb)
        assert (alloc_conf(value) is None) == (torch_says[value] is None), (
            value,
            alloc_conf(value),
            torch_says[value],
        )


def test_alloc_conf_keys_torch_reads_only_in_its_cuda_build() -> None:
    """backend and the pinned-memory keys are parsed by the CUDA build's own allocator config."""
    assert alloc_conf("backend:cudaMallocAsync") is None
    assert "backend" in (alloc_conf("backend:cudaMalloc") or "")
    assert alloc_conf("pinned_num_register_threads:8") is None
    assert "power of 2" in (alloc_conf("pinned_num_register_threads:3") or "")
    assert "power of 2" in (alloc_conf("pinned_num_register_threads:256") or "")
    assert alloc_conf("release_lock_on_cudamalloc:True,pinned_use_cuda_host_register:False") is None
    assert "not a key torch knows" in (alloc_conf("expandable_segment:True") or "")
    assert set(ALLOC_CONF_KEYS) >= {"expandable_segments", "max_split_size_mb", "roundup_power2_divisions"}


# ---- a child that dies names the suspects -------------------------------------------------


def diagnose(python: str, env: dict[str, str | None]):
    """A real diagnosis with `env`, and every other start variable of this machine's
    environment unset (a GPU machine's image sets LD_LIBRARY_PATH, TORCH_CUDA_ARCH_LIST...)."""
    from gputui.startvars import start_variable

    clean: dict[str, str | None] = {k: None for k in os.environ if start_variable(k) is not None}
    return DiagnosisSession(python, timeout=60, env_overrides={**clean, **env}).start().wait(120)


def child_finding(d):
    (found,) = [f for f in d.findings if f.id == "diag.child"]
    return found


def test_a_segfault_names_the_start_variables_set_as_suspects(bare_python: str, tmp_path) -> None:
    site = fake_torch(tmp_path, SEGFAULTS)
    d = diagnose(
        bare_python,
        {
            "PYTHONPATH": str(site),
            "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:maybe",
            "NCCL_DEBUG": "INFO",
            "NCCL_SOCKET_IFNAME": "lo\x1b]2;PWNED\x07",
        },
    )
    assert d.child["signal"] == "SIGSEGV"
    crash = child_finding(d)
    assert crash.cause == "child-crashed"
    assert "killed by SIGSEGV" in crash.summary
    # each with its value, the malformed ones (and why) before the rest
    assert "; suspects, set when it died: " in crash.summary
    assert (
        "PYTORCH_CUDA_ALLOC_CONF='expandable_segments:maybe' "
        "(malformed: expandable_segments: 'maybe' is not True or False)"
    ) in crash.summary
    assert "NCCL_DEBUG='INFO'" in crash.summary
    assert crash.summary.index("PYTORCH_CUDA_ALLOC_CONF") < crash.summary.index("NCCL_DEBUG")
    # values through untrusted.literal: the escape shown, never sent
    assert "NCCL_SOCKET_IFNAME='lo\\x1b]2;PWNED\\x07'" in crash.summary
    assert "\x1b" not in crash.summary and "\x07" not in crash.summary
    # gputui's own settings (NVLink multicast off) are not the user's suspects
    assert "NCCL_NVLS_ENABLE" not in crash.summary
    assert crash.evidence["suspect_variables"]["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:maybe"
    assert "PYTORCH_CUDA_ALLOC_CONF" in crash.evidence["malformed_variables"]
    assert (
        "unset PYTORCH_CUDA_ALLOC_CONF   # malformed: expandable_segments: 'maybe' is not True or False"
        in crash.fix
    )
    assert any(
        "`env -u " in line and "-u PYTORCH_CUDA_ALLOC_CONF" in line and "-u NCCL_DEBUG" in line
        for line in crash.fix
    )
    # and before the crash, the child itself had named it (FAIL) before any CUDA call
    start = next(f for f in d.findings if f.id == "env.start")
    assert start.status == "FAIL" and "PYTORCH_CUDA_ALLOC_CONF" in start.summary
    report = d.to_json()
    jsonschema.validate(report, load_schema())
    assert report["child"]["start_variables"]["NCCL_DEBUG"] == "INFO"
    assert "PYTORCH_CUDA_ALLOC_CONF='expandable_segments:maybe'" in report_markdown(report)
    line = format_finding(crash)
    assert "\x1b" not in line and "PYTORCH_CUDA_ALLOC_CONF" in line


def test_an_exit_before_the_end_names_the_suspects_too(bare_python: str, tmp_path) -> None:
    site = fake_torch(tmp_path, "import os\nos._exit(3)\n")
    d = diagnose(bare_python, {"PYTHONPATH": str(site), "CUDA_MODULE_LOADING": "EAGER"})
    crash = child_finding(d)
    assert "exited with status 3" in crash.summary
    assert "suspects, set when it died: CUDA_MODULE_LOADING='EAGER'" in crash.summary
    assert "(malformed" not in crash.summary


def test_a_crash_with_no_start_variable_set_names_no_suspect(bare_python: str, tmp_path) -> None:
    site = fake_torch(tmp_path, SEGFAULTS)
    d = diagnose(bare_python, {"PYTHONPATH": str(site)})
    crash = child_finding(d)
    assert "SIGSEGV" in crash.summary and "suspects" not in crash.summary
    assert crash.evidence["suspect_variables"] == {}


def test_a_clean_run_has_no_crash_finding_whatever_is_set(bare_python: str) -> None:
    d = diagnose(bare_python, {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:maybe"})
    assert d.child["returncode"] == 0
    assert not [f for f in d.findings if f.id == "diag.child"]
    assert d.child["start_variables"] == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:maybe"}


def test_gputui_diag_needs_neither_textual_nor_plotext(bare_python: str, tmp_path) -> None:
    """The device that runs `bench/device.sh diag-env` has torch, nvidia-ml-py, psutil and rich,
    not textual or plotext: `gputui diag --json` must run with both impossible to import."""
    runner = tmp_path / "no_textual.py"
    runner.write_text(
        "import importlib.abc, sys\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] in ('textual', 'plotext'):\n"
        "            raise ImportError(name + ' is not installed here')\n"
        "sys.meta_path.insert(0, Block())\n"
        "sys.argv = ['gputui', 'diag', '--json', '--no-nccl', '--python', sys.argv[1]]\n"
        "from gputui.cli import main\n"
        "raise SystemExit(main())\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTORCH_CUDA_ALLOC_CONF="expandable_segments:maybe")
    out = subprocess.run(
        [sys.executable, str(runner), bare_python],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert "Traceback" not in out.stderr, out.stderr
    report = json.loads(out.stdout)
    start = next(c for c in report["checks"] if c["id"] == "env.start")
    assert start["status"] == "FAIL" and "PYTORCH_CUDA_ALLOC_CONF" in start["summary"]
    assert out.returncode == report["exit_code"] == 2
