"""Issue 31: live on a 4x H100 with 77.5 GiB of GPU 0 held by another process, the diagnosis
named the holder (right) but also FAILed "a copy between GPUs came back wrong: 0<->1, 0<->2,
0<->3" with ACS/IOMMU advice, and the NCCL test timed out.  The peer check turned a failed
allocation into a mismatch (`copy_ok: False` for an exception).  A check that cannot get
memory says so, and who holds it; only a copy that ran and came back different is corruption.

The probe's own functions (loaded by path, as the child loads them) are fed the shapes the
probe really produces: its evidence entries, the H100's NVML memory figures and holder from
bench/results/2026-11-25-h100-diag-env/diag-held.json (a real run beside a 76 GiB holder), and
exceptions of the real torch classes with torch's own out-of-memory text.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.diag import PROBE
from gputui.diag.verdicts import Diagnosis

HELD_RUN = (
    Path(__file__).resolve().parents[1] / "bench" / "results" / "2026-11-25-h100-diag-env" / "diag-held.json"
)

#: torch's caching allocator's message (c10/cuda/CUDACachingAllocator.cpp), as it reads with
#: 77.5 GiB of an H100's 79.2 GiB held by another process.
TORCH_OOM = (
    "CUDA out of memory. Tried to allocate 4.00 MiB. GPU 0 has a total capacity of 79.19 GiB of which "
    "1.94 MiB is free. Process 480 has 77.50 GiB memory in use. Including non-PyTorch memory, this "
    "process has 1.67 GiB memory in use. Of the allocated memory 8.00 MiB is allocated by PyTorch, and "
    "2.00 MiB is reserved by PyTorch but unallocated."
)


def probe_module(name: str):
    package = "_gputui_probe_p2p"
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
def compute():
    return probe_module("compute")


@pytest.fixture(scope="module")
def held_run() -> dict:
    """memory.0's evidence of the real run: NVML's figures and the holder, as the probe got them."""
    report = json.loads(HELD_RUN.read_text())
    return next(c for c in report["checks"] if c["id"] == "memory.0")["evidence"]


#: What the torch-dependent tests need from torch, computed in a fresh interpreter: the
#: monitor's own process never imports torch (a later test checks sys.modules).
IN_TORCH = """
import json, sys
import torch
from test_diag_p2p import TORCH_OOM, _Starved, _pairs, probe_module

compute = probe_module("compute")
errors = {
    "torch-oom": torch.OutOfMemoryError(TORCH_OOM),
    "cuda-error-oom": RuntimeError("CUDA error: out of memory"),
}
out = {"starved": {}, "cuda": torch.cuda.is_available()}
for how, error in errors.items():
    starved = _Starved(torch, 0, error)
    out["starved"][how] = {
        "entry": compute.copy_pair(starved, 0, 1),
        "pairs": _pairs(4, lambda i, j: compute.copy_pair(starved, i, j)),
    }
if not out["cuda"]:
    out["real"] = compute.copy_pair(torch, 0, 1)
out["oom"] = [
    compute.out_of_memory(torch, torch.OutOfMemoryError(TORCH_OOM)),
    compute.out_of_memory(torch, RuntimeError("CUDA error: out of memory")),
    compute.out_of_memory(None, RuntimeError("CUDA error: out of memory")),
    compute.out_of_memory(torch, RuntimeError("CUDA error: an illegal memory access was encountered")),
]
sys.stdout.write(json.dumps(out))
"""


@pytest.fixture(scope="module")
def torch_run() -> dict:
    from conftest import fresh_python
    from diag_support import torch_python

    if torch_python() != sys.executable:
        pytest.skip("torch is not installed in the test interpreter")
    r = fresh_python(IN_TORCH, tests_importable=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def held_text_of(run: dict) -> str:
    mem = probe_module("memory")
    memory = {"total": run["total_bytes"], "free": run["free_bytes"], "used": run["used_bytes"]}
    return mem.held_text(memory, run["processes"])


def test_held_text_names_the_free_memory_and_the_holder(held_run) -> None:
    assert held_text_of(held_run) == "3.2 GiB of 79.6 GiB free, held by PID 480 (python3, root) 76.0 GiB"
    mem = probe_module("memory")
    assert mem.held_text(None, None) == (
        "free memory unknown (NVML does not report it) (NVML cannot list the processes holding it)"
    )
    unreported = [{"pid": 7, "used_bytes": None, "name": None, "user": None}]  # None is not 0
    assert mem.held_text({"total": 1 << 30, "free": 0}, unreported).endswith("PID 7 (memory not reported)")


def _pairs(n: int, copy) -> list[dict]:
    """The peer check's evidence for n GPUs: every ordered pair, a copy result for i < j."""
    out = []
    for i in range(n):
        for j in range(n):
            if i != j:
                entry = {"from": i, "to": j, "access": True}
                if i < j:
                    entry.update(copy(i, j))
                out.append(entry)
    return out


