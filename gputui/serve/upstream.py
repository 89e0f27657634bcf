"""Everything `gputui serve` takes from textual-serve, and a probe of it.

textual-serve's public surface is `Server(command).serve()`: no hook for a gate, a session
cap or an accept loop of one's own.  So gputui runs its own aiohttp application and takes
only these from textual-serve, none of them public (docs/textual-serve-upstream.md asks for
them to be):

- its page: the template `templates/app_index.html` and the variables it is rendered with;
- its scripts and styles (`static/`), and what `static/js/textual.js` does: it opens a
  websocket to the URL in the page's `data-session-websocket-url`, adding "?width=&height=",
  and speaks JSON envelopes over it (`["stdin", text]`, `["resize", {width, height}]`,
  `["ping", text]` -> `["pong", text]`, `["blur"]`, `["focus"]`);
- `textual_serve.app_service.AppService`, which runs the app in a process and relays it, and
  its private `_process` (to signal a session that will not quit; without it a session still
  ends by itself: `gputui.serve.child`).

`probe()` checks the installed textual-serve for each, so a release that changes one makes
serve refuse to start with one line, instead of serving a page that does not work.  Tested
against the newest release (`.ci/run`'s newest-Textual pass).
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import jinja2
from aiohttp import WSMsgType, web
from textual_serve.app_service import AppService
from textual_serve.download_manager import DownloadManager

PACKAGE = Path(inspect.getfile(AppService)).resolve().parent
TEMPLATES = PACKAGE / "templates"
STATICS = PACKAGE / "static"
INDEX = "app_index.html"
SCRIPT = "js/textual.js"
SCRIPT_MUST_HAVE = ("sessionWebsocketUrl", '"?width="', '"stdin"', '"resize"', '"ping"')
"""What textual.js must still say for the page to work with `index_page` and `relay`: it reads
the websocket URL from the page and adds its size as a query (so a token in the URL's path
survives), and it sends these messages."""
SERVICE_METHODS = ("start", "stop", "send_bytes", "set_terminal_size", "blur", "focus")
TESTED = "1.1.3"
"""The releases this module was tested with (the newest is tested in CI, unpinned)."""


def version() -> str:
    try:
        return metadata.version("textual-serve")
    except metadata.PackageNotFoundError:
        return "(unknown version)"


def index_page(
    websocket_url: str, static_url: str, font_size: int, title: str, templates: Path = TEMPLATES
) -> str:
    """textual-serve's page, pointing at `websocket_url` and `static_url` (absolute URLs: the
    page's script uses them as they are).  A variable the template uses and this does not give
    raises (StrictUndefined): `probe` finds that before anyone opens the page."""
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates), autoescape=True, undefined=jinja2.StrictUndefined
    )
    context: dict[str, Any] = {
        "font_size": font_size,
        "app_websocket_url": websocket_url,
        "config": {"static": {"url": static_url}},
        "application": {"name": title},
        "ping_url": "",
    }
    return environment.get_template(INDEX).render(context)


def probe(package: Path = PACKAGE) -> str | None:
    """What in the installed textual-serve does not fit gputui serve (one line), or None."""
    try:
        page = index_page("ws://h/s/t/ws", "http://h/s/t/static/", 16, "gputui", package / "templates")
    except (OSError, jinja2.TemplateError) as exc:
        return f"its page ({INDEX}) cannot be rendered: {type(exc).__name__}: {exc}"
    if (
        'data-session-websocket-url="ws://h/s/t/ws"' not in page
        or f'src="http://h/s/t/static/{SCRIPT}"' not in page
    ):
        return f"its page ({INDEX}) no longer takes the websocket and static URLs gputui gives"
    try:
        script = (package / "static" / SCRIPT).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"its script ({SCRIPT}) cannot be read: {exc.strerror or exc}"
    missing = [word for word in SCRIPT_MUST_HAVE if word not in script]
    if missing:
        return f"its script ({SCRIPT}) changed: no {', '.join(missing)}"
    for name in SERVICE_METHODS:
        if not inspect.iscoroutinefunction(getattr(AppService, name, None)):
            return f"AppService has no coroutine {name}()"
    try:
        inspect.signature(AppService).bind("command", **_service_arguments(_noop, _noop, _noop))
    except TypeError as exc:
        return f"AppService takes other arguments: {exc}"
    return None


async def _noop(*_args: object) -> None:
    return None


def _service_arguments(
    write_bytes: Callable[[bytes], Awaitable[None]],
    write_str: Callable[[str], Awaitable[None]],
    close: Callable[[], Awaitable[None]],
) -> dict[str, Any]:
    return {
        "write_bytes": write_bytes,
        "write_str": write_str,
        "close": close,
        "download_manager": DownloadManager(),
    }


class AppSession:
    """One app process, relayed to one websocket by textual-serve's AppService; the terminal
    sizes a browser asks for pass through `clamp` first."""

    def __init__(
        self,
        command: str,
        websocket: web.WebSocketResponse,
        clamp: Callable[[Any, Any], tuple[int, int]],
    ) -> None:
        async def close() -> None:
            await websocket.close()

        self.websocket = websocket
        self.clamp = clamp
        self.service = AppService(
            command, **_service_arguments(websocket.send_bytes, websocket.send_str, close)
        )

    async def start(self, width: Any, height: Any) -> None:
        await self.service.start(*self.clamp(width, height))

    async def stop(self) -> None:
        await self.service.stop()

    def process(self) -> asyncio.subprocess.Process | None:
        """The app's process: in AppService's private `_process` (1.1.x); None where a
        version has no such thing."""
        process = getattr(self.service, "_process", None)
        return process if isinstance(process, asyncio.subprocess.Process) else None

    async def relay(self) -> None:
        """The page's messages to the app, until the websocket closes; anything malformed
        ends it."""
        async for message in self.websocket:
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
                await self.service.send_bytes(data.encode("utf-8", "replace"))
            elif kind == "resize" and isinstance(data, dict):
                width, height = self.clamp(data.get("width"), data.get("height"))
                await self.service.set_terminal_size(width, height)
            elif kind == "ping" and isinstance(data, str) and len(data) <= 64:
                await self.websocket.send_json(["pong", data])
            elif kind == "blur":
                await self.service.blur()
            elif kind == "focus":
                await self.service.focus()
