"""DERIVED recordings for tests/fixtures/derived: many GPUs, MIG, jobs, stuck and spinning
GPUs that no real machine of ours recorded, rearranged from REAL recordings.  One subcommand
per kind, run from the repository root:

    python bench/derive.py scale --gpus 8 --processes 240 --out FILE.jsonl.gz
        [--ticks 121] [--topology nvswitch|mixed] [--stagger 7] [--cpus N] [--base REAL.jsonl.gz]
    python bench/derive.py mig --out tests/fixtures/derived/h200x2-mig.jsonl.gz [--start 40] [--ticks 40]
    python bench/derive.py jobs [--base tests/fixtures/derived/h200x8-nvswitch-240procs.jsonl.gz]
        [--out tests/fixtures/derived/h200x8-nvswitch-240procs-jobs.jsonl.gz]
    python bench/derive.py health [--out-dir tests/fixtures/derived]

Each file's header has `derived` set (`from`, `how`, `generator`, `seed`, `args`) and a note
that begins "DERIVED (not a real machine)".  `generator` names the script each subcommand was
before they were folded into this one (bench/derive_recording.py, derive_mig.py,
derive_jobs.py, derive_health.py), so the committed files stay what these commands make.  The
same arguments give the same file except the header's "created" time.  Each subcommand's
recipe is the docstring of its function (`scale`, `mig`, `jobs`, `health`); the commands that
made every committed file are in tests/fixtures/derived/README.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputui.telemetry.model import (
    GpmSample,
    GpuProcess,
    Job,
    LauncherProcess,
    MachineInfo,
    MigDevice,
    NvLink,
    Snapshot,
    Topology,
)
from gputui.telemetry.recording import RecordingHeader, RecordingWriter, read_recording

REPO = Path(__file__).resolve().parents[1]
V = TypeVar("V")


# ======================================================================================
# scale: many GPUs and processes from the real 2x H200 recording
# ======================================================================================


DEFAULT_BASE = "tests/fixtures/h200-x2/recording.jsonl.gz"
SCALE_GENERATOR = "bench/derive_recording.py"
SEED = 0
"""Recorded in the header for the format's sake: the generator draws no random numbers."""
PID_BASE = 20000
"""Derived PIDs are PID_BASE, PID_BASE + 1, ... in order of first appearance."""
IDLE_SM_MAX = 5
"""A real process whose SM utilization never exceeds this is an idle "holder"."""
HOLDER_FRACTION = 4
"""On a GPU whose real twin ran both kinds, 1 in HOLDER_FRACTION slots is a holder."""
NV_PER_PEER = 4
"""`mixed` topology: NVLinks between two peers of a group (NV4)."""
CPU_ROTATE = 5
"""Copy k of the real per-CPU list is rotated left by k * CPU_ROTATE."""


def weight(slot: int) -> int:
    """Fixed share weight of a slot (1..8), so the processes on a GPU differ in size."""
    return 1 + (3 * slot) % 8


def derived_uuid(i: int) -> str:
    return f"GPU-derived-{i:04d}-0000-0000-000000000000"


def derived_bus_id(i: int) -> str:
    return f"00000000:{0x18 + 8 * i:02X}:00.0"


def cpu_list(lo: int, hi: int) -> str:
    return f"{lo}-{hi}" if hi > lo else str(lo)


def repo_relative(path: Path) -> str:
    try:
        return path.resolve().relative_to(REPO).as_posix()
    except ValueError:
        return str(path)


# --------------------------------------------------------------------------------------
# Topology
# --------------------------------------------------------------------------------------


def _every_pair(value: V, n: int) -> tuple[tuple[V | None, ...], ...]:
    """An n x n matrix with `value` off the diagonal and None on it."""
    return tuple(tuple(None if i == j else value for j in range(n)) for i in range(n))


def nvswitch_topology(real: Topology, n: int) -> Topology:
    """Every pair like the real pair: same common-ancestor level, P2P statuses and links."""
    if len(real.levels) < 2 or not real.nvlinks:
        raise SystemExit("nvswitch: the base recording has no 2-GPU topology to copy")
    return Topology(
        levels=_every_pair(real.levels[0][1], n),
        p2p_read=_every_pair(real.p2p_read[0][1], n),
        p2p_write=_every_pair(real.p2p_write[0][1], n),
        p2p_atomics=_every_pair(real.p2p_atomics[0][1], n),
        p2p_nvlink=_every_pair(real.p2p_nvlink[0][1], n),
        nvlinks=tuple(real.nvlinks[i % len(real.nvlinks)] for i in range(n)),
    )


def mixed_groups(n: int) -> tuple[list[int], list[int], tuple[int, int]]:
    """The two socket groups and the PCIe-only (PIX) pair of a `mixed` machine."""
    half = n // 2
    return list(range(half)), list(range(half, n)), (n - 2, n - 1)


