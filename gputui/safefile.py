"""Files that belong to the person running gputui: the config file, the state file, secrets.

The rule, as OpenSSH's StrictModes: such a file is used only when nobody else could have
written it or put it there.

- It is a regular file (not a FIFO, a device, a directory) owned by you or root, and not
  writable by group or others (group-writable is accepted for a user-private group: the
  group has your name and no other member).
- Every directory on the way to it, from `/`, is owned by you or root and not writable by
  others, unless it has the sticky bit (as /tmp: others cannot rename or delete what is
  yours there); the same group exception.
- A symbolic link is followed only where the directory holding it passed these checks
  and you or root own the link (a dotfile manager's link in ~/.config is fine; another
  user's link in a shared directory, sticky /tmp included, is not, whatever the kernel's
  fs.protected_symlinks says), never as the last component when `follow_symlinks` is off.
- Each directory is opened relative to the last (openat), the file with O_NOFOLLOW and
  O_NONBLOCK (a FIFO cannot hang the start), checked again with fstat after the open, and
  read to a bound (`/dev/zero` or a huge file cannot fill memory).

Anything else raises `Refused`, whose text is one line naming the file (escaped: a file
name is untrusted) and why.  A missing file raises FileNotFoundError, even below a
directory that would be refused: nothing is used, so nothing needs saying.

Writing (`write_private`) creates missing directories 0700 (only below directories that
passed the checks: nothing is made where it would then be refused), opened with O_NOFOLLOW
and checked again once open, writes a new file 0600 with
O_CREAT|O_EXCL|O_NOFOLLOW under a temporary name in the checked directory and renames it
over the old name: a symbolic link planted there is replaced, never followed.

Files the user names as data (a recording to replay or to make) are another matter: anyone
may own them (another user's shared recording is fine to read) and a symbolic link is
followed when reading (the user chose the name), but `open_data` opens only a regular file
(a FIFO or a device is never opened: no hang, no endless read), and `create_data` never
writes through a symbolic or hard link or into a FIFO or device.

Standard library only; Linux (and other POSIX systems with openat).
"""

from __future__ import annotations

import contextlib
import errno
import grp
import os
import pwd
import stat
from pathlib import Path

from gputui.untrusted import escaped

MAX_SYMLINKS = 40
"""Links followed while resolving one path (Linux's own limit)."""

_O_PATH = getattr(os, "O_PATH", os.O_RDONLY)
_DIR_FLAGS = _O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class Refused(Exception):
    """A file gputui will not use; str() is one line: `PATH: refused: why`."""

    def __init__(self, path: str | os.PathLike[str], why: str) -> None:
        self.path = os.fspath(path)
        self.why = why
        super().__init__(f"{escaped(self.path)}: refused: {why}")


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _trusted_owner(uid: int) -> bool:
    return uid in (os.geteuid(), 0)


def _private_group(gid: int, uid: int) -> bool:
    """A user-private group: named as its one possible member, the owner (the Debian rule)."""
    try:
        user = pwd.getpwuid(uid).pw_name
        group = grp.getgrgid(gid)
    except KeyError:
        return False
    return group.gr_name == user and set(group.gr_mem) <= {user}


def _problem(st: os.stat_result, is_dir: bool) -> str | None:
    """Why a file or directory with this stat could have been written by someone else."""
    if not _trusted_owner(st.st_uid):
        return f"owned by another user (uid {st.st_uid}), not by you or root"
    mode = st.st_mode
    if mode & stat.S_IWOTH and not (is_dir and mode & stat.S_ISVTX):
        return "writable by others"
    if mode & stat.S_IWGRP and not _private_group(st.st_gid, st.st_uid):
        return "writable by its group"
    return None


def _dir_problem(path: str, st: os.stat_result) -> str | None:
    why = _problem(st, True)
    if why is None:
        return None
    fix = "chmod go-w" if "writable" in why else "chown"
    return f"directory {escaped(path) or '/'} is {why} ({fix} it, or move the file)"


