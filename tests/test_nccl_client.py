"""The RAS client (gputui/telemetry/nccl/client.py) against a fake RAS service on a real loopback
socket: NCCL's protocol, the text fallback of older NCCL, a silent service, a trickling one, a
huge answer, a closed port; and the address policy (only loopback or local addresses, never a
name looked up).  Time bounds are checked by what the service saw (the client closing the
connection before the answer was done), never by the wall clock."""

from __future__ import annotations

import pytest
from ras_support import FakeRas, closed_port, first

from gputui.telemetry.nccl.client import (
    DEFAULT_ADDR,
    RAS_TIMEOUT_S,
    RasTarget,
    ask,
    ras_enabled,
    ras_target,
    strtoll,
)
from gputui.telemetry.nccl.model import parse_json
from gputui.telemetry.nccl.text import parse_text


def target(ras: FakeRas) -> RasTarget:
    t = ras_target(ras.addr)
    assert isinstance(t, RasTarget)
    return t


REAL_JSON = first("3-mismatch-slow-gpu", "localhost:28028", "json", '"AllReduce": 150').body
REAL_TEXT = first("3-mismatch-slow-gpu", "localhost:28028", "text", "MISMATCH").body


def test_nccls_protocol_and_a_real_answer():
    with FakeRas(REAL_JSON.encode()) as ras:
        reply = ask(target(ras))
    assert reply.reason is None and reply.format == "json"
    assert ras.commands == [
        "CLIENT PROTOCOL 2",
        f"TIMEOUT {RAS_TIMEOUT_S}",
        "SET FORMAT json",
        "VERBOSE STATUS",
    ]
    assert parse_json(reply.body).communicators[0].hash == "0xa253901d5e78fc46"


def test_an_older_nccl_refusing_json_is_read_in_text():
    with FakeRas(REAL_TEXT.encode(), json_ok=False) as ras:
        reply = ask(target(ras))
    assert reply.reason is None and reply.format == "text"
    assert ras.commands[-1] == "VERBOSE STATUS"  # on the same connection, after the ERROR
    assert parse_text(reply.body).communicators[0].ranks[1].count("AllReduce") == 150


def test_a_closed_port_says_nothing_listens():
    port = closed_port()
    t = ras_target(f"127.0.0.1:{port}")
    assert isinstance(t, RasTarget)
    reply = ask(t)
    assert reply.format is None
    assert (
        reply.reason
        == f"nothing listens on 127.0.0.1:{port} (RAS off, NCCL older than 2.24, or no job there)"
    )


def test_a_service_that_never_answers_is_left_at_the_deadline():
    with FakeRas(mode="silent") as ras:
        reply = ask(target(ras), deadline=0.3)
        assert ras.client_closed.wait(10)  # the client hung up: it did not wait for ever
    assert reply.format is None
    assert reply.reason == "no answer within 0.3 s (a process of the job stopped?)"


def test_a_silent_process_holding_one_connection_is_passed_by_a_new_connection():
    """NCCL's processes share the port (SO_REUSEPORT): a stopped one accepts and never answers;
    the next connection may reach one that does."""
    with FakeRas(REAL_JSON.encode(), mode="silent_first") as ras:
        reply = ask(target(ras), deadline=5.0)
    assert reply.reason is None and reply.format == "json"
    assert ras.connections == 2


def test_a_trickling_answer_is_cut_at_the_deadline():
    answer = REAL_JSON.encode()[:200]  # 200 bytes, one every 50 ms: 10 s if waited for
    with FakeRas(answer, mode="trickle", trickle_s=0.05) as ras:
        reply = ask(target(ras), deadline=0.5)
        assert ras.client_closed.wait(10)
        assert not ras.answered.is_set()
    assert reply.format is None
    assert reply.reason == "no complete answer within 0.5 s"


def test_an_answer_over_the_cap_is_not_kept():
    with FakeRas(b"{" + b" " * 5000 + b"}") as ras:
        reply = ask(target(ras), cap=1000)
    assert (reply.format, reply.body) == (None, "")
    assert reply.reason == "the answer is larger than 1000 bytes: not read"


def test_an_answer_over_four_mib_is_not_kept():
    with FakeRas(b" " * ((4 << 20) + 1)) as ras:
        reply = ask(target(ras))
    assert reply.reason == "the answer is larger than 4 MiB: not read" and reply.body == ""


def test_an_answer_of_exactly_the_cap_is_kept():
    with FakeRas(b"x" * 1000) as ras:
        reply = ask(target(ras), cap=1000)
    assert reply.reason is None and len(reply.body) == 1000


@pytest.mark.parametrize(
    ("handshake", "reason"),
    [
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", "it is not an NCCL RAS service (no SERVER PROTOCOL reply)"),
        (b"x" * 5000, "it is not an NCCL RAS service (a reply line too long)"),
        (b"", "the connection was closed during the protocol's replies"),
    ],
)
def test_something_else_on_the_port_is_named_so(handshake, reason):
    with FakeRas(handshake, mode="garbage") as ras:
        reply = ask(target(ras), deadline=2.0)
    assert (reply.format, reply.reason) == (None, reason)


def test_a_cancelled_query_stops():
    import threading

    cancel = threading.Event()
    cancel.set()
    with FakeRas(mode="silent") as ras:
        reply = ask(target(ras), cancel=cancel)
    assert reply.reason == "stopped"


