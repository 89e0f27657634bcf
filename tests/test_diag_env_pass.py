"""Which variables reach a diagnosis child (issue 31: `HF_TOKEN` was passed into the diagnosis
though the docs say tokens stay out).

From a process's environment (`gputui diag --pid`) only the variables that decide how CUDA,
torch and NCCL start and where libraries come from pass (gputui/diag/childenv.py `passes`),
read as the process itself reads them (the first of a name given twice, as getenv does; an
entry cut at the read limit is not taken); a credential never reaches any child, whatever
environment it starts from.  Pinned name by name, at the boundaries, and end to end: a real
process's environment, and what a real diagnosis child really had (a sitecustomize on its
PYTHONPATH writes the names it sees).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import gputui

from gputui.diag.childenv import child_env, passes, secret
from gputui.diag.target import process_target, taken

#: Names that pass: the loader's, Python's, CUDA's, NCCL's, torch's, Hugging Face's settings.
PASS = [
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TMPDIR", "VIRTUAL_ENV",
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "SLURM_JOB_ID", "SLURM_PROCID",
    "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "NCCL_DEBUG", "NCCL_SOCKET_IFNAME", "PYTORCH_CUDA_ALLOC_CONF",
    "TORCH_NCCL_BLOCKING_WAIT", "NVIDIA_VISIBLE_DEVICES", "CUDNN_PATH", "CUBLAS_WORKSPACE_CONFIG",
    "NVTE_FLASH_ATTN", "TRITON_CACHE_DIR", "XLA_FLAGS", "CONDA_PREFIX", "OMP_NUM_THREADS",
    "MKL_NUM_THREADS", "HF_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_CACHE",
    # the loader: every LD_ variable decides what loads (not only the search path)
    "LD_LIBRARY_PATH", "LD_PRELOAD", "LD_AUDIT", "LD_BIND_NOW",
    # Python: every PYTHON* variable (PYTHONPATH, PYTHONHOME, PYTHON_GIL, PYTHON itself)
    "PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONNOUSERSITE", "PYTHON_GIL", "PYTHON",
    # a secret word inside a longer word is no secret word
    "TRANSFORMERS_NO_ADVISORY_WARNINGS", "HF_HUB_DISABLE_TOKENIZERS_X", "PYTHONKEYWORDS",
]  # fmt: skip

#: Names that never pass: credentials under a prefix that passes, and everything else.
NEVER = [
    # credentials (a secret word as a word of the name, in any case)
    "HF_TOKEN", "HF_API_TOKEN", "HF_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HUB_DISABLE_IMPLICIT_TOKEN",
    "TRANSFORMERS_TOKEN", "CONDA_TOKEN", "NCCL_SECRET", "CUDA_PASSWORD", "TORCH_API_KEY",
    "PYTHON_KEYRING_PASSWORD", "PYTHON_KEY", "TRITON_CREDENTIALS", "NVIDIA_API_KEY",
    "NCCL_Secret", "HF_token", "LD_AUTH", "CUDA_PASSWD", "TORCH_SECRETS", "HF_TOKENS",
    # not a setting of CUDA, torch, NCCL or the loader
    "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "WANDB_API_KEY", "HUGGING_FACE_HUB_TOKEN",
    "SSH_AUTH_SOCK", "DISPLAY", "TOKENIZERS_PARALLELISM", "SHELL", "PWD", "OLDPWD",
    # lowercase: the libraries read the upper-case names only
    "path", "home", "hf_home", "cuda_visible_devices", "ld_preload", "pythonpath", "Path",
    # a prefix that is not one: LD without its underscore, PYTHON inside a name
    "LDFLAGS", "LD", "XPYTHONPATH", "MY_CUDA_HOME", "NCCL", "CUDA",
]  # fmt: skip


@pytest.mark.parametrize("name", PASS)
def test_these_pass(name: str) -> None:
    assert passes(name) and not secret(name)


@pytest.mark.parametrize(
    "name", ["PWD", "OLDPWD", "PATH", "TOKENIZERS_PARALLELISM", "HF_HUB_DISABLE_TOKENIZERS_X"]
)
def test_what_only_looks_like_a_credential_stays(name: str) -> None:
    """The shell's working directory is no password; a word that merely starts with one is none."""
    assert not secret(name)


@pytest.mark.parametrize("name", NEVER)
def test_these_never_pass(name: str) -> None:
    assert not passes(name)


@pytest.mark.parametrize(
    "name",
    ["HF_TOKEN", "hf_token", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "MY_API_KEY",
     "PIP_INDEX_CREDENTIALS", "SSH_AUTH_SOCK", "Session_Cookie",
     # run together, or spelt short, as well-known tools spell them (review of issue 31)
     "PGPASSWORD", "SSHPASS", "MYSQL_PWD", "GITHUB_PAT", "GH_PAT", "HF_AUTHTOKEN", "NGC_ACCESSTOKEN",
     "AZURE_CLIENTSECRET"],
)  # fmt: skip
def test_a_credential_is_dropped_from_every_childs_environment(name: str) -> None:
    """Whatever environment a child starts from (gputui's own, for --python and the TUI):
    a credential never reaches it; the report names it as removed, without its value."""
    env, changes = child_env(sys.executable, base={"PATH": "/usr/bin", name: "s3cr3t"})
    assert name not in env and changes[name] is None
    assert "s3cr3t" not in json.dumps(changes)
    assert env["PATH"] == "/usr/bin"


