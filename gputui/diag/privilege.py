"""Whose privileges a diagnosis or stress child runs with.

A child runs the diagnosed environment's code: its interpreter, its site-packages and `.pth`
files, its `LD_PRELOAD` / `PYTHONPATH` / `HOME`.  As root, that code must never run with
more privilege than the user who controls it has, so a child of root runs as that user (their
uid, gid and groups, the way `sudo -u` would) or not at all:

- **a process** (`--pid`, `g` on a row): as the process's owner.  A process whose user ids
  differ (a set-user-ID program, a daemon that dropped its effective uid) runs as the one
  non-root uid among its real, effective, saved and filesystem uids: never more than any of
  them gives; two different non-root uids are refused (no one user's privileges to take).
  Its groups: its primary gid (the non-root one, the same rule) and those of its
  supplementary groups the user database also gives that user (the smaller reading).
- **an interpreter** (`--python`, the `e` chooser, python3 on PATH, a root process's own):
  as the one user who owns a file or directory it runs through or reads as it starts (every
  directory above it and every symbolic link on the way, its venv's `pyvenv.cfg` and `home`,
  a script's `#!` interpreter, its site directories, what is in them and what their `.pth`
  files name: gputui.diag.startfiles); refused where one of those is writable by a group or
  by everyone (no one user controls it), where others can add a file beside it (sticky
  directories too), or where two users own parts of it.

A caller who is not root can take no other user's privileges: another user's process is
refused (its code would run with the caller's), and an interpreter runs as the caller.
"""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gputui.diag import startfiles
from gputui.untrusted import escaped

MAX_LINKS = 40
"""Symbolic links followed resolving one path (the kernel's own limit)."""


class PrivilegeError(ValueError):
    """Why a child cannot be run with anyone's privileges that are safe (one line)."""


@dataclass(frozen=True)
class RunAs:
    """Another user's privileges for a child of root."""

    uid: int
    gid: int
    groups: tuple[int, ...]
    """Supplementary groups (setgroups)."""
    user: str
    home: str
    why: str
    """"PID 589's owner", "/home/bob/venv is bob's (owner of /home/bob/venv/bin)"."""

    def env(self) -> dict[str, str]:
        """The user's own HOME, USER and LOGNAME (from the user database)."""
        return {"HOME": self.home, "USER": self.user, "LOGNAME": self.user}

    def to_json(self) -> dict[str, Any]:
        return {
            "user": self.user,
            "uid": self.uid,
            "gid": self.gid,
            "groups": list(self.groups),
            "switched": True,
            "why": self.why,
        }


def own_privileges() -> dict[str, Any]:
    """The report's `privileges` when the child runs as gputui itself."""
    uid = os.geteuid()
    return {
        "user": _name(uid),
        "uid": uid,
        "gid": os.getegid(),
        "groups": sorted(os.getgroups()),
        "switched": False,
        "why": "gputui's own",
    }


def privileges_text(privileges: Any) -> str:
    """`bob (uid 1001, gid 1001, groups 1001,44): PID 589's owner; gputui runs as root`."""
    if not isinstance(privileges, dict):
        return "unknown"
    groups = privileges.get("groups")
    group_text = ",".join(str(g) for g in groups) if isinstance(groups, list) and groups else "none"
    who = (
        f"{privileges.get('user')} (uid {privileges.get('uid')}, gid {privileges.get('gid')}, "
        f"groups {group_text})"
    )
    if privileges.get("switched"):
        return f"{who}: {privileges.get('why')}; gputui runs as {_name(os.geteuid())}"
    return f"{who}: gputui's own"


def _name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


# ---- a process ----------------------------------------------------------------------


@dataclass(frozen=True)
class ProcessIds:
    uids: tuple[int, ...]
    """Real, effective, saved and filesystem uid (/proc/PID/status)."""
    gids: tuple[int, ...]
    groups: tuple[int, ...]


def process_ids(pid: int) -> ProcessIds:
    """The process's user and group ids; OSError (FileNotFoundError: gone) where unreadable."""
    with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
        text = f.read(1 << 16)
    fields = dict(line.partition(":")[::2] for line in text.splitlines())
    try:
        uids = tuple(int(x) for x in fields["Uid"].split())
        gids = tuple(int(x) for x in fields["Gid"].split())
        groups = tuple(int(x) for x in fields.get("Groups", "").split())
    except (KeyError, ValueError):
        raise OSError(f"/proc/{pid}/status has no readable Uid and Gid lines") from None
    if not uids or not gids:
        raise OSError(f"/proc/{pid}/status has no readable Uid and Gid lines")
    return ProcessIds(uids, gids, groups)


