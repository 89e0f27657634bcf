"""The install hint of an optional extra (gputui/extras.py): `pip install 'gputui[serve]'`
fails from a checkout (the README installs from one, issue 31); the hint names what works for
how this gputui was installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gputui import extras

ROOT = Path(__file__).resolve().parents[1]


def test_from_the_checkout_it_runs_from() -> None:
    assert extras.source_tree() == ROOT
    editable = {"url": ROOT.as_uri(), "dir_info": {"editable": True}}
    assert extras.target_for("serve", ROOT, editable, True) == f"-e '{ROOT}[serve]'"
    assert extras.target_for("serve", ROOT, None, False) == f"'{ROOT}[serve]'"  # (PYTHONPATH)
    elsewhere = {"url": "file:///nowhere/else", "dir_info": {"editable": True}}
    assert extras.target_for("serve", ROOT, elsewhere, True) == f"'{ROOT}[serve]'"


def test_installed_from_a_checkout_with_pip_install_dot(tmp_path: Path) -> None:
    checkout = tmp_path / "my gputui"  # (a space: the hint quotes it)
    checkout.mkdir()
    plain = {"url": checkout.as_uri(), "dir_info": {}}
    assert extras.target_for("stacks", None, plain, True) == f"'{checkout}[stacks]'"
    editable = {"url": checkout.as_uri(), "dir_info": {"editable": True}}
    assert extras.target_for("stacks", None, editable, True) == f"-e '{checkout}[stacks]'"
    gone = {"url": (tmp_path / "gone").as_uri(), "dir_info": {}}
    assert extras.target_for("stacks", None, gone, True) is None


def test_installed_from_an_index_a_wheel_or_not_at_all() -> None:
    assert extras.target_for("serve", None, None, True) == "'gputui[serve]'"
    wheel = {"url": "file:///tmp/gputui-0.1.0-py3-none-any.whl", "archive_info": {}}
    assert extras.target_for("serve", None, wheel, True) is None
    vcs = {"url": "https://github.com/gputui/gputui", "vcs_info": {"vcs": "git"}}
    assert extras.target_for("serve", None, vcs, True) is None
    assert extras.target_for("serve", None, None, False) is None


def test_the_pip_of_this_interpreter() -> None:
    assert extras.pip_command("/v/.venv/bin/python", "/v/.venv/bin/pip") == "pip"
    assert extras.pip_command("/v/.venv/bin/python", "/usr/bin/pip") == "/v/.venv/bin/python -m pip"
    assert extras.pip_command("/my venv/bin/python", "") == "'/my venv/bin/python' -m pip"


def test_serve_without_textual_serve_says_what_installs_it_from_this_checkout(tmp_path: Path) -> None:
    hidden = tmp_path / "textual_serve"
    hidden.mkdir()
    (hidden / "__init__.py").write_text("raise ImportError('textual-serve is not installed here')\n")
    r = subprocess.run(
        [sys.executable, "-m", "gputui", "serve", "--listen", "127.0.0.1:0", "--", "--demo"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])},
    )
    assert r.returncode == 2, r.stderr
    assert "'gputui[serve]'" not in r.stderr and f"'{ROOT}[serve]'" in r.stderr, r.stderr
    assert "install textual-serve" in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr


def test_stacks_help_names_what_installs_py_spy_here() -> None:
    """`gputui stacks --help` said `pip install 'gputui[stacks]'`, which fails from a checkout
    (review of issue 31): it names the shared hint's command."""
    argv = [sys.executable, "-m", "gputui", "stacks", "--help"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    flat = " ".join(r.stdout.split())
    assert "'gputui[stacks]'" not in flat
    assert f"install -e '{ROOT}[stacks]'" in flat or f"install '{ROOT}[stacks]'" in flat, flat
    assert "install py-spy" in flat, flat


def test_the_docs_never_give_an_install_command_that_fails_from_a_checkout() -> None:
    """The README installs from a checkout: `pip install 'gputui[EXTRA]'` needs a package index
    that has gputui."""
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if "install 'gputui[" in line or 'install "gputui[' in line or "install gputui[" in line:
                raise AssertionError(f"{page.name}:{n}: {line.strip()}")


def test_the_install_command_in_help_is_never_cut_at_a_hyphen(monkeypatch) -> None:
    """Wrapped at `py-spy`'s hyphen, the command does not paste as one (a fresh venv's help
    said `pip install py-` and `spy` on two lines)."""
    import contextlib
    import io

    from gputui.cli import main

    for columns in range(50, 131):
        monkeypatch.setenv("COLUMNS", str(columns))
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            main(["stacks", "--help"])
        text = out.getvalue()
        assert "install" in text and "py-\n" not in text, (columns, text)
