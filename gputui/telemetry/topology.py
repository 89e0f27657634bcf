"""How the GPUs are connected, in the terms of `nvidia-smi topo -m`, computed from a Topology.

Pure functions (no NVML, no Textual), so the matrix is tested against nvidia-smi's own text
captured on the same machine.

The classes, best first:

  X     the GPU itself
  NV#   a bonded set of # NVLinks (directly, or through NVSwitch)
  PIX   at most one PCIe bridge between the two GPUs
  PXB   several PCIe bridges, without going through the CPU's host bridge
  PHB   through a PCIe host bridge (typically the CPU)
  NODE  across PCIe host bridges within one NUMA node
  SYS   across NUMA nodes: the SMP interconnect between CPU sockets (QPI/UPI, Infinity Fabric)

NVLink wins over the PCIe path: two GPUs behind different CPU sockets that share NVLinks are
NV#, as nvidia-smi shows them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from gputui.telemetry.model import DeviceInfo, GpuSample, MachineInfo, NvLink, Topology

#: NVML common-ancestor level -> nvidia-smi's class.  Level 0 (NVML_TOPOLOGY_INTERNAL: two
#: GPUs on one board, e.g. a K80) is a board-internal PCIe switch: nvidia-smi calls it PIX.
LEVEL_CLASSES: dict[int, str] = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}

#: (class, nvidia-smi's legend, the same in plain words), best connection first.
LEGEND: tuple[tuple[str, str, str], ...] = (
    ("X", "Self", "the GPU itself"),
    (
        "NV#",
        "Connection traversing a bonded set of # NVLinks",
        "# NVLinks, direct or through NVSwitch: the fastest path between GPUs",
    ),
    (
        "PIX",
        "Connection traversing at most a single PCIe bridge",
        "one PCIe switch between them: fast peer-to-peer over PCIe",
    ),
    (
        "PXB",
        "Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
        "several PCIe switches, not through the CPU",
    ),
    (
        "PHB",
        "Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
        "through the CPU's PCIe host bridge",
    ),
    (
        "NODE",
        "Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node",
        "across PCIe host bridges of one CPU socket (NUMA node)",
    ),
    (
        "SYS",
        "Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)",
        "across CPU sockets: the slowest path",
    ),
)

#: Rank of each class, 0 = fastest (for colouring and sorting).
CLASS_RANK = {"X": -1, "NV": 0, "PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5}

#: P2P status name (as NvmlSource records it) -> nvidia-smi topo -p2p's code.
P2P_CODES = {
    "OK": "OK",
    "chipset not supported": "CNS",
    "GPU not supported": "GNS",
    "topology not supported": "TNS",
    "disabled by regkey": "DRK",
    "not supported": "NS",
    "unknown": "U",
}

#: Utilization (percent) from which a GPU counts as under load for the PCIe-link check.
LOAD_UTIL = 50


def bus_key(bus_id: str | None) -> tuple[int, int, int, int] | None:
    """A PCI bus id ("00000000:00:07.0", "0000:3b:00.0") as numbers, for comparing ids that
    NVML prints with 8 or 4 domain digits and in either case; None when not a bus id."""
    if not bus_id:
        return None
    try:
        domain, bus, rest = bus_id.strip().split(":")
        device, function = rest.split(".")
        return int(domain, 16), int(bus, 16), int(device, 16), int(function, 16)
    except ValueError:
        return None


def _switch_link(link: NvLink, gpu_buses: set[tuple[int, int, int, int]]) -> bool:
    """Does this active link end at an NVSwitch?  NVML says so (remote type "switch"); in
    recordings made before gputui read the remote type, a link whose far end is not one of
    the GPUs is taken to be a switch link (the only other ends are IBM NPUs on POWER9)."""
    if link.remote_type is not None:
        return link.remote_type == "switch"
    key = bus_key(link.remote_bus_id)
    return key is not None and key not in gpu_buses


def nvlink_count(topology: Topology, devices: Sequence[DeviceInfo], i: int, j: int) -> int:
    """How many NVLinks join GPU i and GPU j: the # of nvidia-smi's NV#.

    - Direct links: GPU i's active links whose remote bus id is GPU j's.
    - Through NVSwitch (HGX/DGX): GPU i's links end at switches, not at GPU j, and every
      switch reaches every GPU, so the pair shares a bonded set of as many links as the GPU
      with fewer active switch links has: min(switch links of i, switch links of j).  The
      pair must also be NVLink P2P capable where NVML says so (a GPU whose switch fabric is
      not set up, e.g. without Fabric Manager, has links but no NVLink path).  Checked
      against the real 2x H200 capture: 18 active links each, all to "FFFFFFFF:FF:FF.0"
      (remote type switch), nvidia-smi shows NV18.  With unequal counts (a link down on one
      GPU) the min is our rule, not verified against nvidia-smi.
    """
    if i == j or not topology.nvlinks:
        return 0
    links = topology.nvlinks
    if i >= len(links) or j >= len(links) or j >= len(devices) or i >= len(devices):
        return 0
    index = _link_index(topology, devices)
    target = index.keys[j]
    direct = index.direct[i].get(target, 0) if target is not None else 0
    if direct:
        return direct
    status = _pair(topology.p2p_nvlink, i, j)
    if status is not None and status != "OK":
        return 0
    return min(index.via_switch[i], index.via_switch[j])


@dataclass(frozen=True)
class _LinkIndex:
    """What `nvlink_count` needs of each GPU, read once per topology (not once per pair:
    256 GPUs are 65,280 pairs)."""

    keys: list[tuple[int, int, int, int] | None]
    """Each GPU's bus id as numbers."""
    direct: list[Counter[tuple[int, int, int, int] | None]]
    """Per GPU: its active links, counted by the far end's bus id."""
    via_switch: list[int]
    """Per GPU: its active links that end at an NVSwitch."""


