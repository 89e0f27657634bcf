"""Direct cluster mode beside hostile exporters (issue 24, item 1): real servers on loopback
that answer with raw bytes no HTTP library would write — a broken status line, more than 100
headers, a 64 KiB header line, a bad chunk, headers dripped a byte at a time, nothing at all —
next to a real `gputui export --replay`.  Each bad target is one host DOWN with a one-line
reason that fits 80 columns; the good exporter's GPUs stay; a refresh and quitting never wait
past the per-target deadline.

No check here reads a clock: "it did not wait" is shown by events — the client gave its
deadline's reason and hung up on a server that had not finished (the server saw it), and the
process ended while the scrape it left behind could not have."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pty
import select
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator

import pytest
from cluster_support import Behaviour, RawServer, drip, exporters, raw_server_factory, silent
from conftest import H200_X1, screen_lines, wait_for

from gputui.cluster import wire
from gputui.cluster.http import MAX_HEADERS, FetchError, HttpClient, short_url
from gputui.cluster.sources import DirectSource, PrometheusSource
from gputui.telemetry.recording import read_recording
from gputui.ui.cluster.lines import rows, status_line
from gputui.ui.render import line_len


def _send(conn: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):
        conn.sendall(data)


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
GOOD_LINE = b'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-h",Hostname="h"} 5\n'

DRIPPED = HEAD + b"X-Slow: " + b"s" * 120 + b"\r\n\r\n" + GOOD_LINE
assert len(DRIPPED) < wire.READS_FREE

HOSTILE: dict[str, tuple[Behaviour, str]] = {
    # name: (what the server does after reading the request, what the reason must say)
    "status": (lambda c: _send(c, b"HTTP/1.1 OK-ish but not a status\r\n\r\n" + GOOD_LINE), "status line"),
    "not-http": (lambda c: _send(c, b"\x1b]52;c;cHduZWQ=\x07 SSH-2.0-OpenSSH\r\n"), "status line"),
    "headers": (
        lambda c: _send(c, HEAD + b"".join(b"X-%d: y\r\n" % k for k in range(MAX_HEADERS + 1)) + b"\r\n"),
        f"more than {MAX_HEADERS} headers",
    ),
    "long-header": (lambda c: _send(c, HEAD + b"X-Big: " + b"a" * 65536 + b"\r\n\r\n"), "header line longer"),
    "chunk": (
        lambda c: _send(
            c, HEAD + b"Transfer-Encoding: chunked\r\n\r\nzz-not-hex\r\n" + GOOD_LINE + b"0\r\n\r\n"
        ),
        "bad chunk",
    ),
    "short-body": (
        lambda c: _send(c, HEAD + b"Content-Length: 5000\r\n\r\n" + GOOD_LINE),
        "closed the connection",
    ),
    "drip": (
        # ~23 s of drip at the least, longer than any deadline here by far, in fewer bytes
        # than wire.READS_FREE (no read is paced: the deadline alone must cut it)
        drip(DRIPPED, 0.1),
        "no complete answer within",
    ),
    "silent": (silent, "no complete answer within"),
}


@pytest.fixture
def raw_servers() -> Iterator[Callable[[Behaviour], RawServer]]:
    with raw_server_factory() as make:
        yield make


def test_each_hostile_exporter_is_one_host_down_and_the_real_one_stays(raw_servers):
    header, ticks = read_recording(H200_X1)
    bad = {name: raw_servers(behaviour) for name, (behaviour, _) in HOSTILE.items()}
    with exporters((H200_X1,)) as (good,):
        src = DirectSource([good.target, *(s.target for s in bad.values())], HttpClient(timeout=2.0))
        state = src.fetch()
        src.close()
    # the drip and the silent one were cut at the deadline: the client hung up on them
    # before they were done (a refresh that waited for them would have seen them finish)
    for name in ("drip", "silent"):
        assert bad[name].wait_cut() and bad[name].completed == 0, name
    by_instance = {h.instance: h for h in state.hosts}
    real = by_instance[good.target]
    assert real.up and real.error is None
    assert [g.device.uuid for g in real.gpus] == [d.uuid for d in header.machine.devices]
    assert real.gpus[0].sample.gpu_util == ticks[0].gpus[0].gpu_util
    for name, server in bad.items():
        host = by_instance[server.target]
        reason = HOSTILE[name][1]
        assert not host.up, name
        assert host.error is not None and reason in host.error, (name, host.error)
        assert "\n" not in host.error and "\x1b" not in host.error and "\x07" not in host.error, name
        assert len(host.error) <= 80, (name, host.error)
        assert host.gpus == (), name  # nothing invented from half an answer
    # the list shows every host: the real one's GPU, each bad one DOWN with its reason
    listed = rows(state, src_rule(), "host", "all")
    assert sum(1 for r in listed if r.gpu is not None) == len(header.machine.devices)
    assert sum(1 for r in listed if r.gpu is None and not r.host.up) == len(bad)


def src_rule():  # type: ignore[no-untyped-def]
    from gputui.telemetry.alerts import IdleRule

    return IdleRule(True, 30.0, 0, 1024)


def test_a_host_that_goes_hostile_keeps_its_gpus_as_last_seen_marked_down(raw_servers):
    """A good answer, then a broken one from the same target: the GPUs it had stay, DOWN."""
    answers = [HEAD + b"Content-Length: %d\r\n\r\n" % len(GOOD_LINE) + GOOD_LINE, b"HTTP/1.1 2x0 ??\r\n\r\n"]

    def behaviour(conn: socket.socket) -> None:
        _send(conn, answers.pop(0) if len(answers) > 1 else answers[0])

    s = raw_servers(behaviour)
    src = DirectSource([s.target], HttpClient(timeout=2))
    first = src.fetch()
    assert first.hosts[0].up and len(first.hosts[0].gpus) == 1
    second = src.fetch()
    src.close()
    (host,) = second.hosts
    assert not host.up and host.stale and len(host.gpus) == 1
    assert "status line" in (host.error or "")


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_client_refuses_each_hostile_answer_with_a_one_line_reason(raw_servers, name):
    behaviour, reason = HOSTILE[name]
    s = raw_servers(behaviour)
    with pytest.raises(FetchError) as exc:
        HttpClient(timeout=1.0).get(f"http://{s.target}/metrics")
    assert reason in str(exc.value), str(exc.value)
    if name in ("drip", "silent"):  # cut at the deadline, not when the server was done
        assert s.wait_cut() and s.completed == 0
    assert exc.value.reason and str(exc.value).endswith(exc.value.reason)


def test_well_formed_answers_still_read(raw_servers):
    """Chunked with extensions and trailers, Content-Length, read-to-close, gzip, LF-only lines."""
    import gzip

    body = GOOD_LINE * 50
    chunked = HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
    for k in range(0, len(body), 700):
        part = body[k : k + 700]
        chunked += b"%x;ext=1\r\n" % len(part) + part + b"\r\n"
    chunked += b"0\r\nX-Trailer: t\r\n\r\n"
    zipped = gzip.compress(body)
    answers = {
        "chunked": chunked,
        "length": HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body,
        "close": HEAD + b"\r\n" + body,
        "gzip": HEAD + b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(zipped) + zipped,
        "lf": b"HTTP/1.0 200 OK\nContent-Length: %d\n\n" % len(body) + body,
        "continue": b"HTTP/1.1 100 Continue\r\n\r\n" + HEAD + b"\r\n" + body,
    }
    client = HttpClient(timeout=5)
    for name, raw in answers.items():
        s = raw_servers(lambda c, raw=raw: _send(c, raw))
        assert client.get(f"http://{s.target}/metrics") == body, name


def test_a_refusal_names_the_status_and_a_redirect_is_not_followed(raw_servers):
    s401 = raw_servers(lambda c: _send(c, b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n"))
    s302 = raw_servers(lambda c: _send(c, b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.2:1/\r\n\r\n"))
    evil = raw_servers(lambda c: _send(c, b"HTTP/1.1 500 \x1b]52;c;eA==\x07" + b"x" * 500 + b"\r\n\r\n"))
    client = HttpClient(timeout=2)
    with pytest.raises(FetchError, match=r"HTTP 401 Unauthorized$"):
        client.get(f"http://{s401.target}/metrics")
    with pytest.raises(FetchError, match=r"HTTP 302 redirect \(not followed\)$"):
        client.get(f"http://{s302.target}/metrics")
    with pytest.raises(FetchError) as exc:
        client.get(f"http://{evil.target}/metrics")
    text = str(exc.value)
    assert "HTTP 500" in text and "\x1b" not in text and "\x07" not in text and len(text) <= 80, text


def test_short_url_keeps_the_host_and_cuts_the_rest():
    long = "http://prometheus.example.internal:9090/api/v1/query?query=" + "x" * 540
    short = short_url(long, 40)
    assert len(short) <= 40 and short.startswith("prometheus.example.internal:9090") and "…" in short
    assert short_url("http://n1:9400/metrics", 40) == "n1:9400/metrics"
    assert "alice" not in short_url("http://alice:pw@n1:9400/metrics", 40)
    # a message: the URL is cut to make room, the reason never is
    err = FetchError(long, "HTTP 401 Unauthorized")
    assert len(str(err)) <= 80 and str(err).endswith(": HTTP 401 Unauthorized"), str(err)
    assert str(err).startswith("prometheus.example.internal:9090/api/v1/")


def test_prometheus_401_reason_fits_80_columns(raw_servers):
    """A Prometheus behind an auth proxy: the reason, not a 566-character URL, is on screen."""
    s = raw_servers(lambda c: _send(c, b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n"))
    src = PrometheusSource(
        f"http://{s.target}", HttpClient(timeout=2), selector='job="gpu",cluster="a-long-name"'
    )
    state = src.fetch()
    assert state.error is not None and state.error.endswith("HTTP 401 Unauthorized"), state.error
    line = status_line(state, 80, "host", "all", None, 5.0)
    text = "".join(t for t, _ in line)
    assert line_len(line) <= 80
    assert "HTTP 401 Unauthorized" in text, text
    # behind a reverse proxy with a long path: the source is cut, the reason stays
    proxied = PrometheusSource(f"http://{s.target}/" + "monitoring/prometheus/" * 4, HttpClient(timeout=2))
    line = status_line(proxied.fetch(), 80, "host", "all", None, 5.0)
    text = "".join(t for t, _ in line)
    assert (
        line_len(line) <= 80 and "HTTP 401 Unauthorized" in text and f"Prometheus http://{s.target}" in text
    )


def test_a_down_row_shows_the_whole_reason_at_80_columns(raw_servers):
    from gputui.ui.cluster.lines import row_line

    s = raw_servers(HOSTILE["headers"][0])
    src = DirectSource([s.target], HttpClient(timeout=2))
    state = src.fetch()
    src.close()
    (row,) = rows(state, src_rule(), "host", "all")
    text = "".join(t for t, _ in row_line(row, 80, 16))
    assert f"more than {MAX_HEADERS} headers" in text, text


# --------------------------------------------------------------------------------------
# quitting while a target drips: the real command in a pseudo-terminal
# --------------------------------------------------------------------------------------


def _read_until(fd: int, needle: bytes, timeout: float) -> bytes:
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                got = os.read(fd, 65536)
            except OSError:
                break
            if not got:
                break
            out += got
            if needle in out:
                return out
    return out


QUIT_WAIT_S = 90.0
"""How long the test waits for the process to end after `q`: less than the scrape's own
deadline (TIMEOUT_S), so a process that waited for its scrape cannot end in it."""
TIMEOUT_S = 120


def test_q_quits_at_once_while_a_target_drips_its_headers(raw_servers, tmp_path):
    """`gputui cluster` with a target that drips its headers a byte a second (8 KiB of header
    line: hours) and a deadline of 120 s: after `q` the process ends while the scrape it left
    behind is still running — it cannot end before 120 s, and the dripper was never done."""
    dripper = raw_servers(drip(HEAD + b"X: " + b"s" * 8000 + b"\r\n\r\n", 1.0))
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="100", LINES="30")
    config = tmp_path / "config.toml"
    config.write_text(f"[cluster]\ntimeout = {TIMEOUT_S}\n")
    pid, fd = pty.fork()
    if pid == 0:  # the child: the real command on the pseudo-terminal
        os.execve(
            sys.executable,
            [sys.executable, "-m", "gputui", "cluster", "--config", str(config), dripper.target],
            env,
        )
    try:
        seen = _read_until(fd, b"waiting for an answer", 40)
        assert b"waiting for an answer" in seen, seen[-500:]
        assert dripper.requests == 1
        os.write(fd, b"q")
        deadline = time.monotonic() + QUIT_WAIT_S
        done, status = 0, 0
        while not done and time.monotonic() < deadline:
            _read_until(fd, b"\0", 0.2)
            done, status = os.waitpid(pid, os.WNOHANG)
        assert done, f"still running {QUIT_WAIT_S:g} s after q: it waits for the {TIMEOUT_S} s scrape"
        assert os.waitstatus_to_exitcode(status) == 0
        # the scrape was left behind, not finished: the dripper saw the process hang up
        assert dripper.wait_cut() and dripper.completed == 0
    finally:
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)


def test_the_screen_stays_whole_beside_a_hostile_target(raw_servers):
    asyncio.run(_screen_stays_whole(raw_servers))


async def _screen_stays_whole(raw_servers):
    from gputui.ui.cluster.app import ClusterApp

    bad = raw_servers(HOSTILE["long-header"][0])
    with exporters((H200_X1,)) as (good,):
        src = DirectSource([good.target, bad.target], HttpClient(timeout=3))
        app = ClusterApp(src, refresh=3600)
        async with app.run_test(size=(80, 20)) as pilot:
            await wait_for(pilot, lambda: app.states_applied >= 1, timeout=60)
            await pilot.pause()
            text = "\n".join(screen_lines(app))
            assert "1 GPUs on 2 hosts (1 down)" in text, text
            assert "header line longer" in text, text
        src.close()
