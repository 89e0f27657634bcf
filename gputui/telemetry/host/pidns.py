"""Which PID namespace gputui runs in: the host's (NVML's PIDs are ours) or a container's.

One `stat` of /proc, no psutil: the Processes pane asks at mount, on the way to the first
frame."""

from __future__ import annotations

import os

#: Inode of /proc/self/ns/pid in the initial (host) PID namespace: the kernel's
#: PROC_PID_INIT_INO, the same on every Linux.
INIT_PID_NS_INODE = 0xEFFFFFFC


def pid_namespace_inode(pid: int | str = "self") -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


def in_host_pid_namespace() -> bool | None:
    """True in the host's PID namespace (NVML's PIDs are ours), False inside a container
    without `--pid=host`, None when it cannot be told."""
    inode = pid_namespace_inode()
    return None if inode is None else inode == INIT_PID_NS_INODE
