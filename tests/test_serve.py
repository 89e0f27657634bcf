"""`gputui serve` as an attacker and as its user see it: a real serve on a free loopback port,
real websocket clients (aiohttp), real sessions (`--demo`)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import stat
import time

import pytest

pytest.importorskip("textual_serve")
import aiohttp
from serve_support import (
    Served,
    app_output,
    cpu_percent,
    read_log,
    start_serve,
    wait_log,
    wait_no_sessions,
    wait_sessions,
)

from gputui.serve import auth


@pytest.fixture(scope="module")
def served():
    s = start_serve()
    yield s
    s.stop()


def _run(coro):
    return asyncio.run(coro)


async def _get(url: str, **headers: str) -> tuple[int, str, aiohttp.ClientResponse]:
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as r:
        return r.status, await r.text(), r


async def _ws_status(url: str, **headers: str) -> int:
    async with aiohttp.ClientSession() as session:
        try:
            async with session.ws_connect(url, headers=headers):
                return 101
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status


# ---- the secret, Host and Origin ---------------------------------------------------------


def test_page_assets_and_websocket_need_the_token(served: Served) -> None:
    wrong = ("wrong-but-long-enough-0123456789", served.token[:-1], served.token + "x", served.token.upper())
    for rest in ("", "static/js/textual.js", "static/css/xterm.css", "ws"):
        for token in (None, *wrong):
            status, body, _ = _run(_get(served.path(rest, token)))
            assert (status, body) == (403, "403: Forbidden\n"), (rest, token)
        # the token anywhere but first in the path (a query, a later segment) is no token
        for url in (
            served.path(rest, None) + f"?token={served.token}",
            served.path(f"x/{served.token}/{rest}", token=None),
        ):
            assert _run(_get(url))[0] == 403, url
    assert _run(_ws_status(served.ws(token=None))) == 403
    assert _run(_ws_status(served.ws(token="x" * 43))) == 403


def test_foreign_host_or_origin_is_refused_even_with_the_token(served: Served) -> None:
    for headers in ({"Host": "evil.example"}, {"Host": "evil.example:80"}, {"Origin": "http://evil.example"}):
        assert _run(_get(served.url, **headers))[0] == 403, headers
        assert _run(_ws_status(served.ws(), **headers)) == 403, headers
    port = served.host.rsplit(":", 1)[1]
    assert _run(_ws_status(served.ws(), Origin=f"http://127.0.0.1:{int(port) + 1}")) == 403
    assert _run(_ws_status(served.ws(), Origin="null")) == 403


def test_the_token_and_our_origin_get_the_app(served: Served) -> None:
    async def go() -> bytes:
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(served.ws(), headers={"Origin": served.base}) as ws,
        ):
            return await app_output(ws, b"Overview")

    assert b"Overview" in _run(go())
    # localhost names the loopback address too
    port = served.host.rsplit(":", 1)[1]
    assert _run(_get(served.url, Host=f"localhost:{port}"))[0] == 200


def test_no_response_sets_a_cookie_and_the_page_carries_the_token_in_its_urls(served: Served) -> None:
    """Issue 31: a cookie is handed to every port of the host.  The page's own URLs carry the
    token (its first path segment) and no response, of any kind, sets a cookie."""

    async def go() -> list[tuple[str, int, dict[str, str]]]:
        seen: list[tuple[str, int, dict[str, str]]] = []
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
            urls = [
                served.url,
                served.url.rstrip("/"),
                served.path("static/js/textual.js"),
                served.path("static/nothing-here.js"),
                served.path("nothing-here"),
                served.path(""),
                served.path("", token=None) + f"?token={served.token}",
                served.path("", token="x" * 43),
            ]
            for url in urls:
                async with session.get(url) as r:
                    seen.append((url, r.status, dict(r.headers)))
                    if url == served.url:
                        page = await r.text()
            ws_url = re.search(r'data-session-websocket-url="([^"]+)"', page)
            static = re.search(r'<script src="([^"]+)"', page)
            assert ws_url is not None and static is not None, page
            assert ws_url.group(1) == f"ws://{served.host}/s/{served.token}/ws"
            assert static.group(1) == f"{served.base}/s/{served.token}/static/js/textual.js"
            # the page's websocket, as its script opens it (its URL, "?width=...")
            async with session.ws_connect(ws_url.group(1) + "?width=80&height=24") as ws:
                await app_output(ws, b"Overview")
                seen.append(("ws", ws._response.status, dict(ws._response.headers)))
            assert len(session.cookie_jar) == 0
        return seen

    seen = _run(go())
    assert [status for _, status, _ in seen] == [200, 200, 200, 404, 404, 200, 403, 403, 101]
    for url, _status, headers in seen:
        assert "Set-Cookie" not in headers, (url, headers)
        if url != "ws" and "x" * 43 not in url and "?token=" not in url:
            assert headers["Referrer-Policy"] == "no-referrer", (url, headers)
            assert headers["Cache-Control"] == "no-store", (url, headers)


def test_static_files_stay_in_their_folder(tmp_path) -> None:
    from gputui.serve.server import static_file

    (tmp_path / "static" / "js").mkdir(parents=True)
    (tmp_path / "static" / "js" / "a.js").write_text("ok")
    (tmp_path / "static" / ".hidden").write_text("no")
    (tmp_path / "secret").write_text("no")
    (tmp_path / "static" / "out").symlink_to(tmp_path / "secret")
    folder = tmp_path / "static"
    assert static_file(folder, "js/a.js") == (folder / "js" / "a.js").resolve()
    for name in (
        "../secret",
        "js/../../secret",
        ".hidden",
        "out",
        "js",
        "js/",
        "/etc/passwd",
        "",
        "js//a.js",
    ):
        assert static_file(folder, name) is None, name


def test_the_token_is_printed_once_and_never_logged(served: Served) -> None:
    _run(_get(served.url))
    _run(_get(served.url + "?x=1"))
    _run(_get(served.path("static/js/textual.js")))
    _run(_get(served.url, Host="evil.example"))  # refused with the token in its path
    log = wait_log(served, "Host not served")
    assert log.count(served.token) == 1, log


def test_the_token_is_the_first_segment_of_the_path() -> None:
    assert auth.secret_path("abc") == "/s/abc/"
    assert auth.split_secret("/s/abc/ws") == ("abc", "/ws")
    assert auth.split_secret("/s/abc/") == ("abc", "/")
    assert auth.split_secret("/s/abc") == ("abc", "/")
    assert auth.split_secret("/s//ws") == ("", "/ws")
    for path in ("/", "/ws", "/x/s/abc/", "/S/abc/", "s/abc/", "//s/abc/"):
        assert auth.split_secret(path) == (None, path), path
    gate = auth.Gate.for_listen("right-token-0123456789", "127.0.0.1", 8080)
    ok = {"host": "127.0.0.1:8080", "origin": None}
    assert gate.refusal(path="/s/right-token-0123456789/ws", **ok) is None
    assert gate.refusal(path="/s/right-token-0123456789", **ok) is None
    for path in ("/s//ws", "/s/right-token-012345678/", "/s/right-token-0123456789x/", "/ws", "/"):
        assert gate.refusal(path=path, **ok) is not None, path


def test_log_lines_lose_their_tokens_and_controls() -> None:
    import logging

    from gputui.serve.logs import SafeLines

    args = ("/s/SECRET/ws", "/?token=SECRET", "\x1b[2J")
    record = logging.LogRecord("x", logging.INFO, "f", 1, "GET %s and %s %s", args, None)
    line = SafeLines().format(record)
    assert "SECRET" not in line and "\x1b" not in line and "\\x1b[2J" in line, line


def test_the_log_has_a_line_when_a_session_starts_and_ends_and_refusals_are_quiet() -> None:
    """docs/serve.md: one line when a session starts, one when it ends, none a request;
    refusals (which anyone can cause) one line an interval, malformed requests too, without
    a traceback or the request's bytes."""
    s = start_serve()
    try:

        async def go() -> None:
            async with aiohttp.ClientSession() as session:
                for _ in range(3):
                    for url in (s.url, s.path("static/js/textual.js")):
                        async with session.get(url) as r:
                            assert r.status == 200
                async with session.ws_connect(s.ws()) as ws:
                    await app_output(ws, b"Overview")
            for _ in range(30):
                assert (await _get(s.path("", "wrong-token-0123456789abcdef")))[0] == 403

        _run(go())
        host, port = s.host.rsplit(":", 1)
        for junk in (b"GARBAGE\r\n\r\n", b"GET / HTTP/1.1\r\nContent-Length: \x1b[31mx\r\n\r\n") * 5:
            with socket.create_connection((host, int(port))) as sock:
                sock.sendall(junk)
                sock.settimeout(30)
                assert sock.recv(100).startswith(b"HTTP/1.")  # (answered: logged already)
        log = wait_log(s, " ended ")
        lines = log.splitlines()[1:]  # (after the URL)
        started = [line for line in lines if " started" in line]
        ended = [line for line in lines if " ended " in line]
        refused = [line for line in lines if "wrong token" in line]
        malformed = [line for line in lines if "malformed" in line]
        assert (len(started), len(ended), len(refused), len(malformed)) == (1, 1, 1, 1), log
        assert len(lines) == 4, log
        assert "Traceback" not in log and "\x1b" not in log, log
    finally:
        s.stop()


