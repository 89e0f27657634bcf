"""The GPUs' topology through NVML: common ancestors, P2P status and NVLinks (read once)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from gputui.telemetry.model import NvLink, Topology
from gputui.telemetry.nvml.query import _NVLINK_REMOTE_TYPES, _P2P_STATUS, GpuLost, Nvml, _text


def read_topology(nv: Nvml, handles: Sequence[Any], lost: Collection[int]) -> Topology:
    """How the GPUs of `handles` are linked; a lost GPU's row and column are None."""
    lib = nv.lib
    n = len(handles)

    def pair(fn: str, *extra: Any) -> tuple[tuple[Any, ...], ...]:
        rows = []
        for i in range(n):
            row: list[Any] = []
            for j in range(n):
                if i == j or i in lost or j in lost:
                    row.append(None)
                    continue
                try:
                    row.append(nv.query(fn, handles[i], handles[j], *extra, device=i))
                except GpuLost:
                    row.append(None)
            rows.append(tuple(row))
        return tuple(rows)

    def status(matrix: tuple[tuple[Any, ...], ...]) -> tuple[tuple[str | None, ...], ...]:
        return tuple(
            tuple(None if v is None else _P2P_STATUS.get(v, f"status {v}") for v in row) for row in matrix
        )

    caps = {
        "read": getattr(lib, "NVML_P2P_CAPS_INDEX_READ", 0),
        "write": getattr(lib, "NVML_P2P_CAPS_INDEX_WRITE", 1),
        "nvlink": getattr(lib, "NVML_P2P_CAPS_INDEX_NVLINK", 2),
        "atomics": getattr(lib, "NVML_P2P_CAPS_INDEX_ATOMICS", 3),
    }
    # pynvml defines READ as a 1-tuple by accident in some versions
    caps = {k: v[0] if isinstance(v, tuple) else v for k, v in caps.items()}
    nvlinks = []
    for i, h in enumerate(handles):
        links: list[NvLink] = []
        for link in range(getattr(lib, "NVML_NVLINK_MAX_LINKS", 18)):
            try:
                state = nv.query("nvmlDeviceGetNvLinkState", h, link, device=i)
                if state is None:
                    if link == 0:
                        break  # NVLink not supported on this GPU
                    continue
                version = nv.query("nvmlDeviceGetNvLinkVersion", h, link, device=i)
                remote = nv.query("nvmlDeviceGetNvLinkRemotePciInfo", h, link, device=i)
                kind = nv.query("nvmlDeviceGetNvLinkRemoteDeviceType", h, link, device=i)
            except GpuLost:
                break
            remote_type = None if kind is None else _NVLINK_REMOTE_TYPES.get(int(kind), "unknown")
            links.append(
                NvLink(link, bool(state), version, _text(getattr(remote, "busId", None)), remote_type)
            )
        nvlinks.append(tuple(links))
    return Topology(
        levels=pair("nvmlDeviceGetTopologyCommonAncestor"),
        p2p_read=status(pair("nvmlDeviceGetP2PStatus", caps["read"])),
        p2p_write=status(pair("nvmlDeviceGetP2PStatus", caps["write"])),
        p2p_atomics=status(pair("nvmlDeviceGetP2PStatus", caps["atomics"])),
        p2p_nvlink=status(pair("nvmlDeviceGetP2PStatus", caps["nvlink"])),
        nvlinks=tuple(nvlinks),
    )
