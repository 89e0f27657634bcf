"""The cluster client's byte cap holds on every path an answer can take (issue 31): each
transfer framing (Content-Length, chunked, no length + close), each content encoding
(identity, gzip, deflate, and the bombs they allow), and servers whose Content-Length lies.
The cap counts the body after decoding, the same number on every path; at the cap an answer
is read whole, one byte past it is refused with one line.  And the work an answer costs is
bounded by its bytes, not by how finely a server cuts them: a body sent a byte per TCP
segment, or in 1-byte chunks, costs a bounded number of reads and chunk parses.

Every server here is a raw loopback socket writing bytes no HTTP library would (tests only:
no exporter stand-in); the checks count bytes, reads and outcomes, never time."""

from __future__ import annotations

import contextlib
import gzip
import socket
import threading
import tracemalloc
import zlib
from collections.abc import Callable, Iterator

import pytest
from cluster_support import Behaviour, RawServer, raw_server_factory

from gputui.cluster import wire
from gputui.cluster.http import FetchError, HttpClient

LIMIT = 4096
"""The client's cap in these tests (bytes after decoding)."""
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"


@pytest.fixture
def raw_servers() -> Iterator[Callable[[Behaviour], RawServer]]:
    with raw_server_factory() as make:
        yield make


def _send(data: bytes) -> Behaviour:
    def run(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            conn.sendall(data)

    return run


def body_of(n: int) -> bytes:
    """`n` bytes of exposition-like text (compressible, as real answers are)."""
    line = b'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-h",Hostname="h"} 5\n'
    return (line * (n // len(line) + 1))[:n]


def encode(body: bytes, encoding: str) -> tuple[bytes, bytes]:
    """(the Content-Encoding header line, the encoded body)."""
    if encoding == "identity":
        return b"", body
    if encoding == "gzip":
        return b"Content-Encoding: gzip\r\n", gzip.compress(body, mtime=0)
    if encoding == "deflate":  # RFC 9110's deflate: the zlib format
        return b"Content-Encoding: deflate\r\n", zlib.compress(body)
    if encoding == "raw-deflate":  # what some servers send as "deflate": no zlib header
        c = zlib.compressobj(wbits=-zlib.MAX_WBITS)
        return b"Content-Encoding: deflate\r\n", c.compress(body) + c.flush()
    raise AssertionError(encoding)


def frame(data: bytes, framing: str, extra: bytes = b"", piece: int = 700) -> bytes:
    """A whole answer: HEAD, `extra` header lines, `data` framed."""
    if framing == "length":
        return HEAD + extra + b"Content-Length: %d\r\n\r\n" % len(data) + data
    if framing == "chunked":
        out = HEAD + extra + b"Transfer-Encoding: chunked\r\n\r\n"
        for k in range(0, len(data), piece):
            part = data[k : k + piece]
            out += b"%x\r\n" % len(part) + part + b"\r\n"
        return out + b"0\r\n\r\n"
    if framing == "close":
        return HEAD + extra + b"\r\n" + data
    raise AssertionError(framing)


FRAMINGS = ("length", "chunked", "close")
ENCODINGS = ("identity", "gzip", "deflate", "raw-deflate")


def get(raw_servers, answer: bytes, limit: int = LIMIT, timeout: float = 10.0) -> bytes:
    s = raw_servers(_send(answer))
    return HttpClient(timeout=timeout, max_body=limit).get(f"http://{s.target}/metrics")


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("framing", FRAMINGS)
def test_a_body_exactly_at_the_cap_is_read_and_one_byte_more_is_refused(raw_servers, framing, encoding):
    at = body_of(LIMIT)
    header, data = encode(at, encoding)
    assert get(raw_servers, frame(data, framing, header)) == at
    over = body_of(LIMIT + 1)
    header, data = encode(over, encoding)
    with pytest.raises(FetchError) as exc:
        get(raw_servers, frame(data, framing, header))
    assert exc.value.reason == f"the answer is larger than {LIMIT / 2**20:g} MiB", exc.value.reason


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw-deflate"])
@pytest.mark.parametrize("framing", FRAMINGS)
def test_a_decompression_bomb_is_refused_without_inflating_it(raw_servers, framing, encoding):
    """64 MiB of zeros in ~64 KiB: refused at the cap (1 MiB), with at most a few MiB ever held."""
    limit = 2**20
    header, data = encode(bytes(64 * 2**20), encoding)
    assert len(data) < 2**20  # the compressed answer itself is under the cap
    answer = frame(data, framing, header, piece=8192)
    s = raw_servers(_send(answer))
    client = HttpClient(timeout=30, max_body=limit)
    tracemalloc.start()
    try:
        with pytest.raises(FetchError, match=r"larger than 1 MiB"):
            client.get(f"http://{s.target}/metrics")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 6 * limit, peak


def test_gzip_members_one_after_another_count_together(raw_servers):
    """Two gzip members (a valid gzip stream): both are read, and the cap counts their sum."""
    half = body_of(LIMIT // 2)
    two = gzip.compress(half, mtime=0) + gzip.compress(half, mtime=0)
    assert get(raw_servers, frame(two, "length", b"Content-Encoding: gzip\r\n")) == half + half
    over = gzip.compress(half, mtime=0) + gzip.compress(half + b"x", mtime=0)
    with pytest.raises(FetchError, match="larger than"):
        get(raw_servers, frame(over, "length", b"Content-Encoding: gzip\r\n"))


@pytest.mark.parametrize("framing", FRAMINGS)
def test_a_compressed_body_cut_short_is_refused(raw_servers, framing):
    _, data = encode(body_of(3000), "gzip")
    with pytest.raises(FetchError, match="cut short"):
        get(raw_servers, frame(data[: len(data) // 2], framing, b"Content-Encoding: gzip\r\n"))


def test_garbage_that_claims_gzip_is_refused(raw_servers):
    with pytest.raises(FetchError, match="does not decompress"):
        get(raw_servers, frame(b"not gzip at all" * 10, "length", b"Content-Encoding: gzip\r\n"))


@pytest.mark.parametrize("value", ["gzip, gzip", "br", "compress", "gzip, identity, gzip"])
def test_encodings_it_did_not_ask_for_are_refused_in_one_line(raw_servers, value):
    """Only one layer of gzip or deflate: a stacked encoding (a bomb of bombs) is refused."""
    _, data = encode(body_of(100), "gzip")
    with pytest.raises(FetchError, match="unsupported content encoding"):
        get(raw_servers, frame(data, "length", b"Content-Encoding: %s\r\n" % value.encode()))


# ---- Content-Length that lies -----------------------------------------------------------


def test_a_content_length_shorter_than_the_body_reads_only_what_it_says(raw_servers):
    body = body_of(300)
    answer = HEAD + b"Content-Length: 100\r\n\r\n" + body
    assert get(raw_servers, answer) == body[:100]


def test_a_content_length_longer_than_the_body_is_refused(raw_servers):
    answer = HEAD + b"Content-Length: %d\r\n\r\n" % LIMIT + body_of(100)
    with pytest.raises(FetchError, match="closed the connection in the body"):
        get(raw_servers, answer)


def test_a_content_length_over_the_cap_is_refused_before_the_body_is_read(raw_servers):
    answer = HEAD + b"Content-Length: %d\r\n\r\n" % (LIMIT + 1) + body_of(10)
    with pytest.raises(FetchError, match="larger than"):
        get(raw_servers, answer)


def test_a_gzip_body_whose_content_length_stops_inside_it_is_refused(raw_servers):
    _, data = encode(body_of(3000), "gzip")
    answer = HEAD + b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % (len(data) - 5) + data
    with pytest.raises(FetchError, match="cut short"):
        get(raw_servers, answer)


@pytest.mark.parametrize(
    "value", [b"+100", b"-1", b"0x10", b"100, 200", b"1e3", b"", b"99999999999999999999"]
)
def test_a_malformed_content_length_is_refused(raw_servers, value):
    answer = HEAD + b"Content-Length: " + value + b"\r\n\r\n" + body_of(100)
    with pytest.raises(FetchError, match=r"a bad Content-Length|larger than"):
        get(raw_servers, answer)


def test_two_different_content_lengths_are_refused(raw_servers):
    answer = HEAD + b"Content-Length: 10\r\nContent-Length: 100\r\n\r\n" + body_of(100)
    with pytest.raises(FetchError, match="a bad Content-Length"):
        get(raw_servers, answer)


def test_chunked_wins_over_a_content_length(raw_servers):
    """Both headers (a smuggling shape): the chunked framing is read, the length ignored."""
    body = body_of(1000)
    answer = frame(body, "chunked", b"Content-Length: 5\r\n")
    assert get(raw_servers, answer) == body


# ---- chunked -----------------------------------------------------------------------------


def test_a_chunk_that_declares_more_than_the_cap_is_refused_before_its_data(raw_servers):
    answer = HEAD + b"Transfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFF\r\n" + body_of(10)
    with pytest.raises(FetchError, match="larger than"):
        get(raw_servers, answer)


def test_chunks_that_add_up_past_the_cap_are_refused(raw_servers):
    body = body_of(LIMIT)
    answer = frame(body, "chunked", piece=1000)[: -len(b"0\r\n\r\n")] + b"1\r\nx\r\n0\r\n\r\n"
    with pytest.raises(FetchError, match="larger than"):
        get(raw_servers, answer)


def test_one_byte_chunks_are_refused_after_a_bounded_number_of_chunks(raw_servers):
    """A body of 1-byte chunks costs a chunk-size line parse per byte: the client stops once
    the chunks are too many for the bytes they carry, not at the cap or the deadline."""
    body = body_of(200_000)
    answer = frame(body, "chunked", piece=1)
    s = raw_servers(_send(answer))
    client = HttpClient(timeout=30, max_body=4 * 2**20)
    with pytest.raises(FetchError) as exc:
        client.get(f"http://{s.target}/metrics")
    assert "chunks" in exc.value.reason and len(str(exc.value)) <= 80, exc.value.reason
    # the work done: at most the free chunks and those the bytes pay for, read in few reads
    assert client.chunks <= wire.CHUNKS_FREE + wire.CHUNKS_FREE // wire.MIN_CHUNK_BYTES + 1, client.chunks


def test_small_chunks_within_the_allowance_and_large_ones_are_read(raw_servers):
    few = body_of(wire.CHUNKS_FREE // 2)
    assert get(raw_servers, frame(few, "chunked", piece=1)) == few
    big = body_of(200_000)
    s = raw_servers(_send(frame(big, "chunked", piece=wire.MIN_CHUNK_BYTES)))
    assert HttpClient(timeout=30, max_body=2**20).get(f"http://{s.target}/metrics") == big


# ---- a body sent a byte per segment --------------------------------------------------------


def _one_byte_per_segment(answer: bytes, sent: threading.Event) -> Behaviour:
    def run(conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with contextlib.suppress(OSError):
            for k in range(len(answer)):
                conn.send(answer[k : k + 1])
        sent.set()

    return run


@pytest.mark.parametrize("framing", FRAMINGS)
def test_a_body_sent_a_byte_per_segment_costs_a_bounded_number_of_reads(raw_servers, framing):
    """Each byte its own TCP segment, as fast as the server can: the client reads the whole
    answer in at most READS_FREE reads, plus one per pause, plus one per SMALL_READ bytes
    (a large read needs no pause): never one per byte."""
    body = body_of(60_000)
    sent = threading.Event()
    answer = frame(body, framing, piece=8192)
    s = raw_servers(_one_byte_per_segment(answer, sent))
    timeout = 60.0
    client = HttpClient(timeout=timeout, max_body=2**20)
    assert client.get(f"http://{s.target}/metrics") == body
    assert sent.wait(60)
    bound = wire.READS_FREE + int(timeout / wire.COALESCE_S) + len(answer) // wire.SMALL_READ + 1
    assert client.reads <= bound, (client.reads, bound)
    assert client.reads < len(body) // 10, client.reads
