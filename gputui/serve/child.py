"""What a browser session's gputui does about the server that started it.

A session is a process that talks to its browser through pipes to `gputui serve`.  It must
not outlive serve (killed by the kernel when serve dies, SIGKILL included: PR_SET_PDEATHSIG,
`gputui.rules.lifeline.die_with_parent`)
and must notice when serve stops listening to it (its pipes close or break): a session
nobody reads would otherwise run on forever, blocked in a write to a full pipe where no
signal handler of its event loop can run.  Standard library only.
"""

from __future__ import annotations

import os
import select

SESSION_MODES = ("readonly", "signals")
"""`--serve-session MODE`: readonly (no signals to processes), or signals (--allow-signals)."""


def in_browser() -> bool:
    """True inside a textual-serve session: the app talks to a web page through pipes, and
    the page (not a terminal) ends it."""
    return os.environ.get("TEXTUAL_DRIVER", "").endswith(":WebDriver")


def pipes_alive(stdin: int = 0, stdout: int = 1) -> bool:
    """False once the server closed its end of our stdin (POLLHUP) or of our stdout (a write
    end with no reader polls POLLERR), or either is no longer open."""
    poller = select.poll()
    poller.register(stdin, 0)  # POLLHUP, POLLERR and POLLNVAL are always reported
    poller.register(stdout, 0)
    try:
        events = poller.poll(0)
    except OSError:
        return False
    return not any(mask & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _fd, mask in events)
