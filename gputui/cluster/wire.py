"""One HTTP/1.1 GET over a socket, read by a bounded parser under one deadline.

The servers the cluster view reads are untrusted: an exporter on a shared node, or anything
listening where a target points.  So the whole exchange — connect, TLS handshake, request,
status line, headers, body — must finish by one deadline (a server dripping a byte a second is
cut off when it passes, not when it pauses), and every part of the answer is bounded: the
status line, each header line, the number of headers, each chunk-size line, the body.  A
broken answer raises `WireError` with a short reason for that target; it never escapes as
another exception.  Only what a scrape needs is spoken: no keep-alive (`Connection: close`),
no redirects, no proxies, identity, gzip or deflate content.  The body's cap counts its
content after decoding, the same on every path (`decoded`).
"""

from __future__ import annotations

import re
import socket
import ssl
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

MAX_LINE = 8192
"""Longest status line, header line or chunk-size line (as common servers limit theirs)."""
MAX_HEADERS = 100
"""Most header lines in one answer (and in a chunked body's trailer)."""
MAX_INTERIM = 5
"""Most 1xx interim answers (100 Continue) before the real one."""
READ = 1 << 16
"""The most bytes one read asks for."""
READS_FREE = 256
"""Reads an answer may take at any size; after them, a small read is followed by a pause."""
SMALL_READ = 4096
"""A read that brought fewer bytes is small."""
COALESCE_S = 0.01
"""The pause after a small read (past READS_FREE): a server sending a byte per segment
costs at most 100 reads a second, not a read per byte."""
CHUNKS_FREE = 1024
"""Chunks a chunked body may have at any size..."""
MIN_CHUNK_BYTES = 128
"""...plus one per this many bytes of data: 1-byte chunks (a parse per byte) are refused
after about CHUNKS_FREE of them, while any real server's chunks (4 KiB and more) pass."""

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
    """Reads one answer from `sock`; every read waits at most until the deadline.

    The work is bounded by the bytes, not by how a server cuts them: after READS_FREE reads,
    a read that brought less than SMALL_READ bytes is followed by a pause of COALESCE_S
    before the next one (what arrives meanwhile comes in one read), and a chunked body may
    have at most CHUNKS_FREE chunks plus one per MIN_CHUNK_BYTES of data."""

    def __init__(self, sock: socket.socket, deadline: Deadline, on_bytes: Callable[[int], None]) -> None:
        self.sock = sock
        self.deadline = deadline
        self.on_bytes = on_bytes
        self.buf = bytearray()
        self.eof = False
        self.status = 0
        self.reason = ""
        self.headers: dict[str, str] = {}
        self.reads = 0
        """Reads that brought bytes."""
        self.chunks = 0
        """Chunks of a chunked body read so far."""
        self._pace = False

    # ---- bytes -------------------------------------------------------------------------

    def _fill(self) -> bool:
        """Read more into the buffer; False at end of stream."""
        if self.eof:
            return False
        if self._pace:  # a trickle: let it gather instead of waking for every segment
            time.sleep(min(COALESCE_S, self.deadline.left()))
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
        self.reads += 1
        self._pace = self.reads >= READS_FREE and len(got) < SMALL_READ
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

    def some(self, most: int, what: str = "") -> bytes:
        """At most `most` (> 0) bytes: what is buffered, else the next read.  b"" at end of
        stream; with `what`, the end of stream is an error (the body is not all there)."""
        if not self.buf and not self._fill():
            if what:
                raise WireError(f"the server closed the connection in the {what}")
            return b""
        out = bytes(self.buf[:most])
        del self.buf[:most]
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

    def body(self, limit: int) -> Iterator[bytes]:
        """The body as sent (its transfer coding removed, any content coding kept), in
        pieces as they arrive; TooLarge once it passes `limit` bytes."""
        te = self.headers.get("transfer-encoding", "").strip().lower()
        if te:
            if te != "chunked":
                raise WireError(f"an unsupported transfer encoding ({te[:20]})")
            yield from self._chunked(limit)
            return
        length = self.headers.get("content-length")
        if length is not None:
            length = length.strip()
            if not length.isascii() or not length.isdigit() or len(length) > 15:
                raise WireError("a bad Content-Length")
            left = int(length)
            if left > limit:
                raise TooLarge
            while left:
                piece = self.some(min(left, READ), "body")
                left -= len(piece)
                yield piece
            return
        total = 0
        while piece := self.some(READ):
            total += len(piece)
            if total > limit:
                raise TooLarge
            yield piece

    def _chunked(self, limit: int) -> Iterator[bytes]:
        total = 0
        while True:
            m = _CHUNK.fullmatch(self.line("chunk-size line"))
            if m is None:
                raise WireError("a bad chunk (its size line is not hexadecimal)")
            n = int(m.group(1), 16)
            if n == 0:
                self._fields("trailer")
                return
            total += n
            if total > limit:
                raise TooLarge
            self.chunks += 1
            if self.chunks > CHUNKS_FREE + total // MIN_CHUNK_BYTES:
                raise WireError(f"{self.chunks} chunks for {total} bytes (chunks too small)")
            while n:
                piece = self.some(min(n, READ), "body")
                n -= len(piece)
                yield piece
            if self.line("chunk end") not in (b"\r\n", b"\n"):
                raise WireError("a bad chunk (no line end after its data)")


