"""`gputui diag --pid` and `g` on a process that runs in a virtual environment (issue 26 item
4, found live on an H100): the rank ran /opt/torch/.venv/bin/python3, a symlink to
/usr/bin/python3.12; /proc/PID/exe names the resolved binary, and diagnosing that (without the
venv's pyvenv.cfg next to it) said "torch is not installed".  The interpreter to run is the
process's argv[0] (absolute, relative to its cwd, or found on its PATH), or the python of its
VIRTUAL_ENV / CONDA_PREFIX, only when it is the same file as /proc/PID/exe.

Real venvs (`python -m venv --without-pip` of the test interpreter) and real child processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
from conftest import gputui

from gputui.diag.target import default_target, process_target
from gputui.diag.verdicts import load_schema

SLEEP = "import time; time.sleep(600)"
BASH = shutil.which("bash") or "/bin/bash"


def recording(out: Path) -> str:
    """A sleeper that first writes where Python itself found its environment (sys.prefix)."""
    return f"import sys, time; open({str(out)!r}, 'w').write(sys.prefix); time.sleep(600)"


def prefix_of(out: Path) -> str:
    deadline = time.monotonic() + 10
    while not (out.exists() and out.read_text()):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return out.read_text()


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("venvs") / "train-env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    assert (root / "bin" / "python").is_symlink() and (root / "pyvenv.cfg").is_file()
    return root


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [os.fsdecode(a) for a in f.read().split(b"\0")[:-1]]
    except OSError:
        return []


def start(children, argv: list[str], *, argv0: str | None = None, **kw) -> int:
    """`argv` started (with argv[0] replaced by `argv0`: bash's `exec -a`); its PID once the
    command line shows it has exec'd."""
    cmd = argv if argv0 is None else [BASH, "-c", 'exec -a "$0" "$@"', argv0, *argv]
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, **kw)
    children.append(p)
    want = [argv0 if argv0 is not None else argv[0], *argv[1:]]
    deadline = time.monotonic() + 10
    while _cmdline(p.pid) != want:
        assert time.monotonic() < deadline, f"{want} never started: {_cmdline(p.pid)}"
        time.sleep(0.01)
    return p.pid


def env(**extra: str) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], **extra}


# ---- the interpreter the process runs, found from its argv[0] --------------------------------


def test_an_absolute_argv0_in_a_venv_is_the_interpreter_and_the_why_says_so(children, venv) -> None:
    python = str(venv / "bin" / "python")
    pid = start(children, [python, "-c", SLEEP], env=env())
    exe = os.readlink(f"/proc/{pid}/exe")
    assert exe == os.path.realpath(python) and exe != python  # the kernel resolved the symlink
    t = process_target(pid)
    assert t.python == python
    assert t.why == (
        f"PID {pid}'s, its virtual environment {venv} (its argv[0], the same file as /proc/{pid}/exe: {exe})"
    )
    assert t.notes == []
    assert t.to_json()["interpreter"] == python


def test_a_bare_argv0_is_found_on_the_processs_path(children, venv, tmp_path) -> None:
    """`python train.py` typed in a shell whose PATH has the venv first (an activated venv, or
    a job script's PATH): argv[0] is just `python`; the PATH of its environment finds it (the
    first executable of that name, as the shell and Python search; a relative entry from the
    process's cwd).  Python itself found the same venv (its sys.prefix)."""
    path = f"{tmp_path}:{venv / 'bin'}:{os.environ['PATH']}"
    pid = start(children, ["python", "-c", recording(tmp_path / "a")], env=env(PATH=path))
    t = process_target(pid)
    assert t.python == str(venv / "bin" / "python") and prefix_of(tmp_path / "a") == str(venv)
    assert t.why.startswith(f"PID {pid}'s, its virtual environment {venv} (its argv[0], the same file")
    path = f"/nonexistent:bin:{os.environ['PATH']}"
    pid = start(children, ["python3", "-c", recording(tmp_path / "b")], env=env(PATH=path), cwd=venv)
    assert process_target(pid).python == str(venv / "bin" / "python3")
    assert prefix_of(tmp_path / "b") == str(venv)


