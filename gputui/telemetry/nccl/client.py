"""The RAS client: where to ask (from a rank's environment, loopback or local only) and one
bounded, time-limited `VERBOSE STATUS` query.  Blocking: `watch.RasWatch` runs it on its own
thread, never the UI's.

The protocol (NVIDIA/nccl `src/ras/client.cc`), one line each way:
    > CLIENT PROTOCOL 2      < SERVER PROTOCOL 2
    > TIMEOUT 2              < OK       (how long NCCL waits for the job's other processes)
    > SET FORMAT json        < OK       (NCCL 2.28+; older: "ERROR: Unknown command": text)
    > VERBOSE STATUS         < the answer, until NCCL closes the connection

Bounds: `CONNECT_S` to connect, `REPLY_S` for each protocol reply, `DEADLINE_S` for the whole
query, `MAX_ANSWER_BYTES` read at most.  Every process of the job binds the port (NCCL sets
SO_REUSEPORT), so the kernel hands a connection to any one of them: one that is stopped
(SIGSTOP) accepts and never answers.  A connection whose first reply does not come within
`REPLY_S` is closed and another made (up to `MAX_CONNECTIONS`, within the deadline), which
the kernel may hand to a process that answers.

Where it asks.  NCCL listens on `NCCL_RAS_ADDR` (default localhost:28028); gputui reads that
from the GPU processes' environment.  The environment is the job owner's to write, and
gputui may run as root or as a cluster's exporter: a value naming another machine would make
gputui open connections wherever a user points it (a port scanner in the monitor's name), and
a host name would need a DNS lookup of a name a user chose.  So only a literal loopback
address, "localhost", the wildcard (0.0.0.0, ::, which mean this machine) or one of this
machine's own addresses is ever contacted, with no name lookup, and never a port below 1024
(the system's services); any other value is refused with a reason.  Nothing is lost by
that: RAS answers for every node of the job from any node, so the local port suffices.
Even on loopback the port may be some other local service (any user may listen on a free
port): gputui sends only the four fixed lines above, and what comes back is untrusted text,
read bounded.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from gputui.telemetry.nccl.model import MAX_ANSWER_BYTES, clip

DEFAULT_ADDR = "localhost:28028"
"""NCCL's default NCCL_RAS_ADDR."""
CONNECT_S = 1.0
REPLY_S = 1.0
"""Seconds for each protocol reply (a live NCCL answers in well under a millisecond)."""
DEADLINE_S = 5.0
"""Seconds for the whole query, connections and answer together."""
RAS_TIMEOUT_S = 2
"""Sent as `TIMEOUT`: how long NCCL may wait for the job's other processes (its default is
5 s per leg); under DEADLINE_S, so a job with an unreachable node still answers in time."""
MAX_CONNECTIONS = 4
MAX_LINE = 1024
"""The longest protocol reply line."""
PROTOCOL = 2
FIRST_USER_PORT = 1024
"""Lower ports are the system's services (only root listens there): never a user's NCCL."""
SILENT = "silent"
"""Why a first reply did not come (the next connection is tried)."""


@dataclass(frozen=True, slots=True)
class RasTarget:
    """An address gputui may contact."""

    text: str
    """As shown: "localhost:28028"."""
    hosts: tuple[str, ...]
    """Literal IP addresses to try, in order."""
    port: int


@dataclass(frozen=True, slots=True)
class RasReply:
    """What one query got: the answer's text (after the protocol's replies) or why not."""

    format: str | None
    """"json", "text", or None when there is no answer."""
    body: str
    reason: str | None
    seconds: float


# --------------------------------------------------------------------------------------
# The environment: whether RAS is on, and where it listens
# --------------------------------------------------------------------------------------


