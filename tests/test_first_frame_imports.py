"""What the monitor imports before its first frame: what the first screen draws and nothing
else (issues 25 and 33: the first frame with public APIs only, by doing less before it).
gputui's own modules are checked against a list (FIRST_FRAME): a module added to the start,
or one that leaves it, is a deliberate edit of that list.  Each check runs in a fresh
interpreter, since other tests import everything; how fast the frame comes is a benchmark
(bench/RESULTS.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

FIRST_FRAME = {
    # the command line, the config file and the saved state
    "gputui",
    "gputui.cli",
    "gputui.cmdline",  # the top-level parser (cli's, moved out)
    "gputui.commands",
    "gputui.commands.common",
    "gputui.config",
    "gputui.options",
    "gputui.palette",
    "gputui.safefile",
    "gputui.state",
    "gputui.toml_bounds",
    "gputui.untrusted",
    # the engines' settings (the config file's [alerts], [hints], [health]); the engines
    # themselves are made on the poller's thread once the first frame is up
    "gputui.telemetry.alert_config",
    "gputui.telemetry.hints",  # HintConfig lives there (the hints' room)
    "gputui.telemetry.health_config",  # HealthConfig and the verdicts' kinds (the health room)
    # the samples: model, metric registry, the recording, the poller and the hub
    "gputui.rules",
    "gputui.rules.clocks",
    "gputui.telemetry",
    "gputui.telemetry.codec",
    "gputui.telemetry.gpm_check",
    "gputui.telemetry.history",
    "gputui.telemetry.hub",
    "gputui.telemetry.metric_types",
    "gputui.telemetry.metrics",
    "gputui.telemetry.model",
    "gputui.telemetry.poller",
    "gputui.telemetry.process_metrics",
    "gputui.telemetry.recording",
    "gputui.recording_settings",  # a recording header's own settings (format 7), validated
    "gputui.telemetry.source",
    # the app and the Overview: header, banner, tab bar, cards, process list, host, footer
    "gputui.ui",
    "gputui.ui.app",
    "gputui.ui.base_app",
    "gputui.ui.cards",
    "gputui.ui.context",
    "gputui.ui.feed",  # the app's base: the poller started, each tick shown (app.py, split)
    "gputui.ui.leaving",  # the app's base: its exits, the hang-up watch (app.py, split)
    "gputui.ui.messages",
    "gputui.ui.overview",
    "gputui.ui.overview.cadence",  # the charts' columns, the readings held past their jitter
    "gputui.ui.overview.lines",
    "gputui.ui.overview.pane",
    "gputui.ui.overview.widgets",
    "gputui.ui.panes",
    "gputui.ui.render",
    "gputui.ui.terminal_watch",
    "gputui.ui.textual_crop",
    "gputui.ui.theme",
    "gputui.ui.widgets",
    "gputui.ui.widgets.card",
    "gputui.ui.widgets.footer",
    "gputui.ui.widgets.header",
    "gputui.ui.widgets.lines",
    "gputui.ui.widgets.text",
    # the Overview's process list (the Processes tab's widget): rows, lines, the table, the
    # verdict lines above it (job_view, its engine imports inside), the one signal path
    "gputui.telemetry.host",
    "gputui.telemetry.host.cmdline",
    "gputui.telemetry.host.pidns",
    "gputui.ui.processes",
    "gputui.ui.processes.job_view",
    "gputui.ui.processes.lines",
    "gputui.ui.processes.process_list",
    "gputui.ui.processes.rows",
    "gputui.ui.processes.signals",
    "gputui.ui.processes.sent",  # the signal path's plain data (signals', moved out)
    "gputui.ui.processes.widgets",
}
"""gputui's modules imported by `gputui --demo` up to its first frame."""

NOT_BEFORE_THE_FIRST_FRAME = (
    "plotext",  # the detail view's charts
    "psutil",  # the host facts of GPU processes: a recording has them already
    "pynvml",
    "secrets",  # random names of files written (the state, at exit)
    "statistics",  # job health's straggler comparison
    "tomllib",  # there is no config file
    "gputui.diag",
    "gputui.export",
    "gputui.cluster",
    "gputui.control",
    "gputui.ui.detail",
    "gputui.telemetry.nccl",  # NCCL RAS: a snapshot's view is decoded or made when one comes
    "gputui.telemetry.replay_judge",  # a replay's seeks: with the engines, after the frame
    "gputui.telemetry.health",  # the engines' (hints import its spin test where they judge)
    "gputui.telemetry.health_report",  # the reports: made by the engine, after the frame
    "gputui.telemetry.job_energy",  # a report's energy
    "gputui.ui.processes.nccl_lines",
    "gputui.ui.processes.pane",
    "gputui.telemetry.host.processes",
)


