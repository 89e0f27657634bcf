"""Who may use a `gputui serve` port (gputui/serve/auth.py): the Host and Origin a request
names must be an address this serve answers on, port included, and its token this serve's.
The rules at their boundaries (IPv6, upper case, trailing dots, user info, default ports,
origins without a port), and two real serves on one host that must not open each other."""

from __future__ import annotations

import asyncio

import pytest

from gputui.serve import auth

TOKEN = "the-right-token-0123456789"
PATH = f"/s/{TOKEN}/ws"


def _gate(host: str = "127.0.0.1", port: int = 18083, **kw: object) -> auth.Gate:
    return auth.Gate.for_listen(TOKEN, host, port, **kw)  # type: ignore[arg-type]


def _host_ok(gate: auth.Gate, host: str | None) -> bool:
    return gate.refusal(host, None, PATH) is None


def _origin_ok(gate: auth.Gate, origin: str, host: str) -> bool:
    return gate.refusal(host, origin, PATH) is None


# ---- Host --------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1:18083", "localhost:18083", "LOCALHOST:18083", "LocalHost:18083"])
def test_the_hosts_of_a_loopback_serve(host: str) -> None:
    assert _host_ok(_gate(), host)


@pytest.mark.parametrize(
    "host",
    [
        None,
        "",
        "127.0.0.1",  # no port: port 80, not this serve's
        "localhost",
        "127.0.0.1:80",
        "127.0.0.1:18084",  # another serve's port
        "127.0.0.1:018083",  # the same number, spelt otherwise
        "127.0.0.1:18083:18083",
        "127.0.0.1:",
        ":18083",
        "127.0.0.1:99999",
        "127.0.0.1:-18083",
        "127.0.0.1:+18083",
        "127.0.0.1:1_8083",
        "localhost.:18083",  # a trailing dot names another host to a resolver
        "127.0.0.1.:18083",
        "user@127.0.0.1:18083",
        "127.0.0.1:18083@evil.example",
        "evil.example:18083",
        "127.0.0.1.evil.example:18083",
        "127.0.0.1:18083/",
        "127.0.0.1:18083 ",
        " 127.0.0.1:18083",
        "127.0.0.1 :18083",
        "[127.0.0.1]:18083",
        "[::1]:18083",  # not listened on
        "[::ffff:127.0.0.1]:18083",
        "0x7f.1:18083",
        "2130706433:18083",
    ],
)
def test_hosts_a_loopback_serve_refuses(host: str | None) -> None:
    assert not _host_ok(_gate(), host)
    assert _gate().refusal(host, None, PATH) == "Host not served"


def test_port_80_is_the_default_port_of_a_host_without_one() -> None:
    gate = _gate(port=80)
    for host in ("127.0.0.1", "127.0.0.1:80", "localhost", "LOCALHOST:80"):
        assert _host_ok(gate, host), host
    for host in ("127.0.0.1:443", "127.0.0.1:8080", "127.0.0.1:080", "localhost.:80"):
        assert not _host_ok(gate, host), host


def test_ipv6_hosts() -> None:
    gate = _gate("::1")
    for host in ("[::1]:18083", "localhost:18083"):
        assert _host_ok(gate, host), host
    for host in (
        "::1:18083",
        "[::1]",
        "[::1]:18084",
        "[::1]18083",
        "[::1:18083",
        "::1]:18083",
        "127.0.0.1:18083",
    ):
        assert not _host_ok(gate, host), host
    upper = _gate("FE80::A")
    assert _host_ok(upper, "[fe80::a]:18083") and _host_ok(upper, "[FE80::A]:18083")
    assert _origin_ok(gate, "http://[::1]:18083", "[::1]:18083")
    assert not _origin_ok(gate, "http://[::1]", "[::1]:18083")


# ---- Origin ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "origin",
    ["http://127.0.0.1:18083", "http://localhost:18083", "HTTP://LOCALHOST:18083", "http://LocalHost:18083"],
)
def test_the_origins_of_a_loopback_serve(origin: str) -> None:
    assert _origin_ok(_gate(), origin, "127.0.0.1:18083")


@pytest.mark.parametrize(
    "origin",
    [
        "http://127.0.0.1",  # no port: 80, not 18083 (issue 31: origins without a port)
        "http://localhost",
        "http://127.0.0.1:80",
        "https://127.0.0.1",
        "https://127.0.0.1:18083",  # another scheme: another origin
        "ws://127.0.0.1:18083",
        "http://127.0.0.1:18084",  # another serve on this host
        "http://127.0.0.1:018083",
        "http://127.0.0.1:18083:18083",
        "http://localhost.:18083",
        "http://user@127.0.0.1:18083",
        "http://user:pw@127.0.0.1:18083",
        "http://127.0.0.1:18083@evil.example",
        "http://127.0.0.1:18083.evil.example",
        "http://evil.example:18083",
        "http://127.0.0.1:18083/path",
        "http://127.0.0.1:18083?x",
        "http:/127.0.0.1:18083",
        "http//127.0.0.1:18083",
        "127.0.0.1:18083",
        "null",
        "",
        "*",
    ],
)
def test_origins_a_loopback_serve_refuses(origin: str) -> None:
    gate = _gate()
    assert gate.refusal("127.0.0.1:18083", origin, PATH) == "foreign Origin"