def is_own(pid: int) -> bool:
    """Every user id of the process is the caller's (what the default choices consider)."""
    try:
        ids = process_ids(pid)
    except OSError:
        return False
    return set(ids.uids) == {os.geteuid()}


def _one_id(ids: tuple[int, ...]) -> int | None:
    """The one non-root id among a process's ids; 0 where all are root's; None where two
    different non-root ids are held."""
    others = set(ids) - {0}
    if len(others) > 1:
        return None
    return others.pop() if others else 0


def _ids_text(ids: tuple[int, ...], what: str) -> str:
    names = ("real", "effective", "saved", "filesystem")
    return ", ".join(f"{n} {what} {i}" for n, i in zip(names, ids, strict=False))


def for_process(pid: int) -> RunAs | None:
    """The privileges a child diagnosing `pid` runs with: None for gputui's own (the process
    is the caller's; as root: root's own process, whose interpreter `for_python` judges);
    PrivilegeError with the reason where no safe choice exists."""
    try:
        ids = process_ids(pid)
    except FileNotFoundError:
        raise PrivilegeError("no such process") from None
    except OSError as exc:
        raise PrivilegeError(f"its user ids cannot be read ({exc})") from None
    me = os.geteuid()
    if me != 0:
        if set(ids.uids) == {me}:
            return None
        raise PrivilegeError(
            f"another user's process ({_ids_text(ids.uids, 'uid')}): its code would run with your "
            "privileges; run gputui diag as that user (or as root, which runs it as its owner)"
        )
    uid = _one_id(ids.uids)
    if uid is None:
        raise PrivilegeError(
            f"its user ids name two users ({_ids_text(ids.uids, 'uid')}): no one user's privileges "
            "to run its code with; not run as root"
        )
    if uid == 0:
        return None
    gid = _one_id(ids.gids)
    if gid is None:
        raise PrivilegeError(
            f"its group ids name two groups ({_ids_text(ids.gids, 'gid')}): no one group's "
            "privileges to run its code with; not run as root"
        )
    mixed = len(set(ids.uids)) > 1
    why = f"PID {pid}'s owner" + (
        f" (the non-root one of its user ids: {_ids_text(ids.uids, 'uid')})" if mixed else ""
    )
    return _user(uid, why, gid=gid, process_groups=ids.groups)


def _user(
    uid: int, why: str, *, gid: int | None = None, process_groups: tuple[int, ...] | None = None
) -> RunAs:
    """`uid`'s privileges as the user database gives them (name, home, groups), narrowed to
    `gid` and to the groups the process holds where a process is the source."""
    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        raise PrivilegeError(
            f"uid {uid} has no entry in the user database (a container's user?): its name, home "
            "and groups are unknown, so it is not run as root; run gputui diag as that user or "
            "inside its container"
        ) from None
    primary = entry.pw_gid if gid is None else gid
    listed = set(os.getgrouplist(entry.pw_name, primary))
    groups = listed if process_groups is None else listed & set(process_groups)
    home = entry.pw_dir if os.path.isabs(entry.pw_dir) else "/"
    return RunAs(uid, primary, tuple(sorted(groups)), entry.pw_name, home, why)


# ---- an interpreter -----------------------------------------------------------------


def _walk(path: str) -> Iterator[tuple[str, os.stat_result]]:
    """Every directory, link and file the kernel passes through resolving `path` (lstat of
    each, symbolic links followed one at a time, their targets walked too); a component that
    does not exist ends the walk."""
    todo = [c for c in os.path.abspath(path).split("/") if c]
    here = "/"
    try:
        st = os.lstat(here)
    except OSError:
        return
    yield here, st
    links = 0
    while todo:
        name = todo.pop(0)
        if name == ".":
            continue
        if name == "..":
            here = os.path.dirname(here)
            continue
        nxt = os.path.join(here, name)
        try:
            st = os.lstat(nxt)
        except OSError:
            return
        yield nxt, st
        if stat.S_ISLNK(st.st_mode):
            links += 1
            if links > MAX_LINKS:
                return
            try:
                target = os.readlink(nxt)
            except OSError:
                return
            parts = [c for c in target.split("/") if c]
            if target.startswith("/"):
                here = "/"
                yield here, os.lstat(here)
            todo = parts + todo
            continue
        here = nxt


