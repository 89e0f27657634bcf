"""The overview's widgets: the GPU board, the host panel and the no-GPU panel (the header and
the banner every screen shows are in `gputui.ui.widgets.header`)."""

from __future__ import annotations

import textwrap
from collections import defaultdict
from collections.abc import Callable
from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region
from textual.widget import Widget

from gputui.config import CardConfig
from gputui.telemetry.hints import with_spinning
from gputui.telemetry.hub import Hub
from gputui.telemetry.model import GpuProcess, GpuSample, MachineInfo, Snapshot
from gputui.ui.cards import boxed
from gputui.ui.messages import GpuSelected, OpenGpuDetail
from gputui.ui.overview.cadence import Held, chart_ticks
from gputui.ui.overview.lines import BoardLayout, board_lines, host_lines
from gputui.ui.render import NA, Line, S, clean
from gputui.ui.widgets.card import card_height
from gputui.ui.widgets.lines import LineWidget


class GpuBoard(LineWidget):
    """Every GPU: cards when they fit, otherwise one compact line each.  The arrow keys (or
    h/j/k/l) select a GPU, Enter opens its detail view."""

    DEFAULT_CSS = """
    GpuBoard { height: auto; }
    """

    can_focus = True

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left,h", "move(-1, 0)", "Select", show=False, tooltip="Select the GPU to the left"),
        Binding("right,l", "move(1, 0)", "Select", show=False, tooltip="Select the GPU to the right"),
        Binding("up,k", "move(0, -1)", "Select", show=False, tooltip="Select the GPU above"),
        Binding("down,j", "move(0, 1)", "Select", show=False, tooltip="Select the GPU below"),
        Binding("enter", "open", "Details", tooltip="Open the selected GPU's detail view"),
        Binding(
            "escape",
            "unselect",
            "All GPUs",
            key_display="esc",
            tooltip="Select no card: the process list below shows every GPU's processes again",
        ),
    ]

    def __init__(self, hub: Hub, *, id: str | None = None, card: CardConfig | None = None) -> None:
        super().__init__(id=id)
        self.hub = hub
        self.card = card or CardConfig()
        """What each card shows (the config file's [cards])."""
        self.info: MachineInfo | None = None
        self.snapshot: Snapshot | None = None
        self.mode = "auto"
        """Layout: auto (cards when they fit), cards, or compact."""
        self.plan: BoardLayout | None = None
        self.reserved_height = 0
        """Lines of the container taken by siblings (the host panel)."""
        self.budget: Callable[[], int] | None = None
        """The lines the board may plan for, when its pane decides (the Overview keeps
        rows for the process list); else its container's height less `reserved_height`."""
        self.selected: int | None = None
        """The highlighted GPU (none until an arrow key is pressed)."""
        self.held = Held()
        """The power and clock readings last shown, moved past their jitter only: they
        follow every tick the hub publishes (on the publishing thread)."""
        hub.subscribe(lambda snap: self.held.observe(hub.info, snap))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Selecting and opening GPUs are offered only while there are GPUs (not on the
        no-GPU screen)."""
        if action in ("move", "open"):
            return bool(self.info and self.info.devices)
        if action == "unselect":  # offered (in the footer) only while a card narrows the list
            return self.selected is not None
        return True

    def action_unselect(self) -> None:
        self._select(None)

    def action_move(self, dx: int, dy: int) -> None:
        n = len(self.info.devices) if self.info else 0
        if not n:
            return
        if self.selected is None:
            self.selected = 0
        else:
            plan = self.plan
            cols = plan.cols if plan is not None and not plan.compact else 1
            step = dx + dy * cols if cols > 1 else dx + dy
            target = self.selected + step
            if 0 <= target < n:
                self.selected = target
        self._select(self.selected)

    def _select(self, index: int | None) -> None:
        self.selected = index
        self.update_lines()
        self._scroll_to_selected()
        self.refresh_bindings()  # esc (every GPU) is offered while a card is selected
        self.post_message(GpuSelected(index))

    def gpu_at(self, x: int, y: int) -> int | None:
        """The GPU drawn at (x, y) of the board, if any."""
        plan = self.plan
        n = len(self.info.devices) if self.info else 0
        if plan is None or not n or y < 0 or x < 0:
            return None
        if plan.compact:
            per = 2 if plan.lines >= 2 * n else 1
            index = y // per
        else:
            height = card_height(plan.spark_rows, len(self.card.sparklines))
            col = min(plan.cols - 1, x // max(1, self.size.width // plan.cols))
            index = (y // height) * plan.cols + col
        return index if 0 <= index < n else None

    def on_click(self, event: events.Click) -> None:
        """A click selects the card under it; a double click opens its detail view."""
        index = self.gpu_at(event.x, event.y)
        if index is None:
            return
        if index != self.selected:
            self._select(index)
        if event.chain >= 2:
            self.post_message(OpenGpuDetail(index))

    def action_open(self) -> None:
        if not self.info or not self.info.devices:
            return
        if self.selected is None:
            self._select(0)
        assert self.selected is not None
        self.post_message(OpenGpuDetail(self.selected))

    def _scroll_to_selected(self) -> None:
        plan = self.plan
        parent = self.parent
        if plan is None or self.selected is None or not isinstance(parent, Widget):
            return
        if plan.compact:
            per = 2 if plan.lines >= 2 * len(self.info.devices if self.info else ()) else 1
            top, height = self.selected * per, per
        else:
            height = card_height(plan.spark_rows, len(self.card.sparklines))
            top = (self.selected // plan.cols) * height
        region = Region(0, self.virtual_region.y + top, self.size.width, height)
        parent.scroll_to_region(region, animate=False, immediate=True)

    def available_height(self) -> int:
        if self.budget is not None:
            return max(0, self.budget())
        parent = self.parent
        height = parent.size.height if isinstance(parent, Widget) else self.size.height
        return max(0, height - self.reserved_height)

    def show(self, info: MachineInfo | None, snapshot: Snapshot | None) -> None:
        if (self.info is None or not self.info.devices) != (info is None or not info.devices):
            self.refresh_bindings()  # GPUs came or went: the footer's keys follow
        self.info = info
        self.snapshot = snapshot if snapshot is None else self.held.shown(info, snapshot)
        """The tick shown, its power and clock readings as held (`cadence`)."""
        self.update_lines()

    def build(self, width: int, height: int) -> list[Line]:
        info = self.info
        if info is None or not info.devices:
            self.plan = None
            return []
        snap = self.snapshot
        gpus: dict[int, GpuSample] = {g.index: g for g in snap.gpus} if snap else {}
        procs: dict[int, list[GpuProcess]] = defaultdict(list)
        if snap:
            for p in snap.processes:
                procs[p.gpu_index].append(p)
        history = self.hub.history
        alerts = self.hub.by_gpu_alerts()
        hints = with_spinning(self.hub.hints_by_gpu(), self.hub.health_report())
        with self.hub.lock:
            per = chart_ticks(history)  # (the charts move once a column of data is complete)
            layout, lines = board_lines(
                info,
                gpus,
                procs,
                lambda gpu, metric, n: history.columns(gpu, metric, n, per),
                width,
                height,
                self.mode,
                self.selected,
                alerts=alerts,
                card=self.card,
                hints=hints,
            )
        self.plan = layout
        return lines


class HostPanel(LineWidget):
    DEFAULT_CSS = """
    HostPanel { height: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.snapshot: Snapshot | None = None
        self.hostname = ""
        self.compact = False

    def show(self, hostname: str, snapshot: Snapshot | None) -> None:
        self.hostname = hostname
        self.snapshot = snapshot
        self.update_lines()

    def build(self, width: int, height: int) -> list[Line]:
        host = self.snapshot.host if self.snapshot else None
        return host_lines(host, self.hostname, width, self.compact)


class NoGpuPanel(LineWidget):
    """Why there are no GPUs to show: the exact NVML error, what it means, what to try."""

    DEFAULT_CSS = """
    NoGpuPanel { height: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.info: MachineInfo | None = None
        self.demo_available = True

    def build(self, width: int, height: int) -> list[Line]:
        info = self.info
        if info is None:
            return []
        inner = max(10, width - 4)
        problem = info.system.nvml_problem
        body: list[Line] = []

        def para(text: str, style: object = S.text, indent: str = "") -> None:
            for k, chunk in enumerate(textwrap.wrap(text, inner - len(indent)) or [""]):
                lead = indent if k == 0 else " " * len(indent)
                body.append([(lead + chunk, style)])  # type: ignore[list-item]

        if problem is not None:
            title: Line = [("No GPU telemetry: NVML is unavailable", S.bad)]
            code = f" (NVML error {problem.code})" if problem.code is not None else ""
            para(f"NVML said: {clean(problem.error)}{code}", S.warn)
            body.append([])
            para(problem.meaning)
            advice = problem.advice
        else:
            title = [("No GPUs found", S.bad)]
            sys_ = info.system
            para(
                f"NVML works (driver {clean(sys_.driver_version or NA)}, "
                f"CUDA {clean(sys_.cuda_driver_version or NA)}) "
                "but reports 0 GPUs.",
                S.warn,
            )
            body.append([])
            para("The driver is loaded but no GPU is visible to it or to this container.")
            advice = (
                "Run `nvidia-smi -L`: if it lists GPUs outside this container, start the "
                "container with `--gpus all` (or set NVIDIA_VISIBLE_DEVICES).",
                "On bare metal, check `lspci | grep -i nvidia` and `dmesg` for GPUs that "
                "failed to initialise.",
                "No GPU here? Press d to open the recorded demo session.",
            )
        body.append([])
        body.append([("What to try:", S.label)])
        for item in advice:
            if "Press d" in item:
                continue  # said once, below, only when the demo is there to open
            para(item, S.text, "  • ")
        if self.demo_available:
            body.append([])
            text = "Press d to open the bundled recording of real GPUs (clearly marked as recorded)."
            for k, chunk in enumerate(textwrap.wrap(text, inner)):  # at words, as `para`
                if k == 0:  # "Press d ...": the key stands out
                    body.append([("Press ", S.label), ("d", S.warn), (chunk[len("Press d") :], S.label)])
                else:
                    body.append([(chunk, S.label)])
        return boxed(title, [], body, width)
