"""HTTP GET for the cluster sources: one deadline for the whole exchange, a bounded answer
(gputui/cluster/wire.py), TLS options, credentials that never reach a message or a log, no
redirects (an Authorization header must not follow a redirect to another host), no proxies.

Errors are `FetchError`: a short `reason` a user can read ("HTTP 401 Unauthorized", "more
than 100 headers") and the URL without credentials; `str()` shortens the URL, never the
reason, so the message fits 80 columns.  Nothing the server wrote reaches a message except
through the untrusted-text filter.
"""

from __future__ import annotations

import base64
import contextlib
import http
import ssl
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field

from gputui.cluster import wire
from gputui.cluster.wire import MAX_HEADERS, MAX_LINE  # noqa: F401 - re-exported for callers and tests
from gputui.untrusted import escaped

MAX_BODY = 64 * 2**20
"""Largest response body accepted (after decompression): 512 GPUs of dcgm-exporter are ~2 MiB."""
MESSAGE_WIDTH = 80
"""`str(FetchError)` fits this many columns: the URL is shortened to make room for the reason."""
MAX_REASON = 60
"""A reason longer than this (a server's own words) is cut."""


def short_url(url: str, width: int) -> str:
    """`url` for a message at most `width` characters: no scheme, no credentials, the host
    and port first; what does not fit (the path's end, the query) cut with "…"."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    text = host + (f":{port}" if port else "") + parts.path + (f"?{parts.query}" if parts.query else "")
    text = escaped(text)
    width = max(2, width)
    return text if len(text) <= width else text[: width - 1] + "…"


class FetchError(Exception):
    """A request that failed: the message is safe to show (no credentials, no headers)."""

    def __init__(self, url: str, reason: str) -> None:
        self.url = display_url(url)
        self.reason = reason
        super().__init__(self.message())

    def message(self, width: int = MESSAGE_WIDTH) -> str:
        """ "host:port/path: reason" in at most `width` characters (the URL cut first)."""
        room = width - len(self.reason) - 2
        if room < 8:
            return self.reason[:width]
        return f"{short_url(self.url, room)}: {self.reason}"


def _reason(text: str) -> str:
    text = escaped(text)
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"


@dataclass(frozen=True)
class Credentials:
    """An Authorization header value, kept out of repr() and str()."""

    header: str = field(repr=False, default="")

    @classmethod
    def basic(cls, user: str, password: str) -> Credentials:
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        return cls(f"Basic {token}")

    def __bool__(self) -> bool:
        return bool(self.header)

    def __str__(self) -> str:
        return "Credentials(<hidden>)" if self.header else "Credentials(none)"


MAX_TLS_FILE_BYTES = 4 << 20
"""The largest CA, certificate or key file read (a system CA bundle is about 220 KB)."""


@dataclass(frozen=True)
class TlsOptions:
    ca_file: str = ""
    insecure: bool = False
    """Skip certificate verification (a self-signed server on a trusted network)."""
    client_cert: str = ""
    client_key: str = ""

    def context(self) -> ssl.SSLContext:
        """The TLS context; ValueError (one line) or ssl.SSLError when a file is refused.

        The files are the config's (a CA decides whom you trust): each must pass the config
        file's rule (gputui/safefile.py: a regular file, never a FIFO or a device, owned by
        you or root, that nobody else could have written, at most MAX_TLS_FILE_BYTES) before
        OpenSSL sees it.  The CA is handed over as read; OpenSSL can only load the client
        certificate and key by name, so those are checked, then named (their directories
        passed the rule: nobody else can swap them in between)."""
        from gputui.safefile import Refused, read_private, read_private_text

        try:
            cadata = read_private_text(self.ca_file, MAX_TLS_FILE_BYTES) if self.ca_file else None
            for path in (self.client_cert, self.client_key):
                if path:
                    read_private(path, MAX_TLS_FILE_BYTES)
        except Refused as exc:
            raise ValueError(str(exc)) from None
        ctx = ssl.create_default_context(cadata=cadata)
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.client_cert:
            ctx.load_cert_chain(self.client_cert, self.client_key or None)
        return ctx


def display_url(url: str) -> str:
    """The URL without user:password@ (for messages)."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host + (f":{port}" if port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def _bad_characters(text: str) -> bool:
    return not text.isascii() or any(c <= " " or c == "\x7f" for c in text)


