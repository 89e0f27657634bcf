"""The Topology tab: how the GPUs are connected (the nvidia-smi topo -m matrix with a legend in
plain words), CPU/NUMA affinity, peer-to-peer capability, every GPU's PCIe link and NVLinks
with live counters, what is wrong with them, and what CUDA would see from this shell.

The static part (the Topology) is read once, off the UI thread: from a recording's header,
or from NVML on a worker thread the first time the tab is shown.  Each tick refreshes only
the counters (a LineWidget sends only the cells that changed).
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import TYPE_CHECKING, Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.css.query import NoMatches

from gputui.telemetry.cuda_visible import CudaVisibility, cuda_visibility
from gputui.telemetry.model import GpuSample, MachineInfo, Snapshot, Topology
from gputui.ui.context import LOCKED, PaneContext
from gputui.ui.messages import OpenGpuDetail
from gputui.ui.panes import Pane
from gputui.ui.render import Line, S, pad_line
from gputui.ui.topology.lines import (
    classes_of,
    cuda_lines,
    legend_lines,
    link_row,
    link_table,
    links_header,
    matrix_lines,
    p2p_lines,
    problem_lines,
    section,
    warm,
)
from gputui.ui.widgets.lines import LineWidget

if TYPE_CHECKING:
    from gputui.telemetry.hub import Hub


#: From this many GPUs, the matrices are worked out on a worker thread (8 GPUs: 0.3 ms).
PREPARE_FROM_GPUS = 32


class TopologyStatic(LineWidget):
    """The parts that change only with the topology, the selection or the CUDA view: the
    matrix, the legend, P2P."""

    DEFAULT_CSS = """
    TopologyStatic { height: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.info: MachineInfo | None = None
        self.topology: Topology | None = None
        self.reading = False
        self.preparing = False
        """Set while a worker works out the matrix of many GPUs."""
        self.selected: int | None = 0
        self.cuda: CudaVisibility | None = None
        """Set while the CUDA view is on."""

    def build(self, width: int, height: int) -> list[Line]:
        info = self.info
        if info is None:
            return [[(" waiting for the GPUs…", S.dim)]]
        if not info.devices:
            return [[(" No GPUs: nothing is connected to anything. (The Overview tab says why.)", S.dim)]]
        out: list[Line] = []
        if self.cuda is not None:
            out += cuda_lines(info, self.cuda, width)
            out.append([])
        note = "as nvidia-smi topo -m"
        if self.reading:
            note = "reading the topology from NVML…"
        elif self.topology is None:
            note = "NVML gave no topology for these GPUs (N/A)"
        if self.preparing:
            note = f"working out the links of {len(info.devices)} GPUs…"
        out.append(section("GPU links", width, note))
        if self.preparing:
            return out
        out += matrix_lines(info, self.topology, width, self.selected, self.cuda)
        classes = {c for row in classes_of(info, self.topology) for c in row if c not in ("X", "N/A")}
        if classes:
            out += legend_lines(classes, width)
        out.append([])
        out.append(section("Peer-to-peer", width, "can one GPU read and write another's memory directly?"))
        out += p2p_lines(info, self.topology, width)
        return out


class TopologyLinks(LineWidget):
    """Per GPU: PCIe now/max, replays, PCIe and NVLink throughput, NVLink groups; problems;
    and every link of the selected GPU.  Updated every tick."""

    DEFAULT_CSS = """
    TopologyLinks { height: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.info: MachineInfo | None = None
        self.topology: Topology | None = None
        self.snapshot: Snapshot | None = None
        self.selected: int | None = 0
        self.preparing = False
        """Set while a worker works out what many GPUs' links need (drawn after)."""

    def build(self, width: int, height: int) -> list[Line]:
        info = self.info
        if info is None or not info.devices or self.preparing:
            return []
        gpus: dict[int, GpuSample] = {g.index: g for g in self.snapshot.gpus} if self.snapshot else {}
        topo = self.topology
        nvlinks = topo.nvlinks if topo is not None else ()
        out: list[Line] = [
            [],
            section("Links", width, "PCIe and NVLink of each GPU, live"),
            links_header(width),
        ]
        for d in info.devices:
            links = nvlinks[d.index] if d.index < len(nvlinks) else ()
            out += link_row(d, gpus.get(d.index), links, info.devices, width, d.index == self.selected)
        out += problem_lines(info, topo, gpus, width)
        sel = self.selected
        if sel is not None and 0 <= sel < len(info.devices):
            links = nvlinks[sel] if sel < len(nvlinks) else ()
            out.append([])
            out.append(
                section(f"NVLinks of GPU{sel}", width, "↑/↓ another GPU · enter: its details · a: CUDA view")
            )
            out += link_table(sel, links, info.devices, gpus.get(sel), width)
        return [pad_line(line, width) for line in out]


class TopologyView(VerticalScroll):
    """The tab's scrolling body; takes the keys (GPU selection, CUDA view, details)."""

    DEFAULT_CSS = """
    TopologyView { height: 1fr; scrollbar-size-vertical: 1; scrollbar-gutter: stable; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "move(-1)", "Select", show=False, tooltip="Select the GPU above"),
        Binding("down,j", "move(1)", "Select", show=False, tooltip="Select the GPU below"),
        Binding("enter", "open", "Details", tooltip="Open the selected GPU's detail view"),
        Binding(
            "a",
            "cuda_view",
            "CUDA view",
            tooltip="Show which GPUs a CUDA program started from this shell sees, as which cuda:N",
        ),
    ]

    def _pane(self) -> TopologyPane:
        return self.query_ancestor(TopologyPane)

    def action_move(self, delta: int) -> None:
        self._pane().action_move(delta)

    def action_open(self) -> None:
        self._pane().action_open()

    def action_cuda_view(self) -> None:
        self._pane().action_cuda_view()


class TopologyPane(Pane):
    """The Topology tab."""

    PANE_ID = "topology"
    TAB_TITLE = "Topology"
    TAB_KEY = "3"
    KEYS = TopologyView.BINDINGS

    def __init__(self, hub: Hub, context: PaneContext = LOCKED) -> None:
        super().__init__(hub, context)
        self.info: MachineInfo | None = None
        self.topology: Topology | None = None
        self._requested = False
        self._generation = 0
        self._prepared: tuple[MachineInfo, Topology | None] | None = None
        self._preparing: tuple[MachineInfo, Topology | None] | None = None
        self.selected = 0
        self.cuda_view = False
        self.environ = {
            k: os.environ[k] for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER") if k in os.environ
        }
        """The two variables as this shell has them (read once)."""

    def compose(self) -> ComposeResult:
        with TopologyView(id="topology-body"):
            yield TopologyStatic(id="topology-static")
            yield TopologyLinks(id="topology-links")

    def on_show(self) -> None:
        self.query_one(TopologyView).focus()
        self._ensure_topology()

    # ---- data ------------------------------------------------------------------------

    def show_info(self, info: MachineInfo) -> None:
        if info == self.info:
            return  # the app repeats it whenever the tab is shown: keep what was read
        self._generation += 1
        self.info = info
        self.topology = info.topology
        self._requested = info.topology is not None
        self.selected = 0
        if self.display and self.is_mounted:
            self._ensure_topology()
        self._refresh_static()

    def show_snapshot(self, info: MachineInfo | None, snapshot: Snapshot) -> None:
        self._ensure_topology()
        links = self.query_one(TopologyLinks)
        links.info = info
        links.topology = self.topology
        links.snapshot = snapshot
        links.selected = self.selected
        links.update_lines()

    def _ensure_topology(self) -> None:
        """Read the topology once, on a worker thread (NVML's P2P and NVLink queries take
        ~10 ms for two GPUs and grow with the square of the GPU count)."""
        if self._requested or self.info is None or not self.info.devices:
            return
        source = self.context.sources.source
        self._requested = True
        if source is None:
            return
        read = source.read_topology
        generation = self._generation
        static = self.query_one(TopologyStatic)
        static.reading = True
        static.update_lines()

        def work() -> None:
            try:
                topology = read()
            except Exception:  # an NVML failure reads as "no topology", not a crash
                topology = None
            self.app.call_from_thread(self._topology_ready, topology, generation)

        self.run_worker(work, thread=True, exclusive=True, group="topology", name="read-topology")

    def _topology_ready(self, topology: Topology | None, generation: int) -> None:
        if generation != self._generation:
            return  # a new source came meanwhile
        self.topology = topology
        self.query_one(TopologyStatic).reading = False
        self._refresh_static()
        app: Any = self.app
        if app.snapshot is not None and self.display:
            self.show_snapshot(app.info, app.snapshot)

    def _refresh_static(self) -> None:
        if not self.is_mounted:
            return
        if self._prepare():
            return
        static = self.query_one(TopologyStatic)
        static.info = self.info
        static.topology = self.topology
        static.selected = self.selected
        static.cuda = self.cuda_visibility() if self.cuda_view else None
        static.update_lines()
        links = self.query_one(TopologyLinks)
        links.info = self.info
        links.topology = self.topology
        links.selected = self.selected
        links.update_lines()

    def _prepare(self) -> bool:
        """With many GPUs, work out the link and P2P matrices (quadratic in the GPU count)
        on a worker thread the first time, so the UI keeps answering (256 GPUs froze it for
        over a minute); the tab says so meanwhile.  True while that is under way."""
        info, topology = self.info, self.topology
        if info is None or len(info.devices) <= PREPARE_FROM_GPUS or _same(self._prepared, info, topology):
            return False
        static = self.query_one(TopologyStatic)
        if static.preparing and _same(self._preparing, info, topology):
            return True
        self._preparing = (info, topology)
        static.info, static.topology, static.preparing = info, topology, True
        static.update_lines()
        self.query_one(TopologyLinks).preparing = True

        app = self.app

        def work() -> None:
            warm(info, topology)
            if not app.is_running:
                return  # the app has quit meanwhile: nothing to hand the result to
            with contextlib.suppress(RuntimeError):  # it quit just now
                app.call_from_thread(self._prepared_now, info, topology)

        # a plain daemon thread, not a Textual worker: quitting never waits for it
        threading.Thread(target=work, name="gputui-topology-prepare", daemon=True).start()
        return True

    def _prepared_now(self, info: MachineInfo, topology: Topology | None) -> None:
        if info is not self.info or topology is not self.topology:
            return  # another machine or topology came meanwhile: its own worker runs
        self._prepared = (info, topology)
        try:
            static, links = self.query_one(TopologyStatic), self.query_one(TopologyLinks)
        except NoMatches:
            return  # the tab is gone (the app is quitting): nothing left to draw
        static.preparing = links.preparing = False
        self._refresh_static()

    def cuda_visibility(self) -> CudaVisibility | None:
        info = self.info
        if info is None:
            return None
        app: Any = self.app
        snap = app.snapshot
        migs = {g.index: g.mig_devices for g in snap.gpus if g.mig_devices} if snap else {}
        return cuda_visibility(
            info.devices,
            self.environ.get("CUDA_VISIBLE_DEVICES"),
            self.environ.get("CUDA_DEVICE_ORDER"),
            migs,
        )

    # ---- keys (bound on TopologyView, which has the focus) ---------------------------

    def action_move(self, delta: int) -> None:
        n = len(self.info.devices) if self.info else 0
        if n:
            self.selected = max(0, min(n - 1, self.selected + delta))
            self._refresh_static()

    def action_open(self) -> None:
        self.post_message(OpenGpuDetail(self.selected))

    def action_cuda_view(self) -> None:
        self.cuda_view = not self.cuda_view
        self._refresh_static()
        if self.cuda_view:
            self.query_one(TopologyView).scroll_home(animate=False)


def _same(
    pair: tuple[MachineInfo, Topology | None] | None, info: MachineInfo, topology: Topology | None
) -> bool:
    return pair is not None and pair[0] is info and pair[1] is topology
