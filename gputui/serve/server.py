"""serve's web application (aiohttp): textual-serve's page, scripts and app sessions
(`upstream`) under the secret path, every request through `auth.Gate` (token, Host, Origin)
before a route sees it, connections accepted by `admission`, sessions capped and ended with
their browser (`sessions`), and a stop in well under 3 s with sessions open."""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import sys
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Handler

from gputui.serve.admission import Admission, waiting_cap
from gputui.serve.auth import Gate, secret_path
from gputui.serve.logs import HttpErrors, QuietLog, SafeLines
from gputui.serve.sessions import Sessions, clamp_size
from gputui.serve.upstream import STATICS, AppSession, index_page

log = logging.getLogger("gputui.serve")

HEARTBEAT_S = 5.0
"""Websocket pings this often; a browser that does not answer within half of it is gone."""
SHUTDOWN_S = 2.0
"""How long a stopping serve waits for its request handlers (the sessions are signalled first)."""
KEEPALIVE_S = 10.0
"""An idle keep-alive connection (of a page whose requests passed the gate) is closed after this."""
MAX_MESSAGE = 256 * 1024
"""The largest websocket message taken from a browser (a paste is a few KiB)."""
FORBIDDEN = "403: Forbidden\n"
NOT_A_WEBSOCKET = "400: this address is the page's websocket: open the page's own address instead\n"


