"""`gputui serve` against the attacks of issue 23: a second local user driving the
interpreter chooser."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("textual_serve")
from serve_support import start_serve

ATTACKER = "gputui-attacker"

#: The attack of issue 23 as a second user ran it, with a stdlib websocket client: the
#: Diagnostics tab, `e` (the interpreter chooser), Tab to its path field, a script of the
#: attacker's, Enter.
CLIENT = r"""
import base64, json, os, socket, struct, sys, time
from urllib.parse import urlsplit
url = urlsplit(sys.argv[1])
sock = socket.create_connection((url.hostname, url.port), timeout=40)
key = base64.b64encode(os.urandom(16)).decode()
sock.sendall((f"GET {url.path}?{url.query} HTTP/1.1\r\nHost: {url.netloc}\r\n"
              "Upgrade: websocket\r\nConnection: Upgrade\r\n"
              f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
head = b""
while b"\r\n\r\n" not in head:
    head += sock.recv(1)
print("status", head.split()[1].decode(), flush=True)
if b" 101 " not in head.split(b"\r\n")[0] + b" ":
    sys.exit(0)
def send(text):
    data = text.encode(); mask = os.urandom(4)
    n = len(data)
    header = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack(">H", n))
    sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))
got = b""
while b"Overview" not in got:
    got += sock.recv(65536)
for keys in ("4", "e", "\t", sys.argv[2], "\r"):
    send(json.dumps(["stdin", keys]))
    time.sleep(0.5)
time.sleep(3)
sock.close()
"""
SYSTEM_PYTHON = "/usr/bin/python3"


def _attacker() -> pwd.struct_passwd:
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"no {SYSTEM_PYTHON} for the second user's client")
    if os.geteuid() != 0:
        pytest.skip("needs root: the attack is a second Unix user against root's serve")
    try:
        return pwd.getpwnam(ATTACKER)
    except KeyError:
        if shutil.which("useradd") is None:
            pytest.skip("no useradd to make a second user")
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", ATTACKER], check=True)
        return pwd.getpwnam(ATTACKER)


@pytest.mark.parametrize("with_token", [False, True])
def test_a_second_user_cannot_run_a_script_through_the_interpreter_chooser(with_token: bool) -> None:
    user = _attacker()
    work = Path(tempfile.mkdtemp(prefix="gputui-attack-"))
    os.chmod(work, 0o777)
    marker = work / "ran-as-root"
    payload = work / "payload.sh"
    payload.write_text(f"#!/bin/sh\nid -u > {marker}\n")
    payload.chmod(0o755)
    os.chown(payload, user.pw_uid, user.pw_gid)  # the attacker's own script
    client = work / "client.py"
    client.write_text(CLIENT)
    client.chmod(0o644)
    served = start_serve()
    try:
        url = served.ws(token="right" if with_token else None)
        r = subprocess.run(
            [SYSTEM_PYTHON, str(client), url, str(payload)],
            user=user.pw_uid,
            group=user.pw_gid,
            extra_groups=[],
            capture_output=True,
            text=True,
            timeout=90,
            cwd=work,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(work)},
            check=False,
        )
        assert r.returncode == 0, r.stderr
        assert ("status 101" in r.stdout) == with_token, r.stdout  # (with it: a token that leaked)
        time.sleep(1)
        assert not marker.exists(), "the chooser ran the attacker's script"
    finally:
        served.stop()
        shutil.rmtree(work, ignore_errors=True)
