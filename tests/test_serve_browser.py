"""`gputui serve` in a real browser (headless Chromium): the page shows the app, its session
ends with the browser, and nothing the browser keeps or sends elsewhere holds the token."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("textual_serve")
from browser_support import Recorder, chromium, page
from serve_support import Served, cpu_percent, start_serve, wait_no_sessions


@pytest.fixture
def served():
    s = start_serve()
    yield s
    s.stop()


def test_headless_chromium_shows_the_overview_and_takes_its_session_when_it_exits(served: Served) -> None:
    with chromium() as (browser, port):

        async def go() -> bytes:
            async with page(port) as tab:
                await tab.call("Page.navigate", url=served.url)
                return await tab.wait_for_frames(b"Overview")

        assert b"Overview" in asyncio.run(go())
        assert len(served.sessions()) == 1
        browser.kill()  # the browser goes away without a word
        browser.wait(10)
        left = wait_no_sessions(served.proc.pid, 5)
        assert left == [], "a session outlived its browser"
        assert cpu_percent(left) == 0.0


def test_a_page_on_another_local_port_gets_no_credential(served: Served) -> None:
    """Issue 31: cookies are not kept per port.  After the owner opened serve's link, a page
    another user serves on another port of 127.0.0.1 received serve's cookie.  Now the browser
    keeps nothing of serve's, and a page that serve's own page leads to learns nothing."""
    with chromium() as (_browser, port), Recorder() as other:

        async def go() -> list[dict[str, object]]:
            async with page(port) as tab:
                await tab.call("Page.navigate", url=served.url)
                await tab.wait_for_frames(b"Overview")
                kept = await tab.cookies()
                # from serve's page to the other one: the navigation's Referer, the other
                # page's own requests, cookies and all
                await tab.call("Runtime.evaluate", expression=f"location.href = {other.url!r}")
                got = await asyncio.to_thread(other.probed.wait, 60)
                assert got, "the other page never called back"
                return kept

        kept = asyncio.run(go())
        seen = other.seen()
        assert served.token not in seen, seen
        assert "cookie:" not in seen.lower(), seen
        assert "gputui" not in seen.lower(), seen
        assert kept == [], kept