class GuardedServer:
    """Serve `command` (one process per browser) to those who pass `gate`."""

    def __init__(
        self,
        command: str,
        sock: socket.socket,
        gate: Gate,
        sessions: Sessions,
        *,
        public_url: str | None = None,
        title: str = "gputui",
    ) -> None:
        self.command = command
        self.title = title
        self.sock = sock
        self.gate = gate
        self.sessions = sessions
        self.given_public_url = public_url.rstrip("/") if public_url else None
        """--public-url: where the page's links point; else the address the browser used."""
        self.admission: Admission
        """Connections not admitted yet (made once the loop runs)."""
        self.quiet: QuietLog
        self.session_count = 0
        """Sessions started so far (their names in the log)."""

    # ---- the aiohttp application -----------------------------------------------------

    def make_app(self) -> web.Application:
        """textual-serve's routes (less its file downloads, which gputui never offers), under
        the secret path, behind the gate."""
        app = web.Application(middlewares=[self.guard], client_max_size=64 * 1024)
        app.add_routes(
            [
                web.get("/s/{token}/", self.handle_index, name="index"),
                web.get("/s/{token}", self.handle_index),  # (the link, its last "/" lost)
                web.get("/s/{token}/ws", self.handle_websocket, name="websocket"),
                web.get("/s/{token}/static/{name:.+}", self.handle_static, name="static"),
            ]
        )
        app.on_response_prepare.append(private_headers)
        app.on_shutdown.append(self.on_shutdown)
        return app

    @web.middleware
    async def guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        reason = self.gate.refusal(request.headers.get("Host"), request.headers.get("Origin"), request.path)
        if reason is not None:
            # (never the path: it may hold a token)
            self.quiet.note(f"refused: {reason}", f"refused {request.remote}: {reason}")
            response = web.Response(status=403, text=FORBIDDEN)
            response.force_close()
            return response
        self.admission.admitted(request.transport)
        return await handler(request)

    def base_url(self, request: web.Request) -> str:
        """Where the page's links point, the secret path included."""
        # the Host passed the gate: it is one of ours
        return (self.given_public_url or f"http://{request.host}") + secret_path(self.gate.token)

    async def handle_index(self, request: web.Request) -> web.Response:
        base = self.base_url(request)
        scheme, rest = base.split(":", 1)
        websocket_url = ("wss:" if scheme == "https" else "ws:") + rest + "ws"
        size = font_size(request.query.get("fontsize", ""))
        page = index_page(websocket_url, base + "static/", size, self.title)
        return web.Response(text=page, content_type="text/html")

    async def handle_static(self, request: web.Request) -> web.StreamResponse:
        """A file of textual-serve's static folder (its scripts, styles and images)."""
        path = static_file(STATICS, request.match_info["name"])
        if path is None:
            raise web.HTTPNotFound()
        return web.FileResponse(path)

    async def handle_websocket(self, request: web.Request) -> web.StreamResponse:
        websocket = web.WebSocketResponse(heartbeat=HEARTBEAT_S, max_msg_size=MAX_MESSAGE)
        if not websocket.can_prepare(request).ok:  # (the URL opened as a page: no session)
            return web.Response(status=400, text=NOT_A_WEBSOCKET)
        session = AppSession(self.command, websocket, clamp_size)
        if not self.sessions.reserve(session):
            limit = self.sessions.limit
            self.quiet.note("refused: sessions", f"refused a session: {limit} are open (--max-sessions)")
            response = web.Response(status=503, text=f"503: {limit} sessions are open already\n")
            response.force_close()
            return response
        self.session_count += 1
        name = f"session {self.session_count}"
        started = asyncio.get_running_loop().time()
        why = "serve stopped"
        try:
            await websocket.prepare(request)
            await session.start(request.query.get("width", 80), request.query.get("height", 24))
            process = session.process()
            if process is not None:
                name += f" (pid {process.pid})"
            running, limit = len(self.sessions.running), self.sessions.limit
            log.info("%s started for %s: %d of %d open", name, request.remote, running, limit)
            await session.relay()
            why = "its page closed or stopped answering"
        except Exception as exc:  # (a browser gone mid-write, a process that would not start)
            why = f"{type(exc).__name__}: {exc}"
        finally:
            await asyncio.shield(self.sessions.end(session))
            if websocket.prepared:  # (a handshake that failed has nothing to close)
                await websocket.close()
            took = asyncio.get_running_loop().time() - started
            log.info("%s ended after %.0f s: %s", name, took, why)
        return websocket

    async def on_shutdown(self, app: web.Application) -> None:
        await self.sessions.end_all()

    # ---- running ---------------------------------------------------------------------

    def initialize_logging(self) -> None:
        """Plain lines on stderr (`gputui.serve.logs`)."""
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(SafeLines())
        logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)

    def serve(self) -> None:
        self.initialize_logging()
        asyncio.run(self.run())

    async def run(self) -> None:
        """Until SIGINT, SIGTERM or SIGHUP: connections accepted by `Admission`, requests
        answered by aiohttp's web server; then the sessions end and so does serve."""
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, stop.set)
        self.quiet = QuietLog(log, loop.call_later)
        runner = web.AppRunner(
            self.make_app(),
            handle_signals=False,
            shutdown_timeout=SHUTDOWN_S,
            keepalive_timeout=KEEPALIVE_S,
            access_log=None,  # (a line a request, its path holding the token)
            logger=HttpErrors(self.quiet),
        )
        await runner.setup()
        assert runner.server is not None
        self.admission = Admission(self.sock, runner.server, waiting_cap(self.sessions.limit), self.quiet)
        self.admission.start()
        try:
            await stop.wait()
        finally:
            self.admission.stop()
            self.sock.close()
            await runner.cleanup()


async def private_headers(request: web.Request, response: web.StreamResponse) -> None:
    """On every response: its URL holds the token, so neither a Referer nor a cache keeps it."""
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cache-Control"] = "no-store"


def font_size(asked: str) -> int:
    """The page's font size a URL asked for (`?fontsize=`), 6 to 64; 16 if none or no number."""
    try:
        size = int(asked)
    except ValueError:
        size = 16
    return max(6, min(64, size))


def static_file(folder: Path, name: str) -> Path | None:
    """`name` in `folder` if it is a regular file there (no "..", no hidden names, nothing a
    symbolic link takes outside), else None."""
    parts = name.split("/")
    if any(part in ("", ".", "..") or part.startswith(".") for part in parts):
        return None
    root = folder.resolve()
    path = root.joinpath(*parts).resolve()
    return path if path.is_relative_to(root) and path.is_file() else None