_INDEX: dict[str, tuple[object, object, _LinkIndex]] = {}


def _link_index(topology: Topology, devices: Sequence[DeviceInfo]) -> _LinkIndex:
    hit = _INDEX.get("last")
    if hit is not None and hit[0] is topology and hit[1] is devices:
        return hit[2]
    keys = [bus_key(d.bus_id) for d in devices]
    gpu_buses = {k for k in keys if k is not None}
    direct: list[Counter[tuple[int, int, int, int] | None]] = []
    via: list[int] = []
    for gpu_links in topology.nvlinks:
        active = [lk for lk in gpu_links if lk.active]
        direct.append(Counter(bus_key(lk.remote_bus_id) for lk in active))
        via.append(sum(1 for lk in active if _switch_link(lk, gpu_buses)))
    index = _LinkIndex(keys, direct, via)
    _INDEX["last"] = (topology, devices, index)  # the objects are kept: an id is never reused
    return index


def _pair(matrix: tuple[tuple[str | None, ...], ...], i: int, j: int) -> str | None:
    if i < len(matrix) and j < len(matrix[i]):
        return matrix[i][j]
    return None


def link_class(topology: Topology | None, devices: Sequence[DeviceInfo], i: int, j: int) -> str:
    """nvidia-smi's class for the pair: "X", "NV18", "PIX", ..., or "N/A" when NVML gave
    nothing for it."""
    if i == j:
        return "X"
    if topology is None:
        return "N/A"
    n = nvlink_count(topology, devices, i, j)
    if n:
        return f"NV{n}"
    level = None
    if i < len(topology.levels) and j < len(topology.levels[i]):
        level = topology.levels[i][j]
    if level is None:
        return "N/A"
    return LEVEL_CLASSES.get(level, f"L{level}")


def class_rank(cls: str) -> int:
    """0 for NVLink (fastest) up to 5 for SYS; -1 for X; 9 when unknown."""
    if cls.startswith("NV"):
        return 0
    return CLASS_RANK.get(cls, 9)


def link_matrix(info: MachineInfo, topology: Topology | None = None) -> list[list[str]]:
    """The GPU x GPU matrix of classes, as `nvidia-smi topo -m` prints it."""
    topo = topology if topology is not None else info.topology
    n = len(info.devices)
    return [[link_class(topo, info.devices, i, j) for j in range(n)] for i in range(n)]


@dataclass(frozen=True)
class Affinity:
    """The last columns of `nvidia-smi topo -m` for one GPU."""

    cpus: str | None
    """CPU Affinity: the CPUs nearest the GPU ("0-31")."""
    numa: int | None
    """NUMA Affinity: the NUMA node the GPU is attached to."""
    gpu_numa_id: int | None
    """GPU NUMA ID: the GPU memory's own NUMA node (coherent systems), usually N/A."""


def affinity(dev: DeviceInfo) -> Affinity:
    return Affinity(dev.cpu_affinity, dev.numa_node, dev.gpu_numa_id)


# --------------------------------------------------------------------------------------
# Peer-to-peer
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class P2P:
    """What NVML says about peer-to-peer between two GPUs (statuses, None = not asked)."""

    read: str | None
    write: str | None
    atomics: str | None
    nvlink: str | None

    @property
    def supported(self) -> bool | None:
        """Can one GPU read and write the other's memory directly?  None when unknown."""
        if self.read is None and self.write is None:
            return None
        return self.read == "OK" and self.write == "OK"

    @property
    def reason(self) -> str | None:
        """Why not (the first status that is not OK)."""
        for status in (self.read, self.write, self.atomics):
            if status is not None and status != "OK":
                return status
        return None

    def code(self) -> str:
        """nvidia-smi topo -p2p rw's code for read+write: OK, TNS, NS, ..."""
        if self.supported:
            return "OK"
        status = next((s for s in (self.read, self.write) if s is not None and s != "OK"), None)
        return P2P_CODES.get(status, "?") if status else "N/A"


