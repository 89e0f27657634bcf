"""What the live monitor imports on the way to its first frame that a one-line Textual app
does not, and what each of those modules costs (`python -X importtime`, own time).

    python bench/import_breakdown.py [--demo] [TOP]

Runs, in a pseudo-terminal at 160x50: a one-line Textual app (bench/minimal_textual.py)
until it has mounted, then `gputui --no-remember` (or `--demo`) until its app has mounted, each with
`-X importtime`; prints the modules only gputui imports: their count, their summed own
time, by package, and the TOP most costly (default 30).  Own times include the collector's
passes that fell in them.
"""

from __future__ import annotations

import contextlib
import os
import pty
import re
import select
import sys
import time

LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")

GPUTUI_UNTIL_MOUNT = """
import os, sys
sys.argv = ["gputui", "--no-remember", *sys.argv[1:]]
os.environ["GPUTUI_ALLOW_NOTTY"] = "1"
import gputui.ui.app as A
real = A.GpuTuiApp.on_mount
def on_mount(self):
    self.set_timer(0.3, lambda: self.exit(0))
    return real(self)
A.GpuTuiApp.on_mount = on_mount
from gputui import cli
cli.main()
"""

MINIMAL = """
from textual.app import App, ComposeResult
from textual.widgets import Static
class Minimal(App):
    def compose(self) -> ComposeResult:
        yield Static("GPU 0  NVIDIA H100 80GB HBM3  0%  0 MiB")
    def on_mount(self) -> None:
        self.set_timer(0.3, lambda: self.exit(0))
Minimal().run()
"""


def importtime(code: str, *args: str) -> dict[str, int]:
    """Each module's own import time (µs), running `code` in a 160x50 pseudo-terminal."""
    read, write = os.pipe()
    pid, fd = pty.fork()
    if pid == 0:
        os.close(read)
        os.dup2(write, 2)
        os.environ.update(TERM="xterm-256color", LINES="50", COLUMNS="160")
        os.execv(sys.executable, [sys.executable, "-X", "importtime", "-c", code, *args])
    os.close(write)
    err = b""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd, read], [], [], 0.1)
        if fd in ready:
            with contextlib.suppress(OSError):
                os.read(fd, 65536)
        if read in ready:
            chunk = os.read(read, 65536)
            if not chunk:
                break
            err += chunk
    os.waitpid(pid, 0)
    own: dict[str, int] = {}
    for line in err.decode(errors="replace").splitlines():
        m = LINE.match(line)
        if m:
            own[m[4]] = int(m[1])
    return own


def main() -> int:
    args = sys.argv[1:]
    demo = "--demo" in args
    args = [a for a in args if a != "--demo"]
    top = int(args[0]) if args else 30
    minimal = importtime(MINIMAL)
    gputui = importtime(GPUTUI_UNTIL_MOUNT, *(["--demo"] if demo else []))
    extra = {k: v for k, v in gputui.items() if k not in minimal}
    print(
        f"one-line app: {len(minimal)} modules, {sum(minimal.values()) / 1000:.0f} ms;"
        f" gputui to mount: {len(gputui)} modules, {sum(gputui.values()) / 1000:.0f} ms;"
        f" only in gputui: {len(extra)} modules, {sum(extra.values()) / 1000:.0f} ms"
    )
    packages: dict[str, list[int]] = {}
    for name, us in extra.items():
        top_name = name.split(".")[0]
        key = ".".join(name.split(".")[:2]) if top_name in ("gputui", "textual") else top_name
        packages.setdefault(key, []).append(us)
    print("by package (modules, ms):")
    for key, times in sorted(packages.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {sum(times) / 1000:6.1f} ms  {len(times):3d}  {key}")
    print(f"the {top} costliest:")
    for name, us in sorted(extra.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {us / 1000:6.1f} ms  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
