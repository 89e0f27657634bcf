"""What the monitor's first frame does not import (issue 25: the first frame with public
APIs only, by doing less before it).  Each check runs in a fresh interpreter, since other
tests import everything; how fast the frame comes is a benchmark (bench/RESULTS.md)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

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
    "gputui.ui.processes.pane",
    "gputui.telemetry.host.processes",
)


def _run(code: str, tmp_path: Path) -> dict[str, object]:
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(REPO),
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
        import asyncio, json, sys
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

        async def go():
            app = GpuTuiApp(source=source, interval=3600.0, demo=True, config=loaded.config,
                            saved=saved, state_path=path, watch_terminal=False)
            async with app.run_test(size=(160, 50)) as pilot:
                await pilot.pause()
                # drawn with the data taken at mount: the poller's first tick is one interval on
                at_mount = app.snapshot is not None and app.poller.ticks == 0
                position = app.query_one("HeaderBar").position
                return at_mount, position, sorted(
                    m for m in sys.modules if m.split(".")[0] in {json.dumps(NOT_BEFORE_THE_FIRST_FRAME)}
                    or any(m == n or m.startswith(n + ".") for n in {json.dumps(NOT_BEFORE_THE_FIRST_FRAME)})
                )

        at_mount, position, loaded_modules = asyncio.run(go())
        print(json.dumps({{"at_mount": at_mount, "position": position, "modules": loaded_modules,
                          "ctypes": imported}}))
        """,
        tmp_path,
    )
    assert result["modules"] == []
    assert result["ctypes"] is False
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
