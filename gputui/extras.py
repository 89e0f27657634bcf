"""The command that installs one of gputui's optional extras (`serve`, `stacks`), for how this
gputui was installed: `pip install 'gputui[serve]'` works only where gputui came from a
package index; from a checkout (the README's way) the extra is installed from that checkout.
Standard library only."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlsplit

_OURS = re.compile(r'^name\s*=\s*"gputui"\s*$', re.MULTILINE)


def install_hint(extra: str, package: str) -> str:
    """ "PIP install WHAT   (or: PIP install PACKAGE)": WHAT installs gputui's `extra` the way
    this gputui was installed; PACKAGE is the extra's one package alone."""
    pip = pip_command()
    what = extra_target(extra)
    alone = f"{pip} install {shlex.quote(package)}"
    return alone if what is None else f"{pip} install {what}   (or: {alone})"


def pip_command(executable: str | None = None, on_path: str | None = None) -> str:
    """`pip` where the pip on PATH is this interpreter's, else "PYTHON -m pip" (a venv used
    as .venv/bin/gputui, not activated: a bare `pip` would install elsewhere)."""
    executable = executable or sys.executable
    on_path = shutil.which("pip") if on_path is None else on_path
    if on_path and os.path.dirname(os.path.abspath(on_path)) == os.path.dirname(os.path.abspath(executable)):
        return "pip"
    return f"{shlex.quote(executable)} -m pip"


def extra_target(extra: str) -> str | None:
    """What to give `pip install` for `extra` here (`target_for`, with this gputui's facts)."""
    direct_url, installed = _direct_url()
    return target_for(extra, source_tree(), direct_url, installed)


def target_for(
    extra: str, tree: Path | None, direct_url: dict[str, object] | None, installed: bool
) -> str | None:
    """What to give `pip install` for `extra` (quoted for a shell), or None where only the
    extra's package alone can be installed (gputui came from a wheel file or a VCS URL).

    `tree`: the source tree gputui runs from, if it does; `direct_url`: the installed
    distribution's PEP 610 direct_url.json, if any; `installed`: whether a distribution of
    gputui is installed at all."""
    local = _local_dir(direct_url) if direct_url else None
    if tree is not None:
        editable = local is not None and local[0] == tree.resolve() and local[1]
        return ("-e " if editable else "") + shlex.quote(f"{tree}[{extra}]")
    if local is not None:
        return ("-e " if local[1] else "") + shlex.quote(f"{local[0]}[{extra}]")
    if direct_url or not installed:
        return None  # (a wheel file, a VCS URL, a directory gone: no name that pip can find)
    return shlex.quote(f"gputui[{extra}]")


def source_tree() -> Path | None:
    """The checkout gputui runs from (its pyproject.toml names gputui), or None."""
    root = Path(__file__).resolve().parent.parent
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return root if _OURS.search(text) else None


def _direct_url() -> tuple[dict[str, object] | None, bool]:
    try:
        dist = metadata.distribution("gputui")
    except metadata.PackageNotFoundError:
        return None, False
    try:
        data = json.loads(dist.read_text("direct_url.json") or "null")
    except ValueError:
        return None, True
    return (data if isinstance(data, dict) else None), True


def _local_dir(direct_url: dict[str, object]) -> tuple[Path, bool] | None:
    """(the directory gputui was installed from, editable?) where it was one and still is."""
    info = direct_url.get("dir_info")
    url = direct_url.get("url")
    if not isinstance(info, dict) or not isinstance(url, str) or not url.startswith("file://"):
        return None
    path = Path(unquote(urlsplit(url).path)).resolve()
    return (path, bool(info.get("editable"))) if path.is_dir() else None