class _Starved:
    """torch, whose allocations on one GPU fail with torch's real OutOfMemoryError."""

    def __init__(self, torch, starved_gpu: int, error: BaseException) -> None:
        self._torch, self._gpu, self._error = torch, starved_gpu, error
        self.float32 = torch.float32
        self.OutOfMemoryError = torch.OutOfMemoryError
        self.cuda = torch.cuda

    def arange(self, n, dtype, device):
        if device == f"cuda:{self._gpu}":
            raise self._error
        return _Tensor(device)

    @staticmethod
    def equal(a, b) -> bool:
        return True


class _Tensor:
    def __init__(self, device: str) -> None:
        self.device = device

    def to(self, device: str) -> _Tensor:
        return _Tensor(device)


@pytest.mark.parametrize("how", ["torch-oom", "cuda-error-oom"])
def test_a_copy_that_cannot_get_memory_is_not_a_copy_that_came_back_wrong(
    compute, torch_run, held_run, how
) -> None:
    run = torch_run["starved"][how]
    entry = run["entry"]
    assert entry["copy_ok"] is None and entry["out_of_memory"] is True and entry["gpu"] == 0
    pairs = run["pairs"]
    status, cause, summary = compute.judge_peers(pairs, 4, lambda gpu: f"GPU {gpu}: {held_text_of(held_run)}")
    assert (status, cause) == ("WARN", "memory-held")
    assert summary == (
        "could not allocate 4 MiB on GPU 0 for the copies 0<->1, 0<->2, 0<->3: not tested "
        "(GPU 0: 3.2 GiB of 79.6 GiB free, held by PID 480 (python3, root) 76.0 GiB)"
    )
    # through the parent's verdicts: no corruption, no ACS advice
    d = Diagnosis()
    f = d.feed(
        {"v": 1, "event": "check", "id": "compute.peer", "group": "compute", "title": "Peer-to-peer access",
         "status": status, "summary": summary, "evidence": {"pairs": pairs}, "cause": cause, "fix": []}
    )  # fmt: skip
    assert f is not None and f.status == "WARN"
    told = " ".join([f.summary, f.meaning or "", *f.fix]).lower()
    assert "came back wrong" not in told and "acs" not in told and "iommu" not in told


def test_a_copy_that_fails_otherwise_is_a_cuda_error_not_corruption(compute, torch_run) -> None:
    """The real torch of this machine (the CPU build here: no CUDA at all) fails the copy."""
    if torch_run["cuda"]:
        pytest.skip("this torch has CUDA: its copy does not fail")
    entry = torch_run["real"]
    assert entry["copy_ok"] is None and entry["out_of_memory"] is False and entry["error"]
    status, cause, summary = compute.judge_peers(_pairs(2, lambda i, j: entry), 2)
    assert (status, cause) == ("FAIL", "cuda-error")
    assert summary.startswith("a copy between GPUs failed: 0<->1 (") and "came back wrong" not in summary


def test_only_a_copy_that_came_back_different_is_corruption(compute) -> None:
    pairs = _pairs(3, lambda i, j: {"copy_ok": not (i == 1 and j == 2)})
    assert compute.judge_peers(pairs, 3) == (
        "FAIL",
        "p2p-wrong",
        "a copy between GPUs came back wrong: 1<->2",
    )
    ok = _pairs(2, lambda i, j: {"copy_ok": True})
    assert compute.judge_peers(ok, 2)[0] == "PASS"
    unknown = [dict(e, access=None) for e in ok]  # can_device_access_peer raised: unknown, not "no"
    assert compute.judge_peers(unknown, 2)[0] == "PASS"
    none = [dict(e, access=False) for e in ok]
    assert compute.judge_peers(none, 2)[:2] == ("WARN", "no-p2p")
    both = _pairs(
        3,
        lambda i, j: (
            {"copy_ok": False} if j == 2 else {"copy_ok": None, "error": "x", "out_of_memory": True, "gpu": 0}
        ),
    )
    status, cause, summary = compute.judge_peers(both, 3)
    assert (status, cause) == ("FAIL", "p2p-wrong")  # corruption elsewhere still fails, first
    assert "could not allocate 4 MiB on GPU 0 for the copies 0<->1: not tested" in summary


