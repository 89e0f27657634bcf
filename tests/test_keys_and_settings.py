"""What a new user met (issue 24 items 10, 11 and 13), driven with real key presses against
replays of real GPUs and the real no-NVML start: text wraps at words at 80 columns; a
narrowing or a filter is shown and one key undoes it; a GPU filter set on one machine is not
carried into another machine's recording; one key has one meaning on every tab."""

from __future__ import annotations

import asyncio
import re

import pytest
from conftest import H200_X2, replay_app, run_to_tick, screen_lines, wait_for
from test_process_bugs import notifications
from textual.binding import Binding

from gputui.telemetry.nvml.source import NvmlSource
from gputui.ui.app import GpuTuiApp


def run(coro):
    return asyncio.run(coro)


def nvml_really_absent() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return True
    pynvml.nvmlShutdown()
    return False


# ---- item 10: the no-GPU panel at 80 columns ---------------------------------------------


@pytest.mark.skipif(not nvml_really_absent(), reason="this machine has an NVIDIA driver")
@pytest.mark.parametrize("width", [80, 60, 100])
def test_the_no_gpu_panel_wraps_at_words(width: int) -> None:
    async def go() -> list[str]:
        app = GpuTuiApp(source=NvmlSource(), interval=1.0, watch_terminal=False)
        async with app.run_test(size=(width, 40)) as pilot:
            await wait_for(pilot, lambda: app.snapshot is not None)
            await pilot.pause()
            return screen_lines(app)

    lines = run(go())
    inside = [re.sub(r"^[│ ]+|[│ ]+$", "", line) for line in lines]
    start = next(k for k, line in enumerate(inside) if line.startswith("Press d"))
    end = next(k for k in range(start, len(inside)) if inside[k].endswith("recorded)."))
    part = inside[start : end + 1]
    sentence = "Press d to open the bundled recording of real GPUs (clearly marked as recorded)."
    assert " ".join(part) == sentence
    words = sentence.split()
    for line in part:  # each line holds whole words only: never "record" + "ed)."
        assert all(w in words for w in line.split()), line


# ---- item 11: a card's narrowing is shown and esc undoes it -------------------------------


def test_a_selected_card_narrows_the_list_visibly_and_esc_shows_every_gpu_again() -> None:
    """The real 2x H200 at tick 60: GPU 0 runs one DDP rank, GPU 1 the other and a holder."""
    from gputui.ui.overview.widgets import GpuBoard

    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 60)
            procs = app.query_one("#overview").processes
            assert len(procs.shown) == 3
            assert "esc" not in screen_lines(app)[-1]  # nothing to undo: not offered
            await pilot.press("down")  # select GPU 0's card
            await pilot.pause()
            assert {r.proc.gpu_index for r in procs.shown} == {0}
            text = "\n".join(screen_lines(app))
            assert "filter GPU 0 (selected card · esc: all)" in text
            assert "esc All GPUs" in screen_lines(app)[-1]  # the footer says how back
            await pilot.press("escape")
            await pilot.pause()
            assert app.query_one(GpuBoard).selected is None
            assert len(procs.shown) == 3
            assert "selected card" not in "\n".join(screen_lines(app))
            assert "All GPUs" not in screen_lines(app)[-1]
            # from the process list (tab), esc undoes the card's narrowing too
            await pilot.press("right")
            await pilot.press("tab")
            await pilot.pause()
            assert {r.proc.gpu_index for r in procs.shown} == {0}
            await pilot.press("escape")
            await pilot.pause()
            assert len(procs.shown) == 3 and app.query_one(GpuBoard).selected is None

    run(go())


# ---- item 11: what is remembered, what is not, and that it shows --------------------------


