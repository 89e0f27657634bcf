"""Who may use a `gputui serve` port: the secret token, and the Origin and Host checks.

Jupyter's model, less its cookie: a random token printed once in the URL to open; every
request (page, assets, websocket) carries it as the first segment of its path (`/s/TOKEN/`,
so the page's own URLs hold it), and its Host and Origin must name an address serve listens
on.  No cookie: a browser hands cookies to every port of a host, so a cookie would give the
token to any other local web server (issue 31).  Pure standard library (psutil for the
interface addresses of a wildcard listen), so the rules are tested without a server.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import re
import secrets
import socket
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

TOKEN_ENV = "GPUTUI_SERVE_TOKEN"  # noqa: S105 - a variable name
"""The environment variable a wall display's token can come from (instead of a new one)."""
SECRET_PREFIX = "/s/"  # noqa: S105 - a path prefix
"""Every path serve answers starts with SECRET_PREFIX + the token + "/"."""
TOKEN_FILE_MAX = 4096
"""A token file larger than this is refused (it is one line)."""
_TOKEN_SHAPE = re.compile(r"[A-Za-z0-9._~-]{16,512}")
"""A token goes into a URL as it is: URL-safe characters only, and long enough to guess never."""


class TokenError(ValueError):
    """A token from a file or the environment that cannot be used (the message says why)."""


def new_token() -> str:
    return secrets.token_urlsafe(32)


