"""The cluster screen: real key presses (sorting, filtering, drilling into a host), a slow
server that must not freeze it, untrusted labels, credentials kept off the screen, SVG
snapshots, and `gputui serve` in a real headless Chromium."""

from __future__ import annotations

import asyncio
import http.server
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from cluster_support import CHROMIUM, RecordedCluster, free_port, host_name
from conftest import FIXTURES, screen_lines, wait_for

from gputui.cluster.http import Credentials, HttpClient
from gputui.cluster.model import gpu_flags, summarize
from gputui.cluster.sources import DirectSource
from gputui.telemetry.alerts import IdleRule
from gputui.ui.cluster.app import ClusterApp, HostScreen

X8_240 = FIXTURES / "derived" / "h200x8-nvswitch-240procs.jsonl.gz"
RULE = IdleRule(True, 30.0, 0, 1024)
SECRET = "s3cr3t-T0KEN-do-not-show"


def fleet_app(hosts: int = 64, down: tuple[int, ...] = (5,), tick: int = 40) -> ClusterApp:
    return ClusterApp(RecordedCluster(X8_240, hosts, tick=tick, down=down), refresh=3600)


async def started(pilot) -> None:
    await wait_for(pilot, lambda: pilot.app.states_applied >= 1, timeout=120)
    await pilot.pause()


def test_filters_find_held_idle_and_unhealthy_in_one_key_press():
    asyncio.run(_filters_find_held_idle_and_unhealthy_in_one_key_press())


async def _filters_find_held_idle_and_unhealthy_in_one_key_press():
    app = fleet_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await started(pilot)
        summary = summarize(app.state, RULE)
        assert summary.gpus == 64 * 8
        assert summary.held_idle > 0 and summary.busy > 0
        await pilot.press("r")
        rows = app.table.rows
        assert len(rows) == summary.held_idle
        assert all("held_idle" in r.flags for r in rows)
        assert "memory held but idle" in "\n".join(screen_lines(app))
        await pilot.press("exclamation_mark")
        rows = app.table.rows
        assert len(rows) == summary.unhealthy == 8  # the down host's eight GPUs
        assert {r.host.name for r in rows} == {host_name(5)}
        assert "DOWN" in screen_lines(app)[2]
        await pilot.press("b")
        assert len(app.table.rows) == summary.busy
        await pilot.press("a")
        assert len(app.table.rows) == 512


def test_sort_keys_order_the_gpus():
    asyncio.run(_sort_keys_order_the_gpus())


async def _sort_keys_order_the_gpus():
    app = fleet_app(hosts=16)
    async with app.run_test(size=(140, 40)) as pilot:
        await started(pilot)
        await pilot.press("s")  # host -> util
        assert app.sort == "util"
        utils = [r.gpu.sample.gpu_util or 0 for r in app.table.rows if r.gpu and r.host.up]
        assert utils == sorted(utils, reverse=True) and utils[0] > 0
        await pilot.press("s")
        assert app.sort == "memory"
        mem = [r.gpu.sample.mem_used or 0 for r in app.table.rows if r.gpu and r.host.up]
        assert mem == sorted(mem, reverse=True)
        await pilot.press("S", "S")
        assert app.sort == "host"


def test_enter_drills_into_a_host_with_cards_and_history():
    asyncio.run(_enter_drills_into_a_host_with_cards_and_history())


async def _enter_drills_into_a_host_with_cards_and_history():
    app = fleet_app(hosts=8)
    async with app.run_test(size=(160, 50)) as pilot:
        await started(pilot)
        for _ in range(8 * 3):  # to the first GPU of host 4
            await pilot.press("down")
        assert app.table.selected().host.name == host_name(3)
        await pilot.press("enter")
        assert isinstance(app.screen, HostScreen)
        await wait_for(pilot, lambda: bool(app.screen.history.times))
        await pilot.pause()
        text = "\n".join(screen_lines(app))
        assert host_name(3) in text
        assert text.count("NVIDIA H200") >= 4  # the Overview's cards, one per GPU
        await pilot.press("end")  # the charts are below the cards, the clocks' the last
        await pilot.pause()
        text = "\n".join(screen_lines(app))
        assert "Power" in text and "Clocks" in text
        await pilot.press("right")
        assert app.screen.selected_key == app.screen.host().gpus[1].key
        await pilot.press("escape")
        assert not isinstance(app.screen, HostScreen)