class _Walk:
    """A path resolved one component at a time from `/`, every directory checked."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool, follow_last: bool) -> None:
        self.path = os.fspath(path)
        self.create = create
        self.follow_last = follow_last
        self.fd = -1
        self.name = ""
        self.where = "/"
        """The directory's path as walked (for messages)."""
        self.problem: str | None = None
        """Why the first unsafe directory is unsafe; None when all are safe."""

    def __enter__(self) -> _Walk:
        try:
            self._resolve()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _enter_root(self) -> None:
        self.close()
        self.fd = os.open("/", _DIR_FLAGS)
        self.where = "/"
        self._check_dir()

    def _check_dir(self) -> None:
        if self.problem is None:
            self.problem = _dir_problem(self.where, os.fstat(self.fd))

    def _may_follow(self, name: str, st: os.stat_result) -> None:
        """Refused unless the link at `name` may be followed: its directory passed the
        checks, and you or root own the link.  (The walk reads links itself, so the
        kernel's fs.protected_symlinks never applies: without the owner check, another
        user's link in a sticky shared directory such as /tmp would lead root anywhere.)"""
        if self.problem is not None:
            raise Refused(self.path, self.problem)
        if not _trusted_owner(st.st_uid):
            where = escaped(os.path.join(self.where, name))
            raise Refused(
                self.path,
                f"{where} is a symbolic link owned by another user (uid {st.st_uid}): not followed",
            )

    def _resolve(self) -> None:
        parts = os.path.abspath(self.path).split("/")
        self._enter_root()
        links = 0
        while parts:
            name = parts.pop(0)
            if name in ("", "."):
                continue
            last = not any(p not in ("", ".") for p in parts)
            if name == "..":
                parent = os.open("..", _DIR_FLAGS, dir_fd=self.fd)
                os.close(self.fd)
                self.fd = parent
                self.where = os.path.dirname(self.where.rstrip("/")) or "/"
                continue  # (walked down through it: already checked)
            try:
                st = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
            except FileNotFoundError:
                if last or not self.create:
                    if last:
                        self.name = name
                        return
                    raise
                if self.problem is not None:  # nothing is made where others could meddle
                    raise Refused(self.path, self.problem) from None
                os.mkdir(name, 0o700, dir_fd=self.fd)
                st = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode) and (not last or self.follow_last):
                self._may_follow(name, st)
                links += 1
                if links > MAX_SYMLINKS:
                    raise Refused(self.path, "too many symbolic links")
                target = os.readlink(name, dir_fd=self.fd)
                parts = target.split("/") + parts
                if target.startswith("/"):
                    self._enter_root()
                continue
            if last:
                self.name = name
                return
            if not stat.S_ISDIR(st.st_mode):
                raise NotADirectoryError(f"{self.path}: {name} is not a directory")
            child = os.open(name, _DIR_FLAGS, dir_fd=self.fd)
            os.close(self.fd)
            self.fd = child
            self.where = os.path.join(self.where, name)
            self._check_dir()
        raise IsADirectoryError(f"{self.path}: a directory")


