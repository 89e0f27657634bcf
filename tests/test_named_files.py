"""Files named on the command line: `gputui cluster --targets-file PATH`, recordings read
with `--replay PATH` and written with `gputui record OUT`.  Bad input is one line on stderr
(or one exception's line), never a traceback, never a hang, never unbounded memory.

The targets file is config-like (which hosts to scrape, and so where credentials go): it is
read under gputui/safefile.py's rule.  A recording is data the user chose: any owner, a
symbolic link followed, but only a regular file, and bounded lines."""

from __future__ import annotations

import gzip
import os
import time
from pathlib import Path

import pytest
from conftest import H200_X2, fresh_python, gputui

from gputui.cluster.targets import MAX_TARGETS_FILE_BYTES, read_targets_file
from gputui.safefile import Refused
from gputui.telemetry import recording
from gputui.telemetry.recording import RecordingError, RecordingWriter, ReplaySource, read_recording

TF = "gputui cluster: --targets-file: "
"""How `gputui cluster` begins a line about the targets file."""
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")


def one_stderr_line(r) -> str:
    """The one line a failed command said (exit status 2, no traceback)."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


def cluster(*args: str, timeout: float = 30):
    """`gputui cluster ...` as a user runs it (no terminal: a good source says so, status 2)."""
    env = {k: v for k, v in os.environ.items() if k != "GPUTUI_ALLOW_NOTTY"}
    env["XDG_CONFIG_HOME"] = "/nonexistent/gputui-test"  # no config file: the defaults
    return gputui("cluster", *args, timeout=timeout, env=env)


# ----------------------------------------------------------------------------------------
# gputui cluster --targets-file
# ----------------------------------------------------------------------------------------


def test_a_targets_file_with_comments_and_blank_lines_is_read(tmp_path):
    nodes = tmp_path / "nodes.txt"
    nodes.write_text("# GPU nodes\n\nn1:9400\n   \nhttps://n2:9400/metrics  # TLS\n# n3:9400\n")
    assert read_targets_file(str(nodes)) == ["n1:9400", "https://n2:9400/metrics"]
    # and through the command line: past the file, to the terminal check
    assert one_stderr_line(cluster("--targets-file", str(nodes))) == "gputui cluster: needs a terminal"


def test_a_fifo_as_the_targets_file_is_refused_at_once(tmp_path):
    """Before: `gputui cluster` hung in open(), waiting for a writer."""
    fifo = tmp_path / "nodes.txt"
    os.mkfifo(fifo)
    started = time.monotonic()
    r = cluster("--targets-file", str(fifo), timeout=20)
    assert time.monotonic() - started < 15
    assert one_stderr_line(r) == f"{TF}{fifo}: refused: a FIFO, not a regular file"


def test_dev_zero_as_the_targets_file_is_refused_without_reading_it():
    """Before: read until memory ran out (a line of zeros never ends)."""
    r = cluster("--targets-file", "/dev/zero")
    assert one_stderr_line(r) == f"{TF}/dev/zero: refused: a character device, not a regular file"


def test_a_directory_as_the_targets_file_is_refused(tmp_path):
    r = cluster("--targets-file", str(tmp_path))
    assert one_stderr_line(r) == f"{TF}{tmp_path}: refused: a directory, not a regular file"


def test_a_symbolic_link_as_the_targets_file_is_not_followed(tmp_path):
    real = tmp_path / "real.txt"
    real.write_text("n1:9400\n")
    link = tmp_path / "nodes.txt"
    link.symlink_to(real)
    with pytest.raises(Refused, match="a symbolic link, not a regular file"):
        read_targets_file(str(link))
    r = cluster("--targets-file", str(link))
    assert one_stderr_line(r) == f"{TF}{link}: refused: a symbolic link, not a regular file"


@pytest.mark.parametrize("mode", [0o620, 0o602], ids=["group", "others"])
def test_a_targets_file_others_could_write_is_refused(tmp_path, mode):
    """Who may change the targets may send the cluster's credentials to a host of theirs."""
    nodes = tmp_path / "nodes.txt"
    nodes.write_text("n1:9400\n")
    if mode & 0o020:  # a user-private group may write (safefile's exception): use another
        if os.geteuid() != 0:
            pytest.skip("giving a file to another group needs root")
        os.chown(nodes, -1, 65534)
    os.chmod(nodes, mode)
    r = cluster("--targets-file", str(nodes))
    line = one_stderr_line(r)
    assert line.startswith(f"{TF}{nodes}: refused: writable by "), line
    assert line.endswith("(chmod go-w it)")


