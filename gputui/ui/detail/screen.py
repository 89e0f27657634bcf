"""The GPU detail view: one GPU's every fact, health, clock-event reasons, MIG devices,
processes, and history charts.  Opened with Enter on a card (overview) or a row (topology).

The facts follow every tick (only changed cells are sent); the charts are rebuilt at most
every CHART_PERIOD seconds and only while this screen is open.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar, cast

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen

from gputui.telemetry.hints import Hint, with_spinning
from gputui.telemetry.model import GpuProcess, GpuSample, MachineInfo, Snapshot
from gputui.ui.detail.charts import chart_lines, chart_metrics
from gputui.ui.detail.lines import (
    activity_lines,
    clock_reason_lines,
    driver_facts,
    fact,
    grid,
    health,
    identity_facts,
    link_facts,
    memory_facts,
    mig_lines,
    power_facts,
    process_lines,
    title_line,
)
from gputui.ui.overview.widgets import Banner, HeaderBar
from gputui.ui.render import Line, S
from gputui.ui.widgets.footer import KeyFooter
from gputui.ui.widgets.lines import LineWidget

if TYPE_CHECKING:
    from gputui.telemetry.hub import Hub
    from gputui.ui.app import GpuTuiApp

CHART_PERIOD = 2.0
"""Seconds between chart rebuilds while the view is open (a rebuild moves every point)."""


class DetailFacts(LineWidget):
    """Everything about one GPU except the charts."""

    DEFAULT_CSS = """
    DetailFacts { height: auto; }
    """

    def __init__(self, index: int, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.index = index
        self.info: MachineInfo | None = None
        self.snapshot: Snapshot | None = None
        self.process_rows = 0
        """The most process rows shown for this GPU so far: the box never shrinks."""
        self.hints: Mapping[int, tuple[Hint, ...]] = {}
        """Each GPU's efficiency hints at the latest tick (the Hub's)."""
        self.live = True

    def build(self, width: int, height: int) -> list[Line]:
        info = self.info
        if info is None or not 0 <= self.index < len(info.devices):
            return [[("No such GPU.", S.dim)]]
        dev = info.devices[self.index]
        g: GpuSample | None = None
        procs: list[GpuProcess] = []
        if self.snapshot is not None:
            g = next((s for s in self.snapshot.gpus if s.index == self.index), None)
            procs = [p for p in self.snapshot.processes if p.gpu_index == self.index]
        out: list[Line] = [title_line(dev, width)]
        if g is not None and g.lost:
            out.append([(" GPU LOST: NVML reports it fell off the bus; see dmesg (Xid 79 or 48).", S.bad)])
        h = health(g)
        boxes = [
            ("Identity", identity_facts(dev), None),
            ("Driver & modes", driver_facts(info, dev), None),
            ("Memory", memory_facts(dev, g), None),
            ("Power & thermal", power_facts(dev, g), None),
            ("PCIe & NUMA", link_facts(dev, g), None),
            ("Memory health", [fact("Verdict", h.verdict, h.style), *h.facts], None),
        ]
        out += grid(boxes, width)
        out += activity_lines(g, self.hints.get(self.index, ()), width, self.live)
        out += clock_reason_lines(g.clock_event_reasons if g else None, width)
        if dev.mig_mode or (g is not None and g.mig_devices):
            out += mig_lines(dev, g, procs, width)
        rows = process_lines(procs, width, min_rows=self.process_rows)
        self.process_rows = max(self.process_rows, len(rows) - 3)  # minus the borders and header
        out += rows
        return out


class DetailCharts(LineWidget):
    """History charts of one GPU (braille, with axes and time labels)."""

    DEFAULT_CSS = """
    DetailCharts { height: auto; }
    """

    def __init__(self, hub: Hub, index: int, *, live: bool, id: str | None = None) -> None:
        super().__init__(id=id)
        self.hub = hub
        self.index = index
        self.live = live
        self.info: MachineInfo | None = None
        self.built_at = 0.0
        """time.monotonic() of the last rebuild."""
        self.builds = 0

    def build(self, width: int, height: int) -> list[Line]:
        info = self.info
        if info is None or not 0 <= self.index < len(info.devices):
            return []
        dev = info.devices[self.index]
        history = self.hub.history
        with self.hub.lock:
            cache: dict[tuple[int, str], list[float]] = defaultdict(list)
            for metric in chart_metrics():
                cache[(self.index, metric)] = history.series(self.index, metric)
            times = history.timestamps.last()
        self.built_at = time.monotonic()
        self.builds += 1
        return chart_lines(dev, lambda gpu, metric: cache[(gpu, metric)], times, width, self.live)


class GpuDetailScreen(Screen[None]):
    """One GPU in full."""

    DEFAULT_CSS = """
    GpuDetailScreen #detail-body { height: 1fr; scrollbar-size-vertical: 1; scrollbar-gutter: stable; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", tooltip="Close the GPU detail view"),
        Binding("left,h", "other(-1)", "Prev GPU", key_display="←", tooltip="Show the previous GPU"),
        Binding("right,l", "other(1)", "Next GPU", key_display="→", tooltip="Show the next GPU"),
    ]

    def __init__(self, hub: Hub, index: int) -> None:
        super().__init__()
        self.hub = hub
        self.index = index

    @property
    def _app(self) -> GpuTuiApp:
        return cast("GpuTuiApp", self.app)  # only the app pushes this screen

    def compose(self) -> ComposeResult:
        # everything is given its data here, so the first paint already has it (each later
        # change of a widget's height repaints the whole screen)
        app = self._app
        header = HeaderBar(id="detail-header")
        self._copy_header(header)
        yield header
        yield Banner(app.query_one(Banner).text, id="detail-banner")
        with VerticalScroll(id="detail-body"):
            facts = DetailFacts(self.index, id="detail-facts")
            facts.info, facts.snapshot = app.info, app.snapshot
            facts.hints, facts.live = (
                with_spinning(self.hub.hints_by_gpu(), self.hub.health_report()),
                bool(app.source.live),
            )
            yield facts
            charts = DetailCharts(self.hub, self.index, live=bool(app.source.live), id="detail-charts")
            charts.info = app.info
            yield charts
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#detail-body").can_focus = False

    def _copy_header(self, header: HeaderBar) -> None:
        main = self._app.query_one(HeaderBar)
        for name in ("info", "live", "label", "interval", "paused", "position", "timestamp", "alerts"):
            setattr(header, name, getattr(main, name))

    def _sync_header(self) -> None:
        header = self.query_one("#detail-header", HeaderBar)
        self._copy_header(header)
        header.update_lines()

    def _refresh(self, *, charts: bool) -> None:
        app = self._app
        facts = self.query_one(DetailFacts)
        if facts.index != self.index:
            facts.process_rows = 0
        facts.index = self.index
        facts.info = app.info
        facts.snapshot = app.snapshot
        facts.hints = with_spinning(self.hub.hints_by_gpu(), self.hub.health_report())
        self._sync_header()
        facts.update_lines()
        chart = self.query_one(DetailCharts)
        chart.index = self.index
        chart.info = app.info
        if charts or time.monotonic() - chart.built_at >= CHART_PERIOD:
            chart.update_lines()

    def show_snapshot(self, info: MachineInfo | None, snapshot: Snapshot) -> None:
        """A tick while this view is open (the app calls it instead of the hidden pane's)."""
        with self.app.batch_update():
            self._refresh(charts=False)

    def action_other(self, delta: int) -> None:
        info = self._app.info
        if info is None or not info.devices:
            return
        self.index = (self.index + delta) % len(info.devices)
        self.query_one("#detail-body", VerticalScroll).scroll_home(animate=False)
        self._refresh(charts=True)

    def action_close(self) -> None:
        app = self._app
        app.pop_screen()
        app.query_one(HeaderBar).update_lines()  # not updated while this view was open
        if app.snapshot is not None:
            app.current_pane().show_snapshot(app.info, app.snapshot)

    def on_key(self, event: events.Key) -> None:
        # a tab key closes this view and shows that tab
        for pane in self._app.PANES:
            if pane.TAB_KEY and event.key == pane.TAB_KEY:
                event.stop()
                self.action_close()
                self._app.call_later(self._app.action_show_tab, pane.PANE_ID)
                return


def open_gpu_detail(app: GpuTuiApp, index: int) -> None:
    """Push the detail view of GPU `index` (no-op without such a GPU)."""
    info = app.info
    if info is None or not 0 <= index < len(info.devices):
        return
    app.push_screen(GpuDetailScreen(app.hub, index))