CHILD_READS = {
    "gputui.telemetry.host.cgroup_trust",
    "gputui.telemetry.host.jobs",
    "gputui.telemetry.host.processes",
    "gputui.telemetry.host.proctree",
    "gputui.telemetry.host.rank",
    "gputui.telemetry.host.starttime",
    "gputui.telemetry.host.workers",
}
"""The GPU processes' host facts (psutil) and their jobs, the process list's rows: what only
the reading of a sample imports.  With the read-ahead in a child, this process imports them
after its first frame.  (With bench's stand-in pynvml, which decodes its recording with
gputui.telemetry.codec, the codec goes with them: the demo's FIRST_FRAME has it for the
demo's own recording.)"""

NVML_OPENED = {"gputui.telemetry.nvml.static", "gputui.telemetry.nvml.parallel"}
"""What opening NVML imports (the static facts, read on a thread per GPU): in this process
with the read-ahead on a thread; with it in a child, there (this process opens NVML on the
poller's thread, after its first frame).  The slow cadence's GPM sampler and Xid events
(with ctypes) come later still, when its thread starts."""

LIVE = (
    {
        # NVML: the source, its queries (nvml/ needs pynvml, which loads the library only at
        # nvmlInit); the slow cadence's types (a tick merges their values)
        "gputui.telemetry.host.procfs",
        "gputui.telemetry.nvml",
        "gputui.telemetry.nvml.query",
        "gputui.telemetry.nvml.read_ahead",
        "gputui.telemetry.nvml.slow",
        "gputui.telemetry.nvml.source",
    }
    | NVML_OPENED
    | CHILD_READS
)
"""What the live monitor imports before its first frame beyond the demo's FIRST_FRAME, with
the read-ahead on a thread."""

REPLAY_ONLY = {"gputui.telemetry.recording", "gputui.recording_settings", "gputui.telemetry.gpm_check"}
"""The demo's (a recording, its header's own settings, the check of its GPM figures) that the
live start does without (GPM's sampler checks its figures with its thread, after the frame)."""

NOT_BEFORE_THE_LIVE_FIRST_FRAME = tuple(
    m for m in NOT_BEFORE_THE_FIRST_FRAME if m not in ("psutil", "pynvml", "gputui.telemetry.host.processes")
)
"""What the demo leaves out that the live start needs: pynvml, psutil and the process
inspector (the rows' user, command, CPU and memory); everything else stays out (NCCL RAS's
watch among them: its first round runs after the first frame, on its own thread)."""

STANDIN = REPO / "bench" / "nvml_standin"
X4 = REPO / "tests" / "fixtures" / "h100-x4-matrix" / "1-healthy-stopped" / "recording.jsonl.gz"


def _run(code: str, tmp_path: Path, **env_extra: str) -> dict[str, object]:
    env = {
        **env_extra,
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": os.pathsep.join(filter(None, (env_extra.get("PYTHONPATH"), str(REPO)))),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "HOME": str(tmp_path),
    }
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=tmp_path,
        env=env,
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def test_the_demos_first_frame_is_drawn_without_the_modules_it_does_not_need(tmp_path):
    """`gputui --demo` as the command line starts it (config, saved state, the recording,
    the app), up to the first frame with the GPUs on it: none of the modules above is
    imported by then; the frame has the recording's first tick (read with the file, so
    drawn with the first paint)."""
    result = _run(
        f"""
        import asyncio, json, os, sys
        from gputui import cli
        args = cli._parse(["--demo"])
        from gputui.config import load
        loaded = load(None)
        saved, warning, path = cli.remembered(args, loaded.config)
        from gputui.telemetry.recording import ReplaySource
        source = ReplaySource(cli.DEMO_RECORDING)
        from gputui.ui.app import GpuTuiApp
        imported = "ctypes" in sys.modules  # (a browser session's parent-death signal; Textual's
                                            # test driver imports it for itself)

        frame = {{}}

        def at_first_frame():
            frame["gputui"] = sorted(m for m in sys.modules if m.split(".")[0] == "gputui")
            frame["modules"] = sorted(
                m for m in sys.modules if m.split(".")[0] in {json.dumps(NOT_BEFORE_THE_FIRST_FRAME)}
                or any(m == n or m.startswith(n + ".") for n in {json.dumps(NOT_BEFORE_THE_FIRST_FRAME)})
            )

        class Probe(GpuTuiApp):
            CSS_PATH = os.path.join(os.path.dirname(cli.__file__), "ui", GpuTuiApp.CSS_PATH)

            def on_mount(self):  # (before the app's own: its callbacks after the frame come later)
                self.call_after_refresh(at_first_frame)

        async def go():
            app = Probe(source=source, interval=3600.0, demo=True, config=loaded.config,
                        saved=saved, state_path=path, watch_terminal=False)
            async with app.run_test(size=(160, 50)) as pilot:
                while "gputui" not in frame:
                    await pilot.pause()
                # drawn with the data taken at mount: the poller's first tick is one interval on
                at_mount = app.snapshot is not None and app.poller.ticks == 0
                position = app.query_one("HeaderBar").position
                return at_mount, position

        at_mount, position = asyncio.run(go())
        print(json.dumps({{"at_mount": at_mount, "position": position, "modules": frame["modules"],
                          "ctypes": imported, "gputui": frame["gputui"]}}))
        """,
        tmp_path,
    )
    assert result["modules"] == []
    assert result["ctypes"] is False
    gputui = set(result["gputui"])
    assert {"added": sorted(gputui - FIRST_FRAME), "gone": sorted(FIRST_FRAME - gputui)} == {
        "added": [],
        "gone": [],
    }
    assert result["at_mount"] is True  # the first tick was shown at mount, not a message later
    assert result["position"][0] == 1  # and the header says which tick it is