@as_root
def test_a_targets_file_of_another_user_is_refused(tmp_path):
    nodes = tmp_path / "nodes.txt"
    nodes.write_text("n1:9400\n")
    os.chown(nodes, 65534, 65534)
    line = one_stderr_line(cluster("--targets-file", str(nodes)))
    assert "refused: owned by another user (uid 65534)" in line


def test_a_targets_file_over_the_bound_is_refused(tmp_path):
    nodes = tmp_path / "nodes.txt"
    with nodes.open("wb") as f:
        f.truncate(MAX_TARGETS_FILE_BYTES + 1)  # sparse: no disk
    r = cluster("--targets-file", str(nodes))
    assert one_stderr_line(r) == (f"{TF}{nodes}: refused: larger than {MAX_TARGETS_FILE_BYTES} bytes")


def test_a_targets_file_of_the_bound_is_read(tmp_path):
    nodes = tmp_path / "nodes.txt"
    line = b"n1:9400\n"
    body = b"#" * (MAX_TARGETS_FILE_BYTES - len(line) - 1) + b"\n" + line
    assert len(body) == MAX_TARGETS_FILE_BYTES
    nodes.write_bytes(body)
    assert read_targets_file(str(nodes)) == ["n1:9400"]


def test_a_targets_file_that_is_not_utf8_names_the_line(tmp_path):
    """Before: a UnicodeDecodeError traceback."""
    nodes = tmp_path / "nodes.txt"
    nodes.write_bytes(b"n1:9400\nn2:9400\nn\xff3:9400\n")
    r = cluster("--targets-file", str(nodes))
    assert one_stderr_line(r) == f"{TF}{nodes}: refused: not UTF-8 text (line 3, byte 17)"


def test_a_bad_target_names_its_line(tmp_path):
    nodes = tmp_path / "nodes.txt"
    nodes.write_text("# nodes\nn1:9400\nftp://n2:9400\n")
    r = cluster("--targets-file", str(nodes))
    assert one_stderr_line(r) == (
        f"{TF}{nodes}:3: ftp://n2:9400/metrics: expected an http:// or https:// URL"
    )


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("n1:port\n", "bad port"),
        ("http://\n", "no host in the URL"),
        ("http://u:secret@n1:9400\n", "credentials in a URL"),
        ("n1:9400 n2:9400\n", "spaces, controls or non-ASCII characters"),
        ("n1:9400/\x1b]2;PWNED\x07\n", "spaces, controls or non-ASCII characters"),
        ("http://u:secret@\x1b]2;X\x07n1:9400\n", "not a URL (Invalid IPv6 URL)"),
    ],
    ids=["port", "no-host", "credentials", "two-on-a-line", "escape", "escape-credentials"],
)
def test_each_bad_target_is_one_clean_line_with_its_line_number(tmp_path, text, why):
    nodes = tmp_path / "nodes.txt"
    nodes.write_text("n0:9400\n" + text)
    line = one_stderr_line(cluster("--targets-file", str(nodes)))
    assert line.startswith(f"{TF}{nodes}:2: "), line
    assert why in line
    assert "secret" not in line and "\x1b" not in line and "\x07" not in line


def test_a_missing_targets_file_is_one_line(tmp_path):
    r = cluster("--targets-file", str(tmp_path / "absent.txt"))
    assert one_stderr_line(r) == (f"{TF}cannot read {tmp_path / 'absent.txt'}: No such file or directory")


# ----------------------------------------------------------------------------------------
# recordings: reading
# ----------------------------------------------------------------------------------------


def test_a_fifo_as_a_recording_is_refused_at_once(tmp_path):
    """Before: `gputui watch --replay FIFO` hung in open(), waiting for a writer."""
    fifo = tmp_path / "run.jsonl"
    os.mkfifo(fifo)
    started = time.monotonic()
    r = gputui("watch", "--replay", str(fifo), "--interval", "0.001", timeout=20)
    assert time.monotonic() - started < 15
    assert one_stderr_line(r) == f"gputui watch: {fifo}: a FIFO, not a regular file"
    with pytest.raises(RecordingError, match="a FIFO, not a regular file"):
        read_recording(fifo)


@pytest.mark.parametrize("command", [("snapshot",), ("watch",), ("export", "--listen", "127.0.0.1:0")])
def test_dev_zero_as_a_recording_is_refused_without_reading_it(command):
    """Before: 8 MiB of zeros read, then "line longer than 8 MiB"; a terminal or a tape
    device could block.  Nothing that is not a regular file is opened."""
    r = gputui(*command, "--replay", "/dev/zero", timeout=30)
    line = one_stderr_line(r)
    assert line.endswith(": /dev/zero: a character device, not a regular file"), line


