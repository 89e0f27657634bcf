"""The Diagnostics tab driven by key presses: streaming rows, cancel, the interpreter picker,
saving the report.  The diagnosed interpreters are real (see diag_support)."""

from __future__ import annotations

import asyncio
import json
import sys

import jsonschema
from conftest import H200_X1, replay_app, screen_lines, wait_for
from diag_support import HANGS, fake_torch, make_bare_venv, need_torch_python, torch_cuda_build

from gputui.diag.verdicts import load_schema


def run(coro):
    return asyncio.run(coro)


def text(app) -> str:
    return "\n".join(screen_lines(app))


def test_g_opens_the_tab_and_streams_rows_in():
    python = need_torch_python()

    async def go():
        app = replay_app(H200_X1)
        # (41 rows: the header's privileges line, and the torch build's fix still on screen)
        async with app.run_test(size=(120, 41)) as pilot:
            pane = await app.load_pane("diagnostics")
            pane.python = python
            pane.picked = True  # as chosen with e (g with nothing selected keeps it)
            await pilot.press("g")
            assert app.query_one("ContentSwitcher").current == "diagnostics"
            # (that rows stream in while the child runs is proven where the child hangs, in
            # test_cancel_kills_a_hung_diagnosis: here a loaded machine may deliver them all at once)
            await wait_for(pilot, lambda: not pane.running and pane.diagnosis.child, timeout=120)
            counts = pane.diagnosis.counts()
            summary = f"{counts['PASS']} pass  {counts['WARN']} warn  {counts['FAIL']} fail"
            await wait_for(pilot, lambda: summary in text(app), timeout=30)  # repainted
            # the first fix joins the header in the same repaint, shown after the next layout pass
            first_fix = pane.diagnosis.primary() is not None
            await wait_for(pilot, lambda: ("First fix:" in text(app)) == first_fix, timeout=30)
            screen = text(app)
            # what the tab must say depends on the torch actually installed here
            if torch_cuda_build(python) is None:  # the CPU build: the one fix is a CUDA wheel
                assert "FAIL  torch build" in screen
                assert "pip install torch --index-url https://download.pytorch.org/whl/cu130" in screen
            else:  # a CUDA build (a GPU machine): the build itself is no failure
                assert "FAIL  torch build" not in screen
            # the first fix is shown exactly when there is something to fix
            assert ("First fix:" in screen) == (pane.diagnosis.primary() is not None)
            assert "torch" not in sys.modules  # the monitor never imports torch

    run(go())


def test_cancel_kills_a_hung_diagnosis(tmp_path):
    bare = make_bare_venv(tmp_path / "venv")
    site = fake_torch(tmp_path / "site", HANGS)

    async def go():
        app = replay_app(H200_X1)
        async with app.run_test(size=(120, 40)) as pilot:
            pane = await app.load_pane("diagnostics")
            pane.python = bare
            pane.picked = True  # as chosen with e (g with nothing selected keeps it)
            pane.env_overrides = {"PYTHONPATH": str(site)}
            await pilot.press("g")
            await wait_for(pilot, lambda: pane.phase == "import torch", timeout=60)
            await wait_for(pilot, lambda: "running" in text(app) and "import torch…" in text(app), timeout=30)
            # the rows before torch's import are on screen while the child is stuck in it
            view = app.query_one("FindingsView")
            assert pane.running and view.findings
            first = view.findings[0].title
            await wait_for(pilot, lambda: first in text(app), timeout=30)
            assert pane.running
            await pilot.press("x")
            await wait_for(pilot, lambda: not pane.running and pane.diagnosis.child, timeout=30)
            child = pane.diagnosis.child
            assert child["cancelled"] and child["leftover_pids"] == []
            await wait_for(pilot, lambda: "cancelled" in text(app), timeout=30)  # repainted

    run(go())


def test_picker_lists_environments_and_takes_a_typed_path(tmp_path):
    bare = make_bare_venv(tmp_path / "venv")

    async def go():
        from gputui.ui.diagnostics.picker import InterpreterPicker

        app = replay_app(H200_X1)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("4")
            pane = await app.load_pane("diagnostics")
            await pilot.press("e")
            await wait_for(pilot, lambda: isinstance(app.screen, InterpreterPicker))
            assert "gputui's own interpreter" in text(app)
            app.screen.query_one("Input").focus()
            await pilot.press(*bare)
            await pilot.press("enter")
            await wait_for(pilot, lambda: not isinstance(app.screen, InterpreterPicker))
            assert pane.python == bare
            assert pane.python_label == "typed path"
            await wait_for(pilot, lambda: pane.diagnosis is not None and pane.diagnosis.child, timeout=60)
            assert any(f.id == "torch.import" and f.cause == "torch-missing" for f in pane.diagnosis.findings)

    run(go())


