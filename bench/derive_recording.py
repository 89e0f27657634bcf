"""Make DERIVED scale-test recordings (many GPUs, hundreds of processes) from a REAL one.

    python bench/derive_recording.py --gpus 8 --processes 240 --out FILE.jsonl.gz
        [--ticks 121] [--topology nvswitch|mixed] [--stagger 7] [--cpus N] [--base REAL.jsonl.gz]

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

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from fractions import Fraction
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputui.telemetry.model import GpuProcess, MachineInfo, NvLink, Snapshot, Topology
from gputui.telemetry.recording import RecordingHeader, RecordingWriter, read_recording

REPO = Path(__file__).resolve().parents[1]
V = TypeVar("V")

DEFAULT_BASE = "tests/fixtures/h200-x2/recording.jsonl.gz"
GENERATOR = "bench/derive_recording.py"
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


def derive(
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
        "generator": GENERATOR,
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--gpus", type=int, required=True, help="number of derived GPUs")
    ap.add_argument("--processes", type=int, required=True, help="process slots, spread over the GPUs")
    ap.add_argument("--ticks", type=int, default=None, help="ticks to write (default: as many as the base)")
    ap.add_argument("--out", required=True, help="output file (.jsonl or .jsonl.gz)")
    ap.add_argument("--topology", choices=("nvswitch", "mixed"), default="nvswitch")
    ap.add_argument("--stagger", type=int, default=7, help="ticks between GPU i and GPU i+1 (default 7)")
    ap.add_argument("--cpus", type=int, default=None, help="host CPUs (default: real CPUs per real GPU pair)")
    ap.add_argument("--base", default=str(REPO / DEFAULT_BASE), help="the real recording to derive from")
    a = ap.parse_args(argv)
    if a.gpus < 1 or a.processes < 0 or (a.ticks is not None and a.ticks < 1) or a.stagger < 0:
        ap.error("--gpus and --ticks must be >= 1, --processes and --stagger >= 0")
    base_header, machine, ticks, derived, note = derive(
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


if __name__ == "__main__":
    sys.exit(main())
