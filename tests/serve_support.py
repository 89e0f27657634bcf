"""A real `gputui serve -- --demo` on a free loopback port, and its sessions, for the serve tests."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import psutil

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Served:
    proc: subprocess.Popen[str]
    url: str
    """The URL serve printed, token included."""
    log: list[str] = field(default_factory=list)

    @property
    def base(self) -> str:
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}"

    @property
    def token(self) -> str:
        path = urlsplit(self.url).path
        assert path.startswith("/s/") and path.endswith("/"), self.url
        return path[len("/s/") : -1]

    @property
    def host(self) -> str:
        return urlsplit(self.url).netloc

    def path(self, rest: str = "", token: str | None = "right") -> str:
        """The URL of `rest` under the secret path of `token` ("right": serve's own; None: none)."""
        if token is None:
            return f"{self.base}/{rest}"
        return f"{self.base}/s/{self.token if token == 'right' else token}/{rest}"

    def ws(self, token: str | None = "right", **query: object) -> str:
        q = {"width": 100, "height": 30, **query}
        url = self.path("ws", token).replace("http://", "ws://", 1)
        return url + "?" + "&".join(f"{k}={v}" for k, v in q.items())

    def sessions(self) -> list[psutil.Process]:
        return sessions_of(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        wait_no_sessions(self.proc.pid, 10)
        for p in sessions_of(self.proc.pid):  # (a failed test's leftovers)
            with contextlib.suppress(psutil.Error):
                p.kill()


def sessions_of(serve_pid: int) -> list[psutil.Process]:
    """gputui processes started by this serve, alive, its children or orphaned."""
    out = []
    for p in psutil.process_iter(["cmdline", "status"]):
        cmd = p.info["cmdline"] or []
        if "--serve-parent" in cmd and str(serve_pid) in cmd and p.info["status"] != psutil.STATUS_ZOMBIE:
            out.append(p)
    return out


def wait_no_sessions(serve_pid: int, timeout: float) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    while (left := sessions_of(serve_pid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def wait_sessions(served: Served, count: int, timeout: float = 30) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    while len(found := served.sessions()) < count:
        assert time.monotonic() < deadline, f"{len(found)} sessions, not {count}"
        time.sleep(0.1)
    return found


def start_serve(
    *serve_args: str,
    app_args: tuple[str, ...] = ("--demo",),
    env: dict[str, str] | None = None,
    open_files: int | None = None,
) -> Served:
    """`open_files`: serve's RLIMIT_NOFILE (soft and hard), to run out of descriptors cheaply."""

    def limit() -> None:
        if open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

    proc = subprocess.Popen(
        [sys.executable, "-m", "gputui", "serve", "--listen", "127.0.0.1:0", *serve_args, "--", *app_args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        preexec_fn=limit if open_files is not None else None,  # noqa: PLW1509 - before any thread
    )
    assert proc.stderr is not None
    log: list[str] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise AssertionError(f"serve exited: {''.join(log)}")
        log.append(line)
        m = re.search(r"open (http://\S+)", line)
        if m:
            served = Served(proc, m.group(1), log)
            os.set_blocking(proc.stderr.fileno(), False)
            return served
    proc.kill()
    raise AssertionError("serve printed no URL")


def read_log(served: Served) -> str:
    assert served.proc.stderr is not None
    with contextlib.suppress(TypeError, OSError):
        while chunk := served.proc.stderr.read():
            served.log.append(chunk)
    return "".join(served.log)


def wait_log(served: Served, needle: str, timeout: float = 30) -> str:
    """serve's log so far, once it holds `needle`."""
    deadline = time.monotonic() + timeout
    while needle not in (log := read_log(served)):
        assert time.monotonic() < deadline, f"serve never logged {needle!r}: {log}"
        time.sleep(0.05)
    return log


async def app_output(ws, needle: bytes, timeout: float = 40, partial: bool = False) -> bytes:
    """What the session sent until `needle` appeared in it (`partial`: or until `timeout`)."""
    from aiohttp import WSMsgType

    got = b""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while needle not in got:
        remaining = deadline - loop.time()
        if remaining <= 0 and partial:
            return got
        assert remaining > 0, f"no {needle!r} from the app in {timeout} s"
        try:
            msg = await ws.receive(timeout=remaining)
        except asyncio.TimeoutError:
            if partial:
                return got
            raise
        if msg.type == WSMsgType.BINARY:
            got += msg.data
        elif msg.type == WSMsgType.TEXT:
            got += msg.data.encode()
        elif msg.type in (WSMsgType.CLOSE, WSMsgType.CLOSED, WSMsgType.ERROR):
            raise AssertionError(f"the websocket closed: {got[-300:]!r}")
    return got


def cpu_percent(procs: list[psutil.Process], seconds: float = 1.0) -> float:
    with contextlib.suppress(psutil.Error):
        for p in procs:
            p.cpu_percent(None)
    time.sleep(seconds)
    total = 0.0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            total += p.cpu_percent(None)
    return total


def send(serve: Served, sig: signal.Signals) -> None:
    serve.proc.send_signal(sig)
