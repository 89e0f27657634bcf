"""The verdicts' words: durations, percentages, how ranks wait, why a rank is not waiting, and
where its stack is.  Built from numbers and fixed words; the only outside text is a stack's
function and file names (a process's, or a recording's), clipped and escaped here (`shown`)."""

from __future__ import annotations

from collections.abc import Sequence

from gputui.telemetry.health_report import RankHealth
from gputui.telemetry.job_energy import hms
from gputui.untrusted import literal

MAX_SHOWN = 80
"""Characters of a function or file name a verdict shows (a recording may hold any length)."""
MAX_FRAMES_SHOWN = 6


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def pct(v: float | None) -> str:
    return "N/A" if v is None else f"{v:.1f} %"


def shown(text: str | None, limit: int = MAX_SHOWN) -> str:
    """Outside text for a verdict: clipped, every character that is not one cell escaped."""
    if text is None:
        return "?"
    clipped = text if len(text) <= limit else text[: limit - 1] + "…"
    return literal(clipped)


def count(n: int, what: str) -> str:
    """ "1 other rank", "2 other ranks"; "1 more", "2 more"."""
    return f"{n} {what}" + ("s" if n != 1 and what.endswith("rank") else "")


def how_waiting(ranks: Sequence[RankHealth]) -> str:
    spin = sum(r.condition == "spinning" for r in ranks)
    blocked = sum(r.condition == "blocked" for r in ranks)
    host = len(ranks) - spin - blocked
    parts = []
    if spin:
        parts.append(f"{spin} spinning on its GPU (busy engine, SMs polling without arithmetic, idle power)")
    if blocked:
        parts.append(f"{blocked} blocked (state S, ~0 % CPU, GPU idle)")
    if host:
        parts.append(f"{host} inside a collective call on its host (its stack)")
    return ", ".join(parts)


def cpu_words(r: RankHealth, window: float) -> str:
    cpu = "N/A" if r.cpu_percent is None else f"{r.cpu_percent:.0f} %"
    if r.cpu_percent is not None and window > 0:
        cpu += f" over {duration(window)}"
    return f"state {r.state or 'N/A'}, CPU {cpu}, GPU utilization {pct(r.util)}"


def why_not_waiting(r: RankHealth, window: float) -> str:
    """Why a rank the others wait for is not waiting: its state, else where its stack is."""
    since = f" since {hms(r.state_since)}" if r.state_since is not None else ""
    if r.condition == "stopped":
        how = (
            "SIGSTOP or Ctrl-Z (SIGCONT resumes it)" if r.state == "T" else "stopped by a debugger or tracer"
        )
        return f"{r.who} is stopped (state {r.state}{since}: {how})"
    if r.condition == "zombie":
        return f"{r.who} has exited (a zombie{since}, not yet reaped)"
    w = r.where
    place = w.place if w is not None else None
    if w is not None and place == "loader":
        return f"{r.who} waits for its data loader at {shown(w.at)} ({cpu_words(r, window)}): {frames(r)}"
    if w is not None and place == "io":
        return (
            f"{r.who} is writing a checkpoint? {shown(w.call)} at {shown(w.at)} "
            f"({cpu_words(r, window)}): {frames(r)}"
        )
    if w is not None and place == "gpu_sync":
        return (
            f"{r.who} computes on its GPU (utilization {pct(r.util)}, SM {pct(r.sm)}) while its host "
            f"waits for it at {shown(w.at)}"
        )
    if w is not None and place == "elsewhere":
        return (
            f"{r.who} is not in a collective: its stack is in {shown(w.call)} ({shown(w.at)}) "
            f"({cpu_words(r, window)}): {frames(r)}"
        )
    if r.condition == "disk":
        how = "I/O, a network file system or a driver call"
        return f"{r.who} is in uninterruptible sleep (state D{since}: {how})"
    return f"{r.who} is still computing ({cpu_words(r, window)})"


def frames(r: RankHealth) -> str:
    """The rank's innermost frames, innermost first: "f (a.py:3) ← g (b.py:9)"."""
    w = r.where
    if w is None or not w.frames:
        return "no Python frame"
    return " ← ".join(shown(f) for f in w.frames[:MAX_FRAMES_SHOWN])


def in_call(r: RankHealth) -> str:
    """ "recv (train.py:41)": where a waiting rank waits, from its stack."""
    w = r.where
    assert w is not None
    return f"{shown(w.call)} ({shown(w.at)})"


def unread(r: RankHealth) -> str:
    """Why where the rank is is not known: not read (no stack sampler here), or why not."""
    w = r.where
    if w is None:
        return (
            f"where {r.who} is was not read (gputui reads a suspected job's ranks' stacks "
            "with py-spy where it runs on their machine)"
        )
    remedy = REMEDY.get(w.reason or "", "")
    return f"where {r.who} is could not be read: {shown(w.message or w.reason, 200)}{remedy}"


REMEDY = {
    "no-py-spy": " (pip install 'gputui[stacks]')",
    "ptrace-refused": " (run gputui as root or as the ranks' user with ptrace allowed)",
}
