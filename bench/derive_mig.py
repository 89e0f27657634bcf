"""Derive a recording with MIG enabled on one GPU, for testing gputui's MIG views.

    python bench/derive_mig.py --out tests/fixtures/derived/h200x2-mig.jsonl.gz

No MIG recording from real hardware exists: MIG cannot be enabled on the machines we record
without a GPU reset.  This file is DERIVED from the real 2x H200 recording
(tests/fixtures/h200-x2) and says so in its header (`derived`, and a note starting with
"DERIVED (not a real machine)"):

* GPU 0 is the real GPU 0, unchanged.
* GPU 1 is the real GPU 1 with MIG mode on: every recorded field is copied except GPU and
  memory utilization, which are left out (NVML does not report device utilization on a
  MIG-enabled GPU).  Its MIG devices are INVENTED: three instances named after H200 MIG
  profiles (3g.71gb, 2g.35gb, 1g.18gb) with invented GPU/compute instance ids, SM counts,
  memory sizes and UUIDs.  Each instance's memory used is the sum of its processes' memory.
* GPU 1's two real processes (a DDP rank and an idle 8 GiB holder) are placed in the 3g and
  1g instances; their per-process utilization is left out (NVML measures none on MIG).
  Everything else about them is the real process's.
* Host, topology and device facts are the real ones.

The same arguments give the same file except the header's "created" time.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputui.telemetry.model import MigDevice, Snapshot
from gputui.telemetry.recording import RecordingWriter, read_recording

REPO = Path(__file__).resolve().parents[1]
BASE = "tests/fixtures/h200-x2/recording.jsonl.gz"
MIG_GPU = 1
GB = 10**9
#: (MIG device index, GI id, CI id, profile, SMs, memory bytes, UUID): INVENTED.
INSTANCES = (
    (0, 1, 0, "3g.71gb", 60, 71 * GB, "MIG-derived-0001-3g71-0000-000000000000"),
    (1, 5, 0, "2g.35gb", 32, 35 * GB, "MIG-derived-0005-2g35-0000-000000000000"),
    (2, 13, 0, "1g.18gb", 16, 18 * GB, "MIG-derived-0013-1g18-0000-000000000000"),
)
HOLDER_MAX_SM = 5
"""A real process whose SM use never exceeded this is the idle holder (goes to the 1g)."""


def derive(base: Path, start: int, ticks: int) -> tuple[object, list[Snapshot], dict[str, object], str]:
    header, real = read_recording(base)
    window = real[start : start + ticks]
    gpu1 = [p for s in real for p in s.processes if p.gpu_index == MIG_GPU]
    peak_sm = {pid: max((p.sm_util or 0) for p in gpu1 if p.pid == pid) for pid in {p.pid for p in gpu1}}
    holders = {pid for pid, sm in peak_sm.items() if sm <= HOLDER_MAX_SM}
    devices = list(header.machine.devices)
    devices[MIG_GPU] = dataclasses.replace(devices[MIG_GPU], mig_mode=True, mig_mode_pending=True)
    machine = dataclasses.replace(header.machine, devices=tuple(devices))
    name = devices[MIG_GPU].name
    out: list[Snapshot] = []
    for k, snap in enumerate(window):
        procs = []
        used = {idx: 0 for idx, *_ in INSTANCES}
        for p in snap.processes:
            if p.gpu_index != MIG_GPU:
                procs.append(p)
                continue
            idx = 2 if p.pid in holders else 0
            _, gi, ci, *_ = INSTANCES[idx]
            used[idx] += p.gpu_memory or 0
            procs.append(
                dataclasses.replace(
                    p,
                    gpu_instance_id=gi,
                    compute_instance_id=ci,
                    sm_util=None,
                    mem_util=None,
                    enc_util=None,
                    dec_util=None,
                )
            )
        migs = tuple(
            MigDevice(
                index=idx,
                gpu_instance_id=gi,
                compute_instance_id=ci,
                uuid=uuid,
                name=f"{name} MIG {profile}",
                sm_count=sms,
                gpu_slices=int(profile[0]),
                compute_slices=int(profile[0]),
                memory_total=mem,
                memory_used=used[idx],
            )
            for idx, gi, ci, profile, sms, mem, uuid in INSTANCES
        )
        gpus = tuple(
            dataclasses.replace(g, gpu_util=None, mem_util=None, mig_devices=migs)
            if g.index == MIG_GPU
            else g
            for g in snap.gpus
        )
        out.append(dataclasses.replace(snap, seq=k + 1, gpus=gpus, processes=tuple(procs)))
    how = (
        f"From the real 2-GPU recording {BASE}, ticks {start + 1}-{start + len(window)}. GPU 0: unchanged. "
        f"GPU {MIG_GPU}: MIG mode set on (current and pending); every recorded field copied except "
        "gpu_util and mem_util, left out because NVML reports no device utilization on a MIG-enabled GPU. "
        f"MIG devices INVENTED: {', '.join(p for _, _, _, p, _, _, _ in INSTANCES)} with invented "
        "GPU/compute instance ids, SM counts, memory sizes and UUIDs; memory_used = the sum of the memory "
        "of the processes placed in the instance. Processes: GPU 1's real processes placed in the 3g.71gb "
        "(the DDP rank) and 1g.18gb (the idle holder) instances, per-process utilization left out (NVML "
        "measures none on MIG), everything else copied. Host, topology and device facts are real. A real "
        "DDP job could not span a MIG instance and a whole GPU: this file tests displays, not workloads."
    )
    note = (
        f"DERIVED (not a real machine): the real 2x {name} recording with MIG enabled on GPU {MIG_GPU} "
        "and three invented MIG devices (see derived.how). No MIG recording from real hardware exists."
    )
    derived: dict[str, object] = {
        "from": [BASE],
        "how": how,
        "generator": "bench/derive_mig.py",
        "seed": 0,
        "args": {"start": start, "ticks": ticks},
    }
    return machine, out, derived, note


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--out", required=True)
    ap.add_argument("--start", type=int, default=40, help="first real tick (0-based, default 40)")
    ap.add_argument("--ticks", type=int, default=40, help="ticks to write (default 40)")
    a = ap.parse_args(argv)
    header, _ = read_recording(REPO / BASE)
    machine, ticks, derived, note = derive(REPO / BASE, a.start, a.ticks)
    out = Path(a.out)
    with RecordingWriter(out, machine, interval=header.interval, derived=derived, note=note) as w:  # type: ignore[arg-type]
        for snap in ticks:
            w.write(snap)
    print(f"{out}: {len(ticks)} ticks, {out.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
