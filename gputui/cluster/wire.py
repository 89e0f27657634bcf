"""One HTTP/1.1 GET over a socket, read by a bounded parser under one deadline.

The servers the cluster view reads are untrusted: an exporter on a shared node, or anything
listening where a target points.  So the whole exchange — connect, TLS handshake, request,
status line, headers, body — must finish by one deadline (a server dripping a byte a second is
cut off when it passes, not when it pauses), and every part of the answer is bounded: the
status line, each header line, the number of headers, each chunk-size line, the body.  A
broken answer raises `WireError` with a short reason for that target; it never escapes as
another exception.  Only what a scrape needs is spoken: no keep-alive (`Connection: close`),
no redirects, no proxies, identity or gzip content.
"""

from __future__ import annotations

import re
import socket
import ssl
import time
import zlib
from collections.abc import Callable

MAX_LINE = 8192
"""Longest status line, header line or chunk-size line (as common servers limit theirs)."""
MAX_HEADERS = 100
"""Most header lines in one answer (and in a chunked body's trailer)."""
MAX_INTERIM = 5
"""Most 1xx interim answers (100 Continue) before the real one."""
READ = 1 << 16

_STATUS = re.compile(rb"HTTP/1\.[01] ([1-5][0-9][0-9])(?:[ \t]([^\r\n]*))?\r?\n")
_HEADER = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*([^\r\n]*?)[ \t]*\r?\n")
_CHUNK = re.compile(rb"([0-9A-Fa-f]{1,15})[ \t]*(?:;[^\r\n]*)?\r?\n")


class WireError(Exception):
    """The answer could not be read: the message is a short reason (no URL, no header)."""


class TooLarge(WireError):
    """The body is larger than allowed."""


class TimedOut(WireError):
    """The deadline passed."""


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left; TimedOut when none."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise TimedOut(f"no complete answer within {self.seconds:g} s")
        return left


