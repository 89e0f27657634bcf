"""textual-serve's Server, guarded: every request passes `auth.Gate` (token, Host, Origin)
before a route sees it, sessions are capped and ended with their browser (`sessions`), and
serve stops in well under 3 s with sessions open."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import socket
import sys
from typing import Any

import aiohttp_jinja2
import jinja2
from aiohttp import WSMsgType, web
from aiohttp.typedefs import Handler
from textual_serve.server import Server

from gputui.serve.auth import TOKEN_QUERY, Gate, RedactTokens
from gputui.serve.sessions import Sessions, SessionService, clamp_size

log = logging.getLogger("gputui.serve")

HEARTBEAT_S = 5.0
"""Websocket pings this often; a browser that does not answer within half of it is gone."""
SHUTDOWN_S = 2.0
"""How long a stopping serve waits for its request handlers (the sessions are signalled first)."""
MAX_MESSAGE = 256 * 1024
"""The largest websocket message taken from a browser (a paste is a few KiB)."""
FORBIDDEN = "403: Forbidden\n"


class GuardedServer(Server):
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
        host, port = sock.getsockname()[:2]
        super().__init__(command, host=host, port=port, title=title, public_url=public_url)
        self.sock = sock
        self.gate = gate
        self.sessions = sessions
        self.given_public_url = public_url.rstrip("/") if public_url else None
        """--public-url: where the page's links point; else the address the browser used."""

    # ---- the aiohttp application -----------------------------------------------------

    def make_app(self) -> web.Application:
        """textual-serve's routes (less its file downloads, which gputui never offers),
        behind the gate."""
        app = web.Application(middlewares=[self.guard], client_max_size=64 * 1024)
        aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(self.templates_path))
        app.add_routes(
            [
                web.get("/", self.handle_index, name="index"),
                web.get("/ws", self.handle_websocket, name="websocket"),
                web.static("/static", self.statics_path, show_index=False, name="static"),
            ]
        )
        app.on_shutdown.append(self.on_shutdown)
        return app

    @web.middleware
    async def guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        query_token = request.query.get(TOKEN_QUERY)
        reason = self.gate.refusal(
            request.headers.get("Host"),
            request.headers.get("Origin"),
            query_token,
            request.cookies.get(self.gate.cookie),
        )
        if reason is not None:
            log.warning("refused %s %s: %s", request.remote, request.path, reason)
            return web.Response(status=403, text=FORBIDDEN)
        response = await handler(request)
        if not response.prepared:  # (a websocket's headers went out long ago)
            response.headers["Referrer-Policy"] = "no-referrer"  # the URL holds the token
            if query_token is not None and request.path == "/":
                response.set_cookie(
                    self.gate.cookie, self.gate.token, httponly=True, samesite="Strict", path="/"
                )
        return response

    def base_url(self, request: web.Request) -> str:
        # the Host passed the gate: it is one of ours
        return self.given_public_url or f"http://{request.host}"

    async def handle_index(self, request: web.Request) -> web.Response:
        base = self.base_url(request)
        scheme, rest = base.split(":", 1)
        font_size = clamp_size(request.query.get("fontsize", "16"), 24)[0]
        context: dict[str, Any] = {
            "font_size": max(6, min(64, font_size)),
            "app_websocket_url": ("wss:" if scheme == "https" else "ws:") + rest + "/ws",
            "config": {"static": {"url": base + "/static/"}},
            "application": {"name": self.title},
            "ping_url": "",
        }
        response = aiohttp_jinja2.render_template("app_index.html", request, context)
        response.headers["Cache-Control"] = "no-store"
        return response

    async def handle_websocket(self, request: web.Request) -> web.StreamResponse:  # type: ignore[override]
        width, height = clamp_size(request.query.get("width", 80), request.query.get("height", 24))
        websocket = web.WebSocketResponse(heartbeat=HEARTBEAT_S, max_msg_size=MAX_MESSAGE)

        async def close() -> None:
            await websocket.close()

        service = SessionService(
            self.command,
            write_bytes=websocket.send_bytes,
            write_str=websocket.send_str,
            close=close,
            download_manager=self.download_manager,
        )
        if not self.sessions.reserve(service):
            log.warning("refused %s: %d sessions open (--max-sessions)", request.remote, self.sessions.limit)
            return web.Response(status=503, text=f"503: {self.sessions.limit} sessions are open already\n")
        try:
            await websocket.prepare(request)
            await service.start(width, height)
            await relay(websocket, service)
        except Exception as exc:  # (a browser gone mid-write, a process that would not start)
            log.warning("session ended: %s: %s", type(exc).__name__, exc)
        finally:
            await asyncio.shield(self.sessions.end(service))
            await websocket.close()
        return websocket

    async def on_shutdown(self, app: web.Application) -> None:
        await self.sessions.end_all()

    # ---- running ---------------------------------------------------------------------

    def initialize_logging(self) -> None:
        """Plain lines on stderr, tokens taken out (aiohttp's access log writes queries;
        textual-serve's own handler would print tracebacks with their local variables)."""
        handler = logging.StreamHandler(sys.stderr)
        handler.addFilter(RedactTokens())
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s", "%H:%M:%S"))
        logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)

    def serve(self, debug: bool = False) -> None:
        self.initialize_logging()
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, self.request_exit)
        web.run_app(
            self.make_app(),
            sock=self.sock,
            handle_signals=False,
            loop=loop,
            print=None,
            shutdown_timeout=SHUTDOWN_S,
        )


async def relay(websocket: web.WebSocketResponse, service: SessionService) -> None:
    """The browser's messages to its session; anything malformed ends it."""
    async for message in websocket:
        if message.type != WSMsgType.TEXT:
            continue
        try:
            envelope = json.loads(message.data)
        except ValueError:
            return
        if not isinstance(envelope, list) or not envelope:
            return
        kind = envelope[0]
        data = envelope[1] if len(envelope) > 1 else None
        if kind == "stdin" and isinstance(data, str):
            await service.send_bytes(data.encode("utf-8", "replace"))
        elif kind == "resize" and isinstance(data, dict):
            await service.set_terminal_size(data.get("width", 80), data.get("height", 24))
        elif kind == "ping" and isinstance(data, str) and len(data) <= 64:
            await websocket.send_json(["pong", data])
        elif kind == "blur":
            await service.blur()
        elif kind == "focus":
            await service.focus()
