"""NCCL RAS for tests: the real answers captured beside the h100-x4-matrix recordings, and a
fake RAS service on a real loopback socket whose misbehaviour a test chooses.

The fake is a test double for the *network peer*, never passed off as NCCL's data: the
answers it serves are either the real captured ones or hostile text a test writes."""

from __future__ import annotations

import gzip
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from conftest import FIXTURES

MATRIX = FIXTURES / "h100-x4-matrix"
SLOTS = sorted(p.name for p in MATRIX.iterdir() if p.is_dir())


@dataclass(frozen=True)
class Captured:
    """One line of a ras.jsonl.gz: a real answer of NCCL 2.28.9."""

    slot: str
    t: float
    addr: str
    format: str
    ok: bool
    body: str
    """NCCL's answer without the protocol transcript bench/ras_capture.py put before it."""
    raw: str


def body_of(answer: str) -> str:
    """The answer after the transcript's "> command" / "< reply" lines."""
    lines = answer.split("\n")
    i = 0
    while i < len(lines) and lines[i][:2] in ("> ", "< "):
        i += 1
    return "\n".join(lines[i:])


def captured(slot: str | None = None) -> Iterator[Captured]:
    for name in [slot] if slot else SLOTS:
        with gzip.open(MATRIX / name / "ras.jsonl.gz", "rt") as f:
            for line in f:
                o = json.loads(line)
                raw = o["answer"] or ""
                yield Captured(name, o["t"], o["addr"], o["format"], o["ok"], body_of(raw), raw)


def first(slot: str, addr: str, fmt: str, needle: str) -> Captured:
    """The first real answer of `slot` from `addr` in `fmt` whose text holds `needle`."""
    return next(c for c in captured(slot) if c.addr == addr and c.format == fmt and c.ok and needle in c.body)


class FakeRas:
    """A RAS-like service on 127.0.0.1 (an ephemeral port), one thread per connection.

    mode: "normal" (NCCL's protocol, then `answer`, then close), "silent" (accepts, reads,
    never replies), "silent_first" (the first connection silent, later ones normal: a
    stopped process holding one of the job's SO_REUSEPORT sockets), "trickle" (the answer
    one byte every `trickle_s`), "garbage" (answers the handshake with `answer`).
    `json_ok=False`: refuses SET FORMAT json as NCCL before 2.28 does."""

    def __init__(
        self, answer: bytes = b"", mode: str = "normal", *, json_ok: bool = True, trickle_s: float = 0.05
    ) -> None:
        self.answer = answer
        self.mode = mode
        self.json_ok = json_ok
        self.trickle_s = trickle_s
        self.commands: list[str] = []
        self.connections = 0
        self.client_closed = threading.Event()
        """Set when the client closed a connection the service was still holding."""
        self.answered = threading.Event()
        self._stop = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.addr = f"127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def __enter__(self) -> FakeRas:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        self.sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            n = self.connections
            threading.Thread(target=self._handle, args=(conn, n), daemon=True).start()

    def _wait_close(self, conn: socket.socket) -> None:
        """Hold the connection, reading, until the client closes it."""
        conn.settimeout(0.05)
        while not self._stop.is_set():
            try:
                if conn.recv(4096) == b"":
                    self.client_closed.set()
                    return
            except TimeoutError:
                continue
            except OSError:
                self.client_closed.set()
                return

    def _handle(self, conn: socket.socket, n: int) -> None:
        with conn:
            silent = self.mode == "silent" or (self.mode == "silent_first" and n == 1)
            if silent:
                self._wait_close(conn)
                return
            f = conn.makefile("rb")
            try:
                self._talk(conn, f)
            except OSError:
                self.client_closed.set()

    def _talk(self, conn: socket.socket, f: object) -> None:
        assert hasattr(f, "readline")
        while not self._stop.is_set():
            line = f.readline(4096)
            if not line:
                return
            cmd = line.decode("ascii", "replace").strip()
            self.commands.append(cmd)
            upper = cmd.upper()
            if self.mode == "garbage":
                conn.sendall(self.answer)
                return
            if upper.startswith("CLIENT PROTOCOL"):
                conn.sendall(b"SERVER PROTOCOL 2\n")
            elif upper.startswith("TIMEOUT"):
                conn.sendall(b"OK\n")
            elif upper.startswith("SET FORMAT"):
                conn.sendall(b"OK\n" if self.json_ok else b"ERROR: Unknown command " + line.strip() + b"\n")
            elif upper == "VERBOSE STATUS":
                if self.mode == "trickle":
                    conn.settimeout(5)
                    for k in range(len(self.answer)):
                        if self._stop.wait(self.trickle_s):
                            return
                        conn.sendall(self.answer[k : k + 1])
                else:
                    conn.sendall(self.answer)
                self.answered.set()
                return
            else:
                conn.sendall(b"ERROR: Unknown command\n")


