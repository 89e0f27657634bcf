"""The devices and cuDNN layers: each GPU torch sees (compute capability against the build's
kernels), a cuDNN convolution against the CPU, and the cuDNN / TF32 flags."""

from __future__ import annotations

import re
import time

from . import memory
from .causes import cuda_cause
from .compute import rel_err
from .protocol import Phase, check, first_line, mapped, safe
from .registry import declare


@declare("device", "devices", "GPUs torch can use", needs=("cuda",))
def devices(p):
    torch = p.torch
    arch = safe(torch.cuda.get_arch_list) or []
    ok_all = True
    for i in range(p.device_count):
        t0 = time.monotonic()
        try:
            with Phase("device-%d" % i, "initialising GPU %d" % i):
                props = torch.cuda.get_device_properties(i)
                torch.zeros(1, device="cuda:%d" % i)
                torch.cuda.synchronize(i)
        except Exception as exc:
            ok_all = False
            check(
                "device.%d" % i,
                "devices",
                "GPU %d" % i,
                "FAIL",
                "cannot use GPU %d: %s" % (i, first_line(str(exc))),
                {"error": str(exc)},
                cause=cuda_cause(_error_code(str(exc)), p),
                t0=t0,
            )
            continue
        cc = "%d.%d" % (props.major, props.minor)
        sm = "sm_%d%d" % (props.major, props.minor)
        ev = {
            "name": props.name,
            "compute_capability": cc,
            "memory_total": props.total_memory,
            "multiprocessors": props.multi_processor_count,
            "tensor_cores": props.major >= 7,
            "bf16": props.major >= 8,
            "arch_list": arch,
            "uuid": str(getattr(props, "uuid", "")) or None,
            "l2_cache": getattr(props, "L2_cache_size", None),
        }
        ptx = [a for a in arch if a.startswith("compute_") and _arch_num(a) <= props.major * 10 + props.minor]
        summary = "%s, compute %s, %.1f GiB, %d SMs%s%s" % (
            props.name,
            cc,
            props.total_memory / 2**30,
            props.multi_processor_count,
            ", tensor cores" if props.major >= 7 else "",
            ", bf16" if props.major >= 8 else "",
        )
        if any(a == sm or a.startswith(sm) for a in arch):
            check("device.%d" % i, "devices", "GPU %d" % i, "PASS", summary, ev, t0=t0)
        elif ptx:
            check(
                "device.%d" % i,
                "devices",
                "GPU %d" % i,
                "WARN",
                summary + f"; no {sm} kernels in this torch build, PTX ({ptx[-1]}) is JIT-compiled at start",
                ev,
                cause="ptx-jit",
                t0=t0,
            )
        else:
            ok_all = False
            check(
                "device.%d" % i,
                "devices",
                "GPU %d" % i,
                "FAIL",
                summary
                + "; this torch build has no kernels for {} (it has {}): ".format(
                    sm, " ".join(arch) or "none"
                )
                + '"no kernel image is available"',
                ev,
                cause="no-kernel-image",
                t0=t0,
            )
    return ok_all


# ---- cuDNN, flags ----------------------------------------------------------------


@declare("cudnn.conv", "cudnn", "cuDNN convolution", needs=("cuda",))
def cudnn(p):
    t0 = time.monotonic()
    torch = p.torch
    cudnn = torch.backends.cudnn
    ev = {
        "available": safe(cudnn.is_available),
        "enabled": cudnn.enabled,
        "version": safe(cudnn.version),
        "library": None,
    }
    if not ev["available"]:
        check(
            "cudnn.version",
            "cudnn",
            "cuDNN",
            "FAIL",
            "cuDNN cannot be loaded by torch",
            ev,
            cause="cudnn-missing",
            t0=t0,
        )
        return
    results = []
    with Phase("cudnn-conv", "cuDNN convolution forward and backward"):
        for i in range(p.device_count):
            results.append(conv_check(torch, i))
    ev["library"] = mapped("libcudnn")
    ev["conv"] = results
    held = lambda gpu: memory.held_on(p, gpu)  # noqa: E731
    status, cause, summary = judge_conv(results, ev["version"], cudnn.enabled, held)
    check("cudnn.conv", "cudnn", "cuDNN convolution", status, summary, ev, cause=cause, t0=t0)