def test_a_plain_request_for_the_websocket_is_a_400_not_a_traceback() -> None:
    """The websocket's URL opened as a page (a browser's address bar, curl): it was a 500, a
    traceback in the log ("Call .prepare() first") and a session counted that never was
    (review of issue 31).  It is a 400, no session, no log line."""
    s = start_serve()
    try:
        for url in (s.ws().replace("ws://", "http://", 1), s.path("ws")):
            status, text, _ = _run(_get(url))
            assert status == 400 and "websocket" in text, (status, text)
        log = read_log(s)
        assert "Traceback" not in log and " started" not in log and " ended " not in log, log
        assert len(log.splitlines()) == 1, log  # (the URL)
    finally:
        s.stop()


# ---- the token's sources -----------------------------------------------------------------


def test_token_file_rules(tmp_path) -> None:
    good = tmp_path / "token"
    good.write_text("wall-display-token-0123456789\n")
    good.chmod(0o600)
    assert auth.read_token_file(str(good)) == "wall-display-token-0123456789"
    link = tmp_path / "link"
    link.symlink_to(good)
    with pytest.raises(auth.TokenError, match="symbolic link"):
        auth.read_token_file(str(link))
    good.chmod(0o620)
    with pytest.raises(auth.TokenError, match="group or others may write"):
        auth.read_token_file(str(good))
    good.chmod(0o600)
    big = tmp_path / "big"
    big.write_text("a" * (auth.TOKEN_FILE_MAX + 1))
    with pytest.raises(auth.TokenError, match="larger than"):
        auth.read_token_file(str(big))
    short = tmp_path / "short"
    short.write_text("abc")
    with pytest.raises(auth.TokenError, match="16 to 512"):
        auth.read_token_file(str(short))
    with pytest.raises(auth.TokenError, match="not a regular file"):
        auth.read_token_file(str(tmp_path))
    assert stat.S_IMODE(good.stat().st_mode) == 0o600
    assert auth.choose_token(None, {auth.TOKEN_ENV: "from-the-environment-012345"})[0] == (
        "from-the-environment-012345"
    )
    assert len(auth.choose_token(None, {})[0]) >= 43


