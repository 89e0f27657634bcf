"""The compute layer: matmul and autocast against the CPU, peer access and copies, and an NCCL
all-reduce over every GPU (one process per rank, started early so its import overlaps ours)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time

from . import lifeline, multicast, protocol
from .causes import nccl_cause
from .protocol import Phase, check, first_line, safe
from .registry import declare

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
MULTICAST_OFF = multicast.MULTICAST_OFF


@declare("compute.matmul", "compute", "Matrix multiply vs CPU", needs=("cuda",))
def matmul(p):
    t0 = time.monotonic()
    torch = p.torch
    results = []
    with Phase("matmul", "matmul on each GPU against the CPU"):
        for i in range(p.device_count):
            results.append(matmul_check(torch, i))
        p.link_under_load = pcie_under_load(p)
    bad = [r for r in results if not r.get("ok")]
    if bad:
        check(
            "compute.matmul",
            "compute",
            "Matrix multiply vs CPU",
            "FAIL",
            "wrong or failed matmul on GPU {}".format(", ".join(str(r["gpu"]) for r in bad)),
            {"results": results},
            cause="matmul-wrong" if all("error" not in r for r in bad) else "cuda-error",
            t0=t0,
        )
        return
    check(
        "compute.matmul",
        "compute",
        "Matrix multiply vs CPU",
        "PASS",
        "float32 512x512 matmul matches the CPU (float64) on every GPU (max rel. error {:.1e})".format(
            max(r["max_rel_error"] for r in results)
        ),
        {"results": results},
        t0=t0,
    )


def pcie_under_load(p):
    """The PCIe link generation while each GPU is busy (it drops at idle to save power)."""
    torch = p.torch
    out = {}
    if not p.nvml.ok:
        return out
    for i in range(p.device_count):
        nvml_index = p.nvml_index(i)
        if nvml_index is None:
            continue
        try:
            with torch.cuda.device(i):
                a = torch.randn(2048, 2048, device="cuda")
                for _ in range(60):
                    a = torch.tanh(a @ a)
                gen, width = p.nvml.link(nvml_index)  # while the queue runs
                torch.cuda.synchronize(i)
            out[nvml_index] = {"gen": gen, "width": width}
        except Exception as exc:
            out[nvml_index] = {"error": str(exc)}
    return out


@declare("compute.amp", "compute", "Mixed precision (autocast)", needs=("cuda",))
def amp(p):
    t0 = time.monotonic()
    torch = p.torch
    results = []
    for i in range(p.device_count):
        for dtype_name in ("float16", "bfloat16"):
            if dtype_name == "bfloat16" and torch.cuda.get_device_capability(i)[0] < 8:
                results.append(
                    {"gpu": i, "dtype": dtype_name, "skipped": "no native bf16 before compute 8.0"}
                )
                continue
            results.append(amp_check(torch, i, dtype_name))
    bad = [r for r in results if not r.get("ok") and not r.get("skipped")]
    if bad:
        check(
            "compute.amp",
            "compute",
            "Mixed precision (autocast)",
            "FAIL",
            "autocast failed or was wrong: {}".format(
                ", ".join("GPU %d %s" % (r["gpu"], r["dtype"]) for r in bad)
            ),
            {"results": results},
            cause="amp-wrong",
            t0=t0,
        )
        return
    ran = sorted({r["dtype"] for r in results if r.get("ok")})
    check(
        "compute.amp",
        "compute",
        "Mixed precision (autocast)",
        "PASS",
        "autocast {} runs and matches float32 within its precision".format(" and ".join(ran)),
        {"results": results},
        t0=t0,
    )


@declare("compute.peer", "compute", "Peer-to-peer access", needs=("cuda",))
def peers(p):
    t0 = time.monotonic()
    torch = p.torch
    n = p.device_count
    if n < 2:
        check("compute.peer", "compute", "Peer-to-peer access", "SKIP", "one GPU: nothing to pair", t0=t0)
        return
    pairs = []
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            entry = {
                "from": i,
                "to": j,
                "access": safe(lambda i=i, j=j: torch.cuda.can_device_access_peer(i, j)),
            }
            if i < j:
                try:
                    x = torch.arange(1 << 20, dtype=torch.float32, device="cuda:%d" % i)
                    y = x.to("cuda:%d" % j)
                    back = y.to("cuda:%d" % i)
                    entry["copy_ok"] = bool(torch.equal(x, back))
                except Exception as exc:
                    entry["copy_ok"] = False
                    entry["error"] = first_line(str(exc))
            pairs.append(entry)
    no_access = [pair for pair in pairs if not pair["access"]]
    bad_copy = [pair for pair in pairs if pair.get("copy_ok") is False]
    if bad_copy:
        status, cause = "FAIL", "p2p-wrong"
        summary = "a copy between GPUs came back wrong: {}".format(
            ", ".join("%d<->%d" % (pair["from"], pair["to"]) for pair in bad_copy)
        )
    elif no_access:
        status, cause = "WARN", "no-p2p"
        summary = "no direct peer access for {}: copies go through host memory".format(
            ", ".join("%d->%d" % (pair["from"], pair["to"]) for pair in no_access)
        )
    else:
        status, cause = "PASS", None
        summary = "every pair of the %d GPUs has direct peer access; copies are exact" % n
    check(
        "compute.peer",
        "compute",
        "Peer-to-peer access",
        status,
        summary,
        {"pairs": pairs},
        cause=cause,
        t0=t0,
    )


# ---- NCCL ------------------------------------------------------------------------


def start_nccl(p):
    """Start one all-reduce worker per GPU now, so their torch import overlaps ours."""
    n = p.expected_visible if p.expected_visible is not None else len(p.nvml_devices)
    if p.options.get("no_nccl") or not p.nvml.ok or n < 2:
        return
    port = _free_port()
    env = dict(os.environ)
    env.update(MULTICAST_OFF)
    env.setdefault("NCCL_DEBUG", "WARN")
    if threading.current_thread() is threading.main_thread():
        env[lifeline.PARENT_VAR] = str(os.getpid())  # the workers die with the probe (SIGKILL too)
    p.worker_started = time.monotonic()
    for rank in range(n):
        p.workers.append(
            subprocess.Popen(
                [
                    sys.executable,
                    PACKAGE_DIR,
                    "--nccl-worker",
                    str(rank),
                    str(n),
                    str(port),
                ],
                stdout=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                env=env,
            )
        )


@declare("compute.nccl", "compute", "NCCL all-reduce")
def nccl(p):
    t0 = time.monotonic()
    if "start_nccl" in p.start_errors:
        error = p.start_errors["start_nccl"]
        check(
            "compute.nccl",
            "compute",
            "NCCL all-reduce",
            "FAIL",
            "the ranks could not be started: %s" % error,
            {"error": error},
            cause="nccl-error",
            t0=t0,
        )
        return
    if not p.workers:
        reason = (
            "one GPU: nothing to reduce across" if (p.expected_visible or 0) < 2 else "skipped (--no-nccl)"
        )
        if not p.nvml.ok:
            reason = "no NVML: GPU count unknown"
        check("compute.nccl", "compute", "NCCL all-reduce", "SKIP", reason, t0=t0)
        return
    if not p.available or p.device_count < 2:
        p.stop_workers()
        check(
            "compute.nccl",
            "compute",
            "NCCL all-reduce",
            "SKIP",
            "fewer than 2 GPUs usable by torch",
            t0=t0,
        )
        return
    results = []
    with Phase("nccl", "NCCL all-reduce across %d GPUs" % len(p.workers)):
        deadline = time.monotonic() + float(p.options.get("nccl_timeout", 90))
        for proc in p.workers:
            left = max(0.1, deadline - time.monotonic())
            try:
                out, _ = proc.communicate(timeout=left)
                line = [ln for ln in out.decode("utf-8", "replace").splitlines() if ln.startswith("{")]
                results.append(
                    json.loads(line[-1])
                    if line
                    else {"ok": False, "error": f"no result (exit {proc.returncode})"}
                )
            except subprocess.TimeoutExpired:
                results.append({"ok": False, "error": "timed out"})
        p.stop_workers()
    ok = all(r.get("ok") for r in results) and len(results) >= 2
    version = next((r.get("nccl") for r in results if r.get("nccl")), None)
    ev = {
        "ranks": results,
        "world_size": len(results),
        "nccl": version,
        "multicast_off": MULTICAST_OFF,
        "seconds": round(time.monotonic() - (p.worker_started or t0), 2),
    }
    if ok:
        check(
            "compute.nccl",
            "compute",
            "NCCL all-reduce",
            "PASS",
            "all-reduce over %d GPUs (one process each) gave the right sum; NCCL %s"
            % (len(results), version),
            ev,
            t0=t0,
        )
    else:
        errors = "; ".join(first_line(str(r.get("error"))) for r in results if not r.get("ok"))
        check(
            "compute.nccl",
            "compute",
            "NCCL all-reduce",
            "FAIL",
            f"all-reduce failed: {errors}",
            ev,
            cause=nccl_cause(errors),
            t0=t0,
        )


def matmul_check(torch, i):
    dev = "cuda:%d" % i
    g = torch.Generator().manual_seed(99 + i)
    a = torch.randn(512, 512, generator=g, dtype=torch.float64)
    b = torch.randn(512, 512, generator=g, dtype=torch.float64)
    saved = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        c = (a.to(dev, torch.float32) @ b.to(dev, torch.float32)).cpu()
        err = rel_err(torch, c, a @ b)
    except Exception as exc:
        return {"gpu": i, "ok": False, "error": first_line(str(exc))}
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    return {"gpu": i, "ok": err < 1e-4, "max_rel_error": err}


def amp_check(torch, i, dtype_name):
    dev = "cuda:%d" % i
    dtype = getattr(torch, dtype_name)
    g = torch.Generator().manual_seed(7 + i)
    x = torch.randn(64, 256, generator=g)
    lin = torch.nn.Linear(256, 128)
    ref = lin(x).double()
    try:
        lin_g = lin.to(dev)
        with torch.autocast("cuda", dtype=dtype):
            y = lin_g(x.to(dev))
        out_dtype = str(y.dtype).replace("torch.", "")
        err = rel_err(torch, y.float().cpu(), ref)
    except Exception as exc:
        return {"gpu": i, "dtype": dtype_name, "ok": False, "error": first_line(str(exc))}
    tol = 2e-2 if dtype_name == "bfloat16" else 5e-3
    return {
        "gpu": i,
        "dtype": dtype_name,
        "ok": out_dtype == dtype_name and err < tol,
        "output_dtype": out_dtype,
        "max_rel_error": err,
    }


def rel_err(torch, got, want):
    got = got.detach().double().cpu()
    want = want.detach().double().cpu()
    scale = float(want.abs().max()) or 1.0
    if not bool(torch.isfinite(got).all()):
        return float("inf")
    return float((got - want).abs().max()) / scale


def _free_port():
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


def nccl_worker(rank, world, port):
    """One rank of the all-reduce check: prints one JSON line on (the real) stdout."""
    if not lifeline.tie_to_parent():  # the probe that started it is gone already
        os._exit(0)
    protocol.take_stdout()
    result = {"rank": rank, "ok": False}
    t0 = time.monotonic()
    try:
        import datetime

        import torch
        import torch.distributed as dist

        if torch.cuda.device_count() < world:
            raise RuntimeError(
                "rank %d: torch sees %d GPUs, %d needed" % (rank, torch.cuda.device_count(), world)
            )
        torch.cuda.set_device(rank)
        dist.init_process_group(
            "nccl",
            init_method="tcp://127.0.0.1:%d" % port,
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=60),
        )
        t = torch.full((1 << 20,), float(rank + 1), device="cuda:%d" % rank)
        dist.all_reduce(t)
        torch.cuda.synchronize()
        want = world * (world + 1) / 2
        result["ok"] = bool((t == want).all())
        result["value"] = float(t[0])
        result["expected"] = want
        result["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version())
        dist.destroy_process_group()
    except BaseException as exc:
        result["error"] = f"{type(exc).__name__}: {first_line(str(exc))}"
    result["seconds"] = round(time.monotonic() - t0, 3)
    protocol.write_json(result)