def test_a_relative_argv0_is_read_against_the_processs_cwd(children, venv, tmp_path) -> None:
    pid = start(children, ["bin/python", "-c", recording(tmp_path / "a")], env=env(), cwd=venv)
    t = process_target(pid)
    assert t.python == str(venv / "bin" / "python") and prefix_of(tmp_path / "a") == str(venv)
    assert t.why.startswith(f"PID {pid}'s, its virtual environment {venv} (its argv[0]")
    pid = start(children, ["./python3", "-c", SLEEP], env=env(), cwd=venv / "bin")
    assert process_target(pid).python == str(venv / "bin" / "python3")


def test_the_system_interpreter_by_its_own_name_stays_itself(children) -> None:
    """No venv: argv[0] (a symlink like /usr/bin/python3) is run as given, and the why names no
    environment."""
    base = os.path.realpath(sys.executable)
    link = Path(base).parent / "python3"
    argv0 = str(link) if link.exists() and os.path.samefile(link, base) else base
    pid = start(children, [argv0, "-c", SLEEP], env=env())
    t = process_target(pid)
    assert t.python == argv0
    assert t.why == f"PID {pid}'s (its argv[0], the same file as /proc/{pid}/exe: {base})"


def test_the_venv_from_virtual_env_or_conda_prefix_when_argv0_does_not_tell(children, venv, tmp_path) -> None:
    """A launcher that sets argv[0] to a name of its own (`exec -a trainer`): the environment's
    VIRTUAL_ENV (or CONDA_PREFIX) holds a bin/python* that is the same file: that one."""
    python = str(venv / "bin" / "python")
    pid = start(children, [python, "-c", SLEEP], argv0="trainer", env=env(VIRTUAL_ENV=str(venv)))
    t = process_target(pid)
    assert os.path.dirname(t.python) == str(venv / "bin") and os.path.samefile(t.python, python)
    exe = os.path.realpath(python)
    assert t.why == (
        f"PID {pid}'s, its virtual environment {venv} "
        f"(in its VIRTUAL_ENV, the same file as /proc/{pid}/exe: {exe})"
    )
    assert t.notes == ["its argv[0] trainer is not found from its cwd or PATH: not used"]
    conda = tmp_path / "conda-env"
    (conda / "bin").mkdir(parents=True)
    (conda / "conda-meta").mkdir()
    (conda / "bin" / "python3.99").symlink_to(exe)
    pid = start(children, [python, "-c", SLEEP], argv0="trainer", env=env(CONDA_PREFIX=str(conda)))
    t = process_target(pid)
    assert t.python == str(conda / "bin" / "python3.99")
    assert t.why == (
        f"PID {pid}'s, its conda environment {conda} "
        f"(in its CONDA_PREFIX, the same file as /proc/{pid}/exe: {exe})"
    )


# ---- never a program other than the one the process runs -----------------------------------


def test_a_hostile_argv0_naming_another_program_is_never_run(children, venv, tmp_path) -> None:
    """A process can put anything in argv[0]: a path to another program (absolute, on its
    PATH, or in its cwd) is refused and /proc/PID/exe used, and the note says why."""
    python = str(venv / "bin" / "python")
    exe = os.path.realpath(python)
    evil = tmp_path / "bin" / "python"
    evil.parent.mkdir()
    evil.write_text("#!/bin/sh\ntouch /tmp/pwned\n")
    evil.chmod(0o755)
    sleep = shutil.which("sleep")
    assert sleep is not None
    for argv0, kw in (
        (sleep, {"env": env()}),
        (str(evil), {"env": env()}),
        ("python", {"env": env(PATH=f"{evil.parent}:{venv / 'bin'}")}),  # the first on PATH is it
        ("bin/python", {"env": env(), "cwd": tmp_path}),
    ):
        pid = start(children, [python, "-c", SLEEP], argv0=argv0, **kw)
        t = process_target(pid)
        assert t.python == exe, argv0
        assert t.why == f"PID {pid}'s (/proc/{pid}/exe)"
        assert t.notes == [f"its argv[0] {argv0} is not the same file as /proc/{pid}/exe: not used"]


