"""When a process started, as gputui identifies processes by it (PID + start time): the one
reading that signals, job trees and the process table share."""

from __future__ import annotations

import functools

import psutil


@functools.cache
def boot_time() -> float:
    """The boot time, read once: psutil re-reads it on every call, and it can move by a
    second when the clock is stepped, which would make one process look like two."""
    return float(psutil.boot_time())


def start_time(proc: psutil.Process) -> float:
    """When the process started, seconds since the epoch, rounded to the clock tick (0.01 s).

    The same process always gives the same value within one gputui run, so (PID, start
    time) identifies it: a reused PID has a later start time."""
    try:
        ticks = proc.create_time(monotonic=True)  # type: ignore[call-arg]  # psutil >= 7.1
    except TypeError:
        return round(proc.create_time(), 2)
    return round(ticks + boot_time(), 2)