def test_a_gpu_filter_and_a_search_are_not_carried_into_the_next_run(tmp_path) -> None:
    """A GPU filter and a search name this machine's GPUs and processes: the next run (here
    the demo's recording, another machine's) starts with every process. Mine and compute
    only are carried, shown as from the last run, and one esc clears them."""
    import json

    from gputui import state
    from gputui.ui.processes.pane import ProcessesPane

    path = tmp_path / "state.json"

    async def first():
        saved, _ = state.load(path)
        app = replay_app(H200_X2, saved=saved, state_path=path)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 60)
            await pilot.press("2")
            await pilot.pause()
            await pilot.press("f", "t")  # GPU 0, compute only
            await pilot.pause()
            pane = app.query_one("#processes", ProcessesPane).list
            assert pane.state.filters() == ["GPU 0", "compute"]
            assert "from the last run" not in "\n".join(screen_lines(app))
            await pilot.press("q")

    run(first())
    filters = json.loads(path.read_text())["filters"]
    assert filters["gpu"] is None and filters["search"] == "" and filters["compute_only"] is True

    async def second():
        saved, _ = state.load(path)
        app = replay_app(H200_X2, saved=saved, state_path=path)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 60)
            await pilot.press("2")
            await pilot.pause()
            pane = app.query_one("#processes", ProcessesPane).list
            assert pane.state.gpu is None
            text = "\n".join(screen_lines(app))
            assert "filter compute (from the last run · esc clears)" in text
            await pilot.press("escape")
            await pilot.pause()
            assert pane.state.filters() == []
            assert "filter none" in "\n".join(screen_lines(app))

    run(second())


def test_an_old_state_file_with_a_gpu_filter_is_not_applied(tmp_path) -> None:
    """A state file written before this rule (GPU 0 and a search saved) opens unfiltered."""
    from gputui import state
    from gputui.state import Filters, SavedState
    from gputui.ui.processes.pane import ProcessesPane

    path = tmp_path / "state.json"
    state.save(SavedState(filters=Filters(gpu=0, search="ddp")), path)

    async def go():
        saved, _ = state.load(path)
        assert saved.filters.gpu == 0
        app = replay_app(H200_X2, saved=saved, state_path=path)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 60)
            await pilot.press("2")
            await pilot.pause()
            pane = app.query_one("#processes", ProcessesPane).list
            assert pane.state.filters() == [] and len(pane.shown) == 3

    run(go())


# ---- item 13: one key, one meaning -------------------------------------------------------


def tab_level_bindings() -> list[tuple[str, str, str]]:
    """(key, class, action) of every binding the tabs and their widgets have."""
    from gputui.ui.diagnostics.pane import DiagnosticsPane
    from gputui.ui.overview.pane import OverviewPane
    from gputui.ui.overview.widgets import GpuBoard
    from gputui.ui.processes.process_list import ProcessList
    from gputui.ui.processes.widgets import ProcessTable
    from gputui.ui.topology.pane import TopologyPane, TopologyView

    out = []
    for cls in (
        OverviewPane,
        GpuBoard,
        ProcessList,
        ProcessTable,
        TopologyPane,
        TopologyView,
        DiagnosticsPane,
    ):
        for b in cls.BINDINGS:
            assert isinstance(b, Binding)
            for key in b.key.split(","):
                out.append((key.strip(), cls.__name__, b.action))
    return out


SAME_MEANING = {
    # moving the cursor or the view, however a widget does it
    "move": "move", "scroll": "move", "hscroll": "move", "page": "move", "edge": "move",
    # opening the selected thing's detail
    "open": "open", "detail": "open",
    # backing out: clear, cancel
    "clear": "back", "cancel": "back", "unselect": "back",
    # T K I m in a replay: the same keys, saying why nothing is sent
    "refused": "signal", "mark": "signal",
}  # fmt: skip


def meaning(action: str) -> str:
    name = action.split("(", 1)[0]
    if name == "processes":  # the Overview's forward to its process list: processes('signal', ..)
        name = action.split("'")[1]
    return SAME_MEANING.get(name, name)


def test_no_tab_uses_a_global_key_for_something_else() -> None:
    global_keys = {k.strip() for b in GpuTuiApp.BINDINGS if isinstance(b, Binding) for k in b.key.split(",")}
    assert {"g", "c", "d", "q", "p", "space"} <= global_keys
    clashes = [(key, cls, action) for key, cls, action in tab_level_bindings() if key in global_keys]
    assert clashes == []


def test_each_key_means_one_thing_on_every_tab() -> None:
    meanings: dict[str, set[str]] = {}
    for key, _, action in tab_level_bindings():
        meanings.setdefault(key, set()).add(meaning(action))
    assert {k: m for k, m in meanings.items() if len(m) > 1} == {}
    assert meanings["s"] == {"sort"} and meanings["j"] == {"move"} and meanings["v"] == {"tree"}


def test_g_opens_diagnostics_from_the_processes_tab_and_f_filters_by_gpu() -> None:
    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(160, 40)) as pilot:
            await run_to_tick(pilot, 60)
            await pilot.press("2")
            await pilot.pause()
            await pilot.press("f")
            await pilot.pause()
            assert "filter GPU 0" in "\n".join(screen_lines(app))
            await pilot.press("g")
            await wait_for(pilot, lambda: app.query_one("ContentSwitcher").current == "diagnostics")

    run(go())


