"""One rank reader (issue 31, the house): the process table (`GpuProcess.rank`, the job view)
and `gputui stacks` name the same rank for one process, by the one rule of
gputui/telemetry/host/rank.py; the command line's `--rank N` reads digits by the same rule.

Real processes where an environment can be made so (a duplicated variable needs a raw
execve: Python's own `os.execve` takes a mapping), a /proc-shaped directory for the bounds."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from gpu_children import stop

from gputui.stacks.dump import dump_many
from gputui.telemetry.health import rank_number
from gputui.telemetry.host import rank as rank_module
from gputui.telemetry.host.processes import ProcessInspector
from gputui.telemetry.model import GpuProcess

# A child that replaces itself with `sleep` under exactly the environment block given on
# its command line (NUL-free items, in order, duplicates kept), then says it is ready.
EXEC_RAW = textwrap.dedent(
    """
    import ctypes, os, shutil, sys
    env = [a.encode() for a in sys.argv[1:]]
    sleep = shutil.which("sleep").encode()
    argv = (ctypes.c_char_p * 3)(sleep, b"600", None)
    envp = (ctypes.c_char_p * (len(env) + 1))(*env, None)
    os.write(1, b"ready\\n")
    ctypes.CDLL(None, use_errno=True).execve(sleep, argv, envp)
    sys.exit("execve failed")
    """
)


def raw_env_process(*items: str) -> subprocess.Popen[bytes]:
    child = subprocess.Popen(
        [sys.executable, "-c", EXEC_RAW, *items], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE
    )
    assert child.stdout is not None and child.stdout.readline() == b"ready\n"
    # the exec follows the line: wait until /proc shows sleep with its environment (during
    # an exec, comm changes before the new environment is in place)
    comm, environ = Path(f"/proc/{child.pid}/comm"), Path(f"/proc/{child.pid}/environ")
    while not (comm.read_text().strip() == "sleep" and environ.read_bytes()):
        assert child.poll() is None, "the child ended before its exec"
        time.sleep(0.001)
    return child


def table_rank(pid: int) -> int | None:
    """The rank the process table shows (the job view and the verdicts read the same)."""
    (p,) = ProcessInspector(verify_gpu_files=False).enrich([GpuProcess(gpu_index=0, pid=pid)])
    return p.rank


def stacks_rank(pid: int) -> int | None:
    """The rank `gputui stacks` names (read before py-spy runs, so no py-spy is needed)."""
    return dump_many([pid], py_spy=None)[0].rank


CASES = [
    # (environment block, the rank): each row is a way the two old readers disagreed
    (("PMIX_RANK=3",), 3),  # PMIx (Open MPI 5, srun --mpi=pmix): the process table had none
    (("RANK=1", "RANK=2"), 1),  # set twice: getenv and os.environ give the first
    (("RANK=1234567", "SLURM_PROCID=4"), 4),  # 7 digits is not a rank: the next variable
    (("RANK=999999",), 999999),  # 6 digits is
    (("RANK=", "PMI_RANK=5"), 5),  # empty
    (("RANK=+1", "OMPI_COMM_WORLD_RANK=2"), 2),  # a sign is not a digit
    (("RANK=\uff15",), None),  # fullwidth 5
    (("SLURM_PROCID=7", "RANK=0"), 0),  # RANK first, wherever it stands
    (("RANKS=3", "XRANK=4"), None),  # names are exact
]


@pytest.mark.parametrize(("env", "want"), CASES)
def test_the_process_table_and_stacks_name_the_same_rank_for_a_real_process(env, want) -> None:
    child = raw_env_process(*env)
    try:
        assert Path(f"/proc/{child.pid}/environ").read_bytes().split(b"\0")[: len(env)] == [
            e.encode() for e in env
        ]
        assert (table_rank(child.pid), stacks_rank(child.pid)) == (want, want)
    finally:
        stop([child])


def test_there_is_one_reader() -> None:
    from gputui.stacks import ranks
    from gputui.telemetry.host import processes

    assert processes.environ_rank is rank_module.environ_rank
    assert ranks.environ_rank is rank_module.environ_rank
    import gputui.stacks.procfs as stacks_procfs

    assert not hasattr(stacks_procfs, "read_rank") and not hasattr(stacks_procfs, "RANK_VARIABLES")


def test_an_environment_cut_at_the_read_limit_never_gives_half_a_number(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(rank_module, "ENVIRON_LIMIT", 64)
    d = tmp_path / "42"
    d.mkdir()
    head = b"A=" + b"x" * 50 + b"\0"
    (d / "environ").write_bytes(head + b"RANK=123456\0")  # the read stops after "RANK=1234"
    assert rank_module.environ_rank(42, proc=str(tmp_path)) is None
    (d / "environ").write_bytes(b"RANK=7\0" + head + b"RANK=123456\0")
    assert rank_module.environ_rank(42, proc=str(tmp_path)) == 7
    assert rank_module.environ_rank(43, proc=str(tmp_path)) is None  # no such process


@pytest.mark.parametrize(
    "value", ["0", "7", "999999", "1000000", "", "+1", "-1", " 1", "1 ", "\uff15", "\u00b2", "1e3", "0x1"]
)
def test_the_command_line_reads_digits_by_the_environments_rule(value) -> None:
    """health.rank_number (`--rank N`) and the environment agree on what a rank is."""
    assert rank_number(["train.py", "--rank", value]) == rank_module.rank_value(value)
    assert rank_number(["train.py", f"--rank={value}"]) == rank_module.rank_value(value)
    assert rank_module.rank_from_environ(f"RANK={value}".encode()) == rank_module.rank_value(value)
