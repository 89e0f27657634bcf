"""`P` on a process (or a job's row, or in the job view): the Python stacks of the process or
of every rank, read with py-spy, the frames the ranks share folded.

The dumps run on a thread of their own (`gputui.stacks.dump_in_background`), never on the UI
thread; each result is posted back with `call_from_thread`.  esc closes the screen and
cancels the dumps still running: the py-spy children are killed, and joined on a worker
thread.  Leaving gputui cancels them too (`cancel_all`, from the app's `kill_children`).

Allowed in read-only and `gputui serve` sessions (reading a stack signals nothing and runs no
program the page names); never in a replay, whose PIDs are another machine's processes.
Everything shown is `gputui.stacks.render`'s text, which escapes what comes from the
processes (function, file and thread names); nothing is markup.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import EllipsisType
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen

from gputui.safefile import save_new
from gputui.stacks.dump import Background, dump_in_background
from gputui.stacks.model import StackResult
from gputui.stacks.render import text
from gputui.ui.render import Line, S, clean, fit
from gputui.ui.widgets.text import TextLines

Target = tuple[int, "float | None"]

REPLAY_REFUSAL = (
    "Stacks are not read in a recording: its PIDs are another machine's processes "
    "(a PID here may be anything)."
)

_running: set[Background] = set()
_running_lock = threading.Lock()


def cancel_all(wait: float) -> None:
    """Kill every py-spy child still running (leaving gputui), waiting up to `wait` s."""
    with _running_lock:
        running = list(_running)
    deadline = time.monotonic() + wait
    for bg in running:
        bg.cancel()
    for bg in running:
        bg.join(max(0.0, deadline - time.monotonic()))


def _forget(bg: Background) -> None:
    with _running_lock:
        _running.discard(bg)


class StacksScreen(ModalScreen[None]):
    """The stacks of `targets` ((PID, start time) each), folded, scrollable; `w` saves."""

    DEFAULT_CSS = """
    StacksScreen { align: center middle; }
    StacksScreen > Vertical { width: 100%; height: 100%; border: round $accent; background: $surface; }
    StacksScreen VerticalScroll { height: 1fr; scrollbar-size-vertical: 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "Back", key_display="esc", tooltip="Close (cancels running dumps)"),
        Binding("w", "save", "Save", tooltip="Save the stacks as text (a new private file)"),
        Binding("up,k", "scroll(-1)", show=False),
        Binding("down,j", "scroll(1)", show=False),
        Binding("pageup", "scroll(-20)", show=False),
        Binding("pagedown", "scroll(20)", show=False),
    ]

    py_spy: str | EllipsisType | None = ...
    """py-spy's path; None: not installed; ...: found on PATH or beside this Python (tests
    set None to see what a machine without py-spy shows)."""
    save_dir: Path | None = None
    """Where `w` saves (default: the current directory, else the home directory)."""

    def __init__(self, targets: Sequence[Target], what: str) -> None:
        super().__init__()
        self.targets = tuple(targets)
        self.what = what
        """What is dumped, in words built from numbers ("PID 1200", "job of launcher PID 1013")."""
        self.results: list[StackResult] = []
        self.done = False
        self.saved: Path | None = None
        self.started = time.monotonic()
        self.seconds: float | None = None
        self.background: Background | None = None

    def compose(self) -> ComposeResult:
        with Vertical():
            yield TextLines(self._head, id="stacks-head")
            with VerticalScroll(id="stacks-body"):
                yield TextLines(self._body, id="stacks-lines")
            yield TextLines(self._keys, id="hint")

    def on_mount(self) -> None:
        self.started = time.monotonic()
        self.background = bg = dump_in_background(
            self.targets,
            on_result=lambda r: self._post(self._arrived, r),
            on_done=lambda rs: self._post(self._finished, rs),
            py_spy=self.py_spy,
        )
        with _running_lock:
            _running.add(bg)
        self.query_one("#stacks-body").focus()

    def _post(self, fn, arg) -> None:  # type: ignore[no-untyped-def]
        with contextlib.suppress(RuntimeError):  # the app has gone meanwhile
            self.app.call_from_thread(fn, arg)

    def _arrived(self, res: StackResult) -> None:
        if not self.done:
            self.results.append(res)
            self._redraw()

    def _finished(self, results: tuple[StackResult, ...]) -> None:
        if self.background is not None:
            _forget(self.background)
        self.done = True
        self.seconds = time.monotonic() - self.started
        self.results = list(results)
        self._redraw()

    def _redraw(self) -> None:
        if self.is_mounted:
            for w in self.query(TextLines):
                w.update_lines()

    # ---- lines ----

    def _head(self, width: int) -> list[Line]:
        n = len(self.targets)
        procs = f"{n} process{'es' if n != 1 else ''}"
        if not self.done:
            state = f" dumping {procs}… ({len(self.results)} of {n} done)"
            return [[(" stacks of " + self.what, S.title)], [(state, S.warn)]]
        line: Line = [(" stacks of " + self.what, S.title)]
        if self.saved is not None:
            line.append((fit(clean(f"  saved: {self.saved}"), max(10, width - 30)), S.ok))
        return [line]

    def _text(self) -> str:
        return text(self.results, seconds=self.seconds if self.done else None)

    def _body(self, width: int) -> list[Line]:
        if not self.results:
            return [[(" waiting for py-spy…", S.dim)]]
        return [[(" " + line, S.value)] for line in self._text().splitlines()]

    def _keys(self, width: int) -> list[Line]:
        return [[(" esc back (cancels running dumps) · ↑↓ pgup pgdn scroll · w save as text", S.label)]]

    # ---- actions ----

    def action_scroll(self, lines: int) -> None:
        self.query_one("#stacks-body", VerticalScroll).scroll_relative(y=lines, animate=False)

    def action_save(self) -> None:
        if not self.done:
            self.notify("The dumps are still running: save once they are done.", timeout=3)
            return
        host = clean(socket.gethostname()).replace("/", "_")
        stem = f"gputui-stacks-{host}-{time.strftime('%Y%m%d-%H%M%S')}"
        folders = [self.save_dir] if self.save_dir is not None else [Path.cwd(), Path.home()]
        problem: OSError | None = None
        for folder in folders:
            try:
                (self.saved,) = save_new(folder, stem, {".txt": self._text()})
                break
            except OSError as exc:
                problem = exc
        else:
            self.notify(clean(f"Cannot save the stacks: {problem}"), severity="error", markup=False)
            return
        self.notify(clean(f"Stacks saved: {self.saved}"), title="Saved", timeout=8, markup=False)
        self._redraw()

    def action_close(self) -> None:
        self.cancel()
        self.dismiss(None)

    def cancel(self) -> None:
        """Stop the dumps still running; killing and reaping py-spy happens on a worker."""
        bg = self.background
        if bg is None or self.done:
            return

        def stop() -> None:
            bg.cancel()
            bg.join(15)
            _forget(bg)

        self.app.run_worker(stop, thread=True, group="stacks-cancel", exit_on_error=False)