# ---- item 13: the replay footer offers only keys that do something -----------------------


def test_the_replay_footer_does_not_offer_signals_and_pressing_one_says_why() -> None:
    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(200, 40)) as pilot:
            await run_to_tick(pilot, 60)
            await pilot.press("2")
            await pilot.pause()
            footer = screen_lines(app)[-1]
            assert "Tree" in footer  # the tab's keys are there
            for word in ("SIGTERM", "SIGKILL", "SIGINT", "Mark"):
                assert word not in footer, footer
            await pilot.press("T")
            await pilot.pause()
            assert "recording" in notifications(app)[-1]
            await pilot.press("enter")  # the process detail: no signal keys either
            await pilot.pause()
            footer = screen_lines(app)[-1]
            assert "SIGTERM" not in footer and "SIGKILL" not in footer, footer

    run(go())


# ---- item 13: the chart picker's ticks differ in glyph, not only in colour -----------------


def test_ticked_and_unticked_charts_differ_in_glyph() -> None:
    from gputui.ui.overview.chart_picker import ChartPicker

    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 5)
            await pilot.press("C")
            await wait_for(pilot, lambda: isinstance(app.screen, ChartPicker))
            await pilot.pause()
            before = "\n".join(screen_lines(app))
            await pilot.press("down", "down", "down", "space")  # temp on
            await pilot.pause()
            after = "\n".join(screen_lines(app))
            return before, after

    before, after = run(go())
    assert re.search(r"\[x\] UTIL", before) and re.search(r"\[ \] TEMP", before)
    assert re.search(r"\[x\] TEMP", after)


# ---- item 12: the demo shows GPM -----------------------------------------------------------


def test_the_bundled_demo_is_the_real_gpm_recording_and_shows_gpm() -> None:
    """The demo is tests/fixtures/h200-x2-gpm/recording.jsonl.gz byte for byte (provenance:
    docs/recordings.md): two real H200s, bf16 training on GPU 0, float32 on GPU 1. Its cards
    show GPM's figures and the float32 GPU's TF32 hint; it stays small in the wheel."""
    from conftest import FIXTURES

    from gputui.telemetry.recording import read_recording
    from gputui.ui.context import DEMO_RECORDING

    assert DEMO_RECORDING.read_bytes() == (FIXTURES / "h200-x2-gpm" / "recording.jsonl.gz").read_bytes()
    assert DEMO_RECORDING.stat().st_size < 32 * 1024
    _, ticks = read_recording(DEMO_RECORDING)
    measured = [t for t in ticks if all(g.activity is not None for g in t.gpus)]
    assert len(measured) >= len(ticks) - 3

    async def go() -> str:
        app = replay_app(DEMO_RECORDING, demo=True)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 40)  # both GPUs training
            return "\n".join(screen_lines(app))

    text = run(go())
    assert "RECORDED SESSION · bundled demo" in text
    assert "SM act N/A" not in text and re.search(r"SM act \d+%", text)
    assert re.search(r"TENSOR [1-9]\d*%", text)  # GPU 0's tensor cores at work
    assert "no tensor cores: try TF32 or bf16" in text  # GPU 1's hint


def test_another_machines_data_in_the_same_run_drops_this_ones_gpu_filter_and_search() -> None:
    """The Processes tab with GPU 0 and a search set on the 2x H200 recording; then the data
    of another machine (the H100 recording's, as when the demo opens) arrives: its rows are
    not hidden by this machine's filters. Mine and compute only stay."""
    from conftest import H100_GPM

    from gputui.telemetry.recording import read_recording
    from gputui.ui.processes.pane import ProcessesPane

    other, _ = read_recording(H100_GPM)

    async def go():
        app = replay_app(H200_X2)
        async with app.run_test(size=(160, 40)) as pilot:
            await run_to_tick(pilot, 60)
            await pilot.press("2")
            await pilot.pause()
            await pilot.press("f", "t", "slash", *"ddp", "enter")
            await pilot.pause()
            pane = app.query_one("#processes", ProcessesPane).list
            assert pane.state.filters() == ["GPU 0", "compute", "/ddp"]
            pane.show_info(app.info)  # the same machine again: kept
            assert pane.state.filters() == ["GPU 0", "compute", "/ddp"]
            pane.show_info(other.machine)
            assert pane.state.filters() == ["compute"]

    run(go())
