"""Listen addresses for the exporter: parsing "HOST:PORT" and the loopback-only policy."""

from __future__ import annotations

import ipaddress
import socket


def parse_listen(text: str) -> tuple[str, int]:
    """ "127.0.0.1:9400", "[::1]:9400", "localhost:9400", ":9400" (all addresses) -> (host, port)."""
    text = text.strip()
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ValueError(f"expected [IPv6]:PORT, got {text!r}")
        port_text = rest[1:]
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep:
            raise ValueError(f"expected HOST:PORT (e.g. 127.0.0.1:9400), got {text!r}")
        if ":" in host:
            raise ValueError(f"write an IPv6 address in brackets: [{host}]:{port_text}")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"port must be a number, got {port_text!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"port must be 0-65535, got {port}")
    if host == "":
        host = "0.0.0.0"  # noqa: S104 - ":PORT" means every address, as in Go servers
    return host, port


def is_loopback(host: str) -> bool:
    """True when every address `host` names is a loopback address (127.0.0.0/8, ::1)."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return False
    addresses = {str(info[4][0]) for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses)


def checked_listen(text: str, allow_remote: bool, exposes: str) -> tuple[str, int]:
    """(host, port) for a server's --listen, or ValueError saying why not: a bad address, or a
    non-loopback one without --allow-remote (`exposes`: what anyone reaching it would get)."""
    host, port = parse_listen(text)
    if not is_loopback(host) and not allow_remote:
        raise ValueError(
            f"refusing to listen on {text}: it is not a loopback address, and {exposes}.  Pass "
            "--allow-remote to serve it anyway (and firewall the port), or listen on 127.0.0.1."
        )
    return host, port