def p2p(topology: Topology | None, i: int, j: int) -> P2P:
    if topology is None or i == j:
        return P2P(None, None, None, None)
    return P2P(
        _pair(topology.p2p_read, i, j),
        _pair(topology.p2p_write, i, j),
        _pair(topology.p2p_atomics, i, j),
        _pair(topology.p2p_nvlink, i, j),
    )


def p2p_problems(topology: Topology | None, n: int) -> list[tuple[int, int, str]]:
    """Pairs (i < j) that cannot do P2P read/write, with NVML's reason."""
    out = []
    for i in range(n):
        for j in range(i + 1, n):
            pp = p2p(topology, i, j)
            if pp.supported is False:
                out.append((i, j, pp.reason or "not supported"))
    return out


# --------------------------------------------------------------------------------------
# NVLinks of one GPU, grouped for display
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LinkGroup:
    """Consecutive-or-not links of one GPU that lead to the same place in the same state."""

    links: tuple[int, ...]
    active: bool | None
    version: int | None
    remote: str
    """"GPU 3", "NVSwitch", "unknown 0000:41:00.0", or "" for inactive links."""

    def span(self) -> str:
        return ranges(self.links)


def ranges(numbers: Sequence[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0-2,5,7-8"."""
    out: list[str] = []
    nums = sorted(numbers)
    k = 0
    while k < len(nums):
        start = end = nums[k]
        while k + 1 < len(nums) and nums[k + 1] == end + 1:
            k += 1
            end = nums[k]
        out.append(str(start) if start == end else f"{start}-{end}")
        k += 1
    return ",".join(out)


def remote_name(link: NvLink, devices: Sequence[DeviceInfo]) -> str:
    """Where a link leads, in words: "GPU 3", "NVSwitch", "IBM NPU" or the bus id."""
    if link.remote_type == "switch":
        return "NVSwitch"
    key = bus_key(link.remote_bus_id)
    index = _gpu_by_bus(devices).get(key) if key is not None else None
    if index is not None:
        return f"GPU {index}"
    if link.remote_type == "IBM NPU":
        return "IBM NPU"
    if key is not None:
        # a far end that is no visible GPU: a switch (see _switch_link), unless NVML said GPU
        if link.remote_type == "GPU":
            return f"GPU {link.remote_bus_id} (not visible)"
        return "NVSwitch"
    return "unknown"


_BY_BUS: dict[str, tuple[object, dict[tuple[int, int, int, int], int]]] = {}


def _gpu_by_bus(devices: Sequence[DeviceInfo]) -> dict[tuple[int, int, int, int], int]:
    """GPU index by bus id, once per device list (not once per link: 256 GPUs x 18 links)."""
    hit = _BY_BUS.get("last")
    if hit is not None and hit[0] is devices:
        return hit[1]
    out: dict[tuple[int, int, int, int], int] = {}
    for d in devices:
        key = bus_key(d.bus_id)
        if key is not None:
            out.setdefault(key, d.index)  # the first, as the scan before it found
    _BY_BUS["last"] = (devices, out)
    return out


def link_groups(links: Sequence[NvLink], devices: Sequence[DeviceInfo]) -> list[LinkGroup]:
    """The links grouped by (state, version, remote end), in order of their first link."""
    groups: dict[tuple[bool | None, int | None, str], list[int]] = {}
    for lk in links:
        remote = remote_name(lk, devices) if lk.active else ""
        groups.setdefault((lk.active, lk.version if lk.active else None, remote), []).append(lk.link)
    return [
        LinkGroup(tuple(nums), active, version, remote) for (active, version, remote), nums in groups.items()
    ]


def inactive_links(links: Sequence[NvLink]) -> list[int]:
    return [lk.link for lk in links if lk.active is False]


# --------------------------------------------------------------------------------------
# PCIe link health
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PcieState:
    """The PCIe link now against its maximum."""

    gen: int | None
    width: int | None
    max_gen: int | None
    max_width: int | None
    busy: bool
    """The GPU is under load (utilization >= LOAD_UTIL)."""

    @property
    def below_max(self) -> bool:
        if self.gen is None or self.width is None or self.max_gen is None or self.max_width is None:
            return False
        return self.gen < self.max_gen or self.width < self.max_width

    @property
    def downtrained(self) -> bool:
        """Below its maximum while the GPU works: a real problem (a bad slot, riser, BIOS
        setting or link error).  At idle GPUs lower the PCIe generation to save power,
        which is normal and not flagged."""
        return self.busy and self.below_max


def pcie_state(dev: DeviceInfo, g: GpuSample | None) -> PcieState:
    util = g.gpu_util if g is not None else None
    return PcieState(
        g.pcie_gen if g else None,
        g.pcie_width if g else None,
        dev.pcie_max_gen,
        dev.pcie_max_width,
        util is not None and util >= LOAD_UTIL,
    )