def test_a_live_sample_with_no_gpu_process_imports_no_psutil(tmp_path):
    """psutil (tens of ms to import, on the NVML read-ahead thread beside the UI's imports)
    is for the host facts of GPU processes: a sample with none (no driver, or idle GPUs)
    does not import it; one with processes does, and enriches them."""
    result = _run(
        """
        import json, sys
        from gputui.telemetry.nvml.source import NvmlSource
        src = NvmlSource()
        src.open()
        snap = src.sample()
        print(json.dumps({"processes": len(snap.processes), "psutil": "psutil" in sys.modules}))
        """,
        tmp_path,
    )
    assert result["psutil"] is (result["processes"] > 0)


@pytest.mark.parametrize("in_child", [True, False], ids=["read-ahead-in-a-child", "read-ahead-on-a-thread"])
def test_the_live_first_frame_is_drawn_without_the_modules_it_does_not_need(tmp_path, in_child):
    """The live monitor as the command line starts it: NvmlSource read ahead (NVML's open
    and first sample in a forked child, or on a thread where no child can be made) while
    the config, the state and the app load, the app takes them at mount.  NVML here is
    bench/nvml_standin's pynvml answering with the real 4x H100 recording (its processes
    become this interpreter's PID, so psutil reads a real one): only the imports are
    checked, no figure.  By the first frame: FIRST_FRAME (less REPLAY_ONLY) and LIVE,
    nothing else of gputui's, none of NOT_BEFORE_THE_LIVE_FIRST_FRAME; the slow-cadence
    thread not started; the frame has the four GPUs and their processes.  In a child, what
    the reading imports (pynvml, psutil, the process inspector and the jobs: CHILD_READS)
    is the child's, and none of NOT_BEFORE_THE_FIRST_FRAME is imported here: this process
    imports them once its first frame is drawn (the poller's `open`)."""
    result = _run(
        f"""
        import asyncio, json, os, sys
        from gputui import cli
        args = cli._parse(["--no-remember"])
        from gputui.telemetry.nvml.source import NvmlSource
        live = NvmlSource()
        live.prefetch(in_child={in_child})
        from gputui.config import load
        loaded = load(None)
        saved, warning, path = cli.remembered(args, loaded.config)
        from gputui.ui.app import GpuTuiApp
        if {in_child}:  # (read ahead while the UI loaded, as on a GPU machine)
            assert live._child.answered(30)
        else:
            live._prefetch.join()
        not_before = {json.dumps(NOT_BEFORE_THE_FIRST_FRAME if in_child else NOT_BEFORE_THE_LIVE_FIRST_FRAME)}
        frame = {{}}

        def at_first_frame():
            frame["gputui"] = sorted(m for m in sys.modules if m.split(".")[0] == "gputui")
            frame["modules"] = sorted(
                m for m in sys.modules if any(m == n or m.startswith(n + ".") for n in not_before)
            )
            frame["slow"] = live._slow_thread is not None
            frame["psutil"] = "psutil" in sys.modules

        class Probe(GpuTuiApp):
            CSS_PATH = os.path.join(os.path.dirname(cli.__file__), "ui", GpuTuiApp.CSS_PATH)

            def on_mount(self):
                self.call_after_refresh(at_first_frame)

        async def go():
            app = Probe(source=live, interval=3600.0, config=loaded.config, saved=saved,
                        state_path=path, watch_terminal=False)
            async with app.run_test(size=(160, 50)) as pilot:
                while "gputui" not in frame:
                    await pilot.pause()
                return len(app.snapshot.gpus), len(app.snapshot.processes)

        gpus, processes = asyncio.run(go())
        print(json.dumps({{**frame, "gpus": gpus, "processes": processes}}))
        """,
        tmp_path,
        PYTHONPATH=str(STANDIN),
        GPUTUI_NVML_STANDIN=str(X4),
    )
    assert (result["gpus"], result["processes"]) == (4, 4)
    assert result["modules"] == []
    assert result["psutil"] is (not in_child) and result["slow"] is False
    gputui = set(result["gputui"])
    want = FIRST_FRAME - REPLAY_ONLY | LIVE
    if in_child:
        want -= CHILD_READS | NVML_OPENED | {"gputui.telemetry.codec"}
    assert {"added": sorted(gputui - want), "gone": sorted(want - gputui)} == {
        "added": [],
        "gone": [],
    }
