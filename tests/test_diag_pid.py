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


def test_pid_1_gets_its_true_reason_in_one_line() -> None:
    """Issue 31: `gputui diag --pid 1` as root said "another user's process".  PID 1 is
    root's: as root it is refused for what it is (not Python, or its exe unreadable even to
    root); only for someone else is it another user's process."""
    r = gputui("diag", "--pid", "1")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith("gputui diag: --pid 1: ")
    if os.geteuid() == 0:
        assert "another user" not in r.stderr
        assert "not a Python" in r.stderr or "even as root" in r.stderr, r.stderr
    else:
        assert "another user's process" in r.stderr


def _refuse_exe(monkeypatch) -> None:
    """/proc/PID/exe refused, as the kernel refuses it for a process gputui may not trace."""
    from gputui.diag import target

    def refused(pid: int) -> str:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(target, "_exe", refused)


def test_an_unreadable_exe_of_your_own_process_is_not_another_users(children, monkeypatch) -> None:
    sleeper = _sleeper(children, argv=["/bin/sleep", "600"])
    python = _sleeper(children, ENV)
    _refuse_exe(monkeypatch)
    with pytest.raises(TargetError) as err:
        process_target(sleeper)
    assert str(err.value).startswith(f"--pid {sleeper}: not a Python process (its name is sleep)")
    assert "another user" not in str(err.value)
    with pytest.raises(TargetError) as err:
        process_target(python)
    text = str(err.value)
    even = "even as root" if os.geteuid() == 0 else "though it is yours"
    assert text.startswith(f"--pid {python}: /proc/{python}/exe cannot be read {even}")
    assert "another user" not in text


def test_a_kernel_thread_is_named_as_one() -> None:
    kthread = next((pid for pid in _pids() if _kernel_thread(pid)), None)
    if kthread is None:
        pytest.skip("no kernel thread in this PID namespace (a container)")
    with open(f"/proc/{kthread}/comm") as f:
        name = f.read().strip()
    r = gputui("diag", "--pid", str(kthread))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == f"gputui diag: --pid {kthread}: a kernel thread ({name}), not a Python process\n"


def test_a_kernel_thread_whose_exe_is_refused_is_still_named_as_one(monkeypatch) -> None:
    """For everyone but root the kernel refuses a kernel thread's exe: it is no user's process."""
    kthread = next((pid for pid in _pids() if _kernel_thread(pid)), None)
    if kthread is None:
        pytest.skip("no kernel thread in this PID namespace (a container)")
    _refuse_exe(monkeypatch)
    with pytest.raises(
        TargetError, match=rf"^--pid {kthread}: a kernel thread \(.*\), not a Python process$"
    ):
        process_target(kthread)


def _pids() -> list[int]:
    return sorted(int(e) for e in os.listdir("/proc") if e.isdigit())


def _kernel_thread(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    return bool(int(stat[stat.rfind(")") + 2 :].split()[6]) & 0x00200000)  # PF_KTHREAD


def test_a_zombie_is_named_as_one(children) -> None:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    children.append(p)
    deadline = time.monotonic() + 30
    while True:  # exited, not reaped: a zombie
        with open(f"/proc/{p.pid}/stat") as f:
            stat = f.read()
        if stat[stat.rfind(")") + 2] == "Z":
            break
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with pytest.raises(TargetError, match=rf"^--pid {p.pid}: it has exited \(a zombie"):
        process_target(p.pid)


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/bin/ls", "not a Python interpreter ({})"),
        ("/nonexistent/python3", "no such file"),
        ("/", "not a file"),
    ],
)
def test_diag_python_that_is_not_python_is_one_line(path: str, why: str) -> None:
    """Issue 31: `gputui diag --python /bin/ls` ran ls and blamed the driver ("the diagnosis
    crashed")."""
    r = gputui("diag", "--python", path)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == f"gputui diag: --python {path}: {why.format(os.path.realpath(path))}\n"
    r = gputui("stress", "--python", path)
    assert (
        r.returncode == 2
        and r.stderr == f"gputui stress: --python {path}: {why.format(os.path.realpath(path))}\n"
    )


def test_diag_python_not_executable_and_a_python_script_wrapper(tmp_path) -> None:
    plain = tmp_path / "python3"
    plain.write_text("#!/bin/sh\n")
    r = gputui("diag", "--python", str(plain))
    assert r.returncode == 2 and r.stderr == f"gputui diag: --python {plain}: not executable\n"
    from gputui.diag.target import python_target

    wrapper = tmp_path / "train-env"  # a script that starts Python: its first line says so
    wrapper.write_text(f"#!{sys.executable}\nimport sys\n")
    wrapper.chmod(0o755)
    assert python_target(str(wrapper), "--python").python == str(wrapper)
    shell = tmp_path / "launcher"
    shell.write_text("#!/bin/sh\nexec ls\n")
    shell.chmod(0o755)
    with pytest.raises(TargetError, match="not a Python interpreter"):
        python_target(str(shell), "--python")


def test_a_program_that_never_starts_the_diagnosis_is_not_python_not_a_crash() -> None:
    """Run anyway (the tab's typed path before it was checked, a PATH that changed): a child
    that exits without saying hello is named as no Python interpreter, not as a crash."""
    from gputui.diag.session import DiagnosisSession

    d = DiagnosisSession("/bin/ls").start().wait(60)
    child = next(f for f in d.findings if f.id == "diag.child")
    assert child.status == "FAIL" and child.cause == "bad-interpreter"
    assert child.summary.startswith("/bin/ls never started the diagnosis (it exited with status")
    assert "not a Python interpreter" in child.summary
    assert "crash" not in child.summary


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
