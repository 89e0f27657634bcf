"""A real headless Chromium driven over the DevTools protocol, for the serve tests, and a
recording web server standing in for another user's page on another local port."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@contextlib.contextmanager
def chromium() -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A headless Chromium with a fresh profile: (its process, its DevTools port)."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    profile = Path(tempfile.mkdtemp(prefix="gputui-chromium-"))
    browser = subprocess.Popen(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--remote-debugging-port=0",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield browser, _devtools_port(profile, browser)
    finally:
        with contextlib.suppress(OSError):
            browser.kill()
        browser.wait(10)
        shutil.rmtree(profile, ignore_errors=True)


def _devtools_port(profile: Path, browser: subprocess.Popen[bytes], timeout: float = 30) -> int:
    deadline = time.monotonic() + timeout
    active = profile / "DevToolsActivePort"
    while not active.exists() or not active.read_text().strip():
        assert browser.poll() is None, "chromium exited"
        assert time.monotonic() < deadline, "chromium opened no DevTools port"
        time.sleep(0.1)
    return int(active.read_text().split()[0])


class Page:
    """One tab over DevTools: commands, and the websocket frames the page received."""

    def __init__(self, cdp: aiohttp.ClientWebSocketResponse) -> None:
        self.cdp = cdp
        self.next_id = 0
        self.frames = b""

    def _take(self, event: dict[str, Any]) -> None:
        if event.get("method") == "Network.webSocketFrameReceived":
            frame = event["params"]["response"]
            data = frame["payloadData"]
            self.frames += base64.b64decode(data) if frame["opcode"] == 2 else data.encode()

    async def call(self, method: str, timeout: float = 30, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        ident = self.next_id
        await self.cdp.send_str(json.dumps({"id": ident, "method": method, "params": params}))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            event = json.loads((await self.cdp.receive(timeout=max(0.01, deadline - loop.time()))).data)
            if event.get("id") == ident:
                assert "error" not in event, event
                result: dict[str, Any] = event.get("result", {})
                return result
            self._take(event)

    async def wait_for_frames(self, needle: bytes, timeout: float = 60) -> bytes:
        """The bytes the page's websockets received, once they hold `needle`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while needle not in self.frames:
            assert loop.time() < deadline, f"the page's websocket got no {needle!r}"
            self._take(json.loads((await self.cdp.receive(timeout=deadline - loop.time())).data))
        return self.frames

    async def cookies(self) -> list[dict[str, Any]]:
        """Every cookie the browser keeps, for any site."""
        return list((await self.call("Storage.getCookies"))["cookies"])


@contextlib.asynccontextmanager
async def page(devtools_port: int) -> AsyncIterator[Page]:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{devtools_port}/json/list") as r:
            targets = await r.json()
        target = next(t for t in targets if t["type"] == "page")
        async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as cdp:
            tab = Page(cdp)
            await tab.call("Network.enable")
            yield tab


class Recorder:
    """Another local web server (another user's, on another port): it records every request
    it gets, whole, and serves a page that calls itself back with whatever the browser adds
    (cookies, the page's own cookie jar)."""

    PAGE = (
        b"<!doctype html><title>another page</title><script>"
        b"fetch('/probe?seen=' + encodeURIComponent(document.cookie), {credentials: 'include'});"
        b"</script>"
    )

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.probed = threading.Event()
        recorder = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                recorder.requests.append(f"{self.requestline}\r\n{self.headers}")
                body = b"" if self.path.startswith("/probe") else recorder.PAGE
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                if self.path.startswith("/probe"):
                    recorder.probed.set()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Recorder:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def seen(self) -> str:
        return "\r\n".join(self.requests)