def mixed_how(n: int, max_links: int) -> str:
    g0, g1, pix = mixed_groups(n)
    return (
        f"invented: GPUs {g0[0]}-{g0[-1]} on NUMA node 0 and {g1[0]}-{g1[-1]} on NUMA node 1. Within "
        f"a group every pair has {NV_PER_PEER} direct NVLinks (remote bus id = the peer's; link "
        f"version copied from the real links), common ancestor level 40 (NODE) and P2P 'OK' everywhere, "
        f"except GPUs {pix[0]} and {pix[1]}: no NVLink, level 10 (PIX), P2P read/write 'OK', atomics "
        f"and NVLink 'not supported'. Across groups: level 50 (SYS), no NVLink, P2P read/write/atomics "
        f"'topology not supported', NVLink 'not supported'. Each GPU lists as many links as the real "
        f"GPU ({max_links}), those it does not use as inactive."
    )


def mixed_topology(real: Topology, n: int) -> Topology:
    """Two groups (first and second half of the GPUs) on two CPU sockets.

    Within a group every pair has NV_PER_PEER direct NVLinks (remote bus id = the peer's),
    common ancestor NODE (40) and P2P "OK" -- except the last pair of the second group,
    which has no NVLink and shares a PCIe switch: PIX (10), P2P read/write "OK", atomics
    and NVLink "not supported".  Across groups: SYS (50), no NVLink, P2P "topology not
    supported" (NVLink P2P "not supported").  Links a GPU does not use are listed inactive.
    """
    if n < 4 or n % 2:
        raise SystemExit("--topology mixed needs an even number of GPUs, at least 4")
    if not real.nvlinks or not real.nvlinks[0]:
        raise SystemExit("mixed: the base recording has no NVLink facts to copy")
    g0, _g1, pix = mixed_groups(n)
    max_links = len(real.nvlinks[0])
    version = real.nvlinks[0][0].version
    if NV_PER_PEER * (len(g0) - 1) > max_links:
        raise SystemExit(f"mixed: {len(g0)} GPUs per group need more than {max_links} links per GPU")

    def group(i: int) -> int:
        return 0 if i in g0 else 1

    def nvlinked(i: int, j: int) -> bool:
        return i != j and group(i) == group(j) and {i, j} != set(pix)

    levels, p2p_rw, p2p_atomics, p2p_nvlink = [], [], [], []
    for i in range(n):
        lv: list[int | None] = []
        rw: list[str | None] = []
        at: list[str | None] = []
        nl: list[str | None] = []
        for j in range(n):
            if i == j:
                lv.append(None)
                rw.append(None)
                at.append(None)
                nl.append(None)
            elif nvlinked(i, j):
                lv.append(40)
                rw.append("OK")
                at.append("OK")
                nl.append("OK")
            elif group(i) == group(j):  # the PIX pair
                lv.append(10)
                rw.append("OK")
                at.append("not supported")
                nl.append("not supported")
            else:
                lv.append(50)
                rw.append("topology not supported")
                at.append("topology not supported")
                nl.append("not supported")
        levels.append(tuple(lv))
        p2p_rw.append(tuple(rw))
        p2p_atomics.append(tuple(at))
        p2p_nvlink.append(tuple(nl))

    nvlinks = []
    for i in range(n):
        links = [
            NvLink(0, True, version, derived_bus_id(j))
            for j in range(n)
            if nvlinked(i, j)
            for _ in range(NV_PER_PEER)
        ]
        links += [NvLink(0, False, None, None)] * (max_links - len(links))
        nvlinks.append(tuple(dataclasses.replace(link, link=k) for k, link in enumerate(links)))
    return Topology(
        levels=tuple(levels),
        p2p_read=tuple(p2p_rw),
        p2p_write=tuple(p2p_rw),
        p2p_atomics=tuple(p2p_atomics),
        p2p_nvlink=tuple(p2p_nvlink),
        nvlinks=tuple(nvlinks),
    )


# --------------------------------------------------------------------------------------
# Process slots
# --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Slot:
    gpu: int
    slot: int
    source_pid: int
    """The real process (on real GPU gpu % 2) this slot follows."""
    holder: bool
    weight: int


@dataclasses.dataclass(frozen=True)
class RealProc:
    pid: int
    gpu: int
    holder: bool
    cmdline: tuple[str, ...]