def judge_conv(results, version, enabled, held=lambda gpu: None):
    """(status, cause, summary) of the convolution results (as compute's `judge_matmul`)."""
    starved, bad = memory.split_starved([r for r in results if not r.get("ok")])
    untested = memory.starved_text("the convolution", starved, held) if starved else None
    status, cause = "PASS", None
    summary = "cuDNN %s, enabled=%s; conv2d forward+backward matches the CPU on %d GPU%s" % (
        version,
        enabled,
        len(results),
        "" if len(results) == 1 else "s",
    )
    if bad:
        status, cause = "FAIL", "cudnn-wrong" if all("error" not in r for r in bad) else "cudnn-error"
        summary = "cuDNN {}: convolution {} on GPU {}".format(
            version,
            "differs from the CPU" if cause == "cudnn-wrong" else "failed",
            ", ".join(str(r["gpu"]) for r in bad),
        ) + ("; " + untested if untested else "")
    elif untested:
        status, cause, summary = "WARN", "memory-held", "cuDNN %s: %s" % (version, untested)
    if not enabled:
        status, cause = ("WARN", "cudnn-disabled") if status == "PASS" else (status, cause)
        summary += "; torch.backends.cudnn.enabled is False (convolutions use slow fallbacks)"
    return status, cause, summary


@declare("torch.flags", "cudnn", "cuDNN and TF32 flags", needs=("cuda",))
def flags(p):
    t0 = time.monotonic()
    torch = p.torch
    ev = {
        "cudnn.benchmark": torch.backends.cudnn.benchmark,
        "cudnn.deterministic": torch.backends.cudnn.deterministic,
        "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "float32_matmul_precision": safe(torch.get_float32_matmul_precision),
        "deterministic_algorithms": safe(torch.are_deterministic_algorithms_enabled),
    }
    meanings = [
        "cudnn.benchmark={}: {}".format(
            ev["cudnn.benchmark"],
            "cuDNN times algorithms on the first call of each shape (fast for fixed shapes)"
            if ev["cudnn.benchmark"]
            else "cuDNN picks algorithms by heuristics (set True for fixed input shapes)",
        ),
        "cudnn.deterministic={}".format(ev["cudnn.deterministic"]),
        "TF32 convolutions %s" % ("on" if ev["cudnn.allow_tf32"] else "off"),
        "TF32 matmuls {} (precision {})".format(
            "on" if ev["cuda.matmul.allow_tf32"] else "off", ev["float32_matmul_precision"]
        ),
    ]
    ampere = any(torch.cuda.get_device_capability(i)[0] >= 8 for i in range(p.device_count))
    cause = None
    if not ev["cuda.matmul.allow_tf32"] and ampere:
        cause = "tf32-off"
    check(
        "torch.flags",
        "cudnn",
        "cuDNN and TF32 flags",
        "PASS",
        "; ".join(meanings),
        ev,
        cause=cause,
        note="float32 matmuls do not use tensor cores (PyTorch's default since 1.12); "
        "torch.set_float32_matmul_precision('high') allows TF32"
        if cause
        else None,
        t0=t0,
    )


# ---- functional ------------------------------------------------------------------


def conv_check(torch, i):
    dev = "cuda:%d" % i
    g = torch.Generator().manual_seed(1234 + i)
    x = torch.randn(2, 3, 16, 16, generator=g, dtype=torch.float64)
    w = torch.randn(4, 3, 3, 3, generator=g, dtype=torch.float64)
    saved = torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cudnn.allow_tf32 = False
        xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
        yc = torch.nn.functional.conv2d(xc, wc, padding=1)
        yc.sum().backward()
        xg = x.to(dev, torch.float32).requires_grad_()
        wg = w.to(dev, torch.float32).requires_grad_()
        yg = torch.nn.functional.conv2d(xg, wg, padding=1)
        yg.sum().backward()
        torch.cuda.synchronize(i)
        errs = [
            rel_err(torch, yg, yc),
            rel_err(torch, xg.grad, xc.grad),
            rel_err(torch, wg.grad, wc.grad),
        ]
    except Exception as exc:
        return memory.failed_run(torch, exc, gpu=i)
    finally:
        torch.backends.cudnn.allow_tf32 = saved
    return {
        "gpu": i,
        "ok": max(errs) < 1e-4,
        "max_rel_error": max(errs),
        "errors": {"forward": errs[0], "grad_input": errs[1], "grad_weight": errs[2]},
    }


def _arch_num(arch):
    m = re.search(r"(\d+)", arch)
    return int(m.group(1)) if m else 0


def _error_code(text):
    m = re.search(r"[Ee]rror (\d+)", text)
    return int(m.group(1)) if m else None
