"""Files in directories others can write (issue 24, item 4): the config and state files,
and any secret gputui reads, are used only when nobody else could have written them or put
them there (gputui/safefile.py, the rule OpenSSH's StrictModes applies).  Owned by another
user needs root to set up (the tests chown to `nobody`); the rest runs as anyone."""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import stat
import time
from pathlib import Path

import pytest
from conftest import H200_X2, gputui

from gputui import config, state
from gputui.safefile import Refused, read_private, read_private_text, write_private

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")

#: A config whose alert command leaves a mark when it runs (the red team's case: it ran as root).
ALERTING = (
    "[alerts.temperature]\nabove = 55.0\nclear_below = 50.0\nfor_seconds = 0.0\n"
    "[watch]\nalert_cmd = '{cmd}'\n"
)


def shared_dir(path: Path, mode: int = 0o777) -> Path:
    """A directory anyone can write (chmod after mkdir: the umask would narrow it)."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, mode)
    return path


def mark_cmd(mark: Path) -> str:
    return f"{shutil.which('touch')} {mark}"


def watch_with_config_home(home: Path, *args: str):
    env = {**os.environ, "XDG_CONFIG_HOME": str(home)}
    return gputui("watch", "--replay", str(H200_X2), "--interval", "0.001", *args, env=env)


# ----------------------------------------------------------------------------------------
# the config file
# ----------------------------------------------------------------------------------------


def test_a_config_in_a_world_writable_config_home_is_refused_and_its_alert_cmd_never_runs(tmp_path):
    home = shared_dir(tmp_path / "xdg")
    mark = tmp_path / "ran"
    (home / "gputui").mkdir()
    (home / "gputui" / "config.toml").write_text(ALERTING.format(cmd=mark_cmd(mark)))
    r = watch_with_config_home(home)
    assert r.returncode == 0, r.stderr
    assert not mark.exists()
    refusal = [line for line in r.stderr.splitlines() if "refused" in line]
    assert len(refusal) == 1, r.stderr
    assert f"directory {home} is writable by others" in refusal[0]
    assert r.stdout == ""  # the defaults: no alert on this healthy recording


def test_the_same_config_in_a_private_config_home_is_used(tmp_path):
    """The control: what the refusal above stops is a working config."""
    home = tmp_path / "xdg"
    mark = tmp_path / "ran"
    (home / "gputui").mkdir(parents=True)
    (home / "gputui" / "config.toml").write_text(ALERTING.format(cmd=mark_cmd(mark)))
    r = watch_with_config_home(home)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    deadline = time.monotonic() + 10
    while not mark.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mark.exists()


@as_root
def test_another_users_config_in_a_world_writable_sticky_config_home_is_refused(tmp_path):
    """Like /tmp: the sticky bit keeps others from replacing what is yours, but what they
    created there is theirs: their directory and their file are both refused."""
    home = shared_dir(tmp_path / "xdg", 0o1777)
    mark = tmp_path / "ran"
    theirs = home / "gputui"
    theirs.mkdir()
    (theirs / "config.toml").write_text(ALERTING.format(cmd=mark_cmd(mark)))
    os.chown(theirs, NOBODY, NOBODY)
    os.chown(theirs / "config.toml", NOBODY, NOBODY)
    r = watch_with_config_home(home)
    assert not mark.exists()
    assert f"directory {theirs} is owned by another user (uid {NOBODY})" in r.stderr


@as_root
def test_a_default_config_owned_by_another_user_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    path = tmp_path / "gputui" / "config.toml"
    path.parent.mkdir()
    path.write_text("[ui]\ninterval = 3.0\n")
    os.chown(path, NOBODY, NOBODY)
    loaded = config.load()
    assert loaded.config == config.Config()
    assert loaded.errors == (
        f"{path}: refused: owned by another user (uid {NOBODY}), not by you or root "
        "(chown it to yourself); using the defaults",
    )
    os.chown(path, os.geteuid(), os.getegid())
    assert config.load().config.ui.interval == 3.0


def test_a_config_others_can_write_is_refused(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text("[ui]\ninterval = 3.0\n")
    for mode in (0o666, 0o646):
        os.chmod(path, mode)
        loaded = config.load(path)
        assert loaded.config == config.Config()
        assert loaded.errors == (f"{path}: refused: writable by others (chmod go-w it); using the defaults",)


@pytest.mark.parametrize("mode", [0o600, 0o644, 0o400])
def test_a_private_or_read_only_config_is_read(tmp_path, mode):
    path = tmp_path / "config.toml"
    path.write_text("[ui]\ninterval = 3.0\n")
    os.chmod(path, mode)
    assert config.load(path).config.ui.interval == 3.0


def test_a_fifo_as_the_config_is_refused_at_once(tmp_path):
    """Before: the monitor hung before its first frame, waiting for a writer."""
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    started = time.monotonic()
    r = gputui("watch", "--config", str(fifo), "--replay", str(H200_X2), "--interval", "0.001", timeout=30)
    assert time.monotonic() - started < 20
    assert f"{fifo}: refused: a FIFO, not a regular file" in r.stderr
    assert "Traceback" not in r.stderr


def test_dev_zero_as_the_config_is_refused_without_reading_it():
    """Before: read until MemoryError."""
    loaded = config.load("/dev/zero")
    assert loaded.errors == (
        "/dev/zero: refused: a character device, not a regular file; using the defaults",
    )


def test_a_huge_config_is_refused_after_reading_a_bounded_amount(tmp_path):
    path = tmp_path / "config.toml"
    with path.open("wb") as f:
        f.truncate(config.MAX_BYTES + 1)  # sparse: costs no disk
    loaded = config.load(path)
    assert loaded.errors == (f"{path}: refused: larger than {config.MAX_BYTES} bytes; using the defaults",)


def test_a_dotfile_managers_link_to_a_safe_file_is_followed(tmp_path, monkeypatch):
    """~/.config/gputui/config.toml -> ~/dotfiles/gputui.toml (stow, chezmoi, home-manager)."""
    real = tmp_path / "dotfiles" / "gputui.toml"
    real.parent.mkdir()
    real.write_text("[ui]\ninterval = 4.0\n")
    link = tmp_path / "config" / "gputui" / "config.toml"
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    loaded = config.load()
    assert loaded.errors == () and loaded.config.ui.interval == 4.0


def test_a_link_planted_in_a_shared_directory_is_refused_even_to_a_safe_file(tmp_path):
    """The link's directory decides: anyone could have made it point anywhere."""
    real = tmp_path / "mine.toml"
    real.write_text("[ui]\ninterval = 4.0\n")
    shared = shared_dir(tmp_path / "shared")
    (shared / "config.toml").symlink_to(real)
    loaded = config.load(shared / "config.toml")
    assert loaded.config == config.Config()
    assert "is writable by others" in loaded.errors[0]


