"""What NVML answers, and what it costs, for the topology tab and the detail view: the raw
values gputui's new queries read (NUMA memory affinity, NVLink remote types, PCIe replays,
row remapping, retired pages, MIG, NVLink throughput counters per link and summed) and the
cost of one slow-cadence pass per GPU.

    python bench/nvml_probe_topo.py > probe.json
"""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pynvml as N

from gputui.telemetry.nvml import NvmlSource, field_int


def call(f, *a):
    t0 = time.perf_counter()
    try:
        v = f(*a)
        ok = True
    except N.NVMLError as e:
        v, ok = f"ERR {e}", False
    us = round((time.perf_counter() - t0) * 1e6, 1)
    if hasattr(v, "__len__") and not isinstance(v, str | list | tuple):
        v = [int(x) for x in v]
    return {"ok": ok, "us": us, "value": v if ok else None, "err": None if ok else v}


N.nvmlInit()
out = {"driver": N.nvmlSystemGetDriverVersion(), "gpus": []}
for i in range(N.nvmlDeviceGetCount()):
    h = N.nvmlDeviceGetHandleByIndex(i)
    g = {
        "index": i,
        "memory_affinity_node_mask": call(N.nvmlDeviceGetMemoryAffinity, h, 1, N.NVML_AFFINITY_SCOPE_NODE),
        "numa_node_id": call(N.nvmlDeviceGetNumaNodeId, h),
        "pcie_replay_counter": call(N.nvmlDeviceGetPcieReplayCounter, h),
        "remapped_rows": call(N.nvmlDeviceGetRemappedRows, h),
        "retired_pages_sbe": call(N.nvmlDeviceGetRetiredPages, h, 0),
        "retired_pages_dbe": call(N.nvmlDeviceGetRetiredPages, h, 1),
        "retired_pending": call(N.nvmlDeviceGetRetiredPagesPendingStatus, h),
        "mig_mode": call(N.nvmlDeviceGetMigMode, h),
        "max_mig_devices": call(N.nvmlDeviceGetMaxMigDeviceCount, h),
        "nvlink_remote_types": [
            call(N.nvmlDeviceGetNvLinkRemoteDeviceType, h, k)["value"] for k in range(18)
        ],
    }
    ids = [
        (N.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 0xFFFFFFFF),
        (N.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, 0xFFFFFFFF),
    ]
    ids += [(N.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, k) for k in range(18)]
    t0 = time.perf_counter()
    vals = N.nvmlDeviceGetFieldValues(h, ids)
    g["field_values_us"] = round((time.perf_counter() - t0) * 1e6, 1)
    g["nvlink_tx_kib"] = [
        {"scope": s, "ret": v.nvmlReturn, "kib": field_int(v), "timestamp": v.timestamp}
        for (_, s), v in zip(ids, vals, strict=False)
    ]
    out["gpus"].append(g)

# one slow-cadence pass per GPU, as NvmlSource runs it (twice, 2 s apart, so rates exist)
src = NvmlSource(slow_interval=3600)
src.open()
time.sleep(0.5)
passes = []
for _ in range(2):
    for i, h in enumerate(src._handles):
        t0 = time.perf_counter()
        values = src._slow_sample(i, h)
        cost = time.perf_counter() - t0
        f = dict(values.fields)
        f["mig_devices"] = [str(m) for m in f["mig_devices"]]
        passes.append({"gpu": i, "slow_pass_ms": round(cost * 1000, 2), "fields": f})
    time.sleep(2)
out["slow_passes"] = passes
src.close()
json.dump(out, sys.stdout, indent=1, default=str)
