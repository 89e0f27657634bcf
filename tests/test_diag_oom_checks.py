"""A check that cannot get GPU memory says so, and who holds it (issue 31 leftover): the matmul,
autocast and cuDNN checks reported an out-of-memory as "wrong or failed" with the cause "CUDA
error", as the peer check did before it was fixed (tests/test_diag_p2p.py).

The probe's own check functions (loaded by path, as the child loads them) run in a fresh
interpreter with the real torch, whose allocation on one GPU fails with torch's real
OutOfMemoryError (torch's own text), CUDA's "out of memory" error, or another CUDA error; the
results are judged here, and fed through the parent's verdicts.
"""

from __future__ import annotations

import json
import sys

import pytest
import test_diag_p2p as p2p
from test_diag_p2p import TORCH_OOM, held_text_of, probe_module

from gputui.diag.verdicts import Diagnosis

held_run = p2p.held_run
"""(test_diag_p2p's fixture: the memory figures of a real H100 run beside a 76 GiB holder)"""

IN_TORCH = """
import json, sys
import torch
from test_diag_oom_checks import Starved
from test_diag_p2p import TORCH_OOM, probe_module

compute, devices = probe_module("compute"), probe_module("devices")
errors = {
    "torch-oom": torch.OutOfMemoryError(TORCH_OOM),
    "cuda-error-oom": RuntimeError("CUDA error: out of memory"),
    "illegal-access": RuntimeError("CUDA error: an illegal memory access was encountered"),
}
out = {}
for how, error in errors.items():
    starved = Starved(torch, 0, error)
    out[how] = {
        "matmul": [compute.matmul_check(starved, 0)],
        "amp": [compute.amp_check(starved, 0, d) for d in ("float16", "bfloat16")],
        "conv": [devices.conv_check(starved, 0)],
    }
sys.stdout.write(json.dumps(out))
"""


class Guarded:
    """A real tensor or module whose move to the starved GPU fails with `error`; the rest is
    the real thing's."""

    def __init__(self, real, gpu: int, error: BaseException) -> None:
        self._real, self._gpu, self._error = real, gpu, error

    def __getattr__(self, name: str):
        return getattr(self._real, name)

    def __call__(self, *args, **kwargs):
        return self._real(*(a._real if isinstance(a, Guarded) else a for a in args), **kwargs)

    def to(self, device, *args, **kwargs):
        if str(device) == f"cuda:{self._gpu}":
            raise self._error
        return Guarded(self._real, self._gpu, self._error)  # (the other GPU: never computed)


class Starved:
    """torch, whose tensors and modules cannot be moved to GPU `gpu` (its memory is held): the
    checks run on that GPU only (this torch may have no CUDA at all)."""

    def __init__(self, torch, gpu: int, error: BaseException) -> None:
        self._torch, self._gpu, self._error = torch, gpu, error
        starved = self

        class nn:
            functional = torch.nn.functional

            @staticmethod
            def Linear(*args, **kwargs):
                return Guarded(torch.nn.Linear(*args, **kwargs), starved._gpu, starved._error)

        self.nn = nn

    def __getattr__(self, name: str):
        return getattr(self._torch, name)

    def randn(self, *args, **kwargs):
        return Guarded(self._torch.randn(*args, **kwargs), self._gpu, self._error)