def read_private(path: str | os.PathLike[str], limit: int, *, follow_symlinks: bool = True) -> bytes:
    """The bytes of a file only you (or root) could have written, at most `limit` of them.

    Raises `Refused` (one line: the file and why), FileNotFoundError when it is not there,
    or another OSError when it cannot be read."""
    with _Walk(path, create=False, follow_last=follow_symlinks) as walk:
        try:
            st = os.stat(walk.name, dir_fd=walk.fd, follow_symlinks=False)
        except FileNotFoundError:
            raise FileNotFoundError(2, "No such file or directory", os.fspath(path)) from None
        if walk.problem is not None:
            raise Refused(path, walk.problem)
        if not stat.S_ISREG(st.st_mode):  # before opening: a device or FIFO is never opened
            raise Refused(path, f"{_kind(st.st_mode)}, not a regular file")
        try:
            fd = os.open(walk.name, _READ_FLAGS, dir_fd=walk.fd)
        except OSError as exc:
            if exc.errno == 40:  # ELOOP: replaced by a link since
                raise Refused(path, "a symbolic link") from None
            raise
    try:
        st = os.fstat(fd)  # what was opened, whatever the name points to now
        if not stat.S_ISREG(st.st_mode):
            raise Refused(path, f"{_kind(st.st_mode)}, not a regular file")
        why = _problem(st, False)
        if why is not None:
            fix = "chmod go-w it" if "writable" in why else "chown it to yourself"
            raise Refused(path, f"{why} ({fix})")
        if st.st_size > limit:
            raise Refused(path, f"larger than {limit} bytes")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:  # grew since the fstat
            raise Refused(path, f"larger than {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_private_text(path: str | os.PathLike[str], limit: int, *, follow_symlinks: bool = True) -> str:
    """`read_private` decoded as UTF-8 (Refused when it is not)."""
    data = read_private(path, limit, follow_symlinks=follow_symlinks)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise Refused(path, f"not UTF-8 text (line {line}, byte {exc.start})") from None


def write_private(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace `path` with `data`, mode 0600, atomically; missing directories are created
    0700.  Raises `Refused` when a directory on the way could be written by someone else,
    OSError when it cannot be written.  A symbolic link at `path` is replaced, not followed."""
    with _Walk(path, create=True, follow_last=False) as walk:
        if walk.problem is not None:
            raise Refused(path, walk.problem)
        tmp = f".{walk.name}.{_token(6)}.tmp"
        fd = os.open(tmp, _WRITE_FLAGS, 0o600, dir_fd=walk.fd)
        try:
            try:
                os.fchmod(fd, 0o600)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, walk.name, src_dir_fd=walk.fd, dst_dir_fd=walk.fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=walk.fd)
            raise


# --------------------------------------------------------------------------------------
# Files the user names as data (recordings): any owner, but only regular files
# --------------------------------------------------------------------------------------

_DATA_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_SYMLINK_REFUSED = "a symbolic link (not followed: remove it or choose another name)"
_DATA_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


def _regular(path: str | os.PathLike[str], st: os.stat_result) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise Refused(path, f"{_kind(st.st_mode)}, not a regular file")


def open_data(path: str | os.PathLike[str]) -> int:
    """A blocking read-only descriptor on `path`, a file the user named as data (a recording).

    Anyone may own it, and a symbolic link is followed: the user chose this name, and
    reading what it points to can change nothing (unlike the config, whose owner decides
    what runs).  But only a regular file is opened: a FIFO would hang the open or the read,
    a device (/dev/zero) would be read without end.  Checked by name before opening (a
    device is never opened) and on the descriptor after (O_NONBLOCK: a FIFO swapped in
    meanwhile cannot hang the open).  Raises `Refused` ("PATH: refused: a FIFO, not a
    regular file"), FileNotFoundError or another OSError."""
    _regular(path, os.stat(path))
    fd = os.open(path, _DATA_READ_FLAGS)
    return _regular_blocking(path, fd)


def _regular_blocking(path: str | os.PathLike[str], fd: int) -> int:
    """`fd` checked on the descriptor to be a regular file and made blocking (closed and
    `Refused` if it is not)."""
    try:
        _regular(path, os.fstat(fd))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def create_data(path: str | os.PathLike[str], *, replace: bool) -> int:
    """A blocking write-only descriptor on `path`, a data file being made (a recording).

    Never through a symbolic link: one planted at the name (in a shared directory such as
    /tmp) is refused whatever it points to, dangling or not, and O_NOFOLLOW holds if one
    appears after the check.  Never a FIFO or a device.  An existing regular file raises
    FileExistsError, or is truncated when `replace`, but never one with another name (a
    hard link planted there: truncating it would overwrite the file it names), checked on
    the opened descriptor before it is truncated.  A new file takes the umask's mode
    (0666 & ~umask), as open() gave: a recording is meant to be shared.  Raises `Refused`,
    FileExistsError or another OSError."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        pass
    else:
        if stat.S_ISLNK(st.st_mode):
            raise Refused(path, _SYMLINK_REFUSED)
        _regular(path, st)
        if not replace:
            raise FileExistsError(errno.EEXIST, "File exists", os.fspath(path))
    flags = _DATA_WRITE_FLAGS | (0 if replace else os.O_EXCL)  # (truncated once checked)
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link planted since the check
            raise Refused(path, _SYMLINK_REFUSED) from None
        if exc.errno == errno.ENXIO:  # a FIFO planted since, with nobody reading it
            raise Refused(path, "a FIFO, not a regular file") from None
        raise
    fd = _regular_blocking(path, fd)
    try:
        if os.fstat(fd).st_nlink > 1:
            why = "a hard link: another name shares this file (remove it or choose another name)"
            raise Refused(path, why)
        if replace:
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


# --------------------------------------------------------------------------------------
# New files under a predictable name (a saved report): never replace or follow anything
# --------------------------------------------------------------------------------------


def save_new(folder: str | os.PathLike[str], stem: str, texts: dict[str, str]) -> list[Path]:
    """Write each of `texts` ({".md": ..., ".json": ...}) as `folder/stem + ext`, mode 0600;
    returns the paths (resolved), in the order of `texts`.

    The name is predictable, so another user could plant a link there: each text is written
    to a new temporary file (O_CREAT | O_EXCL | O_NOFOLLOW, mode 0600), then linked to its
    name, which fails rather than replace anything there (a link is never followed); a taken
    name gets a "-2", "-3"... suffix (all the texts share one).  Nothing half-written ever
    appears under the final name."""
    base = Path(folder)
    temps = {ext: _private_temp(base, text) for ext, text in texts.items()}
    try:
        for n in range(1, 100):
            name = stem if n == 1 else f"{stem}-{n}"
            placed: list[Path] = []
            try:
                for ext, temp in temps.items():
                    target = base / f"{name}{ext}"
                    os.link(temp, target, follow_symlinks=False)  # EEXIST if anything is there
                    placed.append(target)
            except FileExistsError:
                for target in placed:
                    target.unlink()
                continue
            return [p.resolve() for p in placed]
        raise FileExistsError(f"{base / stem}: 99 files of this name already")
    finally:
        for temp in temps.values():
            with contextlib.suppress(OSError):
                os.unlink(temp)


def _token(nbytes: int) -> str:
    """A random name part (`secrets`, imported at the first write: reading the config and
    the state at start-up needs no hashlib)."""
    import secrets

    return secrets.token_hex(nbytes)


def _private_temp(folder: Path, text: str) -> Path:
    """A new file in `folder` holding `text`, readable by its owner only."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    path = folder / f".gputui-{_token(8)}.tmp"
    fd = os.open(path, flags, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            fd = -1
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    return path