def test_w_saves_markdown_and_json(tmp_path):
    bare = make_bare_venv(tmp_path / "venv")

    async def go():
        app = replay_app(H200_X1)
        async with app.run_test(size=(120, 40)) as pilot:
            pane = await app.load_pane("diagnostics")
            pane.python = bare
            pane.picked = True  # as chosen with e (g with nothing selected keeps it)
            pane.report_dir = tmp_path
            await pilot.press("g")
            await wait_for(pilot, lambda: pane.diagnosis.child, timeout=60)
            await pilot.press("w")
            await wait_for(pilot, lambda: pane.saved is not None)
            md = list(tmp_path.glob("gputui-diag-*.md"))
            js = list(tmp_path.glob("gputui-diag-*.json"))
            assert len(md) == len(js) == 1
            assert md[0].read_text().startswith("# gputui diagnosis: FAIL")
            jsonschema.validate(json.loads(js[0].read_text()), load_schema())
            assert "saved:" in text(app) and str(md[0]) in text(app)

    run(go())


STRESS_QUICK = ["--test-cpu", "--precisions", "fp32,bf16"]


def test_stress_from_the_tab_shows_progress_table_and_saves(tmp_path):
    python = need_torch_python()

    async def go():
        app = replay_app(H200_X1)
        async with app.run_test(size=(120, 45)) as pilot:
            await pilot.press("4")
            pane = await app.load_pane("diagnostics")
            pane.python = python
            pane.picked = True  # as chosen with e (g with nothing selected keeps it)
            pane.stress_duration = 1
            pane.stress_args = STRESS_QUICK
            pane.report_dir = tmp_path
            await pilot.press("b")
            await wait_for(pilot, lambda: "matmul" in pane.stress.results.phases_done, timeout=90)
            await wait_for(pilot, lambda: "matmul ████████ 100%" in text(app), timeout=30)
            await wait_for(pilot, lambda: not pane.stress_running, timeout=90)

            # the verdict line and the table below it arrive in one repaint, but the widget grows
            # only at the next layout pass: wait for the whole of it, not for its first line
            def done(screen: str) -> bool:
                return "Stress  PASS" in screen and "verdict" in screen and "matmul TFLOP/s" in screen

            await wait_for(pilot, lambda: done(text(app)), timeout=30)
            await pilot.press("w")
            await wait_for(pilot, lambda: pane.saved is not None)
            report = json.loads(next(tmp_path.glob("gputui-diag-*.json")).read_text())
            jsonschema.validate(report, load_schema())
            assert report["stress"]["status"] == "PASS"

    run(go())


def test_stress_cancel_from_the_tab_leaves_no_process():
    python = need_torch_python()

    async def go():
        from gputui.diag.reaper import group_members

        app = replay_app(H200_X1)
        async with app.run_test(size=(120, 45)) as pilot:
            await pilot.press("4")
            pane = await app.load_pane("diagnostics")
            pane.python = python
            pane.picked = True  # as chosen with e (g with nothing selected keeps it)
            pane.stress_duration = 600
            pane.stress_args = STRESS_QUICK
            await pilot.press("b")
            await wait_for(pilot, lambda: "burn" in (pane.stress.results.current_phase() or ""), timeout=90)
            pgid = pane.stress.child.pid
            await pilot.press("x")
            await wait_for(pilot, lambda: not pane.stress_running, timeout=30)
            assert pane.stress.result.cancelled and group_members(pgid) == []
            await wait_for(pilot, lambda: "cancelled" in text(app), timeout=30)

    run(go())


