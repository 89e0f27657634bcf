"""`gputui diag --pid PID`: the diagnosis of that process's interpreter with that process's
environment, against real child processes started with a distinctive environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import gputui

from gputui.diag.childenv import TAKEN_PREFIXES
from gputui.diag.target import TargetError, process_target


def _sleeper(children, env: dict[str, str] | None = None, argv=None) -> int:
    argv = argv or [sys.executable, "-c", "import time; time.sleep(600)"]
    p = subprocess.Popen(argv, env=env)
    children.append(p)
    want = "\0".join(argv).encode() + b"\0"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # until it has exec'd (a forked child is still us)
        try:
            with open(f"/proc/{p.pid}/cmdline", "rb") as f:
                if f.read() == want:
                    break
        except OSError:
            pass
        time.sleep(0.01)
    return p.pid


ENV = {
    "PATH": os.environ["PATH"],
    "CUDA_VISIBLE_DEVICES": "7,bogus",
    "NCCL_DEBUG": "INFO",
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    "AWS_SECRET_ACCESS_KEY": "not-for-the-report",
    "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
}


def test_target_takes_the_processs_interpreter_and_only_the_variables_it_cares_about(children) -> None:
    pid = _sleeper(children, ENV)
    t = process_target(pid)
    assert t.python == sys.executable and t.pid == pid  # the path it runs by (the test's own venv)
    assert t.env is not None and t.env["CUDA_VISIBLE_DEVICES"] == "7,bogus"
    assert t.env["NCCL_DEBUG"] == "INFO" and t.env["PATH"] == ENV["PATH"]
    assert "AWS_SECRET_ACCESS_KEY" not in t.env
    assert all(k.startswith(TAKEN_PREFIXES) or k in t.env for k in t.env)
    assert t.env_note is None


def test_diag_pid_uses_that_environment_and_says_so(children) -> None:
    pid = _sleeper(children, ENV)
    r = gputui("diag", "--pid", str(pid), "--json", "--no-nccl", timeout=180)
    assert r.returncode in (0, 1, 2), r.stderr
    report = json.loads(r.stdout)
    target = report["target"]
    assert target["pid"] == pid and target["interpreter"] == sys.executable
    assert target["environment"] == f"PID {pid}'s (/proc/{pid}/environ)"
    assert (
        "CUDA_VISIBLE_DEVICES" in target["variables"] and "AWS_SECRET_ACCESS_KEY" not in target["variables"]
    )
    # the diagnosis child saw it: the value is among the start variables the report lists
    assert report["child"]["start_variables"].get("CUDA_VISIBLE_DEVICES") == "7,bogus"
    text = gputui("diag", "--pid", str(pid), "--no-nccl", timeout=180).stdout
    head = text.splitlines()[:3]
    assert head[0] == f"gputui diag: {sys.executable}"
    assert head[1].startswith(f"  interpreter: PID {pid}'s") and f"/proc/{pid}/exe" in head[1]
    assert head[2].startswith(f"  environment: PID {pid}'s (/proc/{pid}/environ): ")


def test_a_non_python_pid_is_one_line(children) -> None:
    pid = _sleeper(children, argv=["/bin/sleep", "600"])
    r = gputui("diag", "--pid", str(pid))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == f"gputui diag: --pid {pid}: it runs /usr/bin/sleep, not a Python interpreter\n"


def test_a_pid_that_does_not_exist_is_one_line() -> None:
    r = gputui("diag", "--pid", "999999999")
    assert r.returncode == 2 and r.stderr == "gputui diag: --pid 999999999: no such process\n"


def test_another_users_process_when_not_permitted_is_one_line() -> None:
    """PID 1 belongs to root; here (a sandbox: root without ptrace rights over it, as any
    user over another user's process) its exe is refused."""
    try:
        os.readlink("/proc/1/exe")
    except PermissionError:
        pass
    else:
        pytest.skip("PID 1's exe is readable here: no process of another user to be refused")
    r = gputui("diag", "--pid", "1")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith("gputui diag: --pid 1: not permitted to read /proc/1/exe")


def test_unreadable_environ_says_why(children, monkeypatch) -> None:
    """The environment file refused (as for another user's process without ptrace rights):
    the report says gputui's own environment was used, and why."""
    pid = _sleeper(children, ENV)
    from gputui.diag import target

    def refuse(pid: int) -> bytes:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(target, "_read_environ", refuse)
    t = process_target(pid)
    assert t.env is None
    assert (
        t.env_note == f"/proc/{pid}/environ not readable (Permission denied): gputui's own environment used"
    )
    with pytest.raises(TargetError):
        process_target(-1)


def test_default_is_the_busiest_gpu_process_else_python3_on_path_else_gputuis_own(children) -> None:
    from gputui.diag.target import default_target

    pid = _sleeper(children, ENV)
    t = default_target(pid)
    assert t.pid == pid and t.python == sys.executable
    assert t.why.startswith(f"the busiest GPU process, PID {pid}'s") and f"/proc/{pid}/exe" in t.why
    assert t.env is not None and t.env["CUDA_VISIBLE_DEVICES"] == "7,bogus"
    sleeper = _sleeper(children, argv=["/bin/sleep", "600"])
    t = default_target(sleeper, path=os.path.dirname(sys.executable))
    assert t.python == os.path.join(os.path.dirname(sys.executable), "python3")
    assert t.why == "python3 on PATH (the one your shell would run)" and t.env is None
    assert t.notes == [
        f"the busiest GPU process not used: --pid {sleeper}: it runs /usr/bin/sleep, not a Python interpreter"
    ]
    t = default_target(None, path="")
    assert t.python == sys.executable and t.why == "gputui's own (no python3 on PATH)"
    assert t.notes == ["no GPU process of yours to diagnose (or NVML unavailable)"]