# --------------------------------------------------------------------------------------
# content codings
# --------------------------------------------------------------------------------------

_GZIP_MAGIC = b"\x1f\x8b"
CODINGS = ("gzip", "x-gzip", "deflate")
"""The content codings read (one layer; identity is none)."""


def raw_limit(limit: int, coding: str) -> int:
    """The most bytes a body may have as sent, for `limit` bytes after decoding: compressed
    data can be a little larger than its content (deflate's stored blocks: 5 bytes per
    64 KiB, plus headers)."""
    return limit if coding in ("", "identity") else limit + limit // 1024 + 1024


def _zlib_header(data: bytes) -> bool:
    """The first two bytes are a zlib header (RFC 1950); else "deflate" is raw deflate."""
    return data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0


def decoded(pieces: Iterable[bytes], coding: str, limit: int) -> Iterator[bytes]:
    """The content of a body sent with Content-Encoding `coding` (lower case; "" or
    "identity" for none), in pieces; TooLarge once it passes `limit` bytes.  The one place
    the cap is counted, whatever the framing and coding: a decompression bomb is stopped
    at `limit` + 1 bytes of output, never inflated further."""
    total = 0
    if coding in ("", "identity"):
        for piece in pieces:
            total += len(piece)
            if total > limit:
                raise TooLarge
            if piece:
                yield piece
        return
    if coding not in CODINGS:
        raise WireError(f"an unsupported content encoding ({coding[:20]})")
    gz = coding != "deflate"
    name = "gzip" if gz else "deflate"
    inflate: Any = None
    members = 0
    pending = b""
    for piece in pieces:
        data = pending + piece if pending else piece
        pending = b""
        while data:
            if inflate is None:
                if len(data) < 2:  # the header decides: wait for its second byte
                    pending = data
                    break
                if gz and members and data[:2] != _GZIP_MAGIC:
                    if data.count(0) == len(data):  # zero padding after the last member
                        break
                    raise WireError("data after the end of the gzip answer")
                wbits = (
                    16 + zlib.MAX_WBITS if gz else zlib.MAX_WBITS if _zlib_header(data) else -zlib.MAX_WBITS
                )
                inflate = zlib.decompressobj(wbits)
            try:
                out = inflate.decompress(data, limit - total + 1)
            except zlib.error:
                raise WireError(f"a {name} answer that does not decompress") from None
            total += len(out)
            if total > limit:
                raise TooLarge
            if out:
                yield out
            if inflate.eof:
                data = inflate.unused_data
                members += 1
                inflate = None
                if data and not gz:
                    raise WireError("data after the end of the deflate answer")
            else:
                data = inflate.unconsumed_tail  # empty: all of it was taken
    if pending or inflate is not None or not members:
        raise WireError(f"a {name} answer cut short")