def test_a_virtual_env_whose_python_is_another_program_is_not_used(children, venv, tmp_path) -> None:
    fake = tmp_path / "fake-env"
    (fake / "bin").mkdir(parents=True)
    (fake / "bin" / "python").symlink_to(shutil.which("sleep") or "/bin/sleep")
    python = str(venv / "bin" / "python")
    pid = start(children, [python, "-c", SLEEP], argv0="trainer", env=env(VIRTUAL_ENV=str(fake)))
    t = process_target(pid)
    assert t.python == os.path.realpath(python) and t.why == f"PID {pid}'s (/proc/{pid}/exe)"


def test_another_mount_namespace_keeps_the_exe_and_says_so(children, venv) -> None:
    """In a container the process's paths are its root's, not ours: argv[0] is not resolved
    from here; the exe's path is used as before, and a note says why."""
    unshare = shutil.which("unshare")
    if (
        unshare is None
        or subprocess.run([unshare, "-Urm", "true"], check=False, capture_output=True).returncode
    ):
        pytest.skip("no unprivileged mount namespace here (unshare -Urm)")
    python = str(venv / "bin" / "python")
    p = subprocess.Popen([unshare, "-Urm", python, "-c", SLEEP], stdin=subprocess.DEVNULL, env=env())
    children.append(p)
    deadline = time.monotonic() + 10
    while _cmdline(p.pid) != [python, "-c", SLEEP]:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    t = process_target(p.pid)
    assert t.python == os.path.realpath(python) and t.why == f"PID {p.pid}'s (/proc/{p.pid}/exe)"
    assert t.notes == [
        f"PID {p.pid} is in another mount namespace or root (a container): its argv[0] is not "
        f"resolved from here; /proc/{p.pid}/exe's path used"
    ]


# ---- the report and the default ---------------------------------------------------------------


def test_diag_pid_runs_the_venvs_python_and_the_report_says_so(children, venv) -> None:
    python = str(venv / "bin" / "python3")
    pid = start(children, [python, "-c", SLEEP], env=env(CUDA_VISIBLE_DEVICES="venv-26"))
    r = gputui("diag", "--pid", str(pid), "--json", "--no-nccl", timeout=180)
    assert r.returncode in (0, 1, 2), r.stderr
    report = json.loads(r.stdout)
    assert report["target"]["interpreter"] == python
    assert report["child"]["python"] == python
    assert report["python"]["prefix"] == str(venv)  # the child's own sys.prefix: the venv
    text = gputui("diag", "--pid", str(pid), "--no-nccl", timeout=180).stdout
    head = text.splitlines()[:2]
    assert head[0] == f"gputui diag: {python}"
    assert head[1] == (
        f"  interpreter: PID {pid}'s, its virtual environment {venv} (its argv[0], the same file as "
        f"/proc/{pid}/exe: {os.path.realpath(python)})"
    )
    # the diagnosis child ran in the venv: the system check names it
    assert f"(venv) at {python}" in text
    # the Markdown report (for a bug report) says the same at its top
    md = gputui("diag", "--pid", str(pid), "--no-nccl", "--markdown", timeout=180).stdout.splitlines()
    assert md[3] == head[1].replace("  interpreter:", "- interpreter:")
    assert md[4].startswith(f"- environment: PID {pid}'s (/proc/{pid}/environ): ")
    assert "CUDA_VISIBLE_DEVICES" in md[4]