class _Slow(http.server.BaseHTTPRequestHandler):
    delay = 10.0

    def do_GET(self) -> None:
        time.sleep(self.delay)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",Hostname="slow-node"} 3\n')

    def log_message(self, format: str, *args: object) -> None:
        pass


def serve(handler) -> http.server.ThreadingHTTPServer:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def test_a_slow_exporter_never_freezes_the_screen():
    asyncio.run(_a_slow_exporter_never_freezes_the_screen())


async def _a_slow_exporter_never_freezes_the_screen():
    httpd = serve(_Slow)
    try:
        src = DirectSource([f"127.0.0.1:{httpd.server_address[1]}"], HttpClient(timeout=30))
        app = ClusterApp(src, refresh=3600)
        async with app.run_test(size=(120, 20)) as pilot:
            # the first answer takes seconds; keys work meanwhile and the screen says why
            await pilot.press("s")
            assert app.sort == "util"
            await wait_for(pilot, lambda: "waiting for an answer" in "\n".join(screen_lines(app)), timeout=9)
            assert app.states_applied == 0
            await wait_for(pilot, lambda: app.states_applied >= 1, timeout=60)
            assert "slow-node" in "\n".join(screen_lines(app))
        src.close()
    finally:
        httpd.shutdown()


class _Hostile(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.headers.get("Authorization") != f"Bearer {SECRET}":
            self.send_response(401)
            self.end_headers()
            return
        self.send_response(200)
        self.end_headers()
        self.wfile.write(
            b'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",Hostname="evil\x1b[2Jnode",'
            b'modelName="[bold red]H200\x1b]0;pwned\x07",pod="p\xe2\x80\x8bod",namespace="ns"} 50\n'
        )

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_untrusted_labels_are_drawn_literally_and_credentials_never_shown():
    asyncio.run(_untrusted_labels_are_drawn_literally_and_credentials_never_shown())


async def _untrusted_labels_are_drawn_literally_and_credentials_never_shown():
    httpd = serve(_Hostile)
    url = f"127.0.0.1:{httpd.server_address[1]}"
    try:
        good = DirectSource([url], HttpClient(timeout=5, credentials=Credentials(f"Bearer {SECRET}")))
        app = ClusterApp(good, refresh=3600)
        async with app.run_test(size=(140, 12)) as pilot:
            await started(pilot)
            text = "\n".join(screen_lines(app))
            assert "\x1b" not in text and "\x07" not in text and "\u200b" not in text
            assert "[bold red]H…" in text  # markup shown as the text it is (cut to the column)
            assert "evil?[2Jnode" in text or "evil [2Jnode" in text, text
            assert SECRET not in text
        bad = DirectSource([url], HttpClient(timeout=5, credentials=Credentials(f"Bearer x{SECRET}")))
        app = ClusterApp(bad, refresh=3600)
        async with app.run_test(size=(140, 12)) as pilot:
            await started(pilot)
            text = "\n".join(screen_lines(app))
            assert "401" in text
            assert SECRET not in text
        good.close()
        bad.close()
    finally:
        httpd.shutdown()


def test_every_row_of_a_filter_has_its_flag_at_500_gpus():
    asyncio.run(_every_row_of_a_filter_has_its_flag_at_500_gpus())


async def _every_row_of_a_filter_has_its_flag_at_500_gpus():
    app = fleet_app(hosts=64)
    async with app.run_test(size=(100, 30)) as pilot:
        await started(pilot)
        for key, flag in (("t", "throttled"), ("i", "idle"), ("d", "down")):
            await pilot.press(key)
            state = app.state
            want = sum(1 for h in state.hosts for g in h.gpus if flag in gpu_flags(g, h.up, RULE))
            assert len(app.table.rows) == want
        await pilot.press("end")
        assert app.table.cursor == len(app.table.rows) - 1


# --------------------------------------------------------------------------------------
# SVG snapshots
# --------------------------------------------------------------------------------------


def _after_state(press: tuple[str, ...] = (), history: bool = False):
    async def run_before(pilot) -> None:
        await started(pilot)
        for key in press:
            await pilot.press(key)
        if history:
            await wait_for(
                pilot,
                lambda: bool(getattr(pilot.app.screen, "history", None) and pilot.app.screen.history.times),
            )
        await pilot.pause()

    return run_before


def test_cluster_512gpus_160x50(snap_compare):
    assert snap_compare(fleet_app(), terminal_size=(160, 50), run_before=_after_state())


def test_cluster_held_idle_120x40(snap_compare):
    assert snap_compare(fleet_app(), terminal_size=(120, 40), run_before=_after_state(("r",)))


def test_cluster_host_drill_in_160x60(snap_compare):
    press = ("down",) * 16 + ("enter",)
    assert snap_compare(
        fleet_app(hosts=8), terminal_size=(160, 60), run_before=_after_state(press, history=True)
    )


# --------------------------------------------------------------------------------------
# gputui serve in a real headless Chromium
# --------------------------------------------------------------------------------------

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def test_serve_refuses_a_remote_address_without_allow_remote():
    from conftest import gputui

    done = gputui("serve", "--listen", "0.0.0.0:8080")
    assert done.returncode == 2
    assert "--allow-remote" in done.stderr


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's `chromium` package is not installed")
def test_serve_in_headless_chromium_shows_a_replay_and_answers_a_key(tmp_path):
    """The page textual-serve gives, loaded in a real browser: it starts gputui on a replay of
    two real H200s; the browser's DOM then holds the app's screen (xterm.js renders into DOM
    rows); a key press sent through the DevTools protocol opens the help screen."""
    pytest.importorskip("textual_serve")
    import asyncio
    import urllib.request

    port = free_port()
    recording = FIXTURES / "h200-x2-v2" / "recording.jsonl.gz"
    token = "x" * 43  # (serve's secret, given as a wall display would: no URL to parse)
    env = dict(os.environ, TZ="UTC", GPUTUI_SERVE_TOKEN=token)
    server = subprocess.Popen(
        [sys.executable, "-m", "gputui", "serve", "--listen", f"127.0.0.1:{port}", "--",
         "--replay", str(recording)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True,
    )  # fmt: skip
    profile = Path(tempfile.mkdtemp(prefix="gputui-chromium-"))
    debug_port = free_port()
    browser = None
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/?token={token}", timeout=2) as r:
                    page = r.read().decode()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    if server.poll() is None:  # (its stderr ends only when it does)
                        os.killpg(server.pid, signal.SIGKILL)
                    raise AssertionError(
                        "gputui serve did not start: " + (server.stderr.read() if server.stderr else "")
                    ) from None
                time.sleep(0.3)
        assert "textual" in page.lower()
        browser = subprocess.Popen(
            [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--remote-debugging-port={debug_port}",
             "--remote-allow-origins=*", "--window-size=1400,900", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        seen = asyncio.run(_drive(debug_port, f"http://127.0.0.1:{port}/?token={token}", tmp_path))
        # the page's DOM: the terminal element exists and got the app's first bytes
        assert seen["dom"] == {"terminal": True, "first_byte": True}, seen["dom"]
        # what the browser received over the page's websocket and drew: the replay's GPUs
        assert "NVIDIA H200" in seen["before"] and "RECORDED SESSION" in seen["before"]
        # a key press in the page reached gputui: `?` opened the help, listing every key
        assert "Quit gputui" in seen["after"], seen["after"][-2000:]
        # and the browser's screenshots show it: the picture changed, and is not blank
        before, after = (tmp_path / "before.png").read_bytes(), (tmp_path / "after.png").read_bytes()
        assert before != after and len(before) > 20_000
    finally:
        for p in (browser, server):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait(5)
        shutil.rmtree(profile, ignore_errors=True)


async def _drive(debug_port: int, url: str, out: Path) -> dict[str, object]:
    """Open `url` in the browser through the DevTools protocol, wait for gputui's screen, press
    `?`; return the DOM facts and the terminal output the page received before and after the
    key, and save screenshots (before.png, after.png) in `out`."""
    import base64
    import json
    import urllib.request

    import aiohttp

    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{debug_port}/json/list", timeout=2) as r:
                targets = json.load(r)
            ws_url = next(t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page")
            break
        except (OSError, StopIteration):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.3)
    received: list[str] = []
    async with aiohttp.ClientSession() as session, session.ws_connect(ws_url, max_msg_size=0) as ws:
        ids = iter(range(1, 100_000))

        async def call(method: str, **params: object) -> dict:
            n = next(ids)
            await ws.send_json({"id": n, "method": method, "params": params})
            while True:
                msg = await ws.receive_json(timeout=60)
                if msg.get("method") == "Network.webSocketFrameReceived":
                    frame = msg["params"]["response"]
                    data = frame.get("payloadData", "")
                    if frame.get("opcode") == 2:
                        data = base64.b64decode(data).decode("utf-8", "replace")
                    received.append(data)
                if msg.get("id") == n:
                    return msg.get("result", {})

        async def evaluate(expression: str) -> object:
            got = await call("Runtime.evaluate", expression=expression, returnByValue=True)
            return got.get("result", {}).get("value")

        async def wait_text(needle: str, start: int, seconds: float) -> str:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                text = "".join(received[start:])
                if needle in text:
                    return text
                await call("Runtime.evaluate", expression="1")  # pumps the event stream
                await asyncio.sleep(0.3)
            return "".join(received[start:])

        async def screenshot(name: str) -> None:
            shot = await call("Page.captureScreenshot", format="png")
            (out / name).write_bytes(base64.b64decode(shot["data"]))

        await call("Network.enable")
        await call("Page.enable")
        await call("Page.navigate", url=url)
        before = await wait_text("RECORDED SESSION", 0, 90)
        await asyncio.sleep(1.0)
        dom = {
            "terminal": await evaluate("!!document.querySelector('#terminal .xterm')"),
            "first_byte": await evaluate("document.body.classList.contains('-first-byte')"),
        }
        await screenshot("before.png")
        mark = len(received)
        await evaluate("document.querySelector('.xterm-helper-textarea').focus()")
        for kind in ("keyDown", "keyUp"):
            await call(
                "Input.dispatchKeyEvent",
                type=kind,
                key="?",
                code="Slash",
                text="?" if kind == "keyDown" else "",
                windowsVirtualKeyCode=191,
                modifiers=8,
            )
        after = await wait_text("Quit gputui", mark, 30)
        await asyncio.sleep(1.0)
        await screenshot("after.png")
        return {"dom": dom, "before": before, "after": after}


def test_help_lists_the_cluster_keys():
    asyncio.run(_help_lists_the_cluster_keys())


async def _help_lists_the_cluster_keys():
    app = fleet_app(hosts=2)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: "Only unhealthy GPUs" in "\n".join(screen_lines(app)), 30)
        text = "\n".join(screen_lines(app))
        assert "Only unhealthy GPUs" in text and "Only GPUs whose memory is held" in text
        # a key is shown as the character it types, never as Textual's name for it
        line = next(x for x in text.splitlines() if "Only unhealthy GPUs" in x)
        assert "! / u" in line and "exclamation_mark" not in text, line


#: The README's cluster pictures are these snapshots, kept current.
PICTURES = {
    "cluster-512gpus-160x50.svg": "test_cluster_512gpus_160x50.svg",
    "cluster-held-idle-120x40.svg": "test_cluster_held_idle_120x40.svg",
    "cluster-host-160x60.svg": "test_cluster_host_drill_in_160x60.svg",
}


@pytest.mark.parametrize(("picture", "snapshot"), sorted(PICTURES.items()))
def test_cluster_screenshot_is_the_current_snapshot(picture, snapshot):
    root = Path(__file__).resolve().parents[1]
    src = root / "tests" / "__snapshots__" / "test_cluster_ui" / snapshot
    dst = root / "screenshots" / picture
    assert dst.read_bytes() == src.read_bytes(), f"{dst} is stale: copy {src} over it"
