"""The NVLink-multicast switches every child gputui starts runs with.

Standard library only, Python 3.8+, no gputui imports: the diagnosis children load this file by
its path (`gputui/diag/probe/__init__.py`); gputui imports it as `gputui.rules.multicast`.
"""

from __future__ import annotations

#: NVLink multicast stays off in every child (NCCL, PyTorch symmetric memory, NVSHMEM): a
#: diagnosis never needs it, and on shared multi-GPU hosts a program that uses it can put
#: the GPUs out of service.
MULTICAST_OFF: dict[str, str] = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