def test_save_never_follows_a_planted_symlink_and_is_private(tmp_path):
    """Another user can guess the name `w` saves under: links planted there must not be
    followed (the target overwritten), nor an existing file replaced; reports are 0600."""
    import os
    import stat

    from gputui.diag.verdicts import Diagnosis
    from gputui.ui.diagnostics.report import report_stem, save_report

    diagnosis = Diagnosis(python=sys.executable)
    stem = report_stem(diagnosis)
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / f"{stem}.md").symlink_to(victim)
    (tmp_path / f"{stem}.json").symlink_to(tmp_path / "nothing-yet")  # dangling: would be created
    os.umask(old := os.umask(0))  # read the umask
    try:
        os.umask(0o022)
        md, js = save_report(diagnosis, tmp_path)
        md2, js2 = save_report(diagnosis, tmp_path)  # the same second again: a new name
    finally:
        os.umask(old)
    assert victim.read_text() == "precious"
    assert not (tmp_path / "nothing-yet").exists()
    assert md.parent == js.parent == tmp_path.resolve()
    assert len({md, md2, js, js2}) == 4 and md.stem == js.stem and md2.stem == js2.stem
    for path in (md, js, md2, js2):
        assert not path.is_symlink()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert md.read_text().startswith("# gputui diagnosis")
    assert json.loads(js.read_text())["python"]["executable"] == sys.executable
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temp left


def test_the_tab_says_which_python_g_diagnoses_and_g_diagnoses_it(tmp_path, monkeypatch):
    """Issue 31: the tab said "gputui's own interpreter", then `g` diagnosed the python3 on
    PATH.  With nothing selected and nothing chosen, what the header names before `g` is what
    `g` runs (the python3 on PATH here: no GPU process of yours in a replay)."""
    import os

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    want = str(bin_dir / "python3")

    async def go():
        app = replay_app(H200_X1)
        async with app.run_test(size=(220, 40)) as pilot:  # (wide: the temporary path is long)
            await pilot.press("4")
            pane = await app.load_pane("diagnostics")
            await wait_for(pilot, lambda: f" python {want} (python3 on PATH; g tries" in text(app))
            assert "gputui's own" not in text(app)
            await pilot.press("g")
            await wait_for(pilot, lambda: pane.target is not None)
            assert pane.target.python == pane.python == want
            assert pane.target.why == "python3 on PATH (the one your shell would run)"
            await wait_for(pilot, lambda: not pane.running and pane.diagnosis.child, timeout=120)
            assert pane.diagnosis.child["python"] == want

    run(go())


def test_a_stress_error_is_said_once_however_often_the_tab_repaints(tmp_path):
    """Issue 31: `gputui --demo`, `4`, `b` without torch showed "the stress process ended
    with 2" 176-190 times: every repaint appended the error again (the report's error list
    was the results' own)."""
    from gputui.cli import DEMO_RECORDING

    bare = make_bare_venv(tmp_path / "venv")  # no torch: the stress child exits with 2

    async def go():
        app = replay_app(DEMO_RECORDING)
        async with app.run_test(size=(120, 45)) as pilot:
            await pilot.press("4")
            pane = await app.load_pane("diagnostics")
            pane.python, pane.picked = bare, True
            await pilot.press("b")
            await wait_for(pilot, lambda: pane.stress is not None and not pane.stress_running, timeout=120)
            await wait_for(pilot, lambda: "the stress process ended with" in text(app), timeout=30)
            for size in ((121, 45), (120, 46), (120, 45)):  # repaint, and repaint again
                await pilot.resize_terminal(*size)
                await pilot.pause()
            await pilot.press("b")  # a second run: its own error, once, instead of the first's
            await wait_for(pilot, lambda: not pane.stress_running, timeout=120)
            await pilot.resize_terminal(121, 45)
            await pilot.pause()
            assert text(app).count("the stress process ended with") == 1
            errors = [e["message"] for e in pane.stress.report()["errors"]]
            assert len(errors) == len(set(errors)) and len(pane.stress.report()["errors"]) == len(errors)
            assert sum("the stress process ended with" in m for m in errors) == 1

    run(go())


def test_the_diagnostics_room_knows_the_app_only_through_its_context():
    """Issue 31 (the house): diagnostics/choose.py cast to GpuTuiApp and read its attributes
    (an import circle with ui/app.py), though ui/context.py says panes never do.  No module of
    the room imports the app, even for typing, and choose.py does not import the pane."""
    import ast
    from pathlib import Path

    room = Path(__file__).resolve().parents[1] / "gputui" / "ui" / "diagnostics"
    for path in sorted(room.glob("*.py")):
        tree = ast.parse(path.read_text())
        imported = {
            node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
        } | {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        assert "gputui.ui.app" not in imported, path.name
        assert "GpuTuiApp" not in path.read_text(), path.name
        if path.name == "choose.py":
            assert "gputui.ui.diagnostics.pane" not in imported