def real_processes(ticks: list[Snapshot]) -> dict[int, list[RealProc]]:
    """Per real GPU, its real processes in order of first appearance."""
    seen: dict[tuple[int, int], RealProc] = {}
    max_sm: dict[tuple[int, int], int] = {}
    for snap in ticks:
        for p in snap.processes:
            key = (p.gpu_index, p.pid)
            max_sm[key] = max(max_sm.get(key, 0), p.sm_util or 0)
            if key not in seen:
                seen[key] = RealProc(p.pid, p.gpu_index, False, p.cmdline or ())
    out: dict[int, list[RealProc]] = {}
    for key, rp in seen.items():
        out.setdefault(rp.gpu, []).append(dataclasses.replace(rp, holder=max_sm[key] <= IDLE_SM_MAX))
    return out


def make_slots(n_gpus: int, n_procs: int, n_real: int, reals: dict[int, list[RealProc]]) -> list[Slot]:
    """Spread n_procs slots over the GPUs; on each, over the real processes of its twin."""
    slots = []
    for i in range(n_gpus):
        k = n_procs // n_gpus + (1 if i < n_procs % n_gpus else 0)
        rps = reals.get(i % n_real, [])
        holders = [rp for rp in rps if rp.holder]
        busy = [rp for rp in rps if not rp.holder]
        if holders and busy:
            n_hold = max(1, k // HOLDER_FRACTION) if k >= 2 else 0
            plan = [holders[s % len(holders)] for s in range(n_hold)]
            plan += [busy[s % len(busy)] for s in range(k - n_hold)]
        elif rps:
            plan = [rps[s % len(rps)] for s in range(k)]
        else:
            plan = []
        slots += [Slot(i, s, rp.pid, rp.holder, weight(s)) for s, rp in enumerate(plan)]
    return slots


def derived_cmdline(real: tuple[str, ...], slot: Slot, share: Fraction) -> tuple[str, ...]:
    """The real command line with the device set to the derived GPU, a holder's --gib
    scaled to its share, and (for workers) a rank/worker argument added."""
    args = list(real)
    if slot.holder:
        for flag, value in (("--device", str(slot.gpu)), ("--gib", None)):
            if flag in args[:-1]:
                at = args.index(flag) + 1
                args[at] = value if value is not None else f"{round(float(args[at]) * share, 2):g}"
        return tuple(args)
    return (*args, f"--local-rank={slot.gpu}", f"--worker={slot.slot}")


# --------------------------------------------------------------------------------------
# Deriving
# --------------------------------------------------------------------------------------


def extend_per_cpu(per_cpu: tuple[float, ...], cpus: int) -> tuple[float, ...]:
    if not per_cpu:
        return per_cpu
    out: list[float] = []
    k = 0
    while len(out) < cpus:
        r = (k * CPU_ROTATE) % len(per_cpu)
        out += per_cpu[r:] + per_cpu[:r]
        k += 1
    return tuple(out[:cpus])


def derive_scale(
    base_path: Path,
    n_gpus: int,
    n_procs: int,
    n_ticks: int | None,
    topology: str,
    stagger: int,
    cpus: int | None,
) -> tuple[RecordingHeader, MachineInfo, list[Snapshot], dict[str, object], str]:
    header, real = read_recording(base_path)
    machine = header.machine
    n = len(real)
    n_real = len(machine.devices)
    if n_real < 1:
        raise SystemExit(f"{base_path}: no GPUs")
    n_ticks = n if n_ticks is None else n_ticks
    real_cpus = len(real[0].host.per_cpu) if real[0].host else 0
    if cpus is None:
        cpus = real_cpus * math.ceil(n_gpus / n_real)
    interval = header.interval
    period = real[-1].timestamp - real[0].timestamp + interval

    # ---- static facts
    if machine.topology is None:
        raise SystemExit(f"{base_path}: no topology to copy")
    if topology == "nvswitch":
        topo = nvswitch_topology(machine.topology, n_gpus)
    else:
        topo = mixed_topology(machine.topology, n_gpus)
    devices = []
    for i in range(n_gpus):
        if topology == "mixed":
            node = 0 if i < n_gpus // 2 else 1
            numa: int | None = node
            affinity = cpu_list(node * cpus // 2, (node + 1) * cpus // 2 - 1)
        else:
            numa = machine.devices[i % n_real].numa_node
            affinity = cpu_list(0, cpus - 1)
        devices.append(
            dataclasses.replace(
                machine.devices[i % n_real],
                index=i,
                uuid=derived_uuid(i),
                bus_id=derived_bus_id(i),
                minor_number=i,
                numa_node=numa,
                cpu_affinity=affinity,
            )
        )
    model = (machine.devices[0].name or "GPU").replace("NVIDIA ", "").lower()
    system = dataclasses.replace(machine.system, hostname=f"derived-{model}x{n_gpus}", device_count=n_gpus)
    out_machine = MachineInfo(system=system, devices=tuple(devices), topology=topo)

    # ---- processes
    reals = real_processes(real)
    cmdlines = {(rp.gpu, rp.pid): rp.cmdline for rps in reals.values() for rp in rps}
    slots = make_slots(n_gpus, n_procs, n_real, reals)
    by_gpu: dict[int, list[Slot]] = {}
    for s in slots:
        by_gpu.setdefault(s.gpu, []).append(s)
    # total weight of the slots that follow one real process on one derived GPU
    weights: dict[tuple[int, int], int] = {}
    for s in slots:
        weights[(s.gpu, s.source_pid)] = weights.get((s.gpu, s.source_pid), 0) + s.weight

    pids: dict[tuple[int, int, int], int] = {}
    out_ticks = []
    for t in range(n_ticks):
        gpus = []
        procs: list[GpuProcess] = []
        for i in range(n_gpus):
            g = i % n_real
            shifted = t + stagger * i
            r, epoch = shifted % n, shifted // n
            sample = real[r].gpus[g]
            gpus.append(dataclasses.replace(sample, index=i))
            present = {p.pid: p for p in real[r].processes if p.gpu_index == g}
            real_total = sum(p.gpu_memory or 0 for p in present.values())
            fit = Fraction(1)
            if sample.mem_used is not None and real_total > sample.mem_used:
                fit = Fraction(sample.mem_used, real_total)
            for s in by_gpu.get(i, []):
                p = present.get(s.source_pid)
                if p is None:
                    continue
                key = (i, s.slot, epoch)
                if key not in pids:
                    pids[key] = PID_BASE + len(pids)
                share = Fraction(s.weight, weights[(i, s.source_pid)])
                shift = (epoch * n - stagger * i) * interval
                procs.append(
                    dataclasses.replace(
                        p,
                        gpu_index=i,
                        pid=pids[key],
                        gpu_memory=None if p.gpu_memory is None else math.floor(p.gpu_memory * share * fit),
                        sm_util=None if p.sm_util is None else math.floor(p.sm_util * share),
                        mem_util=None if p.mem_util is None else math.floor(p.mem_util * share),
                        cmdline=derived_cmdline(cmdlines[(g, s.source_pid)], s, share),
                        create_time=None if p.create_time is None else round(p.create_time + shift, 2),
                    )
                )
        src = real[t % n]
        host = src.host
        if host is not None and cpus != real_cpus:
            host = dataclasses.replace(host, per_cpu=extend_per_cpu(host.per_cpu, cpus))
        procs.sort(key=lambda p: (p.gpu_index, p.pid))
        out_ticks.append(
            Snapshot(
                seq=t + 1,
                timestamp=round(src.timestamp + (t // n) * period, 6),
                gpus=tuple(gpus),
                processes=tuple(procs),
                host=host,
            )
        )

    # ---- header texts
    source = repo_relative(base_path)
    n_hold = sum(1 for s in slots if s.holder)
    how = (
        f"From the real {n_real}-GPU recording {source} ({n} ticks at {interval:g} s). "
        f"GPU samples: derived GPU i at tick t is real GPU (i % {n_real}) at real tick "
        f"(t + {stagger}*i) mod {n}, every field copied as recorded except index (counters such as "
        f"energy therefore jump back where a GPU's timeline wraps). Devices: the real DeviceInfo of "
        f"GPU (i % {n_real}) with invented uuid GPU-derived-NNNN-..., bus id 00000000:XX:00.0, "
        f"minor number i, cpu affinity/NUMA node set for the derived host; serials are the real "
        f"GPUs' (repeated); hostname set to {system.hostname}. Processes: {len(slots)} slots "
        f"({n_hold} idle holders, {len(slots) - n_hold} workers) spread over the GPUs, each following "
        f"one real process of its GPU's real twin (idle holder = a real process whose SM use never "
        f"exceeded {IDLE_SM_MAX}%) and present exactly at the ticks where that real process was; each "
        f"appearance is a process with an invented PID (from {PID_BASE}, in order of first appearance) "
        f"and the real create_time shifted like the GPU's timeline. Slots following the same real "
        f"process on one GPU split its gpu_memory, sm_util and mem_util by fixed weights 1 + (3*slot "
        f"mod 8) (rounded down; memory scaled down further where the real processes' sum exceeded the "
        f"GPU's mem_used), so the sum never exceeds the real value; cpu_percent, rss, name, user, type "
        f"and enc/dec utilization are copied; command lines are the real ones with --device set to "
        f"the derived GPU and --gib scaled to the holder's share, and invented --local-rank/--worker "
        f"arguments on workers. Host: the real host sample of tick (t mod {n})"
        + (
            f", per_cpu extended from {real_cpus} to {cpus} CPUs by repeating it, copy k rotated left "
            f"by {CPU_ROTATE}*k (the per-CPU mean stays the real one); host memory, load and "
            f"cpu_percent are the real host's, so they do not account for the derived processes"
            if cpus != real_cpus
            else " unchanged"
        )
        + ". Topology: "
        + (
            f"every pair copied from the real pair (common ancestor level {topo.levels[0][1]}, P2P "
            f"'{topo.p2p_read[0][1]}', the real GPU's {len(topo.nvlinks[0])} NVLinks via NVSwitch)."
            if topology == "nvswitch"
            else mixed_how(n_gpus, len(topo.nvlinks[0]))
        )
        + " Nothing is random."
    )
    name = machine.devices[0].name
    if topology == "nvswitch":
        shape = f"NVSwitch, NV{len(topo.nvlinks[0])} between every pair as on the real machine"
    else:
        g0, g1, pix = mixed_groups(n_gpus)
        shape = (
            f"mixed topology: GPUs {g0[0]}-{g0[-1]} on CPU socket 0 and {g1[0]}-{g1[-1]} on socket 1; "
            f"NV{NV_PER_PEER} between peers of a group except GPUs {pix[0]} and {pix[1]}, which share a "
            f"PCIe switch (PIX) without NVLink; SYS across sockets"
        )
    note = (
        f"DERIVED (not a real machine): {n_gpus}x {name} ({shape}), {len(slots)} process slots, "
        f"{n_ticks} ticks; GPU samples replayed from the real {n_real}x {name} recording {source} "
        f"with a {stagger}-tick stagger per GPU; processes, host CPU list and topology derived "
        f"as described in derived.how. Real recording's note: {header.note}"
    )
    derived: dict[str, object] = {
        "from": [source],
        "how": how,
        "generator": SCALE_GENERATOR,
        "seed": SEED,
        "args": {
            "gpus": n_gpus,
            "processes": n_procs,
            "ticks": n_ticks,
            "topology": topology,
            "stagger": stagger,
            "cpus": cpus,
        },
    }
    return header, out_machine, out_ticks, derived, note


def scale(a: argparse.Namespace) -> int:
    """Make DERIVED scale-test recordings (many GPUs, hundreds of processes) from a REAL one.

    The base is a real recording of a 2-GPU machine (by default the 2x H200 NV18 recording in
    tests/fixtures/h200-x2).  Nothing measured is invented, only rearranged:

    * GPU samples: derived GPU i replays real GPU (i % 2), `stagger * i` ticks ahead, wrapping
      at the end of the real recording, so the GPUs do not move in lockstep.  Every field is
      copied as recorded except `index`.
    * Static device facts are the real GPU's, with a distinct, obviously derived uuid, bus id
      and minor number, and a CPU affinity / NUMA node that matches the derived host.
    * Processes: each derived GPU gets a share of the `--processes` slots.  A slot follows one
      real process of the GPU it replays (the DDP rank, or the idle 8 GiB holder) and exists
      exactly at the ticks where that real process existed; each appearance is one process
      with its own PID and a create_time shifted like the GPU's timeline.  Slots following the
      same real process split its GPU memory and SM/memory utilization by fixed weights, so
      the per-GPU sum never exceeds the real process's value (and is scaled down further
      where needed to stay within the GPU's mem_used).  CPU percent and RSS are copied.
    * Host: the real host sample of the same tick; `per_cpu` is repeated (rotated) to a
      bigger host, which keeps the mean of the per-CPU values equal to the real one.
    * Topology: `nvswitch` copies the real NV18 pair's shape to every pair; `mixed` builds
      two NVLink groups on two CPU sockets (see `mixed_topology`).

    There are no random choices: the same arguments give the same file (except the header's
    "created" time and the gzip header's mtime).  The header's `derived` object says what was
    done; its `note` starts with "DERIVED (not a real machine)".
    """
    if a.gpus < 1 or a.processes < 0 or (a.ticks is not None and a.ticks < 1) or a.stagger < 0:
        a.parser.error("--gpus and --ticks must be >= 1, --processes and --stagger >= 0")
    base_header, machine, ticks, derived, note = derive_scale(
        Path(a.base), a.gpus, a.processes, a.ticks, a.topology, a.stagger, a.cpus
    )
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with RecordingWriter(out, machine, interval=base_header.interval, derived=derived, note=note) as w:
        for snap in ticks:
            w.write(snap)
    distinct = len({p.pid for s in ticks for p in s.processes})
    peak = max(len(s.processes) for s in ticks)
    print(
        f"{out}: {len(ticks)} ticks, {a.gpus} GPUs, {distinct} distinct processes "
        f"(at most {peak} at once), {out.stat().st_size} bytes"
    )
    return 0


# ======================================================================================
# mig: MIG enabled on one GPU of the real 2x H200 recording
# ======================================================================================


MIG_BASE = "tests/fixtures/h200-x2/recording.jsonl.gz"
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


def derive_mig(base: Path, start: int, ticks: int) -> tuple[object, list[Snapshot], dict[str, object], str]:
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
        f"From the real 2-GPU recording {MIG_BASE}, ticks {start + 1}-{start + len(window)}. GPU 0: unchanged. "
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
        "from": [MIG_BASE],
        "how": how,
        "generator": "bench/derive_mig.py",
        "seed": 0,
        "args": {"start": start, "ticks": ticks},
    }
    return machine, out, derived, note


def mig(a: argparse.Namespace) -> int:
    """Derive a recording with MIG enabled on one GPU, for testing gputui's MIG views.

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
    header, _ = read_recording(REPO / MIG_BASE)
    machine, ticks, derived, note = derive_mig(REPO / MIG_BASE, a.start, a.ticks)
    out = Path(a.out)
    with RecordingWriter(out, machine, interval=header.interval, derived=derived, note=note) as w:  # type: ignore[arg-type]
        for snap in ticks:
            w.write(snap)
    print(f"{out}: {len(ticks)} ticks, {out.stat().st_size} bytes")
    return 0


# ======================================================================================
# jobs: jobs and launchers on the derived 240-process recording
# ======================================================================================


JOBS_BASE = REPO / "tests/fixtures/derived/h200x8-nvswitch-240procs.jsonl.gz"
JOBS_OUT = REPO / "tests/fixtures/derived/h200x8-nvswitch-240procs-jobs.jsonl.gz"
LAUNCHER_PID = 30000
SLURM_JOB = 48200


def worker(p: GpuProcess) -> int | None:
    for arg in p.cmdline or ():
        m = re.fullmatch(r"--worker=(\d+)", arg)
        if m:
            return int(m.group(1))
    return None


def jobs(a: argparse.Namespace) -> int:
    """Add jobs and launchers to a DERIVED recording, for the tree-mode benchmark.

    The base's derived processes carry `--worker=W`: the processes with the same W on the 8
    GPUs become one job, under one invented `torchrun` launcher (PID 30000 + W, started 1 s
    before its first rank) and one invented Slurm job (`48200 + W`, step 0).  Processes without
    `--worker=` (none in the 240-process file) are left alone.  Everything else is copied.
    The layout is the one a real torchrun job has (bench/device_jobs.py recorded one on an
    H100: tests/fixtures/h100-x1-job); the numbers here are only to measure the tree's cost.
    """
    header, ticks = read_recording(a.base)
    first: dict[int, float] = {}
    for snap in ticks:
        for p in snap.processes:
            w = worker(p)
            if w is not None and p.create_time is not None:
                first[w] = min(first.get(w, p.create_time), p.create_time)
    derived = dict(header.derived or {})
    derived["how"] = (
        derived.get("how", "") + " Then bench/derive_jobs.py: processes with the same --worker=W "
        "form one job under an invented torchrun launcher (PID 30000+W) and Slurm job 48200+W."
    )
    derived["generator"] = "bench/derive_recording.py + bench/derive_jobs.py"
    note = (header.note or "DERIVED (not a real machine)") + " Launchers and jobs invented (tree benchmark)."
    with RecordingWriter(a.out, header.machine, interval=header.interval, derived=derived, note=note) as w:
        for snap in ticks:
            procs = []
            jobs: set[int] = set()
            for p in snap.processes:
                wk = worker(p)
                if wk is None:
                    procs.append(p)
                    continue
                jobs.add(wk)
                job = Job("slurm", str(SLURM_JOB + wk), step="0")
                procs.append(dataclasses.replace(p, launcher=LAUNCHER_PID + wk, job=job))
            launchers = tuple(
                LauncherProcess(
                    pid=LAUNCHER_PID + wk,
                    create_time=round(first[wk] - 1.0, 2),
                    kind="torchrun",
                    name="python3",
                    user="root",
                    cmdline=(
                        "/opt/torch/.venv/bin/python3",
                        "/opt/torch/.venv/bin/torchrun",
                        "--nproc-per-node",
                        "8",
                        "bench/load/ddp_like.py",
                        "--seconds",
                        "70",
                    ),
                    pgid=LAUNCHER_PID + wk,
                    sid=LAUNCHER_PID + wk,
                    job=Job("slurm", str(SLURM_JOB + wk), step="0"),
                )
                for wk in sorted(jobs)
            )
            w.write(dataclasses.replace(snap, processes=tuple(procs), launchers=launchers))
    print(f"{a.out}: {len(ticks)} ticks")
    return 0


# ======================================================================================
# health: a spinning GPU, a stopped and an exited rank, from real H100 recordings
# ======================================================================================


GPM_BASE = "tests/fixtures/h100-gpm/recording.jsonl.gz"
JOB_BASE = "tests/fixtures/h100-x1-job/recording.jsonl.gz"
HEALTH_GENERATOR = "bench/derive_health.py"
IDLE_TICKS = 10
SPIN_TICKS = 150
JOB_TICKS = 180
IDLE_HOLDING = (125, 141)
"""Ticks of the H100 GPM recording wholly inside "idle holding 8 GiB" (phases.json)."""
SPIN = {
    "gpu_util": 100,
    "graphics_active": 99.97,
    "sm_active": 0.76,
    "sm_occupancy": 0.01,
    "dram_active": 0.0,
    "tensor_active": 0.0,
    "power_delta": 0.6,
}
"""The spinning kernel on an H100, 2026-11-25 (REFERENCE.md): GPM's fractions as percent."""
STOPPED_RANK = "1"


def _rank(p: GpuProcess) -> str | None:
    c = p.cmdline or ()
    return c[c.index("--rank") + 1] if "--rank" in c and c.index("--rank") + 1 < len(c) else None


def health_spin(out: Path) -> None:
    header, ticks = read_recording(REPO / GPM_BASE)
    lo, hi = IDLE_HOLDING
    holding = ticks[lo:hi]
    dt = header.interval
    snaps = list(ticks[:IDLE_TICKS])
    t0 = snaps[-1].timestamp
    for k in range(SPIN_TICKS):
        real = holding[k % len(holding)]
        g = real.gpus[0]
        w = g.gpm or GpmSample(window=2.0)
        w = dataclasses.replace(
            w,
            graphics_active=SPIN["graphics_active"],
            sm_active=SPIN["sm_active"],
            sm_occupancy=SPIN["sm_occupancy"],
            dram_active=SPIN["dram_active"],
            tensor_active=SPIN["tensor_active"],
        )
        g = dataclasses.replace(
            g,
            gpu_util=int(SPIN["gpu_util"]),
            power_draw=None if g.power_draw is None else round(g.power_draw + SPIN["power_delta"], 3),
            gpm=w,
        )
        ts = t0 + (k + 1) * dt
        procs = tuple(dataclasses.replace(p, state="R", sm_util=100) for p in real.processes)
        snaps.append(dataclasses.replace(real, seq=IDLE_TICKS + k, timestamp=ts, gpus=(g,), processes=procs))
    derived = {
        "from": GPM_BASE,
        "how": (
            f"ticks 0-{IDLE_TICKS - 1} as recorded (idle, no context); then {SPIN_TICKS} ticks 1 s apart "
            f"looping over real ticks {lo}-{hi - 1} ('idle holding 8 GiB') with gpu_util, GPM "
            "graphics/SM/occupancy/DRAM/tensor set to the spinning kernel's H100 figures of 2026-11-25 "
            "(REFERENCE.md) and power +0.6 W; process state R and sm_util 100 set"
        ),
        "generator": HEALTH_GENERATOR,
        "seed": 0,
        "args": {"spin": SPIN},
    }
    note = "DERIVED (not a real machine): an H100 spinning one kernel, built from real idle ticks"
    _write(out / "h100-spin-derived.jsonl.gz", header, snaps, derived, note)


def health_job(out: Path, exited: bool) -> None:
    header, ticks = read_recording(REPO / JOB_BASE)
    dt = header.interval
    snaps = [
        dataclasses.replace(s, processes=tuple(dataclasses.replace(p, state="R") for p in s.processes))
        for s in ticks
    ]
    t0 = snaps[-1].timestamp
    for k in range(JOB_TICKS):
        real = ticks[k % len(ticks)]
        g = dataclasses.replace(real.gpus[0], gpu_util=0)
        procs = []
        for p in real.processes:
            if _rank(p) == STOPPED_RANK:
                if exited:
                    continue
                procs.append(dataclasses.replace(p, state="T", cpu_percent=0.0, sm_util=0))
            else:
                procs.append(dataclasses.replace(p, state="S", cpu_percent=0.0, sm_util=0))
        snaps.append(
            dataclasses.replace(
                real, seq=len(ticks) + k, timestamp=t0 + (k + 1) * dt, gpus=(g,), processes=tuple(procs)
            )
        )
    what = "gone (exited)" if exited else "state T, 0 % CPU"
    derived = {
        "from": JOB_BASE,
        "how": (
            f"the {len(ticks)} real ticks with state R; then {JOB_TICKS} ticks 1 s apart looping over them "
            f"with rank {STOPPED_RANK} {what}, every other process state S at 0 % CPU and sm_util 0, "
            "GPU utilization 0 (what the real gloo job showed with rank 1 under SIGSTOP, REFERENCE.md)"
        ),
        "generator": HEALTH_GENERATOR,
        "seed": 0,
        "args": {"exited": exited},
    }
    note = f"DERIVED (not a real machine): the real H100 torchrun-like job with rank 1 {what}"
    name = "h100-job-exited-derived.jsonl.gz" if exited else "h100-job-stopped-derived.jsonl.gz"
    _write(out / name, header, snaps, derived, note)


def _write(
    path: Path, header: RecordingHeader, snaps: list[Snapshot], derived: dict[str, Any], note: str
) -> None:
    with RecordingWriter(path, header.machine, header.interval, derived=derived, note=note) as w:
        for s in snaps:
            w.write(s)
    print(f"{path}: {len(snaps)} ticks")


def health(a: argparse.Namespace) -> int:
    """Make DERIVED recordings of a spinning GPU and of a job with a stopped or an exited rank,
    from REAL H100 recordings, until the real ones (bench/device.sh health) are in tests/fixtures.

    Writes three files, each with `derived` set in its header and a note that begins
    "DERIVED (not a real machine)":

    * `h100-spin-derived.jsonl.gz`: the real H100 GPM recording (tests/fixtures/h100-gpm): its
      first 10 ticks (idle, no CUDA context: 70 W) as recorded, then 150 ticks that replay the
      real "idle holding 8 GiB" phase (a process holds a CUDA context, nothing runs: ~120 W)
      in a loop, 1 s apart, with utilization and GPM replaced by what a spinning kernel
      (`torch.cuda._sleep`) measured on an H100 on 2026-11-25 (shared/REFERENCE.md, "A stuck
      job"): NVML utilization 100 %, GR engine 99.97 %, SM active 0.76 %, SM occupancy 0.01 %,
      DRAM 0, tensor 0, and power +0.6 W (131.3 W spinning against 130.7 W idle that day).
      Clocks, temperatures, memory and the process are the real idle-holding ticks'.
    * `h100-job-stopped-derived.jsonl.gz`: the real torchrun-like job on an H100
      (tests/fixtures/h100-x1-job: launcher 455, ranks 456/457/458 with `--rank 0/1/2`, a
      bystander, a Slurm-like holder): its 9 ticks as recorded (every process "R"), then 180
      ticks looping over them, 1 s apart, where rank 1 is stopped ("T", 0 % CPU) and every
      other process sleeps ("S", 0 % CPU, per-process SM 0) with GPU utilization 0 %: what the
      real gloo job showed with rank 1 under SIGSTOP (REFERENCE.md).  Power, clocks and
      memory are the real ticks'.
    * `h100-job-exited-derived.jsonl.gz`: the same, but rank 1 is gone instead of stopped
      (NVML stops listing a process that has exited).
    """
    out = Path(a.out_dir)
    health_spin(out)
    health_job(out, exited=False)
    health_job(out, exited=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="DERIVED recordings for tests/fixtures/derived (see the docstring)"
    )
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("scale", help="many GPUs and processes from the real 2x H200 recording")
    p.add_argument("--gpus", type=int, required=True, help="number of derived GPUs")
    p.add_argument("--processes", type=int, required=True, help="process slots, spread over the GPUs")
    p.add_argument("--ticks", type=int, default=None, help="ticks to write (default: as many as the base)")
    p.add_argument("--out", required=True, help="output file (.jsonl or .jsonl.gz)")
    p.add_argument("--topology", choices=("nvswitch", "mixed"), default="nvswitch")
    p.add_argument("--stagger", type=int, default=7, help="ticks between GPU i and GPU i+1 (default 7)")
    p.add_argument("--cpus", type=int, default=None, help="host CPUs (default: real CPUs per real GPU pair)")
    p.add_argument("--base", default=str(REPO / DEFAULT_BASE), help="the real recording to derive from")
    p.set_defaults(func=scale, parser=p)
    p = sub.add_parser("mig", help="MIG enabled on one GPU of the real 2x H200 recording")
    p.add_argument("--out", required=True)
    p.add_argument("--start", type=int, default=40, help="first real tick (0-based, default 40)")
    p.add_argument("--ticks", type=int, default=40, help="ticks to write (default 40)")
    p.set_defaults(func=mig, parser=p)
    p = sub.add_parser("jobs", help="jobs and launchers on the derived 240-process recording")
    p.add_argument("--base", default=str(JOBS_BASE))
    p.add_argument("--out", default=str(JOBS_OUT))
    p.set_defaults(func=jobs, parser=p)
    p = sub.add_parser("health", help="a spinning GPU, a stopped and an exited rank (real H100 recordings)")
    p.add_argument("--out-dir", default=str(REPO / "tests/fixtures/derived"))
    p.set_defaults(func=health, parser=p)
    a = ap.parse_args(argv)
    return int(a.func(a))


if __name__ == "__main__":
    sys.exit(main())
