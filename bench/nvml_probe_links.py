"""Dump what NVML says about links between GPUs (NVLink per link, P2P, common ancestors,
NVLink throughput field values) as JSON: raw material for the topology view's fixtures."""

import json
import sys

import pynvml as N

N.nvmlInit()
out = {"driver": N.nvmlSystemGetDriverVersion(), "gpus": []}
n = N.nvmlDeviceGetCount()
hs = [N.nvmlDeviceGetHandleByIndex(i) for i in range(n)]


def q(f, *a):
    try:
        v = f(*a)
        if hasattr(v, "busId"):
            v = v.busId.decode() if isinstance(v.busId, bytes) else v.busId
        return v
    except N.NVMLError as e:
        return f"ERR {e}"


for i, h in enumerate(hs):
    g = {"index": i, "bus": q(N.nvmlDeviceGetPciInfo, h), "links": []}
    for link in range(N.NVML_NVLINK_MAX_LINKS):
        st = q(N.nvmlDeviceGetNvLinkState, h, link)
        if isinstance(st, str) and link > 0 and "Not Supported" in st:
            break
        g["links"].append(
            {
                "link": link,
                "state": st,
                "version": q(N.nvmlDeviceGetNvLinkVersion, h, link),
                "remote": q(N.nvmlDeviceGetNvLinkRemotePciInfo, h, link),
                "remote_type": q(
                    getattr(N, "nvmlDeviceGetNvLinkRemoteDeviceType", lambda *a: "absent"), h, link
                ),
            }
        )
        if isinstance(st, str):
            break
    fields = []
    for name in (
        "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX",
        "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX",
        "NVML_FI_DEV_NVLINK_LINK_COUNT",
        "NVML_FI_DEV_NVLINK_BANDWIDTH_C0_TOTAL",
    ):
        fid = getattr(N, name, None)
        if fid is None:
            continue
        try:
            vals = N.nvmlDeviceGetFieldValues(h, [fid])
            v = vals[0]
            fields.append(
                {
                    "field": name,
                    "ret": v.nvmlReturn,
                    "type": v.valueType,
                    "ull": v.value.ullVal,
                    "ui": v.value.uiVal,
                }
            )
        except Exception as e:
            fields.append({"field": name, "err": str(e)})
    g["fields"] = fields
    g["pairs"] = {}
    for j, h2 in enumerate(hs):
        if i != j:
            g["pairs"][j] = {
                "ancestor": q(N.nvmlDeviceGetTopologyCommonAncestor, h, h2),
                "p2p": {
                    c: q(N.nvmlDeviceGetP2PStatus, h, h2, k)
                    for c, k in (("read", 0), ("write", 1), ("nvlink", 2), ("atomics", 3), ("prop", 4))
                },
            }
    out["gpus"].append(g)
json.dump(out, sys.stdout, indent=1, default=str)
