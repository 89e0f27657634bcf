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

from . import lifeline, memory, multicast, protocol
from .causes import nccl_cause
from .protocol import Phase, check, first_line, safe
from .registry import declare

out_of_memory = memory.out_of_memory

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
    status, cause, summary = judge_matmul(results, lambda gpu: memory.held_on(p, gpu))
    check(
        "compute.matmul",
        "compute",
        "Matrix multiply vs CPU",
        status,
        summary,
        {"results": results},
        cause=cause,
        t0=t0,
    )


def judge_matmul(results, held=lambda gpu: None):
    """(status, cause, summary) of the matmul results: a GPU that could not get memory is
    not tested (and who holds it said), never a wrong matmul."""
    starved, bad = memory.split_starved([r for r in results if not r.get("ok")])
    untested = memory.starved_text("the matmul", starved, held) if starved else None
    if bad:
        summary = "wrong or failed matmul on GPU {}".format(", ".join(str(r["gpu"]) for r in bad))
        cause = "matmul-wrong" if all("error" not in r for r in bad) else "cuda-error"
        return "FAIL", cause, summary + ("; " + untested if untested else "")
    if untested:
        return "WARN", "memory-held", untested
    return (
        "PASS",
        None,
        "float32 512x512 matmul matches the CPU (float64) on every GPU (max rel. error {:.1e})".format(
            max(r["max_rel_error"] for r in results)
        ),
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
    status, cause, summary = judge_amp(results, lambda gpu: memory.held_on(p, gpu))
    check(
        "compute.amp",
        "compute",
        "Mixed precision (autocast)",
        status,
        summary,
        {"results": results},
        cause=cause,
        t0=t0,
    )


def judge_amp(results, held=lambda gpu: None):
    """(status, cause, summary) of the autocast results (as `judge_matmul`)."""
    starved, bad = memory.split_starved([r for r in results if not r.get("ok") and not r.get("skipped")])
    untested = memory.starved_text("autocast", starved, held) if starved else None
    if bad:
        summary = "autocast failed or was wrong: {}".format(
            ", ".join("GPU %d %s" % (r["gpu"], r["dtype"]) for r in bad)
        )
        return "FAIL", "amp-wrong", summary + ("; " + untested if untested else "")
    if untested:
        return "WARN", "memory-held", untested
    ran = sorted({r["dtype"] for r in results if r.get("ok")})
    return "PASS", None, "autocast {} runs and matches float32 within its precision".format(" and ".join(ran))


#: The peer check's copy: 2**20 float32 values (4 MiB) on each GPU of a pair.
COPY_ELEMENTS = 1 << 20
COPY_MIB = COPY_ELEMENTS * 4 >> 20


def copy_pair(torch, i, j):
    """Copy COPY_ELEMENTS values from GPU i to GPU j and back: {"copy_ok": bool} when the
    copies ran (False: the data came back different); when they could not run, "copy_ok" is
    None with the error, whether it was a lack of memory, and the GPU it happened on."""
    on = i
    try:
        x = torch.arange(COPY_ELEMENTS, dtype=torch.float32, device="cuda:%d" % i)
        on = j
        y = x.to("cuda:%d" % j)
        on = i
        back = y.to("cuda:%d" % i)
        return {"copy_ok": bool(torch.equal(x, back))}
    except Exception as exc:
        return {
            "copy_ok": None,
            "error": first_line(str(exc)),
            "out_of_memory": out_of_memory(torch, exc),
            "gpu": on,
        }


def judge_peers(pairs, n, held=lambda gpu: None):
    """(status, cause, summary) of the peer check's pairs ({"from", "to", "access"}, and for
    from < to the copy_pair result).  Only a copy that ran and came back different is
    corruption; one that could not get memory says so and who holds it (`held(gpu)`), one
    that failed otherwise is a CUDA error; access None (unknown) is not "no access"."""
    pair = lambda e: "%d<->%d" % (e["from"], e["to"])  # noqa: E731
    wrong = [e for e in pairs if e.get("copy_ok") is False]
    starved = [e for e in pairs if e.get("error") and e.get("out_of_memory")]
    failed = [e for e in pairs if e.get("error") and not e.get("out_of_memory")]
    no_access = [e for e in pairs if e.get("access") is False]
    parts = []  # (status, cause, text), worst first
    if wrong:
        parts.append(
            ("FAIL", "p2p-wrong", "a copy between GPUs came back wrong: %s" % ", ".join(map(pair, wrong)))
        )
    if failed:
        parts.append(
            (
                "FAIL",
                "cuda-error",
                "a copy between GPUs failed: %s"
                % "; ".join("%s (%s)" % (pair(e), e["error"]) for e in failed),
            )
        )
    for gpu in sorted({e.get("gpu") for e in starved}, key=str):
        mine = [e for e in starved if e.get("gpu") == gpu]
        whose = held(gpu)
        parts.append(
            (
                "WARN",
                "memory-held",
                "could not allocate %d MiB on GPU %s for the copies %s: not tested%s"
                % (COPY_MIB, gpu, ", ".join(map(pair, mine)), " (%s)" % whose if whose else ""),
            )
        )
    if no_access:
        parts.append(
            (
                "WARN",
                "no-p2p",
                "no direct peer access for {}: copies go through host memory".format(
                    ", ".join("%d->%d" % (e["from"], e["to"]) for e in no_access)
                ),
            )
        )
    if not parts:
        return "PASS", None, "every pair of the %d GPUs has direct peer access; copies are exact" % n
    order = {"FAIL": 0, "WARN": 1}
    worst = min(parts, key=lambda part: order[part[0]])
    return worst[0], worst[1], "; ".join(text for _, _, text in parts)


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
                entry.update(copy_pair(torch, i, j))
            pairs.append(entry)
    status, cause, summary = judge_peers(pairs, n, lambda gpu: memory.held_on(p, gpu))
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


#: Free memory (before the diagnosis starts CUDA) an all-reduce rank needs on its GPU: its
#: CUDA context and NCCL's buffers, beside the diagnosis's own context and cached blocks
#: (about 0.5 GiB each on an H100; 2.1 GiB free was too little there, issue 31).
NCCL_MIN_FREE = 4 << 30
#: How long the other ranks are waited for once one has failed (they wait for it in vain).
NCCL_GRACE_S = 10.0


def nccl_short_of_memory(p):
    """The GPUs the all-reduce would use that have less than NCCL_MIN_FREE free, each with
    who holds it (`memory.held_text`); [] when all have enough, or NVML cannot say."""
    visible = p.visible_nvml if p.visible_nvml is not None else range(len(p.nvml.handles))
    short = []
    for i in visible:
        mem = p.nvml.memory(i)
        if mem and mem.get("free") is not None and mem["free"] < NCCL_MIN_FREE:
            procs = p.nvml.processes(i)
            for proc in procs or []:
                proc["name"], proc["user"] = memory.who(proc["pid"])
            short.append("GPU %d: %s" % (i, memory.held_text(mem, procs, {os.getpid()})))
    return short


def start_nccl(p):
    """Start one all-reduce worker per GPU now, so their torch import overlaps ours; not
    where a GPU has too little free memory for a rank (the check then says so)."""
    n = p.expected_visible if p.expected_visible is not None else len(p.nvml_devices)
    if p.options.get("no_nccl") or not p.nvml.ok or n < 2:
        return
    p.nccl_short = nccl_short_of_memory(p)
    if p.nccl_short:
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
    if p.nccl_short:
        check(
            "compute.nccl",
            "compute",
            "NCCL all-reduce",
            "WARN",
            "not run: less than %d GiB free for a rank on %s"
            % (NCCL_MIN_FREE >> 30, "; ".join(p.nccl_short)),
            {"short_of_memory": p.nccl_short, "min_free_bytes": NCCL_MIN_FREE},
            cause="memory-held",
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
    with Phase("nccl", "NCCL all-reduce across %d GPUs" % len(p.workers)):
        results = collect_ranks(p.workers, float(p.options.get("nccl_timeout", 90)))
        p.stop_workers()
    version = next((r.get("nccl") for r in results if r.get("nccl")), None)
    ev = {
        "ranks": results,
        "world_size": len(results),
        "nccl": version,
        "multicast_off": MULTICAST_OFF,
        "seconds": round(time.monotonic() - (p.worker_started or t0), 2),
    }
    own = [w.pid for w in p.workers]
    status, cause, summary = judge_nccl(results, lambda rank: memory.held_on(p, rank, own))
    check("compute.nccl", "compute", "NCCL all-reduce", status, summary, ev, cause=cause, t0=t0)


def judge_nccl(results, held=lambda rank: None):
    """(status, cause, summary) of the all-reduce's rank results ({"rank", "ok", "error",
    "out_of_memory", "nccl"}).  A rank that could not get memory means the test did not run
    (the others waited for it), said with who holds the memory (`held(rank)`), not a FAIL of
    NCCL."""
    if all(r.get("ok") for r in results) and len(results) >= 2:
        version = next((r.get("nccl") for r in results if r.get("nccl")), None)
        return (
            "PASS",
            None,
            "all-reduce over %d GPUs (one process each) gave the right sum; NCCL %s"
            % (len(results), version),
        )
    failed = [(k, r) for k, r in enumerate(results) if not r.get("ok")]
    starved = [(k, r) for k, r in failed if r.get("out_of_memory")]
    if starved:
        whose = [h for h in (held(k) for k, _ in starved) if h]
        return (
            "WARN",
            "memory-held",
            "not tested: rank %s could not get GPU memory (%s)%s"
            % (
                ", ".join(str(k) for k, _ in starved),
                first_line(str(starved[0][1].get("error"))),
                "; " + "; ".join(whose) if whose else "",
            ),
        )
    errors = "; ".join(first_line(str(r.get("error"))) for _, r in failed)
    return "FAIL", nccl_cause(errors), f"all-reduce failed: {errors}"


def collect_ranks(workers, timeout, grace=None):
    """Each rank's result line, in rank order.  A rank that ends without one, or is still
    running at the deadline, gets an error; once a rank has failed, the others (waiting for it
    in vain) are given NCCL_GRACE_S more, not the whole timeout."""
    grace = NCCL_GRACE_S if grace is None else grace
    deadline = time.monotonic() + timeout
    results = {}
    first_failed = None
    while len(results) < len(workers) and time.monotonic() < deadline:
        for k, proc in enumerate(workers):
            if k in results or proc.poll() is None:
                continue
            out = proc.stdout.read() if proc.stdout is not None else b""
            line = [ln for ln in out.decode("utf-8", "replace").splitlines() if ln.startswith("{")]
            try:
                results[k] = json.loads(line[-1]) if line else None
            except ValueError:
                results[k] = None
            if not isinstance(results[k], dict):
                results[k] = {"ok": False, "error": "no result (exit %s)" % proc.returncode}
            if not results[k].get("ok") and first_failed is None:
                first_failed = k
                deadline = min(deadline, time.monotonic() + grace)
        time.sleep(0.05)
    for k in range(len(workers)):
        if k not in results:
            results[k] = {
                "ok": False,
                "error": "timed out"
                if first_failed is None
                else "stopped: waited %g s more for rank %d, which failed" % (grace, first_failed),
            }
    return [results[k] for k in range(len(workers))]


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
        return memory.failed_run(torch, exc, gpu=i)
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
        return memory.failed_run(torch, exc, gpu=i, dtype=dtype_name)
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
        result["out_of_memory"] = out_of_memory(sys.modules.get("torch"), exc)
    result["seconds"] = round(time.monotonic() - t0, 3)
    protocol.write_json(result)
