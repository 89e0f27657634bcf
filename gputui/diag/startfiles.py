"""What a Python interpreter reads as it starts, besides the path to it: where a file another
user adds or changes becomes code a child of root runs (gputui.diag.privilege decides whose
privileges that child takes).  Found without running anything of the interpreter's, by
Python's own rules (Modules/getpath.py, Lib/site.py):

- **beside it**: `pyvenv.cfg` in the directory of the path as given or one up (a venv, and
  the `home` it names); `<executable>._pth` beside the path as given and beside its real
  file (it replaces sys.path); `pybuilddir.txt` and `Modules/Setup.local` beside the real
  file (a build tree); the standard library searched upward from the real file's directory
  (or the venv's `home`) until `lib/pythonX.Y/os.py` is found.  A file anyone adds to one of
  those directories changes what runs, so none may be one others can add files to, sticky
  or not (/tmp's sticky bit keeps others from replacing a file, not from adding one).
- **a script** (`#!`): its `#!` interpreter is what runs (and is judged as above), and the
  script's own directory comes first on sys.path: no one else may add files there either.
- **its site directories**: `lib/pythonX.Y` (the standard library, lib-dynload) and its
  `site-packages` (Debian's `dist-packages`, `/usr/local/lib/...`) of the venv and of the
  base installation; every entry in them (a `.pth` runs at each start, a package when
  imported); every directory a `.pth` file names (added to sys.path) and its entries.

Not each file deeper inside a package: a package directory root owns and only root can
write holds what root put there.
"""

from __future__ import annotations

import glob
import os
import shutil
import stat

MAX_PTH_BYTES = 1 << 16
"""A `.pth` file is read up to this much (Python reads all of it; one this large is odd)."""

SITE_PATTERNS = (
    "lib*/python3*",
    "lib*/python3*/lib-dynload",
    "lib*/python3*/site-packages",
    "lib*/python3*/dist-packages",
    "local/lib*/python3*/site-packages",
    "local/lib*/python3*/dist-packages",
)
"""Below a prefix: the standard library and the site directories (Debian's `lib/python3`
`dist-packages` and `/usr/local` ones included)."""


def pyvenv(python: str) -> tuple[str | None, list[str]]:
    """The pyvenv.cfg Python reads at start (beside the executable or one directory up, from
    the path as given) and the `home` values it names (absolute ones)."""
    here = os.path.dirname(os.path.abspath(python))
    for d in (here, os.path.dirname(here)):
        cfg = os.path.join(d, "pyvenv.cfg")
        if os.path.isfile(cfg):
            raw = _read_regular(cfg, MAX_PTH_BYTES)
            homes = []
            for line in raw.decode("utf-8", "replace").splitlines():
                key, eq, value = line.partition("=")
                if eq and key.strip().lower() == "home" and os.path.isabs(value.strip()):
                    homes.append(value.strip())
            return cfg, homes
    return None, []


def _read_regular(path: str, limit: int) -> bytes:
    """Up to `limit` bytes of `path` if it is a regular file (never blocks on a FIFO swapped
    in, never follows a link at the last step); b"" otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_NOFOLLOW)
    except OSError:
        return b""
    try:
        return os.read(fd, limit) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError:
        return b""
    finally:
        os.close(fd)


MAX_SCRIPTS = 4
"""Scripts whose #! interpreter is a script again, followed at most (the kernel's limit)."""


def shebang(path: str) -> str | None:
    """The interpreter a script at `path` runs by its `#!` line (`/usr/bin/env NAME`: NAME
    on PATH), or None where `path` is no script (a binary, unreadable, nothing found)."""
    first = _read_regular(os.path.realpath(path), 256).split(b"\n", 1)[0]
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    if not words:
        return None
    if os.path.basename(words[0]) == "env":
        names = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        return shutil.which(names[0]) if names else None
    return words[0]


def _has_stdlib(prefix: str) -> bool:
    return any(glob.glob(os.path.join(glob.escape(prefix), "lib*", "python3*", "os.py*")))


def beside(python: str) -> list[str]:
    """The directories where a file another user adds changes what `python` runs (above)."""
    given = os.path.abspath(python)
    real_dir = os.path.dirname(os.path.realpath(python))
    _cfg, homes = pyvenv(python)
    dirs = [os.path.dirname(given), os.path.dirname(os.path.dirname(given)), real_dir]
    for start in [real_dir, *homes]:
        here = start
        while True:  # the standard library's search (its landmark: lib/pythonX.Y/os.py)
            dirs.append(here)
            if _has_stdlib(here) or here == os.path.dirname(here):
                break
            here = os.path.dirname(here)
    return list(dict.fromkeys(dirs))


def prefixes(python: str) -> list[str]:
    """The venv's directory and the base installations' prefixes `python` takes its
    libraries from."""
    cfg, homes = pyvenv(python)
    found = [os.path.dirname(cfg)] if cfg is not None else []
    for start in [os.path.dirname(os.path.realpath(python)), *homes]:
        here = start
        while here != os.path.dirname(here):
            if _has_stdlib(here):
                found.append(here)
                break
            here = os.path.dirname(here)
        else:  # no standard library found: the usual layout, prefix/bin/python
            found.append(os.path.dirname(start))
    return list(dict.fromkeys(found))


def site_dirs(python: str) -> list[str]:
    """The standard library's and the site directories of `python` that exist (each once,
    by its real path)."""
    out: dict[str, str] = {}
    for prefix in prefixes(python):
        for pattern in SITE_PATTERNS:
            for d in sorted(glob.glob(os.path.join(glob.escape(prefix), pattern))):
                if os.path.isdir(d):
                    out.setdefault(os.path.realpath(d), d)
    return list(out.values())


def pth_dirs(site: str, names: list[str]) -> list[str]:
    """The directories the `.pth` files among `names` (entries of `site`) put on sys.path, as
    site.py reads them: a line that is no comment and no `import` is a path, relative to the
    site directory; only one that exists is added."""
    out = []
    for name in names:
        if not name.endswith(".pth") or name.startswith("."):
            continue
        raw = _read_regular(os.path.join(site, name), MAX_PTH_BYTES)
        for line in raw.decode("utf-8", "replace").splitlines():
            if not line.strip() or line.startswith(("#", "import ", "import\t")):
                continue
            d = os.path.join(site, line.rstrip())
            if os.path.isdir(d):
                out.append(d)
    return out
