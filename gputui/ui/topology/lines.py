"""The Topology tab's content as lines: the GPU x GPU matrix as nvidia-smi topo -m shows it,
a legend in plain words, CPU/NUMA affinity, peer-to-peer capability, each GPU's PCIe link and
NVLinks with live counters, and the CUDA_VISIBLE_DEVICES view.

Pure functions of the data (no Textual), tested as text.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from functools import partial
from typing import TypeVar

from rich.style import Style

from gputui.telemetry.cuda_visible import CudaVisibility
from gputui.telemetry.model import NVLINK_VERSIONS, DeviceInfo, GpuSample, MachineInfo, NvLink, Topology
from gputui.telemetry.topology import (
    LEGEND,
    affinity,
    class_rank,
    inactive_links,
    link_groups,
    link_matrix,
    p2p,
    p2p_problems,
    pcie_state,
    ranges,
    remote_name,
)
from gputui.ui.cards import short_name
from gputui.ui.render import (
    CYAN,
    GREEN,
    NA,
    ORANGE,
    YELLOW,
    Line,
    S,
    clean,
    fmt_rate,
    line_len,
    pad,
    pad_line,
)

#: Style of each class by rank: NVLink green, PCIe switch cyan, host bridge yellow, SYS orange.
RANK_STYLES = {
    -1: S.dim,
    0: Style(color=GREEN, bold=True),
    1: Style(color=CYAN),
    2: Style(color=CYAN),
    3: Style(color=YELLOW),
    4: Style(color=YELLOW),
    5: Style(color=ORANGE, bold=True),
}
PLAIN_WORDS = {code: words for code, _, words in LEGEND}


_MEMO: dict[tuple[str, tuple[int, ...]], tuple[tuple[object, ...], object]] = {}
T = TypeVar("T")


def memo(kind: str, obj: object, compute: Callable[[], T]) -> T:
    """`compute()` once per (kind, object): for what depends only on the static topology but
    is drawn every tick (an object's identity is the key, and the object is kept with the
    value, so a recycled id is never mistaken for it).  A tuple `obj` keys on each of its
    items' identities."""
    objs = obj if isinstance(obj, tuple) else (obj,)
    key = (kind, tuple(id(o) for o in objs))
    hit = _MEMO.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], objs, strict=True)):
        return hit[1]  # type: ignore[return-value]
    if len(_MEMO) > 4096:
        _MEMO.clear()
    value = compute()
    _MEMO[key] = (objs, value)
    return value


def classes_of(info: MachineInfo, topology: Topology | None) -> list[list[str]]:
    """`link_matrix` once per (machine, topology): the matrix, the legend and each key press
    draw from it (256 GPUs are 65,536 cells)."""
    return memo("classes", (info, topology), partial(link_matrix, info, topology))


def p2p_cells(topology: Topology | None, n: int) -> dict[tuple[int, int], tuple[str, Style]]:
    """Every pair's P2P cell, once per topology."""
    return memo(
        "p2p-cells",
        (topology, n),
        lambda: {(i, j): p2p_cell(topology, i, j) for i in range(n) for j in range(n) if i != j},
    )


def warm(info: MachineInfo, topology: Topology | None) -> None:
    """Compute what the tab draws from the topology alone (for a worker thread: many GPUs)."""
    classes_of(info, topology)
    n = len(info.devices)
    p2p_cells(topology, n)
    if topology is not None:
        problems_of(topology, n)
        for links in topology.nvlinks:
            summary_of(links, info.devices)
            inactive_of(links)


def problems_of(topology: Topology | None, n: int) -> list[tuple[int, int, str]]:
    return memo("p2p", topology, partial(p2p_problems, topology, n))


def summary_of(links: Sequence[NvLink], devices: Sequence[DeviceInfo]) -> Line:
    return memo("summary", links, partial(nvlink_summary, links, devices))


def inactive_of(links: Sequence[NvLink]) -> list[int]:
    return memo("inactive", links, partial(inactive_links, links))


def class_style(cls: str) -> Style:
    return RANK_STYLES.get(class_rank(cls), S.dim)


def wrapped(text: str, width: int, style: Style, lead: str = "  ", mark: str = "") -> list[Line]:
    """A paragraph wrapped to `width`, the first line after `mark`, the rest indented."""
    first = lead + mark
    chunks = textwrap.wrap(text, max(10, width - len(first))) or [""]
    return [
        pad_line([(first if k == 0 else " " * len(first), S.label), (c, style)], width)
        for k, c in enumerate(chunks)
    ]