def test_an_origin_without_a_port_is_the_schemes_default_port() -> None:
    gate = _gate(port=80)
    for origin in ("http://127.0.0.1", "http://127.0.0.1:80", "http://localhost", "HTTP://LOCALHOST"):
        assert _origin_ok(gate, origin, "127.0.0.1"), origin
    for origin in (
        "https://127.0.0.1",
        "https://127.0.0.1:80",
        "http://127.0.0.1:443",
        "http://127.0.0.1:8080",
    ):
        assert not _origin_ok(gate, origin, "127.0.0.1"), origin


def test_allowed_origins_of_a_proxy() -> None:
    gate = _gate(allow_origins=["https://GPUs.example.com/"], public_url=None)
    for origin in ("https://gpus.example.com", "https://gpus.example.com:443", "HTTPS://GPUS.EXAMPLE.COM"):
        assert _origin_ok(gate, origin, "gpus.example.com"), origin
    for origin in (
        "http://gpus.example.com",
        "https://gpus.example.com:8443",
        "https://gpus.example.com.",
        "https://user@gpus.example.com",
        "https://example.com",
        "https://x.gpus.example.com",
    ):
        assert not _origin_ok(gate, origin, "gpus.example.com"), origin
    # the proxy may pass its own Host through: with or without the https port
    for host in ("gpus.example.com", "gpus.example.com:443", "127.0.0.1:18083"):
        assert _host_ok(gate, host), host
    for host in ("gpus.example.com:80", "gpus.example.com:18083", "gpus.example.com."):
        assert not _host_ok(gate, host), host
    odd = _gate(allow_origins=["http://proxy:8443"])
    assert _origin_ok(odd, "http://proxy:8443", "proxy:8443")
    assert not _origin_ok(odd, "http://proxy", "proxy:8443")
    assert not _host_ok(odd, "proxy") and _host_ok(odd, "proxy:8443")


@pytest.mark.parametrize(
    "url",
    [
        "ftp://x",
        "x",
        "",
        "http://",
        "http://x:99999",
        "http://x:0",
        "https://user@x",
        "http://[::1",
        "//x:80",
    ],
)
def test_an_allowed_origin_that_is_none_is_refused_at_start(url: str) -> None:
    with pytest.raises(ValueError, match="not an http"):
        _gate(allow_origins=[url])


def test_origin_of_a_configured_url() -> None:
    assert auth.origin_of("HTTPS://GPUs.Example.com:443/gpus/") == ("https", "gpus.example.com", 443)
    assert auth.origin_of("http://x") == ("http", "x", 80)
    assert auth.origin_of("http://[::1]:8080") == ("http", "[::1]", 8080)
    assert auth.origin_of("http://x:443") == ("http", "x", 443)


# ---- two serves on one host --------------------------------------------------------------


def test_one_serves_token_host_or_origin_never_opens_another() -> None:
    a = auth.Gate.for_listen("token-of-serve-a-0123456789", "127.0.0.1", 18083)
    b = auth.Gate.for_listen("token-of-serve-b-0123456789", "127.0.0.1", 18084)
    path_a, path_b = "/s/token-of-serve-a-0123456789/ws", "/s/token-of-serve-b-0123456789/ws"
    assert a.refusal("127.0.0.1:18083", "http://127.0.0.1:18083", path_a) is None
    assert b.refusal("127.0.0.1:18084", "http://127.0.0.1:18084", path_b) is None
    assert b.refusal("127.0.0.1:18084", None, path_a) == "wrong token"
    assert b.refusal("127.0.0.1:18083", None, path_b) == "Host not served"
    assert b.refusal("127.0.0.1:18084", "http://127.0.0.1:18083", path_b) == "foreign Origin"
    assert a.refusal("localhost:18084", "http://localhost:18084", path_a) == "Host not served"


def test_two_real_serves_on_one_host_do_not_open_each_other() -> None:
    pytest.importorskip("textual_serve")
    import aiohttp
    from serve_support import start_serve

    one, two = start_serve(), start_serve()
    try:
        assert one.token != two.token and one.host != two.host

        async def status(url: str, **headers: str) -> int:
            async with aiohttp.ClientSession() as s, s.get(url, headers=headers) as r:
                return r.status

        async def ws_status(url: str, **headers: str) -> int:
            async with aiohttp.ClientSession() as s:
                try:
                    async with s.ws_connect(url, headers=headers):
                        return 101
                except aiohttp.WSServerHandshakeError as exc:
                    return exc.status

        async def go() -> None:
            assert await status(one.url) == 200 and await status(two.url) == 200
            # one's token on two's port (the whole URL, its port changed)
            assert await status(two.path("", one.token)) == 403
            assert await ws_status(two.ws(token=one.token)) == 403
            # two's own token, with one's Host or Origin
            assert await status(two.url, Host=one.host) == 403
            assert await ws_status(two.ws(), Origin=one.base) == 403
            assert await ws_status(two.ws(), Origin="http://127.0.0.1") == 403
            assert await ws_status(two.ws(), Origin=two.base) == 101

        asyncio.run(go())
    finally:
        one.stop()
        two.stop()
