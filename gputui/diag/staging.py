"""The child code (the probe package, stress.py and the rules they load by path) copied where
another user can read it, for a child of root that runs as that user (gputui.diag.privilege):
gputui itself may be installed where only root can read (under /root, mode 700).

The copy is root's and read-only to everyone else: a fresh directory (mkdtemp: a new name,
never an existing one) in a root-owned directory every user can enter (/tmp, whose sticky bit
keeps others from renaming or replacing it), each file created new (O_EXCL, O_NOFOLLOW) and
made world-readable, the directory opened to others only once it is complete.  The user it
runs as can read it and cannot change it; root never follows anything of theirs writing it,
and removes it (nothing in it is theirs) when the child ends.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

from gputui.diag import PROBE, STRESS

_GPUTUI = Path(__file__).resolve().parents[1]
#: Where a copy may go: root-owned directories every user can enter, first usable wins.
SHARED_TEMP = ("/tmp", "/var/tmp", "/dev/shm")  # noqa: S108  (checked: root's, sticky)


class StagingError(OSError):
    """The child code could not be put where the user can read it."""


def child_files() -> list[Path]:
    """Every file a child loads (relative to the gputui package)."""
    return sorted(
        [*PROBE.glob("*.py"), STRESS, _GPUTUI / "rules.py", _GPUTUI / "startvars.py"],
    )


def _shared_temp() -> str:
    for d in SHARED_TEMP:
        try:
            st = os.lstat(d)
        except OSError:
            continue
        if (
            stat.S_ISDIR(st.st_mode)
            and st.st_uid == 0
            and st.st_mode & stat.S_IXOTH
            and (st.st_mode & stat.S_ISVTX or not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))
        ):
            return d
    raise StagingError(f"no root-owned directory every user can enter ({', '.join(SHARED_TEMP)})")


def stage(script: Path) -> tuple[str, str]:
    """Copy the child code; returns (the copy's directory, `script`'s path in it)."""
    top = tempfile.mkdtemp(prefix="gputui-child-", dir=_shared_temp())  # 0700, root's
    try:
        for src in child_files():
            rel = src.relative_to(_GPUTUI.parent)
            dest = os.path.join(top, rel)
            parent = os.path.dirname(dest)
            os.makedirs(parent, exist_ok=True)
            fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, src.read_bytes())
                os.fchmod(fd, 0o644)
            finally:
                os.close(fd)
        for d, dirs, _ in os.walk(top):
            for name in dirs:
                os.chmod(os.path.join(d, name), 0o755)  # noqa: S103  (read-only to others, by design)
        os.chmod(top, 0o755)  # noqa: S103  (last: others see it only complete)
    except OSError as exc:
        unstage(top)
        raise StagingError(f"the diagnosis code cannot be copied for another user: {exc}") from None
    return top, os.path.join(top, Path(script).resolve().relative_to(_GPUTUI.parent))


def unstage(top: str) -> None:
    shutil.rmtree(top, ignore_errors=True)