def strtoll(text: str) -> int | None:
    """C's strtoll(text, NULL, 0), as NCCL reads its integer parameters: leading spaces, a
    sign, 0x hex / 0 octal / decimal digits, the rest ignored; no digits is 0; None on
    overflow (NCCL then keeps the default)."""
    s = text.lstrip(" \t\n\r\f\v")
    sign = -1 if s[:1] == "-" else 1
    if s[:1] in "+-" and s:
        s = s[1:]
    base, digits = 10, "0123456789"
    if s[:2].lower() == "0x" and s[2:3] and s[2:3].lower() in "0123456789abcdef":
        base, digits, s = 16, "0123456789abcdef", s[2:]
    elif s[:1] == "0":
        base, digits = 8, "01234567"
    n = 0
    for ch in s:
        d = digits.find(ch.lower())
        if d < 0:
            break
        n = n * base + d
    n *= sign
    return n if -(2**63) <= n < 2**63 else None


def ras_enabled(env: Mapping[str, str]) -> bool:
    """NCCL_RAS_ENABLE as NCCL reads it: on unless set to an integer other than 1 (an empty
    value, or one out of range, keeps the default: on)."""
    value = env.get("NCCL_RAS_ENABLE")
    if not value:
        return True
    n = strtoll(value)
    return n is None or n == 1


def _literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None


def ras_target(value: str | None, local_addresses: Collection[str] = ()) -> RasTarget | str:
    """Where NCCL_RAS_ADDR=`value` (None: unset) listens, as a RasTarget gputui may contact,
    or the reason it is not contacted (the value clipped; shown through the untrusted filter)."""
    if not value:
        value = DEFAULT_ADDR
    shown = clip(value)
    refused = f"NCCL_RAS_ADDR={shown} is not a loopback or local address: not contacted"
    if value.startswith("["):
        host, sep, rest = value[1:].partition("]")
        port_text = rest[1:] if sep and rest.startswith(":") else ""
    else:
        host, _, port_text = value.rpartition(":")
    if not (
        port_text.isascii() and port_text.isdigit() and len(port_text) <= 5 and 0 < int(port_text) <= 65535
    ):
        return f"NCCL_RAS_ADDR={shown}: no port gputui can read"
    port = int(port_text)
    if port < FIRST_USER_PORT:
        return f"NCCL_RAS_ADDR={shown}: a port below {FIRST_USER_PORT} (a system service's): not contacted"
    if host == "localhost":
        return RasTarget(f"localhost:{port}", ("127.0.0.1", "::1"), port)
    ip = _literal(host)
    if ip is None:
        return refused  # a name: never looked up
    if ip.is_unspecified:  # NCCL listens on every address: this machine's loopback is one
        loop = "127.0.0.1" if ip.version == 4 else "::1"
        return RasTarget(shown, (loop,), port)
    if ip.is_loopback or str(ip) in local_addresses:
        return RasTarget(shown, (str(ip),), port)
    return refused


def local_addresses() -> tuple[str, ...]:
    """This machine's IP addresses (every interface), sorted; () where they cannot be read."""
    try:
        import psutil

        found = {
            a.address.split("%", 1)[0]
            for addrs in psutil.net_if_addrs().values()
            for a in addrs
            if a.family in (socket.AF_INET, socket.AF_INET6)
        }
    except (OSError, RuntimeError):
        return ()
    return tuple(sorted(found))


# --------------------------------------------------------------------------------------
# The query
# --------------------------------------------------------------------------------------


class _Stop(Exception):
    """The query ends early: why (fixed words)."""


class _Conn:
    """One connection under the query's deadline."""

    def __init__(self, sock: socket.socket, end: float, cancel: threading.Event | None) -> None:
        self.sock = sock
        self.end = end
        self.cancel = cancel
        self.buf = b""

    def _recv(self, limit: float, what: str) -> bytes:
        """One recv, waiting at most until `limit` (monotonic) and the deadline."""
        while True:
            if self.cancel is not None and self.cancel.is_set():
                raise _Stop("stopped")
            left = min(limit, self.end) - time.monotonic()
            if left <= 0:
                raise _Stop(what)
            self.sock.settimeout(min(left, 0.25))
            try:
                return self.sock.recv(65536)
            except TimeoutError:
                continue

    def send(self, line: str) -> None:
        self.sock.settimeout(max(0.01, self.end - time.monotonic()))
        self.sock.sendall(line.encode("ascii") + b"\n")

    def line(self, what: str) -> str:
        """The next reply line (without its newline), within REPLY_S."""
        limit = time.monotonic() + REPLY_S
        while b"\n" not in self.buf:
            if len(self.buf) > MAX_LINE:
                raise _Stop("it is not an NCCL RAS service (a reply line too long)")
            chunk = self._recv(limit, what)
            if not chunk:
                raise _Stop("the connection was closed during the protocol's replies")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode("ascii", "replace").rstrip("\r")

    def rest(self, cap: int, late: str) -> bytes:
        """Everything until the peer closes, at most `cap` bytes."""
        data = bytearray(self.buf)
        while len(data) <= cap:
            chunk = self._recv(self.end, late)
            if not chunk:
                return bytes(data)
            data += chunk
        size = f"{cap >> 20} MiB" if cap >= 1 << 20 else f"{cap} bytes"
        raise _Stop(f"the answer is larger than {size}: not read")


