"""Computing on the GPU: kernel images, cuDNN, TF32, matmul and AMP results, peer-to-peer."""

from __future__ import annotations

from gputui.diag.verdicts.causes.base import Cause, static

COMPUTE: dict[str, Cause] = {
    "ptx-jit": Cause(
        "No native kernels for this GPU",
        "torch has no machine code for this GPU's architecture and JIT-compiles its PTX at start "
        "(slow first run, some kernels may be missing).",
        lambda ctx, ev: [
            f"Install a torch build that lists this GPU: {line}" for line in ctx.pip_install_torch()[-1:]
        ],
    ),
    "no-kernel-image": Cause(
        "'no kernel image is available for execution on the device'",
        "This torch build has no kernels for this GPU's compute capability (too new or too old for "
        "the build's TORCH_CUDA_ARCH_LIST).",
        lambda ctx, ev: [
            "Install a torch build that supports this GPU (new GPUs need the newest CUDA wheels):",
            *ctx.pip_install_torch(),
        ],
        ("pytorch#31285",),
    ),
    "cudnn-missing": Cause(
        "cuDNN cannot be loaded",
        "torch could not load cuDNN: the nvidia-cudnn wheel is missing or broken, or a system cuDNN "
        "of another version is loaded first.",
        lambda ctx, ev: [
            f"{ctx.python} -m pip install --force-reinstall "
            f"nvidia-cudnn-cu{(ctx.torch_cuda or '12').split('.')[0]}"
        ],
    ),
    "cudnn-wrong": Cause(
        "cuDNN computes wrong results",
        "A convolution on the GPU did not match the CPU result.",
        static("Run `gputui stress` on this GPU; check for a cuDNN on LD_LIBRARY_PATH"),
    ),
    "cudnn-error": Cause(
        "cuDNN convolution fails",
        "A convolution raised an error (often CUDNN_STATUS_NOT_INITIALIZED or EXECUTION_FAILED: a cuDNN "
        "version mismatch or out of memory).",
        static(
            "Check for a system cuDNN on LD_LIBRARY_PATH "
            "(see 'LD_LIBRARY_PATH' and 'Libraries actually loaded')"
        ),
    ),
    "cudnn-disabled": Cause(
        "cuDNN is disabled",
        "torch.backends.cudnn.enabled is False: convolutions use slow fallbacks.",
        static("Remove `torch.backends.cudnn.enabled = False` from the code (often left from debugging)"),
    ),
    "tf32-off": Cause(
        "TF32 off for float32 matmuls",
        "Since PyTorch 1.12 float32 matmuls do not use TF32 tensor cores by default; on Ampere and "
        "newer that can be up to 8x slower than needed (not an error).",
        static(
            "torch.set_float32_matmul_precision('high')   # in the training script, if TF32 is acceptable"
        ),
        ("pytorch#67384",),
    ),
    "matmul-wrong": Cause(
        "Wrong matmul results",
        "A matrix product on the GPU did not match the CPU: faulty hardware or a broken library.",
        static("Run `gputui stress --gpus N` on that GPU; check `nvidia-smi -q -d ECC`"),
    ),
    "amp-wrong": Cause(
        "Mixed precision fails",
        "autocast in float16/bfloat16 raised or gave wrong results.",
        static("See the evidence; check the cuBLAS wheel matches torch (see 'CUDA library wheels')"),
    ),
    "p2p-wrong": Cause(
        "Peer-to-peer copies are corrupted",
        "Data copied between two GPUs came back different: a known symptom of IOMMU/ACS settings "
        "on some PCIe platforms.",
        static(
            "Disable ACS on the PCIe switches / set iommu=pt, or run with NCCL_P2P_DISABLE=1",
            "Test with the CUDA sample p2pBandwidthLatencyTest",
        ),
    ),
    "no-p2p": Cause(
        "No direct peer access",
        "Some GPU pairs cannot read each other's memory directly; NCCL and copies go through host "
        "memory (slower), common in VMs and on consumer GPUs.",
        static("nvidia-smi topo -p2p r   shows the matrix; NVLink or a PCIe switch gives direct access"),
    ),
}
