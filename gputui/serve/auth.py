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
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{port}".lower()


def listen_names(host: str) -> set[str]:
    """The names a browser may use for an address serve listens on: the address itself;
    "localhost" too on loopback; on a wildcard (0.0.0.0, ::) every interface address and
    the host's own names."""
    names = {host.lower()}
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
                    names.add(a.address.split("%")[0].lower())
        names |= {socket.gethostname().lower(), socket.getfqdn().lower(), "localhost"}
        names.discard(host.lower())
    return names


def origin_of(url: str) -> str | None:
    """ "scheme://host[:port]" of a URL, lower case, the default port left out; None if it
    is no http(s) URL."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    default = 80 if parts.scheme == "http" else 443
    return f"{parts.scheme}://{host}" + (f":{port}" if port not in (None, default) else "")


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
    hosts: frozenset[str]
    """Host headers accepted, "name:port" (and the bare name where the port is 80/443)."""
    origins: frozenset[str]
    """Origin headers accepted ("http://name:port")."""

    @classmethod
    def for_listen(
        cls,
        token: str,
        host: str,
        port: int,
        allow_origins: Iterable[str] = (),
        public_url: str | None = None,
    ) -> Gate:
        hosts = {host_port(name, port) for name in listen_names(host)}
        if port == 80:
            hosts |= {h.rsplit(":", 1)[0] for h in set(hosts)}
        origins = {f"http://{h}" for h in hosts}
        for url in [*allow_origins, *([public_url] if public_url else [])]:
            origin = origin_of(url)
            if origin is None:
                raise ValueError(f"not an http(s) URL: {url!r}")
            origins.add(origin)
            hosts.add(origin.split("://", 1)[1])  # a proxy may pass its own Host through
        return cls(token, frozenset(hosts), frozenset(origins))

    def refusal(self, host: str | None, origin: str | None, path: str) -> str | None:
        """Why a request for `path` is refused (for the server's log, never for the client),
        or None."""
        if host is None or host.lower() not in self.hosts:
            return "Host not served"
        if origin is not None and origin.lower().rstrip("/") not in self.origins:
            return "foreign Origin"
        supplied, _rest = split_secret(path)
        if supplied is None:
            return "no token"
        if not hmac.compare_digest(supplied.encode("utf-8", "replace"), self.token.encode()):
            return "wrong token"
        return None