def test_token_file_not_owned_is_refused(tmp_path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the file to another owner")
    f = tmp_path / "token"
    f.write_text("someone-elses-token-0123456789")
    os.chown(f, 65534, 65534)
    with pytest.raises(auth.TokenError, match="not by you"):
        auth.read_token_file(str(f))


def test_serve_uses_the_token_from_the_environment_and_hides_it_from_sessions() -> None:
    token = "wall-display-0123456789-abcdef"
    s = start_serve(env={auth.TOKEN_ENV: token})
    try:
        assert s.token == token

        async def go() -> None:
            async with aiohttp.ClientSession() as session, session.ws_connect(s.ws()) as ws:
                await app_output(ws, b"Overview")
                (p,) = s.sessions()
                assert auth.TOKEN_ENV not in p.environ()

        _run(go())
    finally:
        s.stop()


# ---- limits ------------------------------------------------------------------------------


def test_sessions_are_capped_and_so_is_the_terminal_size() -> None:
    s = start_serve("--max-sessions", "1")
    try:

        async def go() -> tuple[int, str]:
            async with (
                aiohttp.ClientSession() as session,
                session.ws_connect(s.ws(width=20000, height=5000)) as ws,
            ):
                await app_output(ws, b"Overview")
                (p,) = s.sessions()
                env = p.environ()
                size = f"{env['COLUMNS']}x{env['ROWS']}"
                try:
                    async with session.ws_connect(s.ws()):
                        second = 101
                except aiohttp.WSServerHandshakeError as exc:
                    second = exc.status
                return second, size

        second, size = _run(go())
        assert second == 503
        assert size == "500x200"
    finally:
        s.stop()


# ---- sessions end with their browser and with serve ---------------------------------------


async def _open_sessions(s: Served, n: int) -> tuple[aiohttp.ClientSession, list]:
    session = aiohttp.ClientSession()
    sockets = []
    for _ in range(n):
        ws = await session.ws_connect(s.ws())
        await app_output(ws, b"Overview")
        sockets.append(ws)
    return session, sockets


def test_closing_the_websocket_ends_its_session_even_a_stuck_one(served: Served) -> None:
    async def go() -> None:
        session, (ws1, ws2) = await _open_sessions(served, 2)
        _first, second = wait_sessions(served, 2)
        second.suspend()  # a session that answers nothing (SIGSTOP): only SIGKILL ends it
        await ws1.close()
        ws2._response.connection.transport.abort()  # a browser that vanished without a close
        await session.close()

    _run(go())
    assert wait_no_sessions(served.proc.pid, 5) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_stopping_serve_ends_every_session_in_under_3_s(sig: signal.Signals) -> None:
    s = start_serve()
    try:

        async def go() -> float:
            session, _sockets = await _open_sessions(s, 2)
            assert len(s.sessions()) == 2
            started = time.monotonic()
            s.proc.send_signal(sig)
            await asyncio.to_thread(s.proc.wait, 10)
            took = time.monotonic() - started
            await session.close()
            return took

        took = _run(go())
        assert took < 3.0, took
        assert wait_no_sessions(s.proc.pid, 0.5) == []
    finally:
        s.stop()


def test_sigkill_of_serve_leaves_no_session() -> None:
    s = start_serve()
    try:

        async def go() -> None:
            session, _sockets = await _open_sessions(s, 2)
            s.sessions()[0].suspend()  # (stopped: it cannot notice anything by itself)
            s.proc.kill()  # no handler runs: the kernel ends the sessions (PR_SET_PDEATHSIG)
            await asyncio.to_thread(s.proc.wait, 10)
            await session.close()

        _run(go())
        assert wait_no_sessions(s.proc.pid, 5) == []
    finally:
        s.stop()


def test_no_session_left_burns_cpu(served: Served) -> None:
    async def go() -> None:
        session, sockets = await _open_sessions(served, 1)
        for ws in sockets:
            await ws.close()
        await session.close()

    _run(go())
    left = wait_no_sessions(served.proc.pid, 5)
    assert left == [] and cpu_percent(left) == 0.0
