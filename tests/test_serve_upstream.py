"""What gputui serve takes from textual-serve (gputui/serve/upstream.py): the installed release
fits, and a release that changed one of those things is found by the probe, so serve refuses
to start with one line instead of serving a page that does not work.  Also run against the
newest textual-serve by `.ci/run`."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("textual_serve")
from serve_support import ROOT

from gputui.serve import upstream
from gputui.serve.sessions import Sessions


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A copy of the installed textual_serve package, to change."""
    copy = tmp_path / "textual_serve"
    shutil.copytree(upstream.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new))


def test_the_installed_textual_serve_fits() -> None:
    assert upstream.probe() is None, f"textual-serve {upstream.version()}: {upstream.probe()}"
    page = upstream.index_page("ws://h:1/s/T/ws", "http://h:1/s/T/static/", 16, "gputui")
    assert 'data-session-websocket-url="ws://h:1/s/T/ws"' in page
    assert 'src="http://h:1/s/T/static/js/textual.js"' in page


@pytest.mark.parametrize(
    ("where", "old", "new", "says"),
    [
        ("templates/app_index.html", "<body", "{{ a_new_variable }}<body", "cannot be rendered"),
        ("templates/app_index.html", "data-session-websocket-url", "data-ws", "no longer takes"),
        ("templates/app_index.html", "{{ config.static.url }}js", "/static/js", "no longer takes"),
        ("static/js/textual.js", '"?width="', '"&width="', '"?width="'),
        ("static/js/textual.js", "sessionWebsocketUrl", "socketUrl", "sessionWebsocketUrl"),
        ("static/js/textual.js", '"stdin"', '"input"', '"stdin"'),
    ],
)
def test_a_changed_textual_serve_is_found(package: Path, where: str, old: str, new: str, says: str) -> None:
    _edit(package / where, old, new)
    problem = upstream.probe(package)
    assert problem is not None and says in problem, problem


def test_a_missing_file_is_found(package: Path) -> None:
    (package / "static" / "js" / "textual.js").unlink()
    assert "cannot be read" in (upstream.probe(package) or "")
    (package / "templates" / "app_index.html").unlink()
    assert "cannot be rendered" in (upstream.probe(package) or "")


def test_serve_refuses_to_start_with_a_textual_serve_that_does_not_fit(package: Path) -> None:
    _edit(package / "static" / "js" / "textual.js", '"?width="', '"&width="')
    r = subprocess.run(
        [sys.executable, "-m", "gputui", "serve", "--listen", "127.0.0.1:0", "--", "--demo"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(package.parent), str(ROOT)])},
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("gputui serve: textual-serve ") and "does not fit" in r.stderr, r.stderr
    assert len(r.stderr.splitlines()) == 1 and "open http" not in r.stderr, r.stderr


def test_a_session_without_textual_serves_private_process_still_ends() -> None:
    """`_process` is AppService's private attribute: a release without it gives no process
    to signal, and ending the session still returns (the session ends by itself)."""

    class Service:
        stopped = False

        async def stop(self) -> None:
            self.stopped = True

    session = object.__new__(upstream.AppSession)
    session.service = Service()  # type: ignore[assignment]
    assert session.process() is None
    sessions = Sessions.capped(1)
    assert sessions.reserve(session)

    asyncio.run(sessions.end(session, quit_wait=0.01))
    assert sessions.running == set() and session.service.stopped
