"""A browser session of `gputui serve` as the app sees it: readonly unless --allow-signals,
no program the page could name, and an end when serve stops listening (its pipes)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FROZEN, H200_X2, wait_for

pytest.importorskip("textual_serve")
import aiohttp
from serve_support import ROOT, app_output, start_serve

from gputui.telemetry.recording import ReplaySource
from gputui.ui.app import GpuTuiApp
from gputui.ui.diagnostics.pane import DiagnosticsPane
from gputui.ui.diagnostics.picker import InterpreterPicker


def test_a_serve_session_offers_no_interpreter_chooser_and_no_stress(tmp_path) -> None:
    async def go() -> None:
        app = GpuTuiApp(
            source=ReplaySource(H200_X2), interval=FROZEN, serve_session=True, diag_python=sys.executable
        )
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.press("4")
            await wait_for(pilot, lambda: isinstance(app.current_pane(), DiagnosticsPane))
            pane = app.current_pane()
            assert isinstance(pane, DiagnosticsPane)
            assert pane.python == sys.executable
            await pilot.press("e")
            await pilot.pause(0.2)
            assert not isinstance(app.screen, InterpreterPicker)
            await pilot.press("s")
            await pilot.pause(0.2)
            assert pane.stress is None
            pane.action_pick_interpreter()  # even called directly (not through a key)
            pane.action_stress()
            await pilot.pause(0.2)
            assert not isinstance(app.screen, InterpreterPicker) and pane.stress is None
            keys = "".join(text for text, _style in pane.query_one("#diag-header").build(140, 40)[-2])
            assert "diagnose" in keys and "interpreter" not in keys and "stress" not in keys

    asyncio.run(go())


@pytest.mark.parametrize("allow", [False, True])
def test_serve_sessions_are_readonly_unless_allow_signals(allow: bool) -> None:
    s = start_serve(*(["--allow-signals"] if allow else []))
    try:

        async def go() -> list[str]:
            async with aiohttp.ClientSession() as session, session.ws_connect(s.ws()) as ws:
                await app_output(ws, b"Overview")
                (p,) = s.sessions()
                return p.cmdline()

        cmd = asyncio.run(go())
        i = cmd.index("--serve-session")
        assert cmd[i + 1] == ("signals" if allow else "readonly")
    finally:
        s.stop()


@pytest.mark.parametrize(
    ("argv", "config_readonly", "expected"),
    [
        (["--serve-session", "readonly"], False, True),  # a config cannot undo serve's readonly
        (["--serve-session", "readonly", "--demo"], False, True),
        (["--serve-session", "signals"], False, False),
        (["--serve-session", "signals", "--readonly"], False, True),
        (["--serve-session", "signals"], True, True),
        ([], False, False),
        ([], True, True),
    ],
)
def test_which_sessions_are_readonly(argv: list[str], config_readonly: bool, expected: bool) -> None:
    from dataclasses import replace

    from gputui.cli import _parse, is_readonly
    from gputui.config import Config

    config = Config()
    config = replace(config, ui=replace(config.ui, readonly=config_readonly))
    assert is_readonly(_parse(argv), config) is expected


def test_serve_refuses_what_is_no_app_and_reserved_options() -> None:
    for app_args, message in (
        (["record", "x.jsonl"], "is no app"),
        (["--serve-session", "signals"], "serve's to give"),
        (["--diag-python=/bin/sh"], "serve's to give"),
    ):
        r = subprocess.run(
            [sys.executable, "-m", "gputui", "serve", "--listen", "127.0.0.1:0", "--", *app_args],
            check=False,
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "gputui", "serve", "--python", "relative/python", "--", "--demo"],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 2 and "absolute path" in r.stderr


def _session(parent: int) -> subprocess.Popen[bytes]:
    """A session as textual-serve starts one: web driver, pipes both ways."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TEXTUAL_DRIVER": "textual.drivers.web_driver:WebDriver",
        "COLUMNS": "120",
        "ROWS": "40",
    }
    mode = ["--serve-session", "readonly", "--serve-parent", str(parent)]
    cmd = [sys.executable, "-m", "gputui", *mode, "--demo"]
    return subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )


def _read_until_ready(p: subprocess.Popen[bytes], needle: bytes = b"Overview", timeout: float = 40) -> None:
    assert p.stdout is not None
    got = b""
    deadline = time.monotonic() + timeout
    while needle not in got:
        assert time.monotonic() < deadline, "the session drew no Overview"
        chunk = os.read(p.stdout.fileno(), 65536)
        assert chunk, "the session exited"
        got += chunk


def _wait_until_blocked_writing(pid: int, timeout: float = 60) -> None:
    """Until a thread of `pid` sleeps in the kernel writing to a full pipe (its wchan)."""
    deadline = time.monotonic() + timeout
    while True:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                if "pipe_write" in Path(f"/proc/{pid}/task/{tid}/wchan").read_text():
                    return
        assert time.monotonic() < deadline, "no thread of the session blocked writing to its pipe"
        time.sleep(0.05)


def test_a_session_whose_server_stopped_reading_ends_by_itself() -> None:
    """The orphan of issue 23: serve gone or no longer reading, the session ran on."""
    p = _session(os.getpid())
    try:
        _read_until_ready(p)
        time.sleep(3)  # (its start-up over: no write of its own fails now)
        assert p.stdout is not None and p.stderr is not None
        p.stdout.close()  # serve's ends of the session's output: no reader left
        p.stderr.close()
        assert p.wait(6) is not None
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_ends_a_session_blocked_writing_to_a_full_pipe(sig: signal.Signals) -> None:
    """Nobody reads its output and it keeps drawing (resizes): its writes block, and an
    event-loop signal handler (Textual's web driver's SIGTERM) never runs."""
    p = _session(os.getpid())
    try:
        _read_until_ready(p)
        assert p.stdin is not None
        for i in range(300):
            meta = json.dumps({"type": "resize", "width": 100 + i % 60, "height": 40}).encode()
            p.stdin.write(b"M" + len(meta).to_bytes(4, "big") + meta)
        p.stdin.flush()
        _wait_until_blocked_writing(p.pid)  # (the pipe filled)
        assert p.poll() is None
        p.send_signal(sig)
        assert p.wait(6) is not None
    finally:
        p.kill()
        p.wait()


def test_a_session_whose_parent_is_gone_does_not_start() -> None:
    p = _session(parent=1)  # not its parent: serve died before the session could ask
    try:
        assert p.wait(20) == 0
    finally:
        p.kill()
        p.wait()