# --------------------------------------------------------------------------------------
# where gputui may ask: loopback or this machine only, no name lookups
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "hosts", "port"),
    [
        (None, ("127.0.0.1", "::1"), 28028),
        ("", ("127.0.0.1", "::1"), 28028),
        ("localhost:28029", ("127.0.0.1", "::1"), 28029),
        ("127.0.0.1:1024", ("127.0.0.1",), 1024),
        ("127.8.9.10:28028", ("127.8.9.10",), 28028),
        ("[::1]:28028", ("::1",), 28028),
        ("0.0.0.0:28028", ("127.0.0.1",), 28028),
        ("[::]:28028", ("::1",), 28028),
        ("10.1.2.3:28028", ("10.1.2.3",), 28028),  # one of this machine's addresses (below)
    ],
)
def test_loopback_and_local_addresses_are_asked(value, hosts, port):
    t = ras_target(value, local_addresses=("10.1.2.3",))
    assert isinstance(t, RasTarget)
    assert (t.hosts, t.port) == (hosts, port)


@pytest.mark.parametrize(
    "value",
    [
        "10.1.2.4:28028",  # another machine
        "192.0.2.7:28028",
        "[2001:db8::1]:28028",
        "metadata.google.internal:8080",  # a name: never looked up
        "example.com:28028",
        "127.0.0.1.nip.io:28028",
    ],
)
def test_other_addresses_are_refused_with_a_reason(value):
    reason = ras_target(value, local_addresses=("10.1.2.3",))
    assert reason == f"NCCL_RAS_ADDR={value} is not a loopback or local address: not contacted"


@pytest.mark.parametrize(
    "value", ["localhost", "localhost:", "localhost:0", "localhost:65536", "h:99999999", "[::1]"]
)
def test_an_address_without_a_usable_port_is_refused(value):
    assert ras_target(value) == f"NCCL_RAS_ADDR={value}: no port gputui can read"


@pytest.mark.parametrize("value", ["localhost:22", "127.0.0.1:1023", "[::1]:80", "0.0.0.0:443"])
def test_a_system_port_is_never_contacted(value):
    assert (
        ras_target(value) == f"NCCL_RAS_ADDR={value}: a port below 1024 (a system service's): not contacted"
    )


def test_a_long_or_hostile_value_is_clipped_in_the_reason():
    reason = ras_target("\x1b[31m" + "a" * 500 + ":1")
    assert isinstance(reason, str) and len(reason) < 200


def test_the_default_address_is_nccls():
    assert DEFAULT_ADDR == "localhost:28028"


@pytest.mark.parametrize(
    ("value", "on"),
    [
        (None, True),
        ("", True),
        ("1", True),
        (" 1", True),
        ("0x1", True),
        ("1abc", True),
        ("0", False),
        ("2", False),
        ("-1", False),
        ("off", False),  # strtoll reads no digits: 0, as NCCL does
        ("99999999999999999999", True),  # out of range: NCCL keeps its default
    ],
)
def test_nccl_ras_enable_is_read_as_nccl_reads_it(value, on):
    env = {} if value is None else {"NCCL_RAS_ENABLE": value}
    assert ras_enabled(env) is on


def test_strtoll():
    assert strtoll("010") == 8 and strtoll("0x1f") == 31 and strtoll("-7z") == -7 and strtoll("") == 0


# --------------------------------------------------------------------------------------
# hostile answers over the socket, end to end: a reason, bounded, never an exception
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"{not json", "not valid JSON (line 1)"),
        (b'{"communicators": [{"hash": "0x1", "ranks": [{"pid": "1"}]}]}', "not a valid RAS answer: "),
        (b'{"communicators": [{"hash": "0x1", "size": 1' + b"0" * 5000 + b"}]}", "not valid JSON"),
        (b"\xff\xfe\x00" * 1000, "not valid JSON (line 1)"),
    ],
)
def test_a_hostile_answer_over_the_socket_gives_a_reason(body, reason):
    from gputui.telemetry.nccl.watch import answer_of

    with FakeRas(body) as ras:
        answer = answer_of(ask(target(ras)))
    assert answer.reason is not None and answer.reason.startswith(reason)
    assert answer.communicators == ()


def test_a_million_ranks_claimed_and_an_escape_in_a_host_over_the_socket():
    import json

    from gputui.telemetry.nccl.findings import findings
    from gputui.telemetry.nccl.model import NcclView
    from gputui.telemetry.nccl.watch import answer_of

    comm = {
        "hash": "0x9",
        "size": 10**6,
        "ranks_count": 10**6,
        "missing_ranks_count": 10**6,
        "ranks": [{"rank": 0, "host": "\x1b[2J", "pid": 5, "collective_counts": {"AllReduce": 2**64 - 1}}],
    }
    with FakeRas(json.dumps({"communicators": [comm]}).encode()) as ras:
        answer = answer_of(ask(target(ras)))
    assert answer.reason is None
    (f,) = findings(NcclView(0.0, (answer,), ()))
    assert f.detail == "1000000 more ranks missing from communicator 0x9 (the answer counts 1000000, names 0)"
    assert answer.communicators[0].ranks[0].host == "\x1b[2J"  # kept as data: every view escapes it