def test_the_monitor_refuses_a_fifo_recording_before_needing_a_terminal(tmp_path):
    fifo = tmp_path / "run.jsonl"
    os.mkfifo(fifo)
    r = gputui("--replay", str(fifo), timeout=20)
    assert "a FIFO, not a regular file" in one_stderr_line(r)


def test_a_directory_as_a_recording_is_refused(tmp_path):
    with pytest.raises(RecordingError) as info:
        ReplaySource(tmp_path)
    assert str(info.value) == f"{tmp_path}: a directory, not a regular file"


def test_a_link_to_a_recording_is_followed_and_another_users_recording_is_read(tmp_path):
    """A recording is data the user chose: a link to a shared one is fine, any owner."""
    link = tmp_path / "latest.jsonl.gz"
    link.symlink_to(H200_X2)
    _, ticks = read_recording(link)
    assert len(ticks) == len(read_recording(H200_X2)[1])
    dangling = tmp_path / "gone.jsonl"
    dangling.symlink_to(tmp_path / "nothing")
    with pytest.raises(RecordingError, match="No such file or directory"):
        read_recording(dangling)


@as_root
def test_a_recording_owned_by_another_user_and_group_writable_is_read(tmp_path):
    copy = tmp_path / "shared.jsonl.gz"
    copy.write_bytes(H200_X2.read_bytes())
    os.chown(copy, 65534, 65534)
    os.chmod(copy, 0o666)
    assert read_recording(copy)[1]


def test_a_recording_that_decompresses_past_the_bound_is_refused_with_its_line(tmp_path, monkeypatch):
    """A gzip bomb of many short lines: each line is under the line bound, the whole is not.
    The bound counts every character read (blank lines too: millions of them are time)."""
    header = gzip.decompress(H200_X2.read_bytes()).split(b"\n", 2)
    path = tmp_path / "bomb.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(header[0] + b"\n" + header[1] + b"\n")
        f.write(b"\n" * 3_000_000)
    monkeypatch.setattr(recording, "MAX_TOTAL_CHARS", 2_000_000)
    with pytest.raises(RecordingError) as info:
        read_recording(path)
    message = str(info.value)
    assert message.startswith(f"{path}:")
    line = int(message.split(":")[1])
    assert 1_000_000 < line < 2_000_010, message
    assert "larger than 1 MiB uncompressed" in message


def test_the_total_bound_is_far_above_a_real_recording():
    assert recording.MAX_TOTAL_CHARS >= 1 << 30
    assert recording.MAX_TOTAL_CHARS > 100 * recording.MAX_LINE_CHARS


# ----------------------------------------------------------------------------------------
# recordings: writing
# ----------------------------------------------------------------------------------------


def machine():
    header, _ = read_recording(H200_X2)
    return header.machine


@pytest.mark.parametrize("name", ["out.jsonl", "out.jsonl.gz"])
def test_a_link_planted_at_the_output_is_never_followed(tmp_path, name):
    """Someone else's link in a shared directory: writing through it would create or
    truncate a file of theirs choosing, as you.  Before: followed (open(p, "w"))."""
    victim = tmp_path / "victim"
    link = tmp_path / name
    link.symlink_to(victim)  # dangling: `record` saw "does not exist" and wrote through it
    with pytest.raises(Refused, match="a symbolic link"):
        RecordingWriter(link, machine(), 1.0, replace=False)
    with pytest.raises(Refused, match="a symbolic link"):
        RecordingWriter(link, machine(), 1.0, replace=True)
    assert not victim.exists()
    victim.write_text("precious\n")
    for replace in (False, True):
        with pytest.raises(Refused, match="a symbolic link"):
            RecordingWriter(link, machine(), 1.0, replace=replace)
    assert victim.read_text() == "precious\n"