def test_a_missing_config_below_a_shared_directory_is_silent(tmp_path, monkeypatch):
    """Nothing is used, so nothing needs saying (an unset-up world-writable $XDG_CONFIG_HOME)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(shared_dir(tmp_path / "xdg")))
    assert config.load() == config.LoadedConfig(config.Config(), None)


# ----------------------------------------------------------------------------------------
# the state file
# ----------------------------------------------------------------------------------------


def test_saving_never_follows_a_directory_link_planted_in_a_world_writable_state_home(tmp_path, monkeypatch):
    """The red team's case: $XDG_STATE_HOME/gputui -> another directory; saving wrote
    state.json there, over a file of that name."""
    home = shared_dir(tmp_path / "xdg")
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "state.json").write_text("precious")
    (home / "gputui").symlink_to(victim)
    monkeypatch.setenv("XDG_STATE_HOME", str(home))
    problem = state.save(state.SavedState(layout="cards"))
    assert problem is not None and "\n" not in problem
    assert f"directory {home} is writable by others" in problem
    assert (victim / "state.json").read_text() == "precious"
    assert sorted(p.name for p in victim.iterdir()) == ["state.json"]


def planted_link(link: Path, target: Path, owner: int) -> None:
    """A symbolic link made by user `owner` (lchown needs root)."""
    link.symlink_to(target)
    os.lchown(link, owner, owner)


@as_root
@pytest.mark.parametrize("where", ["state home", "gputui folder"])
def test_root_never_follows_another_users_link_in_a_sticky_shared_directory(tmp_path, monkeypatch, where):
    """The red team's case (issue 31): /tmp-like, sticky and world-writable, so it passes the
    directory rule; another user plants a link there to a directory of root's; with
    fs.protected_symlinks=0 root followed it and made gputui/state.json there.  The walk
    reads links itself (the sysctl never applies to it): a link is followed only when you
    or root own it, whatever the sysctl says."""
    sticky = shared_dir(tmp_path / "tmp", 0o1777)
    root_only = tmp_path / "root-only"
    root_only.mkdir(mode=0o700)
    if where == "state home":
        planted_link(sticky / "xdg", root_only, NOBODY)
        monkeypatch.setenv("XDG_STATE_HOME", str(sticky / "xdg"))
    else:
        home = sticky / "mine"
        home.mkdir(mode=0o700)
        monkeypatch.setenv("XDG_STATE_HOME", str(home))
        sticky_inner = shared_dir(home / "drop", 0o1777)
        planted_link(sticky_inner / "gputui", root_only, NOBODY)
        monkeypatch.setenv("XDG_STATE_HOME", str(sticky_inner))
    problem = state.save(state.SavedState(layout="cards"))
    assert problem is not None and "\n" not in problem
    assert f"symbolic link owned by another user (uid {NOBODY})" in problem
    assert list(root_only.iterdir()) == []
    (root_only / "gputui").mkdir(mode=0o700)
    (root_only / "gputui" / "state.json").write_text(json.dumps({"version": 1, "layout": "cards"}))
    (root_only / "state.json").write_text(json.dumps({"version": 1, "layout": "cards"}))
    saved, warning = state.load()
    assert saved == state.SavedState() and warning is not None and "owned by another user" in warning


def test_your_own_link_in_a_sticky_shared_directory_is_followed(tmp_path, monkeypatch):
    """The owner decides, not the directory alone: a link of your own in /tmp is yours."""
    sticky = shared_dir(tmp_path / "tmp", 0o1777)
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    (sticky / "xdg").symlink_to(mine)
    monkeypatch.setenv("XDG_STATE_HOME", str(sticky / "xdg"))
    assert state.save(state.SavedState(layout="cards")) is None
    assert (mine / "gputui" / "state.json").is_file()


def test_nothing_is_created_below_a_directory_that_fails_the_rule(tmp_path):
    """Refused before anything is made: no directory of yours appears in a shared one."""
    shared = shared_dir(tmp_path / "shared")
    with pytest.raises(Refused, match="writable by others"):
        write_private(shared / "sub" / "deeper" / "f", b"x")
    assert os.listdir(shared) == []


def test_a_link_in_a_directory_that_fails_the_rule_is_not_followed(tmp_path, monkeypatch):
    """Refused at the link: what it points to is never walked (nor created); a planted link
    to nowhere is said, not taken for a missing file."""
    shared = shared_dir(tmp_path / "shared")
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    (shared / "d").symlink_to(target)
    with pytest.raises(Refused, match="writable by others"):
        write_private(shared / "d" / "sub" / "f", b"x")
    assert list(target.iterdir()) == []
    (shared / "gputui").symlink_to(tmp_path / "nowhere")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(shared))
    loaded = config.load()
    assert loaded.config == config.Config() and "is writable by others" in loaded.errors[0]


def test_saving_replaces_a_link_at_the_file_itself_and_leaves_its_target(tmp_path):
    victim = tmp_path / "victim.json"
    victim.write_text("precious")
    path = tmp_path / "gputui" / "state.json"
    path.parent.mkdir(mode=0o700)
    path.symlink_to(victim)
    assert state.save(state.SavedState(layout="cards"), path) is None
    assert victim.read_text() == "precious"
    assert not path.is_symlink() and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert state.load(path) == (state.SavedState(layout="cards"), None)


def test_a_state_file_in_a_world_writable_state_home_is_not_read(tmp_path, monkeypatch):
    home = shared_dir(tmp_path / "xdg")
    (home / "gputui").mkdir()
    (home / "gputui" / "state.json").write_text(json.dumps({"version": 1, "layout": "cards"}))
    monkeypatch.setenv("XDG_STATE_HOME", str(home))
    saved, warning = state.load()
    assert saved == state.SavedState()
    assert warning is not None and f"directory {home} is writable by others" in warning


@as_root
def test_a_state_file_owned_by_another_user_is_not_read(tmp_path):
    """The owner check (a planted file with a filter or a layout): one line, the defaults."""
    path = tmp_path / "state.json"
    assert state.save(state.SavedState(layout="cards"), path) is None
    os.chown(path, NOBODY, NOBODY)
    saved, warning = state.load(path)
    assert saved == state.SavedState()
    assert warning == (
        f"{path}: ignored (owned by another user (uid {NOBODY}), not by you or root "
        "(chown it to yourself)); using the defaults"
    )
    os.chown(path, os.geteuid(), os.getegid())
    assert state.load(path) == (state.SavedState(layout="cards"), None)


def test_a_state_file_others_can_write_is_not_read(tmp_path):
    path = tmp_path / "state.json"
    assert state.save(state.SavedState(layout="cards"), path) is None
    os.chmod(path, 0o602)
    saved, warning = state.load(path)
    assert saved == state.SavedState() and warning is not None and "writable by others" in warning


# ----------------------------------------------------------------------------------------
# the module's own rule, for any file (the serve token, the cluster's secrets)
# ----------------------------------------------------------------------------------------


def test_read_private_text_reads_a_private_file_and_bounds_it(tmp_path):
    path = tmp_path / "token"
    path.write_text("s3cret\n")
    path.chmod(0o600)
    assert read_private_text(path, 64) == "s3cret\n"
    assert read_private(path, 7) == b"s3cret\n"
    with pytest.raises(Refused, match="larger than 6 bytes"):
        read_private(path, 6)


def test_read_private_says_missing_as_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_private(tmp_path / "nope", 10)
    with pytest.raises(FileNotFoundError):
        read_private(tmp_path / "no-dir" / "nope", 10)


def test_a_link_as_the_last_component_is_refused_when_not_following(tmp_path):
    real = tmp_path / "real"
    real.write_text("x")
    (tmp_path / "link").symlink_to(real)
    assert read_private(tmp_path / "link", 10) == b"x"
    with pytest.raises(Refused, match="a symbolic link, not a regular file"):
        read_private(tmp_path / "link", 10, follow_symlinks=False)


def test_a_link_loop_is_refused_not_followed_forever(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(Refused, match="too many symbolic links"):
        read_private(tmp_path / "a", 10)


def test_a_group_writable_file_is_refused_unless_the_group_is_private(tmp_path):
    path = tmp_path / "f"
    path.write_text("x")
    os.chmod(path, 0o620)
    user = pwd.getpwuid(os.geteuid()).pw_name
    shared = [g.gr_gid for g in grp.getgrall() if g.gr_name != user]
    if os.geteuid() != 0:
        shared = [g for g in shared if g in os.getgroups()]
    if not shared:
        pytest.skip("no group of others to give the file to")
    os.chown(path, -1, shared[0])
    with pytest.raises(Refused, match="writable by its group"):
        read_private(path, 10)


def test_a_sticky_world_writable_directory_like_tmp_is_accepted_above_your_own(tmp_path):
    sticky = shared_dir(tmp_path / "tmp", 0o1777)
    mine = sticky / "mine"
    mine.mkdir(mode=0o700)
    (mine / "f").write_text("x")
    assert read_private(mine / "f", 10) == b"x"


def test_refusals_name_the_file_escaped_in_one_line(tmp_path):
    shared = shared_dir(tmp_path / "a\x1b]2;PWNED\x07")
    (shared / "f").write_text("x")
    with pytest.raises(Refused) as info:
        read_private(shared / "f", 10)
    text = str(info.value)
    assert "\x1b" not in text and "\x07" not in text and "\n" not in text
    assert "\\x1b]2;PWNED\\x07" in text


def test_write_private_creates_private_directories_and_file(tmp_path):
    path = tmp_path / "a" / "b" / "secret"
    write_private(path, b"one")
    write_private(path, b"two")
    assert path.read_bytes() == b"two"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert os.listdir(path.parent) == ["secret"]


def test_write_private_refuses_a_shared_directory_and_leaves_nothing(tmp_path):
    shared = shared_dir(tmp_path / "shared")
    with pytest.raises(Refused, match="writable by others"):
        write_private(shared / "f", b"x")
    assert os.listdir(shared) == []


def test_the_clusters_secret_files_follow_the_same_rule(tmp_path):
    """cluster.auth_header_file: a token others could have written (or replaced with a FIFO)
    is refused in one line, never sent."""
    from gputui.commands.cluster import make_client
    from gputui.config import ClusterConfig

    shared = shared_dir(tmp_path / "shared")
    token = shared / "token"
    token.write_text("Bearer planted\n")
    with pytest.raises(ValueError) as info:
        make_client(ClusterConfig(auth_header_file=str(token)))
    assert str(info.value) == (
        f"cluster.auth_header_file: {token}: refused: directory {shared} is writable by others "
        "(chmod go-w it, or move the file)"
    )
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="a FIFO, not a regular file"):
        make_client(ClusterConfig(basic_auth_user="u", basic_auth_password_file=str(fifo)))
    mine = tmp_path / "mine"
    mine.write_text("Bearer mine\n")
    assert make_client(ClusterConfig(auth_header_file=str(mine))).credentials.header == "Bearer mine"