def closed_port() -> int:
    """A loopback port nothing listens on (bound and released)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def ras_views(slot: str, fmt: str = "json", local: tuple[str, ...] = ("192.0.2.2",)) -> list:
    """The slot's real RAS answers as NcclViews, one per capture round (every 5 s), as
    RasWatch would have built them: each address's answer in `fmt`, for the PIDs of the job
    on that port (job a on GPUs 0-1: 28028; job b on GPUs 2-3: 28029), counts_since carried
    from round to round."""
    from dataclasses import replace

    from gputui.telemetry.nccl.model import NcclView, RasAnswer, carry_since, parse_json
    from gputui.telemetry.nccl.text import parse_text

    pids = _job_pids(slot)
    rounds: dict[float, list[RasAnswer]] = {}
    previous: dict[str, RasAnswer] = {}
    start = None
    for c in captured(slot):
        if c.format != fmt:
            continue
        if start is None or c.t - start > 2.0:  # the captures of one round are ms apart
            start = c.t
        if not c.ok:
            a = RasAnswer(c.addr, reason="no answer within 5 s (a process of the job stopped?)")
        else:
            a = parse_json(c.body) if fmt == "json" else parse_text(c.body)
        a = replace(a, addr=c.addr, pids=pids[c.addr])
        if a.reason is None:
            a = carry_since(previous.get(c.addr), a, start)
            previous[c.addr] = a
        rounds.setdefault(start, []).append(a)
    return [NcclView(t, tuple(answers), local) for t, answers in sorted(rounds.items())]


def _job_pids(slot: str) -> dict[str, tuple[int, ...]]:
    """pids.txt: "ranks: a 2226 2227 b 2266 2267; launchers 2010 2012"."""
    words = (MATRIX / slot / "pids.txt").read_text().split(";")[0].split()
    a, b = words.index("a"), words.index("b")
    return {
        "localhost:28028": tuple(int(w) for w in words[a + 1 : b]),
        "localhost:28029": tuple(int(w) for w in words[b + 1 :]),
    }


def with_ras(slot: str, out: Path, fmt: str = "json") -> Path:
    """The slot's recording with its real RAS answers merged in, each round on the first tick
    at or after it (as the live monitor would have carried them): a recording derived from
    two real captures of the same run, labelled so."""
    from dataclasses import replace

    from gputui.telemetry.recording import RecordingWriter, read_recording

    header, ticks = read_recording(MATRIX / slot / "recording.jsonl.gz")
    views = ras_views(slot, fmt)
    derived = {
        "from": [f"h100-x4-matrix/{slot}/recording.jsonl.gz", f"h100-x4-matrix/{slot}/ras.jsonl.gz"],
        "how": "the RAS answers captured beside the recording, put on the first tick after each",
    }
    with RecordingWriter(out, header.machine, header.interval, derived=derived, note=header.note) as w:
        k = 0
        for snap in ticks:
            view = None
            while k < len(views) and views[k].asked_at <= snap.timestamp:
                view = views[k]
                k += 1
            w.write(replace(snap, nccl=view))
    return out