def test_taken_reads_the_environment_as_the_process_does() -> None:
    raw = b"\0".join(
        [
            b"CUDA_VISIBLE_DEVICES=0,1",
            b"CUDA_VISIBLE_DEVICES=7",  # given twice: getenv (and Python) read the first
            b"NCCL_DEBUG=INFO=x",  # a value holding '='
            b"PYTHONPATH=",  # empty is a value
            b"HF_TOKEN=hf_s3cr3t",
            b"LD_PRELOAD",  # no '=': not a variable
            b"=orphan",  # no name
            b"PATH=/usr/\xffbin",  # not UTF-8: not taken
            b"HOME=/home/u",
            b"",
        ]
    )
    assert taken(raw) == {
        "CUDA_VISIBLE_DEVICES": "0,1",
        "NCCL_DEBUG": "INFO=x",
        "PYTHONPATH": "",
        "HOME": "/home/u",
    }


def test_an_entry_cut_at_the_read_limit_is_not_taken() -> None:
    """/proc/PID/environ is read up to a limit: an entry without its terminating NUL may be
    cut short, and a cut PATH or LD_LIBRARY_PATH is a wrong one."""
    assert taken(b"HOME=/home/u\0PATH=/usr/bin:/us") == {"HOME": "/home/u"}
    assert taken(b"HOME=/home/u\0PATH=/usr/bin\0") == {"HOME": "/home/u", "PATH": "/usr/bin"}


def _sleeper(children: list, env: dict[str, str]) -> int:
    p = subprocess.Popen(
        [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(600)"],
        env=env,
        stdout=subprocess.PIPE,
    )
    children.append(p)
    assert p.stdout is not None and p.stdout.readline() == b"ready\n"
    return p.pid


def _spy(site: Path, out: Path) -> None:
    """A sitecustomize that writes the environment a diagnosis child (a Python started from
    the probe) really has: not gputui's own, which may start with the same PYTHONPATH."""
    site.mkdir(parents=True, exist_ok=True)
    (site / "sitecustomize.py").write_text(
        "import json, os\n"
        "if b'/diag/probe' in open('/proc/self/cmdline', 'rb').read():\n"
        f"    with open({str(out)!r}, 'a') as f:\n"
        "        f.write(json.dumps(dict(os.environ)) + '\\n')\n"
    )


def test_what_a_real_diagnosis_child_of_diag_pid_has(children, tmp_path) -> None:
    site, out = tmp_path / "site", tmp_path / "env.jsonl"
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(site),
        "HF_HOME": "/data/hf",
        "HF_TOKEN": "hf_s3cr3t",
        "GITHUB_TOKEN": "ghp_s3cr3t",
        "AWS_SECRET_ACCESS_KEY": "aws_s3cr3t",
        "TOKENIZERS_PARALLELISM": "false",
        "NCCL_DEBUG": "WARN",
        "nccl_debug": "lowercase",
        "LD_BIND_NOW": "1",
        "LDFLAGS": "-L/x",
    }
    pid = _sleeper(children, env)
    _spy(site, out)  # (after the process started: only the diagnosis child reads it)
    t = process_target(pid)
    assert t.env == {k: env[k] for k in ("PATH", "PYTHONPATH", "HF_HOME", "NCCL_DEBUG", "LD_BIND_NOW")}
    r = gputui("diag", "--pid", str(pid), "--json", "--no-nccl", timeout=240)
    report = json.loads(r.stdout)
    assert "HF_TOKEN" not in report["target"]["variables"]
    seen = [json.loads(line) for line in out.read_text().splitlines()]
    assert seen, "the diagnosis child never started"
    for child in seen:  # the probe, and anything it started
        assert not any("s3cr3t" in v for v in child.values())
        assert {"HF_TOKEN", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "TOKENIZERS_PARALLELISM"}.isdisjoint(
            child
        )
        assert {"nccl_debug", "LDFLAGS"}.isdisjoint(child)
        assert (
            child["HF_HOME"] == "/data/hf" and child["NCCL_DEBUG"] == "WARN" and child["LD_BIND_NOW"] == "1"
        )


def test_gputuis_own_credentials_never_reach_a_diag_python_child(tmp_path) -> None:
    site, out = tmp_path / "site", tmp_path / "env.jsonl"
    _spy(site, out)
    env = {**os.environ, "PYTHONPATH": str(site), "HF_TOKEN": "hf_s3cr3t", "MY_API_KEY": "k_s3cr3t"}
    r = gputui("diag", "--python", sys.executable, "--json", "--no-nccl", timeout=240, env=env)
    report = json.loads(r.stdout)
    assert report["child"]["env_changes"]["HF_TOKEN"] is None
    assert out.exists()  # (written by the child, which has ended)
    for child in (json.loads(line) for line in out.read_text().splitlines()):
        assert "HF_TOKEN" not in child and "MY_API_KEY" not in child
        assert child["PYTHONPATH"] == str(site)