def connect(host: str, port: int, deadline: Deadline, tls: ssl.SSLContext | None) -> socket.socket:
    """A connected socket (TLS-wrapped with `tls`), each step within the deadline.  The name
    lookup is not interruptible: callers run this on a thread they can abandon."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise WireError(f"cannot resolve the host: {exc.strerror or exc}") from None
    last: OSError | None = None
    for family, kind, proto, _, addr in infos:
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(deadline.left())
            sock.connect(addr)
        except TimeoutError:
            sock.close()
            raise TimedOut(f"no connection within {deadline.seconds:g} s") from None
        except OSError as exc:
            sock.close()
            last = exc
            continue
        if tls is None:
            return sock
        try:
            sock.settimeout(deadline.left())
            return tls.wrap_socket(sock, server_hostname=host)
        except TimeoutError:
            sock.close()
            raise TimedOut(f"no TLS handshake within {deadline.seconds:g} s") from None
        except ssl.SSLError as exc:
            sock.close()
            raise WireError(f"TLS: {exc.reason or exc}") from None
        except OSError as exc:
            sock.close()
            raise WireError(f"TLS: {exc.strerror or exc}") from None
    if last is None:
        raise WireError("the host has no address")
    raise WireError(last.strerror or str(last))


class Response:
    """Reads one answer from `sock`; every read waits at most until the deadline."""

    def __init__(self, sock: socket.socket, deadline: Deadline, on_bytes: Callable[[int], None]) -> None:
        self.sock = sock
        self.deadline = deadline
        self.on_bytes = on_bytes
        self.buf = bytearray()
        self.eof = False
        self.status = 0
        self.reason = ""
        self.headers: dict[str, str] = {}

    # ---- bytes -------------------------------------------------------------------------

    def _fill(self) -> bool:
        """Read more into the buffer; False at end of stream."""
        if self.eof:
            return False
        try:
            self.sock.settimeout(self.deadline.left())
            got = self.sock.recv(READ)
        except TimeoutError:
            raise TimedOut(f"no complete answer within {self.deadline.seconds:g} s") from None
        except ssl.SSLError as exc:
            raise WireError(f"TLS: {exc.reason or exc}") from None
        except OSError as exc:
            raise WireError(f"connection lost: {exc.strerror or exc}") from None
        if not got:
            self.eof = True
            return False
        self.on_bytes(len(got))
        self.buf += got
        return True

    def line(self, what: str) -> bytes:
        """One line (with its LF), at most MAX_LINE bytes."""
        start = 0
        while True:
            end = self.buf.find(b"\n", start)
            if end >= 0:
                if end >= MAX_LINE:
                    break
                out = bytes(self.buf[: end + 1])
                del self.buf[: end + 1]
                return out
            if len(self.buf) >= MAX_LINE:
                break
            start = len(self.buf)
            if not self._fill():
                raise WireError(f"the server closed the connection in the {what}")
        raise WireError(f"a {what} longer than {MAX_LINE // 1024} KiB")

    def exactly(self, n: int, what: str) -> bytes:
        while len(self.buf) < n:
            if not self._fill():
                raise WireError(f"the server closed the connection in the {what}")
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def some(self) -> bytes:
        """What is buffered, or the next read; b"" at end of stream."""
        if not self.buf and not self._fill():
            return b""
        out = bytes(self.buf)
        self.buf.clear()
        return out

    # ---- the head ----------------------------------------------------------------------

    def read_head(self) -> None:
        for _ in range(MAX_INTERIM + 1):
            first = self.line("status line")
            m = _STATUS.fullmatch(first)
            if m is None:
                raise WireError("not an HTTP answer (bad status line)")
            self.status = int(m.group(1))
            self.reason = (m.group(2) or b"").decode("latin-1")
            self.headers = self._fields("header")
            if self.status >= 200:
                return
        raise WireError(f"more than {MAX_INTERIM} interim (1xx) answers")

    def _fields(self, what: str) -> dict[str, str]:
        """Header lines up to the blank line; repeated names joined with ", "."""
        out: dict[str, str] = {}
        for _ in range(MAX_HEADERS + 1):
            raw = self.line(f"{what} line")
            if raw in (b"\r\n", b"\n"):
                return out
            m = _HEADER.fullmatch(raw)
            if m is None:
                raise WireError(f"a malformed {what} line")
            name = m.group(1).decode("ascii").lower()
            value = m.group(2).decode("latin-1")
            out[name] = f"{out[name]}, {value}" if name in out else value
        raise WireError(f"more than {MAX_HEADERS} {what}s")

    # ---- the body ----------------------------------------------------------------------

    def body(self, limit: int) -> bytes:
        """The body as sent (before any content decoding), at most `limit` bytes."""
        te = self.headers.get("transfer-encoding", "").strip().lower()
        if te:
            if te != "chunked":
                raise WireError(f"an unsupported transfer encoding ({te[:20]})")
            return self._chunked(limit)
        length = self.headers.get("content-length")
        if length is not None:
            length = length.strip()
            if not length.isascii() or not length.isdigit() or len(length) > 15:
                raise WireError("a bad Content-Length")
            n = int(length)
            if n > limit:
                raise TooLarge
            return self.exactly(n, "body")
        out = bytearray()
        while chunk := self.some():
            out += chunk
            if len(out) > limit:
                raise TooLarge
        return bytes(out)

    def _chunked(self, limit: int) -> bytes:
        out = bytearray()
        while True:
            m = _CHUNK.fullmatch(self.line("chunk-size line"))
            if m is None:
                raise WireError("a bad chunk (its size line is not hexadecimal)")
            n = int(m.group(1), 16)
            if n == 0:
                self._fields("trailer")
                return bytes(out)
            if len(out) + n > limit:
                raise TooLarge
            out += self.exactly(n, "body")
            if self.line("chunk end") not in (b"\r\n", b"\n"):
                raise WireError("a bad chunk (no line end after its data)")


def gunzip(data: bytes, limit: int) -> bytes:
    """`data` decompressed, at most `limit` bytes (TooLarge past it)."""
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflate.decompress(data, limit + 1)
        if len(out) > limit:
            raise TooLarge
        if not inflate.eof:
            raise WireError("a gzip answer cut short")
    except zlib.error:
        raise WireError("a gzip answer that does not decompress") from None
    return out