def test_an_nccl_rank_without_memory_is_not_an_nccl_failure(compute, held_run) -> None:
    """Rank 0 on the held GPU fails to allocate; the others wait for it and are stopped."""
    results = [
        {"rank": 0, "ok": False, "error": f"OutOfMemoryError: {TORCH_OOM}", "out_of_memory": True},
        *({"ok": False, "error": "stopped: waited 10 s more for rank 0, which failed"} for _ in range(3)),
    ]
    status, cause, summary = compute.judge_nccl(results, lambda rank: f"GPU {rank}: {held_text_of(held_run)}")
    assert (status, cause) == ("WARN", "memory-held")
    assert summary.startswith(
        "not tested: rank 0 could not get GPU memory (OutOfMemoryError: CUDA out of memory."
    )
    assert summary.endswith("; GPU 0: 3.2 GiB of 79.6 GiB free, held by PID 480 (python3, root) 76.0 GiB")
    broken = [
        {"rank": 0, "ok": False, "error": "DistBackendError: NCCL error: unhandled system error"},
        {"ok": True},
    ]
    assert compute.judge_nccl(broken, lambda rank: None)[0] == "FAIL"
    fine = [{"ok": True, "nccl": "2.27.3"}, {"ok": True, "nccl": "2.27.3"}]
    assert compute.judge_nccl(fine)[0] == "PASS"


def test_the_nccl_worker_says_out_of_memory(torch_run) -> None:
    assert torch_run["oom"] == [True, True, True, False]


class _RecordedNvml:
    """NVML's answers for one GPU as the real run got them (diag-held.json), for the probe."""

    ok = True

    def __init__(self, run: dict, gpus: int) -> None:
        self.run, self.handles = run, [object()] * gpus

    def memory(self, i: int) -> dict:
        if i == 0:
            return {
                "total": self.run["total_bytes"],
                "free": self.run["free_bytes"],
                "used": self.run["used_bytes"],
            }
        return {
            "total": self.run["total_bytes"],
            "free": self.run["total_bytes"] - (1 << 30),
            "used": 1 << 30,
        }

    def processes(self, i: int) -> list[dict]:
        return (
            [{"pid": p["pid"], "used_bytes": p["used_bytes"]} for p in self.run["processes"]]
            if i == 0
            else []
        )


class _P:
    def __init__(self, run: dict, gpus: int) -> None:
        self.nvml = _RecordedNvml(run, gpus)
        self.visible_nvml = None
        self.nccl_short: list[str] = []


def test_nccl_is_not_started_where_a_gpu_has_no_room_for_a_rank(compute, held_run) -> None:
    p = _P(held_run, 4)
    short = compute.nccl_short_of_memory(p)
    assert len(short) == 1 and short[0].startswith("GPU 0: 3.2 GiB of 79.6 GiB free, held by PID 480")
    p.visible_nvml = [1, 2, 3]  # GPU 0 hidden by CUDA_VISIBLE_DEVICES: the ranks never use it
    assert compute.nccl_short_of_memory(p) == []


def _rank(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)


def test_once_a_rank_failed_the_others_are_not_waited_for_to_the_timeout(compute) -> None:
    result = {"rank": 0, "ok": False, "error": "OutOfMemoryError: x", "out_of_memory": True}
    fail = f"import json; print(json.dumps({result!r}))"
    hang = "import time; time.sleep(30)"  # (ends by itself: a rank waited for to the end reports no result)
    workers = [_rank(fail), _rank(hang), _rank(hang)]
    try:
        results = compute.collect_ranks(workers, timeout=600, grace=0.5)
        assert all(w.poll() is None for w in workers[1:])  # not waited for: still waiting
    finally:
        for w in workers:
            w.kill()
            w.wait()
    assert results[0]["out_of_memory"] is True
    assert [r["error"] for r in results[1:]] == ["stopped: waited 0.5 s more for rank 0, which failed"] * 2
    done = [_rank("import json; print(json.dumps({'ok': True}))") for _ in range(2)]
    assert compute.collect_ranks(done, timeout=600) == [{"ok": True}, {"ok": True}]
