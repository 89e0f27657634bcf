"""Whose a cgroup directory is: the check behind job attribution (`gputui.telemetry.host.jobs`).

A Slurm job, a pod or a container is believed only where the cgroup directories down to the
one that names it are real directories owned by root; a container in the subtree systemd
delegated to a user (user@UID.service), owned by that user, is that user's own (rootless).
Nothing here parses job names; it only looks at directories (`os.lstat`, never following a
symlink)."""

from __future__ import annotations

import os
import pwd
import re
import stat
from pathlib import Path

_USER_SERVICE = re.compile(r"user@([0-9]+)\.service")
"""The cgroup systemd delegates to a user (their own systemd's): `user@1000.service`."""
TRUSTED_OWNERS = frozenset({0})
"""Who may own the directories that name a Slurm job, a pod or a container: root
(slurmstepd, the kubelet, dockerd, containerd and root's podman run as root and make
them).  An ordinary user can make any path in a cgroup subtree delegated to them
(systemd's user@UID.service), but only as themselves: see `rootless`."""


def hierarchy(controllers: str, root: Path) -> Path | None:
    """The directory of one hierarchy of /proc/PID/cgroup: v2's ("" controllers), or a
    v1 controller's ("memory", "cpu,cpuacct", "name=systemd")."""
    if not controllers:
        return root if (root / "cgroup.controllers").exists() else root / "unified"
    names = [controllers, *controllers.split(",")]
    for name in names:
        d = root / name.removeprefix("name=")
        if name and d.is_dir():
            return d
    return None


def owned_by_root(
    base: Path | None, segs: list[str], depth: int, user: tuple[int, int] | None = None
) -> bool:
    """Whether every directory from the hierarchy's top down to `segs[:depth]` is a real
    directory owned by TRUSTED_OWNERS (no "..", no symlink, nothing missing); with `user`
    (index, uid), those from `segs[index]` down are that uid's instead."""
    if base is None or depth <= 0:
        return False
    d = base
    for k, seg in enumerate(segs[:depth]):
        if seg in (".", ".."):
            return False  # a process outside gputui's cgroup namespace: not checkable
        d = d / seg
        try:
            st = os.lstat(d)
        except OSError:
            return False
        owners = {user[1]} if user is not None and k >= user[0] else TRUSTED_OWNERS
        if not stat.S_ISDIR(st.st_mode) or st.st_uid not in owners:
            return False
    return True


def rootless(base: Path | None, segs: list[str], depth: int, uid: int | None) -> bool:
    """Whether a container's path is in the subtree systemd delegated to the process's own
    user: the first `user@UID.service` of the path names that uid (ASCII digits), the
    directories above it are root's and it and all below down to the container's are the
    user's (systemd chowns user@UID.service to UID; only that user can make directories in
    it).  That container is the user's own (rootless podman, rootless Docker)."""
    if uid is None:
        return False
    at = next((k for k, seg in enumerate(segs[:depth]) if _USER_SERVICE.fullmatch(seg)), None)
    if at is None:
        return False
    m = _USER_SERVICE.fullmatch(segs[at])
    if m is None or int(m.group(1)) != uid:
        return False
    return owned_by_root(base, segs, depth, (at, uid))


def user_name(uid: int) -> str:
    """The user's name on this machine, else the uid in digits."""
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return str(uid)