MAX_ENTRIES = 100_000
"""Entries of one site directory looked at, at most: one with more is refused (unchecked)."""


def controllers(python: str) -> tuple[dict[int, str], list[str]]:
    """Who can change what `python` runs: {non-root owner uid: one path of theirs}, and why
    others (a group, every user) could.  Looked at: every directory and link on the way to it
    and to its venv's pyvenv.cfg and `home`; the directories beside it where an added file
    changes what runs (sticky or not); its site directories, each entry in them and the
    directories their `.pth` files name (gputui.diag.startfiles)."""
    owners: dict[int, str] = {}
    loose: list[str] = []

    def judge(path: str, st: os.stat_result) -> None:
        if st.st_uid != 0:
            owners.setdefault(st.st_uid, path)
        if stat.S_ISLNK(st.st_mode):
            return  # a link's own mode means nothing; its directory decides
        sticky_dir = stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX
        if st.st_mode & stat.S_IWOTH and not sticky_dir:
            loose.append(f"{path} is writable by every user")
        elif st.st_mode & stat.S_IWGRP and st.st_gid != 0 and not sticky_dir:
            loose.append(f"{path} is writable by group {_group(st.st_gid)}")

    def walked(path: str) -> None:
        for found, st in _walk(path):
            judge(found, st)

    def entries(d: str) -> list[str]:
        """`d`'s entries, each judged (a link walked to its end)."""
        walked(d)
        try:
            with os.scandir(d) as it:
                names = [entry.name for _, entry in zip(range(MAX_ENTRIES + 1), it, strict=False)]
        except OSError:
            return []
        if len(names) > MAX_ENTRIES:
            loose.append(f"{d} has more than {MAX_ENTRIES} entries (not checked)")
        for name in names[:MAX_ENTRIES]:
            path = os.path.join(d, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            judge(path, st)
            if stat.S_ISLNK(st.st_mode):
                walked(path)
        return names

    def room(d: str) -> None:
        """Whether others can add a file to `d` (sticky or not): one beside an interpreter
        or a script changes what runs."""
        try:
            st = os.stat(d)
        except OSError:
            return
        if st.st_mode & stat.S_IWOTH:
            loose.append(f"{d}: every user can add files there {BESIDE}")
        elif st.st_mode & stat.S_IWGRP and st.st_gid != 0:
            loose.append(f"{d}: group {_group(st.st_gid)} can add files there {BESIDE}")

    program = python
    for _ in range(startfiles.MAX_SCRIPTS + 1):
        interpreter = startfiles.shebang(program)
        if interpreter is None:
            break
        # a script: the kernel runs its #! interpreter, which puts the script's directory
        # first on sys.path
        walked(program)
        room(os.path.dirname(os.path.abspath(program)))
        room(os.path.dirname(os.path.realpath(program)))
        program = interpreter
    else:
        loose.append(f"{python}: more than {startfiles.MAX_SCRIPTS} scripts start one another (not checked)")
    cfg, homes = startfiles.pyvenv(program)
    for start in [program, *([cfg] if cfg else []), *homes]:
        walked(start)
    for d in startfiles.beside(program):
        room(d)
    for site in startfiles.site_dirs(program):
        names = entries(site)
        for d in startfiles.pth_dirs(site, names):
            entries(d)
    return owners, list(dict.fromkeys(loose))


BESIDE = "(a ._pth or pyvenv.cfg beside it changes what runs)"


def _group(gid: int) -> str:
    import grp

    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def for_python(python: str) -> RunAs | None:
    """The privileges a child running `python` (with gputui's own role) runs with: None for
    gputui's own; as root, its one non-root controller's; PrivilegeError where no one user
    controls it."""
    if os.geteuid() != 0:
        return None
    owners, loose = controllers(python)
    shown = escaped(python)
    if loose:
        raise PrivilegeError(
            f"{shown}: {escaped(loose[0])}: other users could change what it runs; not run as root "
            "(run gputui diag as the user whose environment it is, or tighten the permissions)"
        )
    if len(owners) > 1:
        named = ", ".join(f"{escaped(p)} is {_name(u)}'s" for u, p in sorted(owners.items()))
        raise PrivilegeError(
            f"{shown}: {named}: two users control what it runs; not run as root "
            "(run gputui diag as the user whose environment it is)"
        )
    if not owners:
        return None
    ((uid, path),) = owners.items()
    return _user(uid, f"{escaped(path)} is {_name(uid)}'s: what runs is that user's")