def check_url(url: str) -> str | None:
    """A problem with a target or server URL, or None."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return f"{escaped(display_url(url))}: expected an http:// or https:// URL"
    if not parts.hostname:
        return f"{escaped(display_url(url))}: no host in the URL"
    if parts.username is not None or parts.password is not None:
        return (
            f"{escaped(display_url(url))}: credentials in a URL show in `ps` and shell history; put them in "
            "the config file's [cluster] section (basic_auth_user / basic_auth_password_file)"
        )
    if _bad_characters(url):
        return f"{escaped(display_url(url))}: spaces, controls or non-ASCII characters in the URL"
    try:
        _ = parts.port
    except ValueError:
        return f"{escaped(display_url(url))}: bad port"
    return None


def _status_reason(status: int, server_said: str) -> str:
    if 300 <= status < 400:
        return f"HTTP {status} redirect (not followed)"
    try:
        phrase = http.HTTPStatus(status).phrase  # the standard words, not the server's
    except ValueError:
        phrase = _reason(server_said.strip())[:30]
    return f"HTTP {status} {phrase}".rstrip()


@dataclass
class HttpClient:
    """GETs with one deadline, a size limit, optional auth and TLS settings."""

    timeout: float = 5.0
    """Seconds for the whole exchange: connect, TLS, request, headers and body."""
    credentials: Credentials = field(default_factory=Credentials)
    tls: TlsOptions = field(default_factory=TlsOptions)
    max_body: int = MAX_BODY
    user_agent: str = "gputui-cluster"
    bytes_received: int = 0
    """Bytes read from the network (compressed), for benchmarks."""
    requests: int = 0
    reads: int = 0
    """Socket reads that brought bytes (the work an answer cost: tests and benchmarks)."""
    chunks: int = 0
    """Chunks of chunked bodies read."""
    _context: ssl.SSLContext | None = field(default=None, repr=False)

    def _tls(self) -> ssl.SSLContext:
        if self._context is None:
            self._context = self.tls.context()
        return self._context

    def _count(self, n: int) -> None:
        self.bytes_received += n

    def get(self, url: str, accept: str = "*/*") -> bytes:
        """The body of a 200 answer, or FetchError (see `stream`)."""
        with self.stream(url, accept) as pieces:
            return b"".join(pieces)

    @contextlib.contextmanager
    def stream(self, url: str, accept: str = "*/*") -> Iterator[Iterator[bytes]]:
        """The body of a 200 answer as it arrives, decoded, in pieces: a reader can stop
        early (the connection is closed when the block ends).  FetchError, on entry or
        from the pieces, for everything that goes wrong.  The whole request, headers and
        body, must finish within `timeout` seconds (a server dripping bytes is cut off);
        the body may hold at most `max_body` bytes after decoding, whatever its framing
        and coding (gputui/cluster/wire.py).  Name resolution is the one step a deadline
        cannot interrupt: DirectSource gives up on a target that overruns, without waiting
        for its thread."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise FetchError(url, "expected an http:// or https:// URL with a host")
        if _bad_characters(url):
            raise FetchError(url, "spaces, controls or non-ASCII characters in the URL")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise FetchError(url, "bad port") from None
        host = parts.hostname
        host_header = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        head = [
            f"GET {target} HTTP/1.1",
            f"Host: {host_header}",
            f"Accept: {accept}",
            "Accept-Encoding: gzip",
            f"User-Agent: {self.user_agent}",
            "Connection: close",
        ]
        if self.credentials:
            head.append(f"Authorization: {self.credentials.header}")
        request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
        self.requests += 1
        deadline = wire.Deadline(self.timeout)
        resp: wire.Response | None = None
        with contextlib.ExitStack() as stack:
            try:
                tls = self._tls() if parts.scheme == "https" else None
                sock = stack.enter_context(wire.connect(host, port, deadline, tls))
                try:
                    sock.settimeout(deadline.left())
                    sock.sendall(request)
                except TimeoutError:
                    raise wire.TimedOut(f"no complete answer within {self.timeout:g} s") from None
                except OSError as exc:
                    raise wire.WireError(f"connection lost: {exc.strerror or exc}") from None
                resp = wire.Response(sock, deadline, self._count)
                resp.read_head()
                if resp.status != 200:
                    raise FetchError(url, _status_reason(resp.status, resp.reason))
                coding = resp.headers.get("content-encoding", "").strip().lower()
                if coding not in ("", "identity", *wire.CODINGS):
                    raise FetchError(url, f"an unsupported content encoding ({_reason(coding)[:20]})")
                pieces = wire.decoded(resp.body(wire.raw_limit(self.max_body, coding)), coding, self.max_body)
            except BaseException as exc:
                self._counted(resp)
                raise self._failure(url, exc) from None
            try:
                yield self._guarded(url, pieces)
            finally:
                self._counted(resp)

    def _counted(self, resp: wire.Response | None) -> None:
        if resp is not None:
            self.reads += resp.reads
            self.chunks += resp.chunks
            resp.reads = resp.chunks = 0

    def _guarded(self, url: str, pieces: Iterator[bytes]) -> Iterator[bytes]:
        try:
            yield from pieces
        except Exception as exc:
            raise self._failure(url, exc) from None

    def _failure(self, url: str, exc: BaseException) -> BaseException:
        """The FetchError an exception of the exchange stands for (others pass through)."""
        if isinstance(exc, FetchError):
            return exc
        if isinstance(exc, wire.TooLarge):
            return FetchError(url, f"the answer is larger than {self.max_body / 2**20:g} MiB")
        if isinstance(exc, wire.WireError):
            return FetchError(url, str(exc))
        if isinstance(exc, (OSError, ValueError, UnicodeError)):  # a TLS context that does not load
            return FetchError(url, _reason(f"{type(exc).__name__}: {exc}"))
        return exc