def _connect(target: RasTarget, end: float, late: str) -> socket.socket:
    failed: OSError | None = None
    for host in target.hosts:
        left = end - time.monotonic()
        if left <= 0:
            raise _Stop(late)
        try:
            return socket.create_connection((host, target.port), timeout=min(CONNECT_S, left))
        except OSError as exc:
            failed = exc
    if isinstance(failed, ConnectionRefusedError):
        raise _Stop(f"nothing listens on {target.text} (RAS off, NCCL older than 2.24, or no job there)")
    raise _Stop(f"{target.text} cannot be reached")


def _session(conn: _Conn, cap: int, deadline: float) -> tuple[str, bytes]:
    """The protocol after the first reply: (format, answer)."""
    conn.send(f"TIMEOUT {RAS_TIMEOUT_S}")
    if conn.line("no reply to TIMEOUT").strip().upper() != "OK":
        raise _Stop("it is not an NCCL RAS service (TIMEOUT was not accepted)")
    conn.send("SET FORMAT json")
    reply = conn.line("no reply to SET FORMAT").strip().upper()
    if reply == "OK":
        fmt = "json"
    elif reply.startswith("ERROR"):
        fmt = "text"  # NCCL before 2.28: "ERROR: Unknown command SET FORMAT json"
    else:
        raise _Stop("it is not an NCCL RAS service (an unexpected reply to SET FORMAT)")
    conn.send("VERBOSE STATUS")
    return fmt, conn.rest(cap, f"no complete answer within {deadline:g} s")


def ask(
    target: RasTarget,
    *,
    deadline: float = DEADLINE_S,
    cap: int = MAX_ANSWER_BYTES,
    cancel: threading.Event | None = None,
) -> RasReply:
    """One `VERBOSE STATUS` query of `target`, JSON where NCCL offers it, else text; bounded
    by `deadline` seconds and `cap` bytes.  Never raises for what the peer does."""
    t0 = time.monotonic()
    end = t0 + deadline
    late = f"no answer within {deadline:g} s"
    try:
        for _ in range(MAX_CONNECTIONS):
            sock = _connect(target, end, late)
            with contextlib.closing(sock):
                conn = _Conn(sock, end, cancel)
                conn.send(f"CLIENT PROTOCOL {PROTOCOL}")
                try:
                    first = conn.line(SILENT)
                except _Stop as exc:
                    if str(exc) != SILENT:
                        raise
                    # a stopped process holds this connection: another may be handed to one
                    # that answers (SO_REUSEPORT)
                    late = f"no answer within {deadline:g} s (a process of the job stopped?)"
                    continue
                if not first.upper().startswith("SERVER PROTOCOL "):
                    raise _Stop("it is not an NCCL RAS service (no SERVER PROTOCOL reply)")
                fmt, data = _session(conn, cap, deadline)
                return RasReply(fmt, data.decode("utf-8", "replace"), None, time.monotonic() - t0)
        raise _Stop(late)
    except _Stop as exc:
        return RasReply(None, "", str(exc), time.monotonic() - t0)
    except OSError as exc:  # reset by the peer, a send that failed
        why = f"the connection failed ({exc.strerror or type(exc).__name__})"
        return RasReply(None, "", why, time.monotonic() - t0)
