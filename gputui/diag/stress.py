"""gputui's stress-benchmark child: how fast and how healthy each GPU really is.

Runs INSIDE the chosen interpreter as a file, like the probe package beside it (whose protocol
and NVML client it loads from there by path), with the standard library and torch only;
Python 3.8+.  All selected GPUs
work in parallel, one thread each (the GPU work releases the GIL).

Protocol: the probe's (version 1, see probe/__init__.py), tool "stress".  Beyond hello/phase/done it emits

  {"v": 1, "event": "gpus", "gpus": [{"index": 0, "nvml_index": 0, "name": "...", ...}]}
  {"v": 1, "event": "progress", "phase": "burn", "gpu": 0, "fraction": 0.42}
  {"v": 1, "event": "result", "phase": "matmul", "gpu": 0, "precision": "bf16", "tflops": 771.2, ...}
  {"v": 1, "event": "result", "phase": "memory", "gpu": 0, "kind": "d2d", "gbps": 4270.1, ...}
  {"v": 1, "event": "result", "phase": "p2p", "from": 0, "to": 1, "gbps": 370.5}
  {"v": 1, "event": "result", "phase": "burn", "gpu": 0, "iterations": 41000, "mismatches": 0, ...}
  {"v": 1, "event": "result", "phase": "health", "gpu": 0, "before": {...}, "after": {...}, ...}
  {"v": 1, "event": "error", "message": "...", "cause": "..."}

Phases: matmul (per precision, timed with CUDA events after warm-up: a 10-product burst and
about a second sustained), memory (device copy,
host<->device pinned and pageable, peer-to-peer per pair), burn (repeated products compared
with the first and with a float64 reference slice, counting mismatches and NaN/Inf), health
(NVML before/after: ECC, remapped rows, PCIe replays, Xid events, clock-event reasons).
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import importlib.util
import os
import sys
import threading
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or ".") == _HERE and __name__ == "__main__":
    del sys.path[0]


def _load_probe():
    """The probe package beside this file, under a private name (nothing of the user's shadowed)."""
    name = "_gputui_probe"
    if name not in sys.modules:
        here = os.path.join(_HERE, "probe")
        spec = importlib.util.spec_from_file_location(
            name, os.path.join(here, "__init__.py"), submodule_search_locations=[here]
        )
        package = importlib.util.module_from_spec(spec)
        sys.modules[name] = package
        spec.loader.exec_module(package)
    return importlib.import_module(name + ".protocol"), importlib.import_module(name + ".nvml")


protocol, nvml_client = _load_probe()
emit = protocol.emit
Phase = protocol.Phase

PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")
GIB = 1 << 30
NVML_XID_EVENT = 0x8  # nvmlEventTypeXidCriticalError
NVML_ERROR_TIMEOUT = 10


class Device:
    """One selected GPU (or the CPU in test mode): its torch device and timing."""

    def __init__(self, torch, index, cpu=False):
        self.torch = torch
        self.index = index
        self.cpu = cpu
        self.name = "CPU (test mode)" if cpu else torch.cuda.get_device_name(index)
        self.device = torch.device("cpu") if cpu else torch.device("cuda", index)
        self.capability = (0, 0) if cpu else torch.cuda.get_device_capability(index)
        self.nvml_index = None

    def sync(self):
        if not self.cpu:
            self.torch.cuda.synchronize(self.index)

    def timed(self, fn, iters):
        """Seconds for `iters` calls of fn: CUDA events on a GPU, perf_counter on the CPU."""
        torch = self.torch
        if self.cpu:
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            return time.perf_counter() - t0
        with torch.cuda.device(self.index):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1000.0

    def calibrated(self, fn, budget):
        """Warm up, then time as many calls as fit in about `budget` seconds."""
        for _ in range(3):
            fn()
        self.sync()
        one = max(1e-6, self.timed(fn, 3) / 3)
        iters = int(max(5, min(100000, budget / one)))
        return self.timed(fn, iters), iters


def in_parallel(devices, work):
    """Run work(device) on every device at once, one thread each; returns results in order."""
    results = [None] * len(devices)

    def run(k, dev):
        try:
            if not dev.cpu:
                dev.torch.cuda.set_device(dev.index)
            results[k] = work(dev)
        except Exception as exc:
            results[k] = {"error": "%s: %s" % (type(exc).__name__, protocol.first_line(str(exc)))}

    threads = [threading.Thread(target=run, args=(k, d), daemon=True) for k, d in enumerate(devices)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


# --------------------------------------------------------------------------------------
# phases
# --------------------------------------------------------------------------------------


def supported(dev, precision):
    """None when the device runs this precision, else why not."""
    torch = dev.torch
    if dev.cpu:
        return None if precision in ("fp64", "fp32", "bf16") else "not in CPU test mode"
    major, minor = dev.capability
    if precision == "tf32" and major < 8:
        return "TF32 needs compute 8.0"
    if precision == "bf16" and major < 8:
        return "bf16 tensor cores need compute 8.0"
    if precision == "fp16" and major < 7:
        return "fp16 tensor cores need compute 7.0"
    if precision == "fp8":
        if (major, minor) < (8, 9):
            return "FP8 needs compute 8.9"
        if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
            return "this torch has no FP8 matmul"
    return None


BURST_ITERS = 10
"""Products timed for the burst figure (after 3 warm-up products)."""


def matmul_fn(dev, precision, size):
    torch = dev.torch
    d = dev.device
    if precision == "fp8":
        a = torch.randn(size, size, device=d).to(torch.float8_e4m3fn)
        b = torch.randn(size, size, device=d).to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt wants
        one = torch.ones((), device=d)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    dtype = {
        "fp64": torch.float64,
        "fp32": torch.float32,
        "tf32": torch.float32,
        "fp16": torch.float16,
        "bf16": torch.bfloat16,
    }[precision]
    a = torch.randn(size, size, device=d, dtype=dtype)
    b = torch.randn(size, size, device=d, dtype=dtype)
    out = torch.empty(size, size, device=d, dtype=dtype)
    return lambda: torch.matmul(a, b, out=out)


def phase_matmul(torch, devices, opts):
    precisions = [p for p in PRECISIONS if p in opts.precisions]
    with Phase("matmul", "matrix multiply throughput per precision"):
        for k, precision in enumerate(precisions):
            torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"

            def work(dev, precision=precision):
                why = supported(dev, precision)
                if why:
                    return {"skipped": why}
                fn = matmul_fn(dev, precision, opts.size)
                flop = 2.0 * opts.size**3
                # burst: 10 products after warm-up, as a plain timed torch.matmul loop does
                # (the figure to compare with references and datasheets); sustained: about
                # `matmul_seconds` of them, where the power cap lowers the clocks
                for _ in range(3):
                    fn()
                dev.sync()
                burst_seconds = dev.timed(fn, BURST_ITERS)
                seconds, iters = dev.calibrated(fn, opts.matmul_seconds)
                del fn
                if not dev.cpu:
                    torch.cuda.empty_cache()
                return {
                    "tflops": round(flop * BURST_ITERS / burst_seconds / 1e12, 3),
                    "sustained_tflops": round(flop * iters / seconds / 1e12, 3),
                    "iters": iters,
                    "seconds": round(seconds, 4),
                }

            for dev, res in zip(devices, in_parallel(devices, work)):
                emit("result", phase="matmul", gpu=dev.index, precision=precision, size=opts.size, **res)
            for dev in devices:
                emit("progress", phase="matmul", gpu=dev.index, fraction=(k + 1) / len(precisions))
        torch.backends.cuda.matmul.allow_tf32 = False


def phase_memory(torch, devices, opts):
    with Phase("memory", "memory bandwidth: device copy, host<->device, peer-to-peer"):
        kinds = ("d2d", "h2d_pinned", "d2h_pinned", "h2d_pageable", "d2h_pageable")

        def work(dev):
            out = {}
            nbytes = opts.copy_bytes
            src = torch.empty(nbytes, dtype=torch.uint8, device=dev.device)
            dst = torch.empty(nbytes, dtype=torch.uint8, device=dev.device)
            seconds, iters = dev.calibrated(lambda: dst.copy_(src), opts.memory_seconds)
            out["d2d"] = round(2.0 * nbytes * iters / seconds / 1e9, 2)  # read + write
            src = dst = None
            if dev.cpu:
                return out
            host_bytes = opts.host_bytes
            gpu_buf = torch.empty(host_bytes, dtype=torch.uint8, device=dev.device)
            for pinned in (True, False):
                host = torch.empty(host_bytes, dtype=torch.uint8, pin_memory=pinned)
                tag = "pinned" if pinned else "pageable"
                s, n = dev.calibrated(
                    lambda h=host, p=pinned: gpu_buf.copy_(h, non_blocking=p), opts.memory_seconds / 2
                )
                out["h2d_" + tag] = round(host_bytes * n / s / 1e9, 2)
                s, n = dev.calibrated(
                    lambda h=host, p=pinned: h.copy_(gpu_buf, non_blocking=p), opts.memory_seconds / 2
                )
                out["d2h_" + tag] = round(host_bytes * n / s / 1e9, 2)
                host = None
            gpu_buf = None
            torch.cuda.empty_cache()
            return out

        for dev, res in zip(devices, in_parallel(devices, work)):
            for kind in kinds:
                if kind in res:
                    emit("result", phase="memory", gpu=dev.index, kind=kind, gbps=res[kind])
            if "error" in res:
                emit("result", phase="memory", gpu=dev.index, kind="error", error=res["error"])
            emit("progress", phase="memory", gpu=dev.index, fraction=0.5 if len(devices) > 1 else 1.0)
        pairs = [(a, b) for a in devices for b in devices if a is not b and not a.cpu]
        for k, (a, b) in enumerate(pairs):
            try:
                emit(
                    "result",
                    phase="p2p",
                    **{"from": a.index, "to": b.index},
                    gbps=p2p_bandwidth(torch, a, b, opts),
                )
            except Exception as exc:
                emit(
                    "result",
                    phase="p2p",
                    **{"from": a.index, "to": b.index},
                    error=protocol.first_line(str(exc)),
                )
            for dev in devices:
                emit("progress", phase="memory", gpu=dev.index, fraction=0.5 + 0.5 * (k + 1) / len(pairs))


def p2p_bandwidth(torch, a, b, opts):
    nbytes = opts.p2p_bytes
    src = torch.empty(nbytes, dtype=torch.uint8, device=a.device)
    dst = torch.empty(nbytes, dtype=torch.uint8, device=b.device)

    def sync():
        torch.cuda.synchronize(a.index)
        torch.cuda.synchronize(b.index)

    for _ in range(3):
        dst.copy_(src, non_blocking=True)
    sync()
    iters = 0
    t0 = time.perf_counter()
    while True:
        for _ in range(5):
            dst.copy_(src, non_blocking=True)
        iters += 5
        sync()
        if time.perf_counter() - t0 >= opts.memory_seconds:
            break
    seconds = time.perf_counter() - t0
    return round(nbytes * iters / seconds / 1e9, 2)


def phase_burn(torch, devices, opts):
    with Phase(
        "burn", "burn: %g s of matmuls compared with each other and a float64 reference" % opts.duration
    ):
        deadline = time.monotonic() + opts.duration
        start = time.monotonic()

        def work(dev):
            size = opts.burn_size
            dtype = torch.bfloat16 if (dev.cpu or dev.capability[0] >= 8) else torch.float16
            g = torch.Generator(device=dev.device).manual_seed(1000 + dev.index)
            a = torch.rand(size, size, device=dev.device, dtype=dtype, generator=g) * 2 - 1
            b = torch.rand(size, size, device=dev.device, dtype=dtype, generator=g) * 2 - 1
            rows = min(64, size)
            ref = a[:rows].double() @ b.double()
            first = a @ b
            out = torch.empty_like(first)
            mism = torch.zeros((), dtype=torch.int64, device=dev.device)
            nonfinite = torch.zeros((), dtype=torch.int64, device=dev.device)
            ref_bad, ref_err = compare_reference(torch, first[:rows], ref)
            iters, series, last_report = 0, [], time.monotonic()
            window_iters, window_start = 0, time.monotonic()
            inject_at = 5 if opts.inject_corruption == dev.index else None
            while time.monotonic() < deadline:
                torch.matmul(a, b, out=out)
                iters += 1
                window_iters += 1
                if inject_at is not None and iters == inject_at:
                    out.view(-1)[(size * size) // 3] += 1000.0  # test-only: one corrupted result
                mism += (out != first).sum()
                nonfinite += (~torch.isfinite(out)).sum()
                now = time.monotonic()
                if now - last_report >= 1.0:
                    dev.sync()
                    now = time.monotonic()
                    series.append(round(2.0 * size**3 * window_iters / (now - window_start) / 1e12, 2))
                    window_iters, window_start, last_report = 0, now, now
                    emit(
                        "progress",
                        phase="burn",
                        gpu=dev.index,
                        fraction=min(1.0, (now - start) / max(opts.duration, 1e-9)),
                        tflops=series[-1],
                        mismatches=int(mism),
                        nonfinite=int(nonfinite),
                    )
            dev.sync()
            last_bad, last_err = compare_reference(torch, out[:rows], ref)
            return {
                "iterations": iters,
                "size": size,
                "dtype": str(dtype).replace("torch.", ""),
                "mismatches": int(mism),
                "nonfinite": int(nonfinite),
                "reference_mismatches": ref_bad + last_bad,
                "reference_max_error": max(ref_err, last_err),
                "tflops_series": series,
                "tflops": round(sum(series) / len(series), 2) if series else None,
                "seconds": round(time.monotonic() - start, 2),
            }

        for dev, res in zip(devices, in_parallel(devices, work)):
            emit("result", phase="burn", gpu=dev.index, **res)
            emit("progress", phase="burn", gpu=dev.index, fraction=1.0)


def compare_reference(torch, got, ref):
    """Elements of a result slice further from the float64 reference than its precision
    allows (bf16/fp16 output rounding), and the largest error relative to the slice's RMS."""
    got = got.double()
    rms = float(ref.pow(2).mean().sqrt()) or 1.0
    err = (got - ref).abs()
    tol = ref.abs() / 64.0 + rms / 64.0
    bad = int(((err > tol) | ~torch.isfinite(got)).sum())
    worst = float(err.max()) / rms if bool(torch.isfinite(err).all()) else float("inf")
    return bad, round(worst, 6)


# --------------------------------------------------------------------------------------
# NVML: health before/after, Xid events and clock-event reasons during the run
# --------------------------------------------------------------------------------------


class Watcher:
    """Samples clock-event reasons and waits for Xid events on its own threads."""

    def __init__(self, nvml, indices):
        self.nvml = nvml
        self.indices = indices
        self.reasons = dict.fromkeys(indices, 0)
        self.xids = {i: [] for i in indices}
        self.xid_supported = None
        self._stop = threading.Event()
        self._threads = []

    def start(self):
        if not self.nvml.ok:
            return
        for target in (self._sample, self._events):
            t = threading.Thread(target=target, daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join(timeout=2)

    def _sample(self):
        while not self._stop.wait(0.2):
            for i in self.indices:
                h = self.nvml.handles[i]
                value = self.nvml.ull("nvmlDeviceGetCurrentClocksEventReasons", h)
                if value is None:
                    value = self.nvml.ull("nvmlDeviceGetCurrentClocksThrottleReasons", h)
                self.reasons[i] |= value or 0

    def _events(self):
        nv = self.nvml
        event_set = ctypes.c_void_p()
        if nv.call("nvmlEventSetCreate", ctypes.byref(event_set)) != 0:
            self.xid_supported = False
            return
        registered = []
        for i in self.indices:
            if (
                nv.call(
                    "nvmlDeviceRegisterEvents", nv.handles[i], ctypes.c_ulonglong(NVML_XID_EVENT), event_set
                )
                == 0
            ):
                registered.append(i)
        self.xid_supported = bool(registered)
        data = nvml_client.EventData()
        while registered and not self._stop.is_set():
            rc = nv.call("nvmlEventSetWait_v2", event_set, ctypes.byref(data), ctypes.c_uint(200))
            if rc == 0:
                for i in registered:
                    if nv.handles[i].value == data.device:
                        self.xids[i].append(int(data.eventData))
            elif rc != NVML_ERROR_TIMEOUT:
                break
        nv.call("nvmlEventSetFree", event_set)


def health_facts(nvml, i):
    h = nvml.health(i)
    return {
        k: h.get(k)
        for k in (
            "ecc_volatile_uncorrected",
            "ecc_volatile_corrected",
            "remapped_rows",
            "retired_pages_pending",
            "pcie_replays",
            "temperature",
        )
    }


# --------------------------------------------------------------------------------------


def parse(argv):
    p = argparse.ArgumentParser(prog="stress.py")
    p.add_argument("--duration", type=float, default=60.0, help="burn seconds")
    p.add_argument("--gpus", default=None, help="torch device indices, e.g. 0,1 (default: all)")
    p.add_argument("--phases", default="matmul,memory,burn")
    p.add_argument("--precisions", default=",".join(PRECISIONS))
    p.add_argument("--size", type=int, default=8192, help="matmul size (n x n x n)")
    p.add_argument("--burn-size", type=int, default=8192)
    p.add_argument("--matmul-seconds", type=float, default=1.0, help="timed seconds per precision")
    p.add_argument("--memory-seconds", type=float, default=0.5)
    p.add_argument("--copy-bytes", type=int, default=2 * GIB)
    p.add_argument("--host-bytes", type=int, default=GIB // 2)
    p.add_argument("--p2p-bytes", type=int, default=GIB // 4)
    p.add_argument("--inject-corruption", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--test-cpu", action="store_true", help=argparse.SUPPRESS)
    opts = p.parse_args(argv)
    opts.phases = [x for x in opts.phases.split(",") if x]
    opts.precisions = [x for x in opts.precisions.split(",") if x]
    if opts.test_cpu:  # protocol tests on machines without a GPU: tiny sizes on the CPU
        opts.size = min(opts.size, 128)
        opts.burn_size = min(opts.burn_size, 128)
        opts.copy_bytes = min(opts.copy_bytes, 8 << 20)
        opts.matmul_seconds = min(opts.matmul_seconds, 0.05)
        opts.memory_seconds = min(opts.memory_seconds, 0.05)
    return opts


def main(argv=None):
    opts = parse(sys.argv[1:] if argv is None else argv)
    protocol.take_stdout()
    t_start = time.monotonic()
    protocol.hello("stress", duration=opts.duration, phases=opts.phases)
    with Phase("torch-import", "import torch"):
        try:
            import torch
        except BaseException as exc:
            emit(
                "error",
                message="import torch failed: %s: %s" % (type(exc).__name__, exc),
                cause="torch-missing"
                if isinstance(exc, ImportError) and getattr(exc, "name", None) == "torch"
                else "torch-broken",
            )
            return 2
    if opts.test_cpu:
        devices = [Device(torch, 0, cpu=True)]
    else:
        with Phase("cuda-init", "CUDA initialisation"):
            available = torch.cuda.is_available()
        if not available:
            emit(
                "error",
                message="torch sees no CUDA GPU (run `gputui diag` to find out why)",
                cause="cuda-unavailable",
            )
            return 2
        count = torch.cuda.device_count()
        wanted = [int(x) for x in opts.gpus.split(",")] if opts.gpus else list(range(count))
        bad = [i for i in wanted if not 0 <= i < count]
        if bad:
            emit(
                "error",
                message="no GPU %s: torch sees %d" % (",".join(map(str, bad)), count),
                cause="bad-gpu",
            )
            return 2
        devices = [Device(torch, i) for i in wanted]
    nvml = nvml_client.Nvml()
    nvml_ok = nvml.open()
    if nvml_ok and not opts.test_cpu:
        uuids = {
            (d.get("uuid") or "").replace("GPU-", ""): d["index"]
            for d in (nvml.device(i) for i in range(len(nvml.handles)))
        }
        for dev in devices:
            uuid = str(getattr(torch.cuda.get_device_properties(dev.index), "uuid", "")).replace("GPU-", "")
            dev.nvml_index = uuids.get(uuid)
    emit(
        "gpus",
        gpus=[
            {
                "index": d.index,
                "nvml_index": d.nvml_index,
                "name": d.name,
                "capability": "%d.%d" % d.capability,
            }
            for d in devices
        ],
    )
    nvml_indices = [d.nvml_index for d in devices if d.nvml_index is not None]
    before = {i: health_facts(nvml, i) for i in nvml_indices} if nvml_ok else {}
    watcher = Watcher(nvml, nvml_indices)
    watcher.start()
    try:
        if "matmul" in opts.phases:
            phase_matmul(torch, devices, opts)
        if "memory" in opts.phases:
            phase_memory(torch, devices, opts)
        if "burn" in opts.phases:
            phase_burn(torch, devices, opts)
    finally:
        watcher.stop()
    with Phase("health", "health after the run (NVML)"):
        for dev in devices:
            i = dev.nvml_index
            if i is None:
                emit("result", phase="health", gpu=dev.index, skipped="no NVML")
                continue
            emit(
                "result",
                phase="health",
                gpu=dev.index,
                before=before.get(i),
                after=health_facts(nvml, i),
                xid_events=watcher.xids.get(i, []),
                xid_supported=watcher.xid_supported,
                clock_event_reasons=watcher.reasons.get(i, 0),
            )
    emit("done", seconds=round(time.monotonic() - t_start, 3))
    return 0


if __name__ == "__main__":
    sys.exit(main())