def test_the_busiest_process_in_a_venv_keeps_its_notes(children, venv) -> None:
    python = str(venv / "bin" / "python")
    pid = start(children, [python, "-c", SLEEP], argv0="/bin/true", env=env())
    t = default_target(pid)
    assert t.python == os.path.realpath(python)
    assert t.why == f"the busiest GPU process, PID {pid}'s (/proc/{pid}/exe)"
    assert t.notes == [f"its argv[0] /bin/true is not the same file as /proc/{pid}/exe: not used"]
    pid = start(children, [python, "-c", SLEEP], env=env())
    t = default_target(pid)
    assert t.python == python
    assert t.why.startswith(
        f"the busiest GPU process, PID {pid}'s, its virtual environment {venv} (its argv[0]"
    )


def test_g_on_a_process_in_a_venv_diagnoses_the_venvs_python_and_the_header_says_so(
    children, venv, tmp_path
) -> None:
    """`g` on the selected process (a real recording's rows put on a real child in a venv);
    `w` saves a report whose top says the same."""
    from conftest import FIXTURES, FROZEN, run_to_tick, screen_lines, wait_for
    from gpu_children import ReplayOntoChildren

    from gputui.ui.app import GpuTuiApp

    python = str(venv / "bin" / "python3")
    pid = start(children, [python, "-c", SLEEP], env=env(CUDA_VISIBLE_DEVICES="venv-g"))
    spin_pid = 705  # the spinning process of the recording, listed from tick 12 on

    async def go():
        source = ReplayOntoChildren(FIXTURES / "h100-health" / "spin.jsonl.gz", {spin_pid: pid})
        app = GpuTuiApp(source=source, interval=FROZEN, watch_terminal=False)
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 12)
            await pilot.press("tab")  # into the Overview's process list
            table = app.query_one("#overview").processes.table
            while table.current is None or table.current.proc.pid != pid:
                before = table.cursor
                await pilot.press("down")
                assert table.cursor != before, "the child is not in the list"
            await pilot.press("g")
            pane = app.query_one("#diagnostics")
            await wait_for(pilot, lambda: getattr(pane, "target", None) is not None)
            assert pane.python == python and pane.target.env["CUDA_VISIBLE_DEVICES"] == "venv-g"
            want = f"interpreter: PID {pid}'s, its virtual environment {venv} (its argv[0]"
            await wait_for(pilot, lambda: want in "\n".join(screen_lines(app)))
            await wait_for(pilot, lambda: not pane.running, timeout=60)
            pane.report_dir = tmp_path
            await pilot.press("w")
            await wait_for(pilot, lambda: pane.saved is not None)
            (md,) = tmp_path.glob("gputui-diag-*.md")
            assert f"- interpreter: {want[len('interpreter: ') :]}" in md.read_text()
            (js,) = tmp_path.glob("gputui-diag-*.json")
            target = json.loads(js.read_text())["target"]
            assert target["pid"] == pid and target["interpreter"] == python
            jsonschema.validate(json.loads(js.read_text()), load_schema())

    asyncio.run(go())


def test_another_venv_on_the_same_base_binary_is_another_interpreter(venv) -> None:
    """Two virtual environments share their base binary (their bin/python are links to it):
    they are still two interpreters, so gputui's own PYTHONHOME and PYTHONEXECUTABLE (which
    point at its Python) are dropped from the diagnosed one's environment."""
    from gputui.diag.childenv import child_env, same_interpreter

    python = str(venv / "bin" / "python")
    assert os.path.samefile(os.path.realpath(python), os.path.realpath(sys.executable))  # one binary
    assert not same_interpreter(python)
    assert same_interpreter(sys.executable)
    env, changes = child_env(
        python, base={"PYTHONHOME": "/gputui/home", "PYTHONEXECUTABLE": "/x", "PATH": "/usr/bin"}
    )
    assert "PYTHONHOME" not in env and "PYTHONEXECUTABLE" not in env and changes["PYTHONHOME"] is None