@pytest.fixture(scope="module")
def runs() -> dict:
    from conftest import fresh_python
    from diag_support import torch_python

    if torch_python() != sys.executable:
        pytest.skip("torch is not installed in the test interpreter")
    r = fresh_python(IN_TORCH, tests_importable=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _held(held_run):
    return lambda gpu: f"GPU {gpu}: {held_text_of(held_run)}"


def _verdict(check_id: str, title: str, status: str, cause: str | None, summary: str, evidence: dict):
    d = Diagnosis()
    finding = d.feed(
        {"v": 1, "event": "check", "id": check_id, "group": "compute", "title": title, "status": status,
         "summary": summary, "evidence": evidence, "cause": cause, "fix": []}
    )  # fmt: skip
    assert finding is not None
    return finding


HELD = "(GPU 0: 3.2 GiB of 79.6 GiB free, held by PID 480 (python3, root) 76.0 GiB)"


@pytest.mark.parametrize("how", ["torch-oom", "cuda-error-oom"])
def test_a_matmul_that_cannot_get_memory_is_not_a_wrong_matmul(runs, held_run, how) -> None:
    compute = probe_module("compute")
    results = runs[how]["matmul"]
    assert results[0]["ok"] is False and results[0]["out_of_memory"] is True
    status, cause, summary = compute.judge_matmul(results, _held(held_run))
    assert (status, cause) == ("WARN", "memory-held")
    assert summary == f"could not get GPU memory for the matmul on GPU 0: not tested {HELD}"
    f = _verdict("compute.matmul", "Matrix multiply vs CPU", status, cause, summary, {"results": results})
    told = " ".join([f.summary, f.meaning or "", *f.fix]).lower()
    assert f.status == "WARN" and "wrong" not in told and "failed" not in told


@pytest.mark.parametrize("how", ["torch-oom", "cuda-error-oom"])
def test_autocast_that_cannot_get_memory_is_not_autocast_failing(runs, held_run, how) -> None:
    compute = probe_module("compute")
    results = runs[how]["amp"]
    assert len(results) == 2 and all(r["ok"] is False and r["out_of_memory"] is True for r in results)
    status, cause, summary = compute.judge_amp(results, _held(held_run))
    assert (status, cause) == ("WARN", "memory-held")
    assert summary == f"could not get GPU memory for autocast on GPU 0: not tested {HELD}"


@pytest.mark.parametrize("how", ["torch-oom", "cuda-error-oom"])
def test_a_convolution_that_cannot_get_memory_is_not_cudnn_failing(runs, held_run, how) -> None:
    devices = probe_module("devices")
    results = runs[how]["conv"]
    assert results[0]["ok"] is False and results[0]["out_of_memory"] is True
    status, cause, summary = devices.judge_conv(results, 91002, True, _held(held_run))
    assert (status, cause) == ("WARN", "memory-held")
    assert summary == f"cuDNN 91002: could not get GPU memory for the convolution on GPU 0: not tested {HELD}"
    f = _verdict("cudnn.conv", "cuDNN convolution", status, cause, summary, {"conv": results})
    assert f.status == "WARN" and "fails" not in f.summary


def test_another_cuda_error_is_still_a_failure(runs, held_run) -> None:
    """Not every CUDA error is a lack of memory: an illegal access is a FAIL, as before."""
    compute, devices = probe_module("compute"), probe_module("devices")
    run = runs["illegal-access"]
    assert run["matmul"][0]["out_of_memory"] is False
    assert compute.judge_matmul(run["matmul"], _held(held_run))[:2] == ("FAIL", "cuda-error")
    assert compute.judge_amp(run["amp"], _held(held_run))[:2] == ("FAIL", "amp-wrong")
    assert devices.judge_conv(run["conv"], 91002, True, _held(held_run))[:2] == ("FAIL", "cudnn-error")


def test_a_failure_beside_a_starved_gpu_is_a_failure_that_names_both(runs, held_run) -> None:
    """GPU 0 without memory, GPU 1 computing wrong: FAIL for GPU 1, GPU 0 said not tested."""
    compute = probe_module("compute")
    starved = runs["torch-oom"]["matmul"][0]
    wrong = {"gpu": 1, "ok": False, "max_rel_error": 0.5}
    status, cause, summary = compute.judge_matmul([starved, wrong], _held(held_run))
    assert (status, cause) == ("FAIL", "matmul-wrong")
    assert summary == (
        "wrong or failed matmul on GPU 1; "
        f"could not get GPU memory for the matmul on GPU 0: not tested {HELD}"
    )


def test_passing_checks_still_pass() -> None:
    compute, devices = probe_module("compute"), probe_module("devices")
    ok = [{"gpu": 0, "ok": True, "max_rel_error": 1e-7}]
    assert compute.judge_matmul(ok)[:2] == ("PASS", None)
    amp = [{"gpu": 0, "dtype": "float16", "ok": True}, {"gpu": 0, "dtype": "bfloat16", "skipped": "old"}]
    passed = "autocast float16 runs and matches float32 within its precision"
    assert compute.judge_amp(amp) == ("PASS", None, passed)
    assert devices.judge_conv(ok, 91002, True)[:2] == ("PASS", None)
    assert devices.judge_conv(ok, 91002, False)[:2] == ("WARN", "cudnn-disabled")
    assert TORCH_OOM.startswith("CUDA out of memory")
