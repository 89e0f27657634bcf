"""How the monitor goes away cleanly: `q`, a hang-up (the terminal or a browser session's
pipes gone, SIGHUP, SIGTERM) watched from outside the event loop, the settings saved, the
poller stopped and every child it started (diagnosis, stress, py-spy) killed."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from pathlib import Path

from gputui.state import Filters, SavedState, portable
from gputui.ui.feed import Feed
from gputui.ui.panes import Pane
from gputui.ui.terminal_watch import TerminalWatch

TERMINAL_CHECK_S = 1.0

#: How long leaving gputui waits for the diagnosis and stress children (and what they
#: started) to be killed and checked gone.
CHILD_KILL_WAIT_S = 8.0


class Leaving(Feed):
    """The app's exits (its state is set up by the app's `__init__`)."""

    saved: SavedState
    state_path: Path | None
    layout_mode: str
    _terminal_watch: TerminalWatch | None

    def _start_terminal_watch(self) -> None:
        """Exit when the terminal goes away (SSH dropped) or on SIGTERM, even if the UI is
        stuck writing to a terminal nobody reads: both go through the watch thread, which
        lives outside the event loop and forces the exit after its grace period."""
        loop = asyncio.get_running_loop()
        fd = sys.__stdout__.fileno() if sys.__stdout__ else 1
        # in a browser (textual-serve) there is no terminal: the pipes to the server are what
        # goes away, and nothing in Textual's web driver notices (it runs on, unread)
        alive = None
        if self.is_web:
            from gputui.serve.child import pipes_alive

            alive = pipes_alive

        def on_lost() -> None:
            kill_children(CHILD_KILL_WAIT_S)  # from the watch thread: never waits on the UI
            loop.call_soon_threadsafe(self._on_hangup)

        watch = self._terminal_watch = TerminalWatch(fd, on_lost, period=TERMINAL_CHECK_S, alive=alive)
        watch.start()
        for sig in (signal.SIGHUP, signal.SIGTERM):
            with contextlib.suppress(ValueError):  # not the main thread (embedded): skip
                signal.signal(sig, lambda signum, frame: watch.hangup())

    def current_state(self) -> SavedState:
        """The settings to remember, as they are now."""
        saved = self.saved
        interval = self.interval if self.source.live else saved.interval
        sort, filters = saved.sort, saved.filters
        from gputui.ui.processes.pane import ProcessesPane

        pane = self.query_one("#processes", Pane)
        if isinstance(pane, ProcessesPane):  # opened this run: its sort and filters
            state = pane.list.state
            sort = ("-" if state.descending else "") + state.sort_key
            filters = Filters(state.mine, state.compute_only, state.gpu, state.search)
        return SavedState(interval, self.layout_mode, sort, portable(filters), saved.sparklines)

    def save_state(self) -> None:
        """Remember the settings (unless --no-remember); a problem is one line on stderr."""
        if self.state_path is None:
            return
        from gputui import state

        problem = state.save(self.current_state(), self.state_path)
        if problem is not None:
            print(f"gputui: {problem}", file=sys.stderr)

    def _on_hangup(self) -> None:
        self.save_state()
        if self.poller is not None:
            self.poller.stop(timeout=0)
        kill_children(0)
        self.exit(0)

    async def action_quit(self) -> None:
        self.save_state()
        if self.poller is not None:
            self.poller.stop(timeout=0.5)
        if self._terminal_watch is not None:
            self._terminal_watch.stop()
        kill_children(0)  # SIGKILL now; `run_tui` waits for what they left once the UI is down
        self.exit(0)


def kill_children(wait: float) -> None:
    """Kill every diagnosis or stress child still running (if any was ever started: the
    runner is imported only then), waiting up to `wait` s for them to be checked gone."""
    runner = sys.modules.get("gputui.diag.runner")
    if runner is not None:
        runner.kill_all(wait)
    stacks = sys.modules.get("gputui.ui.processes.stacks_view")
    if stacks is not None:  # py-spy children of a stacks screen still dumping
        stacks.cancel_all(wait)
    sampler = sys.modules.get("gputui.stacks.sampler")
    if sampler is not None:  # py-spy children reading a suspected job's ranks for its verdict
        sampler.close_all()
