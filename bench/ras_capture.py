"""Capture what NCCL's RAS service answers, raw, for fixtures (issue 32).  Standard library only.

    python3 bench/ras_capture.py OUT.jsonl --addr localhost:28028 [--addr ...] [--every 5] [--duration 60]

Every --every seconds, for each address: one connection asking `VERBOSE STATUS` in JSON
(`SET FORMAT json`) and one in text; each answer is one line of OUT.jsonl:
{"t": wall time, "addr": ..., "format": "json"|"text", "ok": bool, "seconds": ..., "answer": text,
"error": text or null}.  Answers are kept as NCCL sent them (up to 4 MiB), nothing parsed.
"""

from __future__ import annotations

import argparse
import json
import socket
import time

LIMIT = 4 << 20


def ask(addr: str, fmt: str, timeout: float = 5.0) -> tuple[bool, str, str | None]:
    host, _, port = addr.rpartition(":")
    got = b""
    try:
        with socket.create_connection((host or "localhost", int(port)), timeout=timeout) as s:
            s.settimeout(timeout)
            f = s.makefile("rwb")
            transcript = []
            cmds = ["CLIENT PROTOCOL 2", f"TIMEOUT {int(timeout)}"]
            if fmt == "json":
                cmds.append("SET FORMAT json")
            for cmd in cmds:
                f.write(cmd.encode() + b"\n")
                f.flush()
                reply = f.readline(4096)
                transcript.append(f"> {cmd}\n< {reply.decode(errors='replace').rstrip()}")
            f.write(b"VERBOSE STATUS\n")
            f.flush()
            while len(got) < LIMIT:
                chunk = f.read1(65536) if hasattr(f, "read1") else f.read(65536)
                if not chunk:
                    break
                got += chunk
            return True, "\n".join(transcript) + "\n" + got.decode(errors="replace"), None
    except OSError as exc:
        return False, got.decode(errors="replace"), f"{type(exc).__name__}: {exc}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--addr", action="append", default=[])
    ap.add_argument("--every", type=float, default=5.0)
    ap.add_argument("--duration", type=float, default=60.0)
    a = ap.parse_args()
    addrs = a.addr or ["localhost:28028"]
    end = time.monotonic() + a.duration
    with open(a.out, "a", encoding="utf-8") as out:
        while time.monotonic() < end:
            tick = time.monotonic()
            for addr in addrs:
                for fmt in ("json", "text"):
                    t0 = time.time()
                    ok, answer, err = ask(addr, fmt)
                    rec = {
                        "t": t0,
                        "addr": addr,
                        "format": fmt,
                        "ok": ok,
                        "seconds": round(time.time() - t0, 3),
                    }
                    rec.update(answer=answer, error=err)
                    out.write(json.dumps(rec) + "\n")
                    out.flush()
            time.sleep(max(0.0, a.every - (time.monotonic() - tick)))


if __name__ == "__main__":
    main()
