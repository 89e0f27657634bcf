"""The environment: libraries installed twice or shadowed, and the variables that change CUDA's behaviour."""

from __future__ import annotations

from gputui.diag.verdicts.causes.base import Cause, static

ENVIRONMENT: dict[str, Cause] = {
    "two-nccl": Cause(
        "Two NCCL libraries",
        "An NCCL other than the one torch was built with is installed or loaded, which gives "
        "'undefined symbol: nccl...' errors or hangs.",
        lambda ctx, ev: [
            f"{ctx.python} -m pip list | grep -i nccl   # keep only the version torch requires",
            "Remove system NCCL directories from LD_LIBRARY_PATH",
        ],
        ("pytorch#119932",),
    ),
    "two-cuda-wheels": Cause(
        "Two builds of a CUDA library",
        "Two wheels of the same NVIDIA library for different CUDA versions (e.g. -cu11 and -cu12) are "
        "installed; which one loads depends on import order.",
        lambda ctx, ev: [
            f"{ctx.python} -m pip uninstall <the wheel torch does not require>   (see the evidence)"
        ],
    ),
    "wheel-pin-mismatch": Cause(
        "CUDA wheels at versions torch was not built with",
        "torch pins its nvidia-* wheels; another package upgraded or downgraded one.",
        lambda ctx, ev: [
            f"{ctx.python} -m pip install "
            + " ".join(
                f"{k}=={v['torch_requires']}" for k, v in sorted((ev.get("pin_mismatches") or {}).items())
            )
        ],
    ),
    "two-torch": Cause(
        "Two torch installations",
        "torch is installed twice (e.g. user site and the environment); the one imported may not be "
        "the one you upgraded.",
        lambda ctx, ev: [
            f"{ctx.python} -m pip uninstall torch   (repeat until none is left), then reinstall"
        ],
    ),
    "cudnn-shadow": Cause(
        "A system cuDNN can shadow torch's",
        "A cuDNN on LD_LIBRARY_PATH (or loaded from there) can be picked up instead of the one torch "
        "ships; a different version fails at the first convolution or is slower.",
        static("Remove the cuDNN directory from LD_LIBRARY_PATH for PyTorch jobs"),
        ("pytorch PR #80877",),
    ),
    "nccl-shadow": Cause(
        "A system NCCL can shadow torch's",
        "An NCCL on LD_LIBRARY_PATH may be loaded instead of torch's.",
        static("Remove the NCCL directory from LD_LIBRARY_PATH for PyTorch jobs"),
        ("pytorch#119932",),
    ),
    "lib-shadow": Cause(
        "CUDA libraries loaded from outside torch",
        "A CUDA library was loaded from a system directory rather than torch's wheels.",
        static("Check LD_LIBRARY_PATH and LD_PRELOAD"),
    ),
    "torch-shadowed": Cause(
        "Another torch comes first",
        "The torch that `import torch` finds is not this environment's: a PYTHONPATH entry, the "
        "user's site-packages (~/.local) or a directory named torch in the current directory "
        "comes first on sys.path.",
        lambda ctx, ev: [
            "unset PYTHONPATH   # or remove the entry that holds torch",
            f"{ctx.python} -s -c 'import torch; print(torch.__file__)'   # -s: without the user site",
            "export PYTHONNOUSERSITE=1   # if torch comes from ~/.local",
        ],
    ),
    "ld-preload": Cause(
        "A library is preloaded into every process",
        "LD_PRELOAD (or LD_AUDIT) loads a library before all others: it can replace CUDA, NCCL or "
        "libc functions for torch too (profilers, interposers, old shims).",
        static("unset LD_PRELOAD LD_AUDIT   # then diagnose again to compare"),
    ),
    "pythonhome": Cause(
        "PYTHONHOME is set",
        "PYTHONHOME moves where Python takes its standard library and site-packages from; with "
        "another interpreter's prefix, packages (torch too) come from there.",
        static("unset PYTHONHOME"),
    ),
    "ptx-jit-forced": Cause(
        "Every kernel is JIT-compiled",
        "CUDA_FORCE_PTX_JIT=1 makes CUDA ignore the compiled kernels and JIT-compile PTX: a slow "
        "first start, and kernels shipped without PTX fail.",
        static("unset CUDA_FORCE_PTX_JIT"),
    ),
    "ptx-jit-disabled": Cause(
        "PTX JIT is off",
        "CUDA_DISABLE_PTX_JIT=1 stops CUDA from compiling PTX: on a GPU torch has no compiled "
        "kernels for, every kernel fails with 'no kernel image is available'.",
        static("unset CUDA_DISABLE_PTX_JIT"),
    ),
    "nvml-based-check": Cause(
        "torch.cuda.is_available() asks NVML",
        "With PYTORCH_NVML_BASED_CUDA_CHECK=1, is_available() counts GPUs through NVML without "
        "initialising CUDA: it can say True and the first CUDA call still fail.",
        static("unset PYTORCH_NVML_BASED_CUDA_CHECK   # to see the real CUDA error"),
    ),
    "launch-blocking": Cause(
        "CUDA_LAUNCH_BLOCKING is set",
        "Every kernel launch waits for the previous one: right for debugging, many times slower "
        "for training.",
        static("unset CUDA_LAUNCH_BLOCKING"),
    ),
    "injection-variables": Cause(
        "Profiler or injection variables set",
        "Variables that inject profilers or debuggers into CUDA (DCGM's diagnostics refuse to run "
        "with them) slow every CUDA program down.",
        lambda ctx, ev: [f"unset {name}" for name in sorted(ev.get("flagged") or {})],
    ),
    "no-caching-allocator": Cause(
        "PyTorch's caching allocator is off",
        "PYTORCH_NO_CUDA_MEMORY_CACHING makes every allocation a cudaMalloc: much slower.",
        static("unset PYTORCH_NO_CUDA_MEMORY_CACHING"),
    ),
    "malformed-variable": Cause(
        "A variable CUDA, torch or NCCL reads at start is malformed",
        "A variable that changes how CUDA, torch or NCCL start holds a value they do not accept: "
        "depending on the variable they stop with an error, crash (torch segfaults on a malformed "
        "PYTORCH_CUDA_ALLOC_CONF in some versions) or ignore it silently.",
        static("Correct or unset it (the fix above names each one and what is wrong)"),
    ),
}
