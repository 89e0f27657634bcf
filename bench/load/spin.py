"""One kernel spinning on the GPU, as a rank waiting in an NCCL collective does: it polls a
flag in host-mapped (pinned) memory that nothing sets until the end.

    python bench/load/spin.py --seconds 40 [--device 0] [--blocks 1] [--threads 1] [--mode flag|sleep]

--mode flag (default): the kernel `while (*flag == 0) {}` compiled at run time with NVRTC
(the libnvrtc that CUDA builds of torch ship) and launched through the driver API (ctypes,
no extra package), on `--blocks` x `--threads` (NCCL's wait uses one block per channel of
hundreds of threads: `--blocks 32 --threads 512` is its shape on NVLink machines); the host
sets the flag after --seconds and the kernel ends.  Falls back to --mode sleep, saying so,
where NVRTC cannot be loaded.
--mode sleep: `torch.cuda._sleep` back to back (one thread spinning on the clock), as
measured in shared/REFERENCE.md.
Prints one line "spin pid=P mode=M blocks=B threads=T ready" when the kernel runs.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os
import time

import torch

SRC = b'extern "C" __global__ void spin(volatile int* flag) { while (*flag == 0) { } }'


def nvrtc_lib() -> ctypes.CDLL:
    here = os.path.dirname(torch.__file__)
    for path in sorted(glob.glob(os.path.join(here, "..", "nvidia", "cu*", "lib", "libnvrtc.so*"))) + sorted(
        glob.glob(os.path.join(here, "..", "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so*"))
    ):
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    for name in ("libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise OSError("libnvrtc not found")


def check(what: str, rc: int) -> None:
    if rc != 0:
        raise RuntimeError(f"{what} failed: {rc}")


def launch_flag_kernel(flag: torch.Tensor, dev: torch.device, blocks: int, threads: int) -> None:
    major, minor = torch.cuda.get_device_capability(dev)
    nvrtc = nvrtc_lib()
    prog = ctypes.c_void_p()
    check("nvrtcCreateProgram", nvrtc.nvrtcCreateProgram(ctypes.byref(prog), SRC, b"spin.cu", 0, None, None))
    opts = (ctypes.c_char_p * 1)(f"--gpu-architecture=compute_{major}{minor}".encode())
    rc = nvrtc.nvrtcCompileProgram(prog, 1, opts)
    if rc != 0:
        size = ctypes.c_size_t()
        nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise RuntimeError(f"nvrtcCompileProgram failed: {log.value.decode(errors='replace')}")
    size = ctypes.c_size_t()
    check("nvrtcGetPTXSize", nvrtc.nvrtcGetPTXSize(prog, ctypes.byref(size)))
    ptx = ctypes.create_string_buffer(size.value)
    check("nvrtcGetPTX", nvrtc.nvrtcGetPTX(prog, ptx))
    cuda = ctypes.CDLL("libcuda.so.1")
    torch.cuda.synchronize(dev)  # the primary context is current on this thread
    module = ctypes.c_void_p()
    check("cuModuleLoadData", cuda.cuModuleLoadData(ctypes.byref(module), ptx))
    fn = ctypes.c_void_p()
    check("cuModuleGetFunction", cuda.cuModuleGetFunction(ctypes.byref(fn), module, b"spin"))
    # pinned memory under unified addressing: the device uses the host pointer as it is
    arg = ctypes.c_void_p(flag.data_ptr())
    args = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(arg), ctypes.c_void_p))
    check(
        "cuLaunchKernel",
        cuda.cuLaunchKernel(fn, blocks, 1, 1, threads, 1, 1, 0, None, args, None),
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--blocks", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--mode", choices=("flag", "sleep"), default="flag")
    a = ap.parse_args()
    dev = torch.device("cuda", a.device)
    torch.cuda.set_device(dev)
    torch.zeros(1, device=dev)
    mode = a.mode
    flag = torch.zeros(1, dtype=torch.int32, pin_memory=True)
    if mode == "flag":
        try:
            launch_flag_kernel(flag, dev, a.blocks, a.threads)
        except (OSError, RuntimeError, AttributeError) as exc:
            print(f"spin: flag kernel unavailable ({exc}); falling back to torch.cuda._sleep", flush=True)
            mode = "sleep"
    blocks, threads = (a.blocks, a.threads) if mode == "flag" else (1, 1)
    print(f"spin pid={os.getpid()} mode={mode} blocks={blocks} threads={threads} ready", flush=True)
    end = time.monotonic() + a.seconds
    if mode == "flag":
        time.sleep(max(0.0, end - time.monotonic()))
        flag[0] = 1  # the host's write reaches the polling kernel; it ends
        torch.cuda.synchronize(dev)
    else:
        cycles = int(torch.cuda.get_device_properties(dev).clock_rate) * 1000 // 2  # about 0.5 s
        while time.monotonic() < end:
            torch.cuda._sleep(cycles)
            torch.cuda.synchronize(dev)
    print("spin done", flush=True)


if __name__ == "__main__":
    main()
