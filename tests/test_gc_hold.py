"""Python's cyclic garbage collector is held off while the monitor starts and comes back
once the first frame is on screen, on every path: never left off."""

from __future__ import annotations

import asyncio
import gc

import pytest
from conftest import H200_X2
from test_first_frame import ReadAhead

from gputui import gc_hold


@pytest.fixture(autouse=True)
def collector_restored():
    """Each test starts with the collector on and nothing held, and leaves it so (a frozen
    permanent generation is thawed: the rest of the suite collects as usual)."""
    gc_hold._state["held"] = False
    gc.enable()
    yield
    gc_hold._state["held"] = False
    gc.unfreeze()
    gc.enable()


def test_hold_turns_the_collector_off_and_release_collects_freezes_and_turns_it_back_on():
    gc_hold.hold()
    assert not gc.isenabled()
    assert gc_hold.held()
    gc.unfreeze()
    gc_hold.release()
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0  # the start-up's survivors, out of later collections
    assert not gc_hold.held()
    gc_hold.release()  # a second release changes nothing
    assert gc.isenabled()


def test_a_collector_the_user_turned_off_stays_off():
    gc.disable()
    gc_hold.hold()
    gc_hold.release()
    assert not gc.isenabled()


def test_every_command_line_path_leaves_the_collector_on(monkeypatch, tmp_path, capsys):
    """A subcommand, --print-config, an error, and the monitor: the collector is off while
    the monitor starts (its app runs with it held) and on again when main returns."""
    from gputui import cli
    from gputui.ui import app as app_module

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("GPUTUI_ALLOW_NOTTY", "1")
    seen: list[bool] = []
    monkeypatch.setattr(app_module.GpuTuiApp, "run", lambda self, *a, **k: seen.append(gc.isenabled()))
    assert cli.main(["--demo", "--no-remember"]) == 0
    assert seen == [False]  # held while the app started
    assert gc.isenabled()
    assert cli.main(["--print-config"]) == 0
    assert gc.isenabled()
    assert cli.main(["--replay", str(tmp_path / "missing.jsonl")]) == 2
    assert gc.isenabled()
    assert cli.main(["snapshot", "--replay", str(H200_X2), "--json"]) == 0
    assert gc.isenabled()
    capsys.readouterr()


def test_a_subcommand_runs_with_the_collector_on(monkeypatch, tmp_path):
    """`gputui watch` or `export` can run for days: never with the collector held."""
    from gputui import cli
    from gputui.commands import snapshot

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    seen: list[bool] = []
    monkeypatch.setattr(snapshot, "run", lambda args: seen.append(gc.isenabled()) or 0)
    assert cli.main(["snapshot", "--replay", str(H200_X2)]) == 0
    assert seen == [True]


def test_the_app_releases_the_collector_once_its_first_frame_is_drawn(monkeypatch):
    from gputui.ui.app import GpuTuiApp

    monkeypatch.setattr(gc_hold, "RELEASE_AFTER_FRAME_S", 0.05)

    async def go():
        gc_hold.hold()
        app = GpuTuiApp(source=ReadAhead(H200_X2), interval=5.0, watch_terminal=False)
        async with app.run_test(size=(160, 50)) as pilot:
            held_at_mount = gc_hold.held()
            for _ in range(100):
                if not gc_hold.held():
                    break
                await asyncio.sleep(0.02)
            await pilot.pause()
            return held_at_mount, gc.isenabled()

    held_at_mount, enabled = asyncio.run(go())
    assert held_at_mount
    assert enabled


class NeverReady(ReadAhead):
    """A live source whose first sample never comes (NVML hung in its open)."""

    def take_ready(self):  # type: ignore[no-untyped-def]
        return None

    def open(self):  # type: ignore[no-untyped-def]
        import time

        time.sleep(3)
        return self.replay.open()


def test_without_a_first_frame_the_collector_still_comes_back(monkeypatch):
    from gputui.ui.app import GpuTuiApp

    monkeypatch.setattr(gc_hold, "RELEASE_AFTER_FRAME_S", 30.0)
    monkeypatch.setattr(gc_hold, "RELEASE_AT_LATEST_S", 0.2)

    async def go():
        gc_hold.hold()
        app = GpuTuiApp(source=NeverReady(H200_X2), interval=5.0, watch_terminal=False)
        async with app.run_test(size=(160, 50)) as pilot:
            await asyncio.sleep(0.5)
            await pilot.pause()
            return app.snapshot, gc.isenabled()

    snapshot, enabled = asyncio.run(go())
    assert snapshot is None
    assert enabled
