"""No diagnosis or stress process left behind, whatever way gputui leaves: the runner with a
grandchild that escapes the process group (setsid), a child that is never killed (reported),
hostile output (nested too deep, one endless line); `gputui diag` and `gputui stress` ended by
SIGTERM or SIGHUP; the TUI left with `q`, a hang-up or SIGTERM while a diagnosis runs.

Every process here is one this test started; each is checked gone by PID *and* start time."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from diag_support import ROOT, fake_torch, make_bare_venv

from gputui.diag import runner
from gputui.diag.runner import MAX_LINE_BYTES, MAX_STRAY_CHARS, ChildRun
from gputui.diag.session import DiagnosisSession

#: A child (or a torch import) that starts a daemon which calls setsid() (it leaves the
#: process group), writes "<its pid> <daemon pid>" to PIDS, waits for PIDS.go (the test has
#: read their start times), then does `then`.
ESCAPE = (
    "import os, subprocess, sys, time\n"
    "d = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True)\n"
    "open({pids!r} + '.tmp', 'w').write('%d %d' % (os.getpid(), d.pid))\n"
    "os.rename({pids!r} + '.tmp', {pids!r})\n"
    "while not os.path.exists({pids!r} + '.go'):\n"
    "    time.sleep(0.02)\n"
    "{then}\n"
)


def start_ticks(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else int(fields[19])


def wait_pids(path: Path, seconds: float = 60) -> list[tuple[int, int]]:
    """The PIDs the child wrote, each with its start time (read while it is alive)."""
    end = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < end, "the child never started its daemon"
        time.sleep(0.05)
    out = []
    for pid in map(int, path.read_text().split()):
        ticks = start_ticks(pid)
        assert ticks is not None
        out.append((pid, ticks))
    path.with_name(path.name + ".go").touch()
    return out


def alive(procs: list[tuple[int, int]]) -> list[int]:
    return [pid for pid, ticks in procs if start_ticks(pid) == ticks]


def gone_within(procs: list[tuple[int, int]], seconds: float) -> list[int]:
    """Those still alive after up to `seconds` (a bound for a kill to land, not a speed test)."""
    end = time.monotonic() + seconds
    while alive(procs) and time.monotonic() < end:
        for pid, _ in procs:  # orphans of ours, if any, are reaped here
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        time.sleep(0.05)
    return alive(procs)


def cleanup(procs: list[tuple[int, int]]) -> None:
    for pid in alive(procs):
        os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    return make_bare_venv(tmp_path_factory.mktemp("bare") / "venv")


# ---- the runner ----------------------------------------------------------------------------


def test_a_grandchild_that_calls_setsid_is_killed_when_the_child_ends(tmp_path):
    pids = tmp_path / "pids"
    script = tmp_path / "child.py"
    script.write_text(
        ESCAPE.format(pids=str(pids), then='print(\'{"v": 1, "event": "done", "seconds": 0}\')')
    )
    run = ChildRun(sys.executable, script).start()
    procs = wait_pids(pids)
    try:
        result = run.wait(60)
        assert result.returncode == 0
        assert result.leftover_pids == []
        assert gone_within(procs, 10) == []  # the daemon outside the group went too
    finally:
        cleanup(procs)


def test_cancel_kills_a_grandchild_outside_the_group(tmp_path):
    pids = tmp_path / "pids"
    script = tmp_path / "child.py"
    script.write_text(ESCAPE.format(pids=str(pids), then="time.sleep(600)"))
    run = ChildRun(sys.executable, script, timeout=120).start()
    procs = wait_pids(pids)
    try:
        run.cancel()
        result = run.wait(60)
        assert result.cancelled and result.leftover_pids == []
        assert gone_within(procs, 10) == []
    finally:
        cleanup(procs)


def test_a_survivor_is_reported_and_the_diagnosis_fails(bare_python, tmp_path, monkeypatch):
    """If a process of the run cannot be killed, the report says so (a FAIL, and its PID),
    instead of PASS with `leftover_pids: []`."""
    pids = tmp_path / "pids"
    site = fake_torch(tmp_path / "site", ESCAPE.format(pids=str(pids), then="raise ImportError('no')"))
    monkeypatch.setattr(runner, "kill_exact", lambda pid, ticks: False)  # the kill fails
    monkeypatch.setattr(runner, "KILL_VERIFY_S", 0.5)
    session = DiagnosisSession(bare_python, timeout=60, env_overrides={"PYTHONPATH": str(site)})
    procs: list[tuple[int, int]] = []
    try:
        session.start()
        procs = wait_pids(pids)
        d = session.wait(120)
        daemon = procs[1][0]
        assert daemon in d.child["leftover_pids"]
        left = [f for f in d.findings if f.id == "diag.leftover"]
        assert len(left) == 1 and left[0].status == "FAIL"
        assert str(daemon) in left[0].summary
        assert d.status == "FAIL"
    finally:
        cleanup(procs)


def test_a_line_nested_too_deep_is_stray_output_not_a_crash(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(
        "import json\n"
        "print('{\"v\": 1, \"event\": \"x\", \"a\": ' + '[' * 200000 + ']' * 200000 + '}')\n"
        "print(json.dumps({'v': 1, 'event': 'done', 'seconds': 0}))\n"
    )
    events, stray = [], []
    result = ChildRun(sys.executable, script, on_event=events.append, on_stray=stray.append).start().wait(60)
    assert [e["event"] for e in events] == ["done"]  # the reader lived on to the end
    assert len(stray) == 1 and len(stray[0]) == MAX_STRAY_CHARS
    assert result.returncode == 0
    assert result.dropped_output_bytes == 400_000 + len('{"v": 1, "event": "x", "a": }') - MAX_STRAY_CHARS


def test_an_endless_line_is_cut_and_what_was_dropped_is_counted(tmp_path):
    size = 8 * MAX_LINE_BYTES + 123
    script = tmp_path / "child.py"
    script.write_text(
        "import json, sys\n"
        f"sys.stdout.write('x' * {size} + '\\n')\n"
        f"sys.stderr.write('e' * {size} + '\\n')\n"
        "print(json.dumps({'v': 1, 'event': 'done', 'seconds': 0}))\n"
    )
    events, stray = [], []
    run = ChildRun(sys.executable, script, on_event=events.append, on_stray=stray.append).start()
    result = run.wait(60)
    assert [e["event"] for e in events] == ["done"]
    assert stray == ["x" * MAX_STRAY_CHARS]
    assert result.stderr_tail == "e" * MAX_STRAY_CHARS
    assert result.dropped_output_bytes == 2 * (size - MAX_STRAY_CHARS)
    assert result.to_json()["dropped_output_bytes"] == result.dropped_output_bytes


# ---- the commands --------------------------------------------------------------------------


def spawn_cli(args: list[str], site: Path, bare_python: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]))
    for key in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        env.pop(key, None)
    return subprocess.Popen(
        [sys.executable, "-m", "gputui", *args, "--python", bare_python],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # its own group: the test's signal reaches only it
    )


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["sigterm", "sighup"])
@pytest.mark.parametrize(
    "command", [["diag", "--json"], ["stress", "--json", "--monitor-interval", "0", "--test-cpu"]]
)
def test_the_command_killed_by_a_signal_kills_its_children(bare_python, tmp_path, sig, command):
    pids = tmp_path / "pids"
    site = fake_torch(tmp_path / "site", ESCAPE.format(pids=str(pids), then="time.sleep(600)"))
    proc = spawn_cli(command, site, bare_python)
    procs: list[tuple[int, int]] = []
    try:
        procs = wait_pids(pids)  # the child is importing torch, its daemon started
        os.kill(proc.pid, sig)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + sig, err
        assert gone_within(procs, 10) == [], "a child of the command outlived it"
        assert "killed" in err
        report = json.loads(out)
        child = report["child"]
        assert child["cancelled"] and child["leftover_pids"] == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        cleanup(procs)


# ---- the TUI -------------------------------------------------------------------------------


@pytest.mark.parametrize("way", ["q", "hangup", "sigterm"])
def test_leaving_the_tui_while_a_diagnosis_runs_kills_it(bare_python, tmp_path, way):
    """`g` starts a diagnosis whose torch import hangs after starting a daemon that left the
    process group; then gputui is left by `q`, by the terminal hanging up, or by SIGTERM."""
    from test_terminal import finish, read_for, spawn, wait_exit

    pids = tmp_path / "pids"
    site = fake_torch(tmp_path / "site", ESCAPE.format(pids=str(pids), then="time.sleep(600)"))
    venv = str(Path(bare_python).parents[1])
    pid, fd = spawn({"VIRTUAL_ENV": venv, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])})
    procs: list[tuple[int, int]] = []
    try:
        assert b"NVIDIA H200" in read_for(fd, 30, until=b"NVIDIA H200")
        os.write(fd, b"g")
        end = time.monotonic() + 60
        while not pids.exists() and time.monotonic() < end:
            read_for(fd, 0.2)  # keep the terminal read
        procs = wait_pids(pids, 1)
        assert alive(procs) == [p for p, _ in procs]
        if way == "q":
            os.write(fd, b"q")
        elif way == "hangup":
            os.close(fd)
        else:
            os.kill(pid, signal.SIGTERM)
        end = time.monotonic() + 30
        status = None
        while status is None and time.monotonic() < end:
            status = wait_exit(pid, 0.2)
            if status is None and way != "hangup":
                read_for(fd, 0.1)
        assert status is not None, f"gputui still running after {way}"
        assert gone_within(procs, 10) == [], f"left behind after {way}"
    finally:
        finish(pid, fd)
        cleanup(procs)


def test_a_daemon_with_a_clean_environment_is_found_through_its_parent(tmp_path):
    """A daemon that drops the environment (`env -i`) carries no run token: once its parent
    has died it can no longer be told apart from any orphan, so it must have been recorded
    while its parent lived (the descendant walk of the /proc scan)."""
    pids = tmp_path / "pids"
    script = tmp_path / "child.py"
    script.write_text(
        ESCAPE.replace("start_new_session=True)", "start_new_session=True, env=dict())").format(
            pids=str(pids), then='print(\'{"v": 1, "event": "done", "seconds": 0}\')'
        )
    )
    run = ChildRun(sys.executable, script).start()
    end = time.monotonic() + 60
    while not pids.exists() and time.monotonic() < end:
        time.sleep(0.05)
    daemon = int(pids.read_text().split()[1])
    while daemon not in run._tracked and time.monotonic() < end:  # seen by a scan
        time.sleep(0.05)
    procs = wait_pids(pids)  # lets the child end
    try:
        assert daemon in run._tracked, "the daemon was never recorded while its parent lived"
        result = run.wait(60)
        assert result.leftover_pids == []
        assert gone_within(procs, 10) == []
    finally:
        cleanup(procs)


def test_the_reader_never_holds_more_than_a_line_cap_of_one_line():
    """The bound is on what is read, not only on what is kept: an endless line is read in
    MAX_LINE_BYTES pieces and the rest skipped."""
    import io

    class Stream(io.BytesIO):
        biggest = 0

        def readline(self, size: int | None = -1) -> bytes:
            chunk = super().readline(size)
            Stream.biggest = max(Stream.biggest, len(chunk))
            return chunk

    run = ChildRun(sys.executable, "unused.py")
    stream = Stream(b"y" * (5 * MAX_LINE_BYTES) + b"\nnext\n")
    lines = list(run._lines(stream))
    assert [len(line) for line in lines] == [MAX_LINE_BYTES, 4]
    assert Stream.biggest <= MAX_LINE_BYTES
    assert run._dropped == 4 * MAX_LINE_BYTES


def _our_zombies() -> list[int]:
    """Children of this process that exited and were never waited for."""
    me = os.getpid()
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z" and int(fields[1]) == me:
            out.append(int(entry))
    return out


def test_after_a_diagnosis_a_daemonising_command_leaves_no_zombie(tmp_path):
    """gputui is the subreaper of a diagnosis only while one runs: afterwards, an alert
    command that daemonises (its child outlives it) hands that child to init as usual, not
    to gputui, where it would stay a zombie until gputui exits."""
    script = tmp_path / "child.py"
    script.write_text('print(\'{"v": 1, "event": "done", "seconds": 0}\')\n')
    result = ChildRun(sys.executable, script).start().wait(60)
    assert result.returncode == 0
    before = set(_our_zombies())
    # an alert command whose child outlives it by a moment
    subprocess.run(["sh", "-c", "(sleep 0.3 &) ; exit 0"], check=True, timeout=30)
    time.sleep(1.0)  # the orphan has exited by now: whose zombie is it?
    assert set(_our_zombies()) - before == set()
