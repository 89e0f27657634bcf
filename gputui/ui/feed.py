"""The monitor's feed of ticks: the poller started for the current source (with the engines
that judge its ticks, made off the UI thread), and each tick shown: on the header, and on the
current tab or the full screen on top.  The app's base (gputui.ui.app); the poller's messages
reach it through the app's handlers."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

from textual.widgets import ContentSwitcher

from gputui.config import Config
from gputui.telemetry.hub import Hub
from gputui.telemetry.model import MachineInfo, Snapshot
from gputui.telemetry.poller import Poller
from gputui.telemetry.source import Source, take_ready
from gputui.ui.base_app import BaseApp
from gputui.ui.context import PaneContext
from gputui.ui.messages import InfoReady, PollerFailed, SnapshotReady
from gputui.ui.panes import Pane
from gputui.ui.widgets.header import HeaderBar

if TYPE_CHECKING:
    from gputui.stacks.sampler import StackSampler
    from gputui.telemetry.replay_judge import Engines

SAY_JUDGING_FROM = 2000
"""`--start N` from this tick on says that the ticks before are judged first (a 2-GPU
recording: about 0.35 ms a tick, bench/bench_seek.py)."""


class Feed(BaseApp[int]):
    """Where the app's ticks come from and where they are shown (its state is set up by the
    app's `__init__`)."""

    config: Config
    context: PaneContext
    hub: Hub
    poller: Poller | None
    generation: int
    """Which start of the poller a message comes from (a stale one is dropped)."""
    interval: float
    info: MachineInfo | None
    snapshot: Snapshot | None
    freeze_start_up = False
    """What start-up made was frozen (`gc.freeze`, gputui's command line): what the source's
    `open` makes on the poller's thread after the first frame (a live source read ahead in a
    child: pynvml, psutil, the process inspector) is frozen with it (`_source_opened`)."""

    @property
    def source(self) -> Source:
        """Where the snapshots come from (it changes when the demo is opened)."""
        source = self.context.sources.source
        assert source is not None  # the app is always made with one
        return source

    def current_pane(self) -> Pane:
        switcher = self.query_one(ContentSwitcher)
        return self.query_one(f"#{switcher.current}", Pane)

    def _make_engines(self) -> Engines:
        """The alert, hint and job-health engines (off the UI thread: see Hub)."""
        from gputui.telemetry.alerts import AlertEngine
        from gputui.telemetry.health import HealthEngine
        from gputui.telemetry.hints import HintEngine
        from gputui.telemetry.replay_judge import Engines

        config = self.config
        return Engines(
            health=HealthEngine(config.health),
            hints=HintEngine(config.hints, config.health),
            alerts=AlertEngine(config.alerts, config.hints, config.health),
        )

    def _start_poller(self) -> None:
        self.generation += 1
        gen = self.generation
        self.hub.reset()
        source = self.source
        health = self.config.health

        def stack_reader() -> StackSampler | None:  # (made when a verdict first wants a stack)
            from gputui.stacks.sampler import for_source

            return for_source(source.local_processes, health)

        self.hub.stacks_when_wanted(stack_reader)
        self.hub.follow(source.seekable)  # a replay's verdicts: those of its ticks up to each

        def where() -> tuple[int, int] | None:
            """(the tick just sampled, 1-based; the recording's ticks); None when live."""
            replay = source.seekable
            return None if replay is None else (replay.position + 1, len(replay.ticks))

        def on_snapshot(snap: Snapshot) -> None:
            self.hub.publish(snap)
            self.post_message(SnapshotReady(snap, gen, where()))

        def on_info(info: MachineInfo) -> None:
            self.hub.set_info(info)
            self.post_message(InfoReady(info, gen))

        def on_error(exc: BaseException) -> None:
            self.post_message(PollerFailed(exc, gen))

        # NVML's open and first sample, read while Textual loaded (a recording's, read with
        # the file), handled here and now: the first frame is drawn with the data (a message
        # from the poller's thread could come after the first paint, which then shows an
        # empty screen first, and lays it out and paints it again)
        # (not a replay that starts further in, `--start N`: its first tick is judged from
        # the recording's first on the poller's thread, never on this one)
        replay = source.seekable
        ready = take_ready(source) if replay is None or replay.position < 0 else None
        if replay is not None and replay.position + 1 >= SAY_JUDGING_FROM:
            self.notify(
                f"Judging ticks 1 to {replay.position + 1} first: a verdict at a tick is the "
                "recording's up to it",
                timeout=5,
            )
        if ready is not None:
            info, snap = ready
            self.hub.set_info(info)
            self.hub.publish(snap, judge=False)  # the engines judge it after the first frame
            self._show_info(info)
            self._show_snapshot(snap, where())
            self.call_after_refresh(self._judge_first, gen, where())
        self.poller = Poller(
            source,
            self.interval,
            on_snapshot,
            on_info,
            on_error,
            first_delivered=ready is not None,
            delivered_info=None if ready is None else ready[0],
            on_open=_freeze_what_open_made if self.freeze_start_up else None,
        )
        self.interval = self.poller.interval  # as clamped
        self.poller.start()
        # what the first frame does not draw (the live source's slow-cadence thread) starts
        # once that frame is on screen, not beside its layout and paint
        self.call_after_refresh(self.poller.first_frame_drawn)

    def _judge_first(self, generation: int, position: tuple[int, int] | None) -> None:
        """Once the first frame is on screen: the engines are made and judge the tick it
        shows, on a thread (their modules and first judgement never delay that frame); the
        tick is shown again with what they said (only changed cells are sent)."""

        def work() -> None:
            latest = self.hub.latest
            # (shown again only if no newer tick came meanwhile: that one has it all)
            if self.hub.judge_pending() and latest is not None and self.hub.latest is latest:
                self.post_message(SnapshotReady(latest, generation, position))

        self.run_worker(work, thread=True, exclusive=False, group="engines")

    def _show_info(self, info: MachineInfo) -> None:
        self.info = info
        header = self.query_one(HeaderBar)
        header.info = info
        header.update_lines()
        for pane in self.query(Pane):
            pane.show_info(info)
        self.refresh_bindings()

    def _show_snapshot(self, snap: Snapshot, position: tuple[int, int] | None) -> None:
        self.snapshot = snap
        with self.batch_update():
            header = self.query_one(HeaderBar)
            header.timestamp = snap.timestamp
            header.position = position
            header.alerts = len(self.hub.active_alerts())
            # a full screen on top (the GPU detail view) gets the tick instead of the tab;
            # the hidden main screen is not touched (Textual repaints the whole top screen
            # when a screen below it changes)
            show = getattr(self.screen, "show_snapshot", None)
            if show is not None:
                show(self.info, snap)
            else:
                header.update_lines()
                self.current_pane().show_snapshot(self.info, snap)


def _freeze_what_open_made() -> None:
    """On the poller's thread, once the source has opened: its garbage collected, what it
    made frozen with what start-up made.  Long-lived (pynvml's and psutil's modules, the
    source's handles and inspector), it would otherwise be walked by every full collection
    for as long as the monitor runs; the collection looks only at what came after start-up's
    freeze (a few ms), after the first frame."""
    gc.collect()
    gc.freeze()
