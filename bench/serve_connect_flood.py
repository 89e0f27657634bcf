"""A local user floods `gputui serve` with connections while its owner asks for the page.

    GPUTUI_SERVE_TOKEN=... gputui serve --listen 127.0.0.1:PORT -- --demo &
    FLOOD_THREADS=1 python bench/serve_connect_flood.py PORT TOKEN plain|slow|bigheader

Threads connect without the token as fast as they can (plain: nothing sent; slow: one byte of
a request; bigheader: a 60 KB header line), keeping at most 6,000 sockets open; meanwhile the
owner asks for the page 20 times (5 s timeout each).  Prints how many of the owner's requests
were answered."""

from __future__ import annotations

import os
import resource
import socket
import sys
import threading
import time
import urllib.request

port, token, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
resource.setrlimit(resource.RLIMIT_NOFILE, (8000, 8000))
socks: list[socket.socket] = []
stop = False


def flood() -> None:
    while not stop:
        try:
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            if mode == "slow":
                s.send(b"G")
            elif mode == "bigheader":
                s.send(b"GET /s/x/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX: " + b"a" * 60000)
            socks.append(s)
            if len(socks) > 6000:
                socks.pop(0).close()
        except OSError:
            time.sleep(0.001)


threads = [
    threading.Thread(target=flood, daemon=True) for _ in range(int(os.environ.get("FLOOD_THREADS", "4")))
]
for t in threads:
    t.start()
time.sleep(2)
ok = fail = 0
for _ in range(20):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/s/{token}/", timeout=5) as r:
            r.read()
        ok += 1
    except OSError:
        fail += 1
    time.sleep(0.2)
stop = True
print(f"{mode}, {len(threads)} flood threads: the owner's requests answered {ok} of {ok + fail}")
