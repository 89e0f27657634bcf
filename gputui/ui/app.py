"""The gputui application: the tabs, each poller message routed to the widgets (the feed of
ticks: gputui.ui.feed), the global keys (leaving: gputui.ui.leaving)."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.filter import LineFilter, Monochrome, NoColor
from textual.widgets import ContentSwitcher

from gputui.config import Config
from gputui.state import LAYOUTS, Filters, SavedState, portable
from gputui.telemetry.hub import Hub
from gputui.telemetry.source import Source
from gputui.ui import theme
from gputui.ui.context import DEMO_RECORDING, PaneContext, SourceState
from gputui.ui.leaving import Leaving
from gputui.ui.messages import ChartsChosen, InfoReady, OpenGpuDetail, PollerFailed, SnapshotReady
from gputui.ui.overview.pane import OverviewPane
from gputui.ui.overview.widgets import GpuBoard
from gputui.ui.panes import Pane, PanePlaceholder, PaneSpec, TabBar, tab_bindings
from gputui.ui.render import clean
from gputui.ui.widgets.footer import KeyFooter
from gputui.ui.widgets.header import Banner, HeaderBar

#: The refresh intervals + and - step through (seconds).
INTERVALS = (0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0)


class GpuTuiApp(Leaving):
    """gputui's terminal UI.  Give it a Source: live NVML, or a recording."""

    TITLE = "gputui"
    CSS_PATH = "gputui.tcss"
    ENABLE_COMMAND_PALETTE = False

    PANES: ClassVar[list[type[Pane] | PaneSpec]] = [
        OverviewPane,
        PaneSpec("processes", "Processes", "2", "gputui.ui.processes.pane", "ProcessesPane"),
        PaneSpec("topology", "Topology", "3", "gputui.ui.topology.pane", "TopologyPane"),
        PaneSpec("diagnostics", "Diagnostics", "4", "gputui.ui.diagnostics.pane", "DiagnosticsPane"),
    ]
    """The tabs, in order (each issue's screen adds its pane here)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", tooltip="Quit gputui"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
        Binding("question_mark,f1", "help", "Help", key_display="?", tooltip="List every key"),
        Binding(
            "plus,equals_sign",
            "faster",
            "Faster",
            key_display="+",
            tooltip="Refresh more often (shorter interval)",
        ),
        Binding("minus", "slower", "Slower", key_display="-", tooltip="Refresh less often (longer interval)"),
        Binding(
            "space,p",
            "pause",
            "Pause",
            key_display="space",
            tooltip="Pause or resume refreshing (the screen freezes)",
        ),
        Binding("full_stop", "step", "Step", key_display=".", tooltip="While paused: advance one tick"),
        Binding(
            "comma",
            "step_back",
            "Back",
            key_display=",",
            tooltip="While paused in a replay: go back one tick",
        ),
        Binding("c", "cycle_layout", "Layout", tooltip="Cards when they fit / always cards / compact"),
        Binding("d", "demo", "Demo", tooltip="When no GPU is found: open the bundled recording of real GPUs"),
        Binding(
            "g",
            "diagnose",
            "Diagnose",
            tooltip="Diagnose CUDA/cuDNN/NCCL: the selected process's Python",
        ),
        *tab_bindings(PANES),
    ]

    def __init__(
        self,
        source: Source,
        interval: float = 1.0,
        *,
        demo: bool = False,
        watch_terminal: bool = True,
        readonly: bool = False,
        default_sort: str | None = None,
        config: Config | None = None,
        config_errors: Sequence[str] = (),
        saved: SavedState | None = None,
        state_path: Path | None = None,
        state_warning: str | None = None,
        serve_session: bool = False,
        diag_python: str | None = None,
        judged_with: str | None = None,
        freeze_start_up: bool = False,
    ) -> None:
        """`judged_with`: the line saying which of a recording's own settings the replay is
        judged with (`recording_settings.applied`), shown in the banner.  `freeze_start_up`:
        the caller froze what start-up made (`gc.freeze`): what the source's `open` makes
        after the first frame is frozen too (Feed.freeze_start_up)."""
        super().__init__()
        self.judged_with = judged_with
        self.freeze_start_up = freeze_start_up
        config = config or Config()
        if saved is not None and saved.sparklines is not None:  # the charts last ticked (C)
            config = replace(config, cards=replace(config.cards, sparklines=saved.sparklines))
        self.config = config
        """Settings from the config file (or the defaults), with the cards' charts as the
        last run left them."""
        self.config_errors = tuple(config_errors)
        """Problems with the config file, shown once the screen is up."""
        self.context = PaneContext(
            readonly=readonly,
            config=self.config,
            default_sort=(saved.sort if saved and saved.sort else None)
            or default_sort
            or self.config.ui.default_sort,
            filters=portable(saved.filters) if saved else Filters(),
            sources=SourceState(source, demo=demo),
            serve_session=serve_session,
            diag_python=diag_python,
        )
        """What the panes and screens read of the app: `readonly` (every kill action of the
        Processes tab hidden and disabled: `--readonly`, or `readonly = true` in the config
        file) is fixed here."""
        self.register_theme(theme.textual_theme(self.config.ui))
        self.theme = theme.PREFIX + self.config.ui.theme
        self._theme_filters: tuple[str, list[LineFilter]] = ("", [])
        self._no_color = NoColor()
        self.interval = interval
        # the engines run on the poller's thread, in Hub.publish: never on the UI's; they are
        # made there too, once the first frame is up (`_judge_first`)
        self.hub = Hub(make_engines=self._make_engines)
        self.poller = None
        self.generation = 0
        self.info = None
        self.snapshot = None
        self.saved = saved or SavedState()
        """What the last run left (gputui.state), restored here and updated at exit."""
        self.state_path = state_path
        """Where the settings are saved at exit; None: not remembered (--no-remember)."""
        self.state_warning = state_warning
        self.layout_mode = self.saved.layout
        self.error: BaseException | None = None
        self._watch_terminal = watch_terminal
        self._terminal_watch = None

    def get_line_filters(self) -> Sequence[LineFilter]:
        """Textual's filters, then the theme's.  NO_COLOR (no-color.org) means no colour at
        all: Textual's default for it is greyscale (still colour escapes), so its Monochrome
        becomes NoColor (bold and reverse stay)."""
        filters = [self._no_color if isinstance(f, Monochrome) else f for f in super().get_line_filters()]
        name, themed = self._theme_filters
        if name != self.theme:  # the theme's colours, from the registered Textual theme
            themed = theme.filters_for(self.current_theme, mono=self.theme == theme.PREFIX + "mono")
            self._theme_filters = (self.theme, themed)
        return [*filters, *themed]

    # ---- layout ----------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header")
        yield Banner(self._banner_text(), id="banner")
        yield TabBar([(p.PANE_ID, p.TAB_TITLE, p.TAB_KEY) for p in self.PANES], id="tabs")
        with ContentSwitcher(initial=self.PANES[0].PANE_ID, id="panes"):
            for pane in self.PANES:
                if isinstance(pane, type):
                    yield pane(self.hub, self.context)
                else:
                    yield PanePlaceholder(self.hub, pane, self.context)
        yield KeyFooter()

    @property
    def readonly(self) -> bool:
        return self.context.readonly

    @property
    def default_sort(self) -> str | None:
        return self.context.default_sort

    @property
    def demo(self) -> bool:
        return self.context.sources.demo

    async def load_pane(self, pane_id: str) -> Pane:
        """The tab's pane, importing and mounting it first if it has not been opened yet."""
        pane = self.query_one(f"#{pane_id}", Pane)
        if not isinstance(pane, PanePlaceholder):
            return pane
        real = pane.spec.load()(self.hub, self.context)
        switcher = self.query_one(ContentSwitcher)
        await pane.remove()
        await switcher.mount(real)
        if self.info is not None:
            real.show_info(self.info)
        return real

    def _preload_panes(self) -> None:
        """Import the other tabs' modules in the background once the first frame is up, so
        opening a tab later is instant."""

        def work() -> None:
            for pane in self.PANES:
                if isinstance(pane, PaneSpec):
                    importlib.import_module(pane.module)

        self.run_worker(work, thread=True, exclusive=False, group="preload")

    async def action_show_tab(self, pane_id: str) -> None:
        await self.load_pane(pane_id)
        switcher = self.query_one(ContentSwitcher)
        if switcher.current == pane_id:
            return
        switcher.current = pane_id
        tabs = self.query_one(TabBar)
        tabs.current = pane_id
        tabs.update_lines()
        pane = self.current_pane()
        if self.info is not None:
            pane.show_info(self.info)
        if self.snapshot is not None:
            pane.show_snapshot(self.info, self.snapshot)
        self.refresh_bindings()

    def _banner_text(self) -> str:
        """The banner's parts, "|"-separated, each prefixed with its priority (0 = kept last)."""
        if self.source.live:
            return ""
        # the file name is untrusted, and "|" would split the banner's parts
        what = "bundled demo" if self.demo else clean(self.source.label).replace("|", "¦")
        parts = ["0RECORDED SESSION", f"3{what}"]
        replay = self.source.seekable
        if replay is not None and replay.header.derived:
            parts.append("1DERIVED from real recordings")
        if self.judged_with:  # a recording's own settings: always said (as long as it fits)
            parts.append("1" + clean(self.judged_with).replace("|", "¦"))
        parts += ["2not live data from this machine", "4space pause  . step  , back"]
        if self.demo:
            parts.append("5a stuck job: gputui --demo-job")
        return "|".join(parts)

    def on_mount(self) -> None:
        header = self.query_one(HeaderBar)
        header.live = self.source.live
        header.label = self.source.label
        self._start_poller()
        header.interval = self.interval
        self.query_one(GpuBoard).mode = self.layout_mode
        if self.state_warning:
            self.notify(
                self.state_warning,
                title="Saved settings ignored",
                severity="warning",
                timeout=10,
                markup=False,
            )
        if self._watch_terminal and not self.is_headless:
            self._start_terminal_watch()
            self.set_timer(1.0, self._preload_panes)
        if self.config_errors:
            self.notify(
                "\n".join(self.config_errors),
                title="Config file ignored: running with the defaults",
                severity="error",
                timeout=30,
                markup=False,
            )

    # ---- data ------------------------------------------------------------------------

    def _current(self, generation: int) -> bool:
        """A message from the poller still applies: from the current source, and the app
        still running (its widgets are removed while it shuts down, before the poller's
        last messages are drained)."""
        return generation == self.generation and self.is_running

    def on_info_ready(self, message: InfoReady) -> None:
        if self._current(message.generation):
            self._show_info(message.info)

    def on_snapshot_ready(self, message: SnapshotReady) -> None:
        if self._current(message.generation):
            self._show_snapshot(message.snapshot, message.position)

    def on_poller_failed(self, message: PollerFailed) -> None:
        if not self._current(message.generation):
            return
        self.error = message.error
        self.notify(  # the message quotes recording fields and file names: never markup
            clean(f"{type(message.error).__name__}: {message.error}"),
            title="Telemetry error",
            severity="error",
            timeout=10,
            markup=False,
        )

    # ---- actions ---------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        paused = self.poller is not None and self.poller.paused
        if action == "step":
            return paused
        if action == "step_back":
            return paused and not self.source.live
        if action == "demo":
            no_gpus = self.info is not None and not self.info.devices
            return no_gpus and self.context.sources.demo_available
        if action == "cycle_layout":
            return self.query_one(ContentSwitcher).current == OverviewPane.PANE_ID
        return True

    def _set_interval(self, seconds: float) -> None:
        if self.poller is None:
            return
        self.interval = self.poller.set_interval(seconds)
        header = self.query_one(HeaderBar)
        header.interval = self.interval
        header.update_lines()

    def action_faster(self) -> None:
        shorter = [i for i in INTERVALS if i < self.interval - 1e-9]
        if shorter:
            self._set_interval(shorter[-1])
        else:
            self.notify(f"Already at the shortest interval ({self.interval:g} s)", timeout=2)

    def action_slower(self) -> None:
        longer = [i for i in INTERVALS if i > self.interval + 1e-9]
        if longer:
            self._set_interval(longer[0])
        else:
            self.notify(f"Already at the longest interval ({self.interval:g} s)", timeout=2)

    def action_pause(self) -> None:
        if self.poller is None:
            return
        if self.poller.paused:
            self.poller.resume()
        else:
            self.poller.pause()
        header = self.query_one(HeaderBar)
        header.paused = self.poller.paused
        header.update_lines()
        self.refresh_bindings()

    def action_step(self) -> None:
        if self.poller is not None and self.poller.paused:
            self.poller.step(1)

    def action_step_back(self) -> None:
        if self.poller is not None and self.poller.paused and not self.source.live:
            self.poller.step(-1)

    def action_cycle_layout(self) -> None:
        board = self.query_one(GpuBoard)
        board.mode = LAYOUTS[(LAYOUTS.index(board.mode) + 1) % len(LAYOUTS)]
        self.layout_mode = board.mode
        board.relayout()
        self.notify(f"Layout: {board.mode}", timeout=1.5)

    def action_demo(self) -> None:
        if not DEMO_RECORDING.exists():
            self.notify("The bundled recording is missing from this installation.", severity="error")
            return
        from gputui.telemetry.recording import RecordingError, ReplaySource

        try:
            source = ReplaySource(DEMO_RECORDING)
        except RecordingError as exc:
            self.notify(clean(str(exc)), title="Cannot open the demo", severity="error", markup=False)
            return
        self.switch_source(source, demo=True)

    def switch_source(self, source: Source, *, demo: bool = False) -> None:
        """Replace the data source (e.g. open the demo from the no-GPU panel)."""
        if self.poller is not None:
            self.poller.stop(timeout=0)  # its stale messages are ignored by generation
        self.context.sources.source = source
        self.context.sources.demo = demo
        self.info = None
        self.snapshot = None
        if source.seekable is not None and source.seekable.interval:
            self.interval = source.seekable.interval
        header = self.query_one(HeaderBar)
        header.live = source.live
        header.label = source.label
        header.paused = False
        banner = self.query_one(Banner)
        banner.text = self._banner_text()
        banner.relayout()
        self._start_poller()
        header.interval = self.interval
        self.refresh_bindings()

    async def on_tab_bar_clicked(self, message: TabBar.Clicked) -> None:
        await self.action_show_tab(message.pane_id)

    def on_charts_chosen(self, message: ChartsChosen) -> None:
        self.saved = replace(self.saved, sparklines=message.sparklines)  # saved at exit

    def on_open_gpu_detail(self, message: OpenGpuDetail) -> None:
        """Push the detail view of GPU `message.index` (no-op without such a GPU)."""
        info = self.info
        if info is None or not 0 <= message.index < len(info.devices):
            return
        from gputui.ui.detail.screen import GpuDetailScreen

        screen = GpuDetailScreen(
            self.hub,
            message.index,
            context=self.context,
            info=info,
            snapshot=self.snapshot,
            header=self.query_one(HeaderBar),
            banner=self.query_one(Banner).text,
            tabs={p.TAB_KEY: p.PANE_ID for p in self.PANES if p.TAB_KEY},
        )
        self.push_screen(screen, self._detail_closed)

    def _detail_closed(self, pane_id: str | None) -> None:
        """The detail view is gone: the main screen catches up (not updated while it was
        open), and shows the tab whose key closed the view."""
        self.query_one(HeaderBar).update_lines()
        if self.snapshot is not None:
            self.current_pane().show_snapshot(self.info, self.snapshot)
        if pane_id is not None:
            self.call_later(self.action_show_tab, pane_id)

    async def action_diagnose(self) -> None:
        from gputui.ui.diagnostics.choose import selected_row
        from gputui.ui.diagnostics.pane import DiagnosticsPane

        row = selected_row(self.focused)  # (before the tab takes the focus)
        again = self.query_one(ContentSwitcher).current == "diagnostics"
        pane = await self.load_pane("diagnostics")
        await self.action_show_tab("diagnostics")
        if isinstance(pane, DiagnosticsPane):
            pane.diagnose(row, again)

    def action_help(self) -> None:
        from gputui.ui.help import HelpScreen

        self.push_screen(HelpScreen(self.PANES, self.query_one(ContentSwitcher).current))