def section(title: str, width: int, note: str = "") -> Line:
    line: Line = [(f" {title} ", S.title)]
    if note:
        line.append((note, S.label))
    return pad_line(line, width)


# --------------------------------------------------------------------------------------
# the matrix
# --------------------------------------------------------------------------------------


def matrix_lines(
    info: MachineInfo,
    topology: Topology | None,
    width: int,
    selected: int | None = None,
    cuda: CudaVisibility | None = None,
) -> list[Line]:
    """The GPU x GPU matrix with the affinity columns, fitted to `width`: cells shrink to 5
    columns, then the affinity moves below the matrix, then (many GPUs in a narrow terminal)
    cells are 4 columns with 3-letter codes (N18 for NV18) and the header has bare indices."""
    devices = info.devices
    n = len(devices)
    classes = classes_of(info, topology)
    cuda_w = 7 if cuda is not None else 0
    label_w = 7
    aff = [affinity(d) for d in devices]
    cpu_w = max([len("CPU affinity"), *(len(clean(a.cpus or NA)) for a in aff)]) + 2
    tail_w = 2 + cpu_w + len("NUMA  ") + len("GPU NUMA")
    cell_w = 6
    if label_w + cuda_w + n * cell_w + tail_w > width:
        cell_w = 5
    narrow = label_w + cuda_w + n * cell_w > width
    if narrow:
        cell_w = 4
    inline_affinity = label_w + cuda_w + n * cell_w + tail_w <= width
    # the columns that fit (the rest would be cropped): 256 GPUs need not draw 65,536 cells
    shown = min(n, max(0, (width - label_w - cuda_w) // cell_w + 1))
    head: Line = [(" " * label_w, None)]
    if cuda is not None:
        head.append((pad("CUDA", cuda_w), S.label))
    for d in devices[:shown]:
        head.append((pad(str(d.index) if narrow else f"GPU{d.index}", cell_w, "^"), S.label))
    if inline_affinity:
        head += [("  ", None), (pad("CPU affinity", cpu_w), S.label), ("NUMA  GPU NUMA", S.label)]
    out: list[Line] = [pad_line(head, width)]
    for i, d in enumerate(devices):
        sel = selected == d.index
        mark = "▶" if sel else " "
        row: Line = [
            (mark, S.index),
            (pad(f"GPU{d.index}", label_w - 1), S.index_selected if sel else S.index),
        ]
        if cuda is not None:
            k = cuda.cuda_index_of(d.index)
            row.append((pad(f"cuda:{k}" if k is not None else "—", cuda_w), S.ok if k is not None else S.dim))
        for j in range(shown):
            cls = classes[i][j]
            text = short_class(cls) if narrow else cls
            row.append((pad(text, cell_w, "^"), class_style(cls)))
        if inline_affinity:
            a = aff[i]
            row += [
                ("  ", None),
                (pad(clean(a.cpus or NA), cpu_w), S.value if a.cpus else S.dim),
                (pad(NA if a.numa is None else str(a.numa), 6), S.value if a.numa is not None else S.dim),
                (
                    NA if a.gpu_numa_id is None else str(a.gpu_numa_id),
                    S.dim if a.gpu_numa_id is None else S.value,
                ),
            ]
        out.append(pad_line(row, width))
    if narrow:
        out.append(pad_line([(" (narrow terminal: N18 means NV18, NOD NODE)", S.dim)], width))
    if not inline_affinity:
        for i, d in enumerate(devices):
            a = aff[i]
            out.append(
                pad_line(
                    [
                        (pad(f" GPU{d.index}", label_w), S.index),
                        ("CPUs ", S.label),
                        (clean(a.cpus or NA), S.value),
                        ("  NUMA ", S.label),
                        (NA if a.numa is None else str(a.numa), S.value),
                        ("  GPU NUMA ", S.label),
                        (NA if a.gpu_numa_id is None else str(a.gpu_numa_id), S.value),
                    ],
                    width,
                )
            )
    return out


def short_class(cls: str) -> str:
    """A class in at most 3 letters, for narrow terminals: NV18 -> N18, NODE -> NOD."""
    if cls.startswith("NV") and len(cls) > 3:
        return "N" + cls[2:]
    return {"NODE": "NOD", "N/A": "?"}.get(cls, cls)


def legend_lines(classes_present: set[str], width: int) -> list[Line]:
    """The legend in plain words: one line per class this machine has, then the others on
    one dim line."""
    present = sorted(classes_present, key=class_rank)
    codes = {"NV#" if c.startswith("NV") else c for c in present}
    out: list[Line] = []
    for cls in present:
        if cls.startswith("NV") and cls != next(c for c in present if c.startswith("NV")):
            continue  # one line for NVLink, whatever the counts
        key = "NV#" if cls.startswith("NV") else cls
        words = PLAIN_WORDS.get(key, "")
        if key == "NV#":
            words = words.replace("#", "the number of")
        for k, chunk in enumerate(textwrap.wrap(words, max(10, width - 7)) or [""]):
            code = pad("NV#" if key == "NV#" else cls, 5) if k == 0 else " " * 5
            out.append(pad_line([(" ", None), (code, class_style(cls)), (" ", None), (chunk, S.text)], width))
    others = [f"{code} {PLAIN_WORDS[code]}" for code, _, _ in LEGEND if code not in codes and code != "X"]
    if others:
        out += wrapped(" · ".join(others), width, S.dim, lead=" ", mark="also  ")
    return out


# --------------------------------------------------------------------------------------
# peer-to-peer
# --------------------------------------------------------------------------------------


def p2p_cell(topology: Topology | None, i: int, j: int) -> tuple[str, Style]:
    if i == j:
        return "X", S.dim
    pp = p2p(topology, i, j)
    if pp.supported is None:
        return NA, S.dim
    if not pp.supported:
        return "✗ " + pp.code(), S.bad
    atomics = pp.atomics == "OK"
    return ("RWA" if atomics else "RW·"), (S.ok if atomics else S.warn)


def p2p_lines(info: MachineInfo, topology: Topology | None, width: int) -> list[Line]:
    """P2P read/write/atomics per pair: one line when every pair is the same, else a matrix
    and the pairs that cannot do P2P."""
    n = len(info.devices)
    if n < 2:
        return [pad_line([(" one GPU: no peer-to-peer", S.dim)], width)]
    cells = p2p_cells(topology, n)
    distinct = {text for text, _ in cells.values()}
    if len(distinct) == 1:
        text, style = next(iter(cells.values()))
        words = {
            "RWA": "read, write and atomics work between every pair",
            "RW·": "read and write work between every pair; atomics do not",
            NA: "NVML gave no P2P status",
        }.get(text, f"not possible between any pair ({text[2:]})")
        mark = "✓ " if text == "RWA" else ("⚠ " if text != NA else "")
        return [pad_line([(" P2P ", S.label), (mark + words, style)], width)]
    cell_w = 6
    narrow = 7 + n * cell_w > width
    if narrow:  # many GPUs in a narrow terminal: bare indices, "✗" without the reason
        cell_w = 4
    shown = min(n, max(0, (width - 7) // cell_w + 1))  # the columns that fit
    out: list[Line] = []
    head: Line = [(" " * 7, None)]
    for d in info.devices[:shown]:
        head.append((pad(str(d.index) if narrow else f"GPU{d.index}", cell_w, "^"), S.label))
    head.append(("  R read · W write · A atomics · ✗ not possible", S.label))
    out.append(pad_line(head, width))
    for i, d in enumerate(info.devices):
        row: Line = [(pad(f" GPU{d.index}", 7), S.index)]
        for j in range(shown):
            text, style = ("X", S.dim) if i == j else cells[(i, j)]
            if narrow and text.startswith("✗"):
                text = "✗"
            row.append((pad(text, cell_w, "^"), style))
        out.append(pad_line(row, width))
    problems = p2p_problems(topology, n)
    if problems:
        reasons = sorted({r for _, _, r in problems})
        out.append(
            pad_line(
                [
                    (" ⚠ P2P not possible between ", S.warn),
                    (f"{len(problems)} pair{'s' if len(problems) != 1 else ''}", S.warn),
                    (f" ({', '.join(reasons)}): copies between them go through host memory", S.text),
                ],
                width,
            )
        )
    return out


# --------------------------------------------------------------------------------------
# per-GPU links with live counters
# --------------------------------------------------------------------------------------


def nvlink_summary(links: Sequence[NvLink], devices: Sequence[DeviceInfo]) -> Line:
    """One GPU's NVLinks in a few cells: "v4.0 18→NVSwitch", "v4.0 4→GPU1 4→GPU2 ⚠6 down"."""
    if not links:
        return [("no NVLink", S.dim)]
    groups = link_groups(links, devices)
    versions = {g.version for g in groups if g.active}
    out: Line = []
    if len(versions) == 1:
        out.append((f"v{NVLINK_VERSIONS.get(next(iter(versions)) or 0, '?')} ", S.label))
    for g in groups:
        if out and out[-1][0] != " " and not out[-1][0].endswith(" "):
            out.append((" ", None))
        if g.active:
            version = "" if len(versions) == 1 else f"v{NVLINK_VERSIONS.get(g.version or 0, '?')}:"
            out.append((f"{version}{len(g.links)}→", S.text))
            out.append((g.remote.replace("GPU ", "GPU"), S.ok))
        else:
            out.append((f"⚠{len(g.links)} down", S.warn))
    return out


def pcie_text(dev: DeviceInfo, g: GpuSample | None) -> tuple[str, Style]:
    """ "Gen5 x16 = max", "Gen4 x16 < Gen5 x16" (and how loudly)."""
    state = pcie_state(dev, g)
    if state.gen is None or state.width is None:
        return NA, S.dim
    now = f"Gen{state.gen} x{state.width}"
    if state.max_gen is None or state.max_width is None:
        return now, S.value
    if not state.below_max:
        return f"{now} = max", S.value
    text = f"{now} < Gen{state.max_gen} x{state.max_width}"
    return ("⚠ " + text, S.bad) if state.downtrained else (text, S.label)


LINK_COLUMNS = (
    f"{'':7}{'PCIe now vs max':21}{'replays':>7}{'PCIe RX':>10}{'PCIe TX':>10}  "
    f"{'NVLink RX':>10}{'NVLink TX':>10}  NVLinks"
)


def link_row(
    dev: DeviceInfo,
    g: GpuSample | None,
    links: Sequence[NvLink],
    devices: Sequence[DeviceInfo],
    width: int,
    selected: bool,
) -> list[Line]:
    """One GPU's PCIe and NVLink numbers; the NVLink summary goes on a second line when it
    does not fit beside them."""
    link, link_style = pcie_text(dev, g)
    replay = g.pcie_replay_counter if g else None
    row: Line = [
        ("▶" if selected else " ", S.index),
        (pad(f"GPU{dev.index}", 6), S.index_selected if selected else S.index),
        (pad(link, 21), link_style),
        (
            pad(NA if replay is None else str(replay), 7, ">"),
            S.warn if replay else S.dim if replay is None else S.value,
        ),
        (pad(fmt_rate(g.pcie_rx if g else None), 10, ">"), S.value),
        (pad(fmt_rate(g.pcie_tx if g else None), 10, ">"), S.value),
        ("  ", None),
    ]
    if links:
        row += [
            (pad(fmt_rate(g.nvlink_rx if g else None), 10, ">"), S.value),
            (pad(fmt_rate(g.nvlink_tx if g else None), 10, ">"), S.value),
            ("  ", None),
        ]
    else:
        row.append((" " * 22, None))
    summary = summary_of(links, devices)
    if line_len(row) + line_len(summary) <= width:
        return [pad_line(row + summary, width)]
    return [pad_line(row, width), pad_line([(" " * 7, None), *summary], width)]


def links_header(width: int) -> Line:
    return pad_line([(LINK_COLUMNS, S.label)], width)


def link_table(
    index: int, links: Sequence[NvLink], devices: Sequence[DeviceInfo], g: GpuSample | None, width: int
) -> list[Line]:
    """Every NVLink of one GPU with its state, version, far end and live throughput."""
    if not links:
        return [pad_line([(f" GPU{index} has no NVLink (or NVML does not report it).", S.dim)], width)]
    out = [
        pad_line(
            [(f" {'link':>5}  {'state':9}{'version':9}{'far end':22}{'RX':>11}{'TX':>11}", S.label)], width
        )
    ]
    for lk in links:
        rx = g.nvlink_link_rx[lk.link] if g and lk.link < len(g.nvlink_link_rx) else None
        tx = g.nvlink_link_tx[lk.link] if g and lk.link < len(g.nvlink_link_tx) else None
        state = "active" if lk.active else ("⚠ down" if lk.active is False else NA)
        version = NVLINK_VERSIONS.get(lk.version or 0, NA) if lk.version else NA
        far = remote_name(lk, devices) if lk.active else "—"
        out.append(
            pad_line(
                [
                    (f" {lk.link:>5}  ", S.value),
                    (pad(state, 9), S.ok if lk.active else S.warn),
                    (pad(version, 9), S.value),
                    (pad(far, 22), S.value),
                    (pad(fmt_rate(rx), 11, ">"), S.value if rx is not None else S.dim),
                    (pad(fmt_rate(tx), 11, ">"), S.value if tx is not None else S.dim),
                ],
                width,
            )
        )
    return out


def problem_lines(
    info: MachineInfo, topology: Topology | None, gpus: dict[int, GpuSample], width: int
) -> list[Line]:
    """What is wrong with the links, one line per kind of problem; a ✓ line when nothing is."""
    out: list[Line] = []
    slow: list[str] = []
    down: list[str] = []
    replays: list[str] = []
    for d in info.devices:
        g = gpus.get(d.index)
        state = pcie_state(d, g)
        if state.downtrained:
            slow.append(
                f"GPU{d.index} Gen{state.gen} x{state.width} (max Gen{state.max_gen} x{state.max_width})"
            )
        links = topology.nvlinks[d.index] if topology and d.index < len(topology.nvlinks) else ()
        inactive = inactive_of(links)
        if inactive:
            down.append(f"GPU{d.index} links {ranges(inactive)} ({len(inactive)} of {len(links)})")
        if g is not None and g.pcie_replay_counter:
            replays.append(f"GPU{d.index} {g.pcie_replay_counter}")
    if slow:
        out += wrapped(
            "PCIe link below its maximum under load: " + ", ".join(slow) + ". Check the slot, riser and "
            "the BIOS PCIe settings.",
            width,
            S.bad,
            lead=" ",
            mark="⚠ ",
        )
    if down:
        out += wrapped(
            "NVLinks inactive: " + "; ".join(down) + ". See nvidia-smi nvlink -s.",
            width,
            S.warn,
            lead=" ",
            mark="⚠ ",
        )
    if replays:
        out += wrapped(
            "PCIe replays (link-level retransmissions; a marginal link if they keep rising): "
            + ", ".join(replays),
            width,
            S.warn,
            lead=" ",
            mark="⚠ ",
        )
    problems = problems_of(topology, len(info.devices))
    if problems:
        out.append(
            pad_line(
                [(f" ⚠ P2P not possible between {len(problems)} GPU pair(s) (see above)", S.warn)], width
            )
        )
    if not out:
        out.append(
            pad_line(
                [(" ✓ links look right: no PCIe link below its maximum under load, no NVLink down", S.ok)],
                width,
            )
        )
    return out


def cuda_lines(info: MachineInfo, cuda: CudaVisibility, width: int) -> list[Line]:
    """What a CUDA program started from this shell would see."""
    env = "(unset: every GPU)" if cuda.visible_devices is None else repr(clean(cuda.visible_devices))
    out: list[Line] = [
        section(
            "CUDA view",
            width,
            "what a CUDA program started from this shell would see (a hides this)",
        ),
        pad_line(
            [
                ("  CUDA_VISIBLE_DEVICES=", S.label),
                (env, S.value),
                ("   CUDA_DEVICE_ORDER=", S.label),
                (cuda.order, S.value),
                ("" if cuda.order_exact else " (estimated)", S.warn),
            ],
            width,
        ),
    ]
    by_gpu = {d.index: d for d in info.devices}
    for cd in cuda.devices:
        dev = by_gpu.get(cd.gpu_index)
        name = short_name(clean(dev.name)) if dev else NA
        what: Line = [
            (f"  cuda:{cd.cuda_index}", S.ok),
            (" = ", S.label),
            (f"GPU {cd.gpu_index}", S.index),
            (f"  {name}  {clean(dev.bus_id or '') if dev else ''}", S.value),
        ]
        if cd.mig is not None:
            what.append((f"  MIG {cd.mig.profile or cd.mig.index} {clean(cd.mig.uuid or '')}", S.value))
        if cd.entry is not None:
            what.append((f"  (from {clean(cd.entry)!r})", S.dim))
        out.append(pad_line(what, width))
    hidden = [d.index for d in info.devices if all(cd.gpu_index != d.index for cd in cuda.devices)]
    if not cuda.devices:
        out.append(pad_line([("  no GPU: CUDA would report no device", S.bad)], width))
    if hidden and cuda.devices:
        out.append(
            pad_line([("  not visible: ", S.label), (", ".join(f"GPU {i}" for i in hidden), S.dim)], width)
        )
    if cuda.reason:
        out += wrapped(clean(cuda.reason), width, S.warn, mark="⚠ ")
    for note in cuda.notes:
        out += wrapped(note, width, S.text, mark="· ")
    out += wrapped(
        "nvidia-smi and gputui number GPUs in PCI bus order; CUDA numbers them fastest first unless "
        "CUDA_DEVICE_ORDER=PCI_BUS_ID, then renumbers them 0, 1, ... in the order CUDA_VISIBLE_DEVICES "
        "lists them.",
        width,
        S.label,
        mark="· ",
    )
    return out
