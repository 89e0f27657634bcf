"""The panes' typed context: read-only fails closed and cannot be switched off afterwards,
and no pane or screen looks the app's attributes up by name (a renamed attribute would
then silently read as its default: `getattr(self.app, "readonly", False)` re-enabled every
kill action when `readonly` was renamed)."""

from __future__ import annotations

import ast
import asyncio
import dataclasses
from pathlib import Path

import pytest
from conftest import H200_X2, run_to_tick
from gpu_children import ReplayOntoChildren, start_child
from textual.app import App, ComposeResult

from gputui.telemetry.hub import Hub
from gputui.ui.app import GpuTuiApp
from gputui.ui.context import LOCKED, PaneContext, SourceState
from gputui.ui.processes.pane import ProcessesPane
from gputui.ui.processes.screens import SignalDialog

UI = Path(__file__).resolve().parents[1] / "gputui" / "ui"
RANK0 = 650
"""A DDP rank of the real 2x H200 recording, on GPU 0 at tick 60."""


def test_a_context_made_without_saying_is_read_only() -> None:
    assert PaneContext().readonly is True
    assert LOCKED.readonly is True
    assert LOCKED.sources.source is None


def test_read_only_cannot_be_switched_off_afterwards() -> None:
    ctx = PaneContext(readonly=True, sources=SourceState())
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.readonly = False  # type: ignore[misc]


def test_a_processes_pane_given_no_context_offers_no_signal() -> None:
    class Bare(App[None]):
        def compose(self) -> ComposeResult:
            yield ProcessesPane(Hub())

    async def go() -> None:
        app = Bare()
        async with app.run_test():
            pane = app.query_one(ProcessesPane).list
            assert pane.check_signal() is False
            for action in ("signal", "mark"):
                assert pane.check_action(action, ()) is False

    asyncio.run(go())


def test_read_only_hides_signals_for_processes_that_could_be_signalled(children: list) -> None:
    """On processes of this machine (real children), signals are offered unless read-only."""
    kid = start_child("rank0")
    children.append(kid)

    async def go(readonly: bool) -> None:
        source = ReplayOntoChildren(H200_X2, {RANK0: kid.pid})
        app = GpuTuiApp(source=source, interval=3600.0, watch_terminal=False, readonly=readonly)
        async with app.run_test(size=(160, 40)) as pilot:
            await run_to_tick(pilot, 60)
            await pilot.press("2")
            await pilot.pause()
            pane = app.query_one("#processes", ProcessesPane).list
            assert pane.check_action("signal", ("TERM",)) is (not readonly)
            await pilot.press("T")
            await pilot.pause()
            assert isinstance(app.screen, SignalDialog) is not readonly

    asyncio.run(go(readonly=False))
    asyncio.run(go(readonly=True))
    assert kid.poll() is None  # nothing was sent


def _app_lookups_by_name(path: Path) -> list[str]:
    """getattr/hasattr/setattr calls on `app`, `self.app` or `self._app` in a module."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if node.func.id not in ("getattr", "hasattr", "setattr") or not node.args:
            continue
        target = ast.unparse(node.args[0])
        if target in ("app", "self.app", "self._app") or target.startswith(("self.app.", "app.")):
            out.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return out


def test_nothing_in_the_ui_looks_the_app_up_by_name() -> None:
    found = [hit for path in sorted(UI.rglob("*.py")) for hit in _app_lookups_by_name(path)]
    assert found == []


def test_the_lookup_check_sees_one(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text('def f(self):\n    return bool(getattr(self.app, "readonly", False))\n')
    assert len(_app_lookups_by_name(bad)) == 1