def test_an_existing_file_is_replaced_only_when_asked(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_text("old\n")
    with pytest.raises(FileExistsError):
        RecordingWriter(out, machine(), 1.0, replace=False)
    assert out.read_text() == "old\n"
    with RecordingWriter(out, machine(), 1.0, replace=True):
        pass
    assert out.read_text().startswith('{"format":"gputui-recording"')


def test_replace_never_writes_through_a_hard_link(tmp_path):
    """`record --force OUT` where OUT is a hard link planted in a shared directory (another
    name of a file its planter chose): truncating it in place would overwrite that file,
    as you (as root, any file the kernel let them link).  Refused, the file untouched; and
    checked on the opened descriptor, before anything is truncated."""
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    out = tmp_path / "out.jsonl.gz"
    os.link(victim, out)
    for replace in (True, False):
        with pytest.raises((Refused, FileExistsError)) as caught:
            RecordingWriter(out, machine(), 1.0, replace=replace)
        if replace:
            assert caught.type is Refused and "hard link" in str(caught.value)
    assert victim.read_text() == "precious\n"
    os.unlink(out)  # the lone name of its own file: replaced as asked
    out.write_text("old\n")
    with RecordingWriter(out, machine(), 1.0, replace=True):
        pass
    assert out.read_bytes()[:2] == b"\x1f\x8b" and victim.read_text() == "precious\n"


def test_a_fifo_or_device_at_the_output_is_refused_without_opening_it(tmp_path):
    fifo = tmp_path / "out.jsonl"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(Refused, match="a FIFO, not a regular file"):
        RecordingWriter(fifo, machine(), 1.0, replace=True)
    with pytest.raises(Refused, match="a character device, not a regular file"):
        RecordingWriter("/dev/null", machine(), 1.0, replace=True)
    assert time.monotonic() - started < 5


def test_a_new_recording_takes_the_umasks_mode_as_before(tmp_path):
    """The mode is the umask's, as before (a recording is meant to be shared)."""
    out = tmp_path / "out.jsonl.gz"
    old = os.umask(0o022)
    try:
        with RecordingWriter(out, machine(), 1.0, replace=False) as w:
            w.write(read_recording(H200_X2)[1][0])
    finally:
        os.umask(old)
    assert out.stat().st_mode & 0o777 == 0o644
    _, ticks = read_recording(out)
    assert len(ticks) == 1
    # the gzip header names the file, as GzipFile(path) did: the fixtures' bytes stay the same
    assert b"out.jsonl" in out.read_bytes()[:40]


def test_record_refuses_a_planted_link_before_touching_the_gpu(tmp_path):
    """`gputui record OUT`: a dangling link at OUT "exists" (it did not: exists() follows)."""
    victim = tmp_path / "victim"
    link = tmp_path / "out.jsonl"
    link.symlink_to(victim)
    r = gputui("record", str(link), "--duration", "1")
    assert one_stderr_line(r) == f"gputui record: {link} exists; pass --force to overwrite it"
    assert not victim.exists()


# ----------------------------------------------------------------------------------------
# the cluster's TLS files ([cluster] tls_ca_file, tls_client_cert, tls_client_key)
# ----------------------------------------------------------------------------------------

TLS_CHECK = """
import sys
from gputui.commands.cluster import make_client
from gputui.config import ClusterConfig
try:
    make_client(ClusterConfig(**{sys.argv[1]: sys.argv[2]}))
except ValueError as exc:
    print(exc)
"""


@pytest.mark.parametrize("field", ["tls_ca_file", "tls_client_cert"])
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "others-writable"])
def test_a_tls_file_that_is_not_a_safe_regular_file_is_refused_at_once(tmp_path, field, kind):
    """OpenSSL opened these itself: a FIFO hung `gputui cluster`, /dev/zero was read
    without end, and a CA file others could write let them choose whom you trust."""
    if kind == "fifo":
        path = str(tmp_path / "ca.pem")
        os.mkfifo(path)
        why = "a FIFO, not a regular file"
    elif kind == "dev-zero":
        path, why = "/dev/zero", "a character device, not a regular file"
    else:
        path = str(tmp_path / "ca.pem")
        Path(path).write_text("-----BEGIN CERTIFICATE-----\n")
        os.chmod(path, 0o646)
        why = "writable by others"
    started = time.monotonic()
    r = fresh_python(TLS_CHECK, field, path, timeout=20)
    assert time.monotonic() - started < 15
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert r.stdout.strip().startswith(f"cluster: TLS settings: {path}: refused: {why}"), r.stdout


def test_a_command_line_target_with_credentials_and_controls_is_one_clean_line():
    """The credentials message names the target too: its controls are escaped like every
    other message's (a terminal must never receive a target's escape sequences)."""
    r = cluster("http://u:secret@n1\x07\x1bcx:9400/")
    line = one_stderr_line(r)
    assert "credentials in a URL" in line or "URL" in line, line
    assert "secret" not in line and "\x1b" not in line and "\x07" not in line
