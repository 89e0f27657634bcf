"""The exporters `gputui cluster` scrapes directly: a target as typed ("n1:9400") made a
URL, and the targets file (`--targets-file`), read under the config file's rules."""

from __future__ import annotations

import urllib.parse


def normalize_target(text: str) -> str:
    """ "n1:9400" -> "http://n1:9400/metrics"; a URL without a path gets /metrics."""
    text = text.strip()
    if "://" not in text:
        text = "http://" + text
    parts = urllib.parse.urlsplit(text)
    if parts.path in ("", "/"):
        parts = parts._replace(path="/metrics")
    return urllib.parse.urlunsplit(parts)


MAX_TARGETS_FILE_BYTES = 1 << 20
"""The largest targets file read (some 50,000 targets)."""


def read_targets_file(path: str) -> list[str]:
    """One target per line; blank lines and # comments skipped.

    The file says which hosts get the cluster's credentials, so it is read as the config
    file is (gputui/safefile.py): a regular file (never a FIFO or a device: no hang, no
    endless read) of at most MAX_TARGETS_FILE_BYTES, owned by you or root, that nobody else
    could have written, named directly (a symbolic link is refused, not followed).

    Raises `safefile.Refused` (one line: the file and why; text that is not UTF-8 names its
    line), FileNotFoundError or another OSError, or ValueError "PATH:LINE: why" for the
    first bad target."""
    from gputui.cluster.http import check_url
    from gputui.safefile import read_private_text
    from gputui.untrusted import escaped

    text = read_private_text(path, MAX_TARGETS_FILE_BYTES, follow_symlinks=False)
    targets: list[str] = []
    for lineno, line in enumerate(text.split("\n"), 1):
        target = line.split("#", 1)[0].strip()
        if not target:
            continue
        try:
            problem = check_url(normalize_target(target))
        except ValueError as exc:  # urlsplit's own, "Invalid IPv6 URL" (the line is not
            problem = f"not a URL ({exc})"  # shown: it may hold a password)
        if problem:
            raise ValueError(escaped(f"{path}:{lineno}: {problem}"))
        targets.append(target)
    return targets