def checked_token(text: str, where: str) -> str:
    token = text.strip()
    if not _TOKEN_SHAPE.fullmatch(token):
        raise TokenError(
            f"{where}: a token must be 16 to 512 characters from A-Z a-z 0-9 . _ ~ - "
            "(make one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return token


def read_token_file(path: str) -> str:
    """The token in `path`: a regular file (never through a symbolic link) owned by this
    user, that neither group nor others may write, of at most TOKEN_FILE_MAX bytes."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | os.O_NONBLOCK
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        why = "it is a symbolic link" if os.path.islink(path) else (exc.strerror or str(exc))
        raise TokenError(f"--token-file {path}: cannot open: {why}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TokenError(f"--token-file {path}: not a regular file")
        if st.st_uid != os.getuid():
            raise TokenError(f"--token-file {path}: owned by uid {st.st_uid}, not by you (uid {os.getuid()})")
        if st.st_mode & 0o022:
            raise TokenError(f"--token-file {path}: group or others may write it (chmod go-w)")
        if st.st_size > TOKEN_FILE_MAX:
            raise TokenError(f"--token-file {path}: larger than {TOKEN_FILE_MAX} bytes")
        data = os.read(fd, TOKEN_FILE_MAX + 1)
    finally:
        os.close(fd)
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise TokenError(f"--token-file {path}: not ASCII text") from None
    return checked_token(text, f"--token-file {path}")


def choose_token(token_file: str | None, env: dict[str, str] | None = None) -> tuple[str, str]:
    """(token, where it came from): --token-file, else $GPUTUI_SERVE_TOKEN, else a new one."""
    if token_file is not None:
        return read_token_file(token_file), "--token-file"
    value = (os.environ if env is None else env).get(TOKEN_ENV)
    if value:
        return checked_token(value, f"${TOKEN_ENV}"), f"${TOKEN_ENV}"
    return new_token(), "new"


def host_port(host: str, port: int) -> str:
    """The Host header naming `host`:`port` ("[::1]:8080" for IPv6)."""
    return f"{bracketed(host)}:{port}"


def bracketed(address: str) -> str:
    """A name or address as a Host header spells it: lower case, IPv6 in brackets."""
    address = address.lower()
    return f"[{address}]" if ":" in address else address


DEFAULT_PORTS = {"http": 80, "https": 443}
_NAME = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*|\[[0-9a-f:.]+\]")
"""A host as a Host header or an origin names it: a DNS name or IPv4 address (no trailing
dot: a resolver takes "localhost." for another name), or an IPv6 address in brackets."""
_PORT = re.compile(r"[1-9][0-9]{0,4}")


def split_host(value: str) -> tuple[str, int | None] | None:
    """A Host header's (name, port), lower case, the port None where none is given; None if
    the value is no "name", "name:port", "[v6]" or "[v6]:port" (user info, a path, a port
    spelt with a sign or leading zeros, anything else)."""
    text = value.lower()
    if text.startswith("["):
        end = text.find("]") + 1
        name, rest = text[:end], text[end:]
    else:
        name, colon, port = text.partition(":")
        rest = colon + port
    if not _is_name(name) or (rest and not (rest[0] == ":" and _PORT.fullmatch(rest[1:]))):
        return None
    port_number = int(rest[1:]) if rest else None
    if port_number is not None and port_number > 65535:
        return None
    return name, port_number


def _is_name(name: str) -> bool:
    if _NAME.fullmatch(name) is None:
        return False
    if name.startswith("["):
        try:
            ipaddress.IPv6Address(name[1:-1])
        except ValueError:
            return False
    return True


def split_origin(value: str) -> tuple[str, str, int] | None:
    """An Origin header's (scheme, name, port), the scheme's default port where none is
    given; None if it is no "http(s)://host[:port]" (the `null` origin, a path, user info)."""
    scheme, sep, authority = value.lower().partition("://")
    if not sep or scheme not in DEFAULT_PORTS:
        return None
    host = split_host(authority)
    if host is None:
        return None
    name, port = host
    return scheme, name, DEFAULT_PORTS[scheme] if port is None else port


def origin_of(url: str) -> tuple[str, str, int] | None:
    """The origin of a URL given on the command line (--allow-origin, --public-url; a path
    is allowed, user info is not), as `split_origin` gives it; None if it is no http(s) URL."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    return split_origin(f"{parts.scheme}://{parts.netloc}")


def listen_names(host: str) -> set[str]:
    """The names a browser may use for an address serve listens on, as `bracketed`: the
    address itself; "localhost" too on loopback; on a wildcard (0.0.0.0, ::) every interface
    address and the host's own names."""
    names = {bracketed(host)}
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return names  # a name was given: browsers use that name
    if address.is_loopback:
        names.add("localhost")
    if address.is_unspecified:
        import psutil

        for addrs in psutil.net_if_addrs().values():
            for a in addrs:
                if a.family in (socket.AF_INET, socket.AF_INET6):
                    names.add(bracketed(a.address.split("%")[0]))
        names |= {bracketed(socket.gethostname()), bracketed(socket.getfqdn()), "localhost"}
        names.discard(bracketed(host))
    return names


def secret_path(token: str) -> str:
    """The path of the page: the token is the first segment of every URL the page uses."""
    return f"{SECRET_PREFIX}{token}/"


def split_secret(path: str) -> tuple[str | None, str]:
    """(the token a request's path carries, the path after it): "/s/TOKEN/ws" -> ("TOKEN",
    "/ws"); (None, path) when the path does not start with SECRET_PREFIX."""
    if not path.startswith(SECRET_PREFIX):
        return None, path
    token, _slash, rest = path[len(SECRET_PREFIX) :].partition("/")
    return token, "/" + rest


@dataclass(frozen=True, slots=True)
class Gate:
    """The checks every request passes before anything is served."""

    token: str
    hosts: frozenset[tuple[str, int | None]]
    """Host headers accepted, as `split_host` reads them: (name, port), and (name, None)
    where the port is the default one of the scheme the browser used."""
    origins: frozenset[tuple[str, str, int]]
    """Origin headers accepted, as `split_origin` reads them."""

    @classmethod
    def for_listen(
        cls,
        token: str,
        host: str,
        port: int,
        allow_origins: Iterable[str] = (),
        public_url: str | None = None,
    ) -> Gate:
        names = listen_names(host)
        hosts: set[tuple[str, int | None]] = {(name, port) for name in names}
        if port == DEFAULT_PORTS["http"]:
            hosts |= {(name, None) for name in names}
        origins = {("http", name, port) for name in names}
        for url in [*allow_origins, *([public_url] if public_url else [])]:
            origin = origin_of(url)
            if origin is None:
                raise ValueError(f"not an http(s) URL of a host and port: {url!r}")
            origins.add(origin)
            scheme, name, origin_port = origin  # a proxy may pass its own Host through
            hosts.add((name, origin_port))
            if origin_port == DEFAULT_PORTS[scheme]:
                hosts.add((name, None))
        return cls(token, frozenset(hosts), frozenset(origins))

    def refusal(self, host: str | None, origin: str | None, path: str) -> str | None:
        """Why a request for `path` is refused (for the server's log, never for the client),
        or None."""
        if host is None or split_host(host) not in self.hosts:
            return "Host not served"
        if origin is not None and split_origin(origin) not in self.origins:
            return "foreign Origin"
        supplied, _rest = split_secret(path)
        if supplied is None:
            return "no token"
        if not hmac.compare_digest(supplied.encode("utf-8", "replace"), self.token.encode()):
            return "wrong token"
        return None
