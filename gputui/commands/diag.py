"""`gputui diag`: why CUDA / cuDNN / NCCL do not work in a Python environment, and the fix.

Exit status: 0 every check passed, 1 warnings, 2 failures (130 when interrupted), so a job
prologue can run `gputui diag --json > node.json || drain-node`.
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any

from gputui.commands.common import (
    SIGPIPE_EXIT,
    Interrupted,
    ReaderGone,
    interruptible,
    killed_line,
    out,
    positive,
    say,
    stdout_gone,
)
from gputui.untrusted import literal

NAME = "diag"

_COLOURS = {"PASS": "\033[32m", "WARN": "\033[33;1m", "FAIL": "\033[31;1m", "SKIP": "\033[90m"}
_RESET = "\033[0m"


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "diag",
        help="diagnose CUDA, cuDNN and NCCL in a Python environment (exit 0 pass, 1 warn, 2 fail)",
        description="Run the diagnosis in a child process of the interpreter being diagnosed "
        "(--pid: that process's, with its environment; --python; default: your busiest GPU "
        "process's, else the python3 on PATH, else gputui's own) and say which layer is broken "
        "and the command that fixes it.  As root, another user's process or interpreter is "
        "diagnosed with that user's privileges, or refused.  Exit status: 0 all pass, "
        "1 warnings, 2 failures.",
    )
    p.add_argument(
        "--python",
        metavar="PATH",
        default=None,
        help="the interpreter to diagnose, with gputui's environment",
    )
    p.add_argument(
        "--pid",
        type=int,
        metavar="PID",
        default=None,
        help="diagnose that process's interpreter (the path it was started by, e.g. its venv's "
        "python, when that is the same file as /proc/PID/exe) with its environment's CUDA, "
        "NCCL, torch and library variables (/proc/PID/environ), as its owner (as root: another "
        "user's process runs as that user); default without --python: your busiest GPU "
        "process's, else the python3 on PATH",
    )
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument(
        "--json",
        action="store_true",
        help="print the report as JSON (schema: gputui/diag/report.schema.json)",
    )
    fmt.add_argument(
        "--markdown", action="store_true", help="print the report as Markdown (for a bug report)"
    )
    p.add_argument(
        "--timeout",
        type=positive,
        default=120.0,
        metavar="S",
        help="kill the diagnosis after S seconds (default 120)",
    )
    p.add_argument("--no-nccl", action="store_true", help="skip the multi-GPU NCCL all-reduce")


def run(args: argparse.Namespace) -> int:
    from gputui.diag.session import DiagnosisSession
    from gputui.diag.target import TargetError, busiest_gpu_pid, default_target, process_target, python_target
    from gputui.diag.verdicts import Finding, report_json, report_markdown

    if args.pid is not None and args.python:
        print("gputui diag: --pid and --python: give one", file=sys.stderr)
        return 2
    try:
        if args.pid is not None:
            target = process_target(args.pid)
        elif args.python:
            target = python_target(args.python, "--python")
        else:
            target = default_target(busiest_gpu_pid())
    except TargetError as exc:
        print(f"gputui diag: {exc}", file=sys.stderr)
        return 2
    python = target.python
    stream = not (args.json or args.markdown)
    colour = stream and sys.stdout.isatty()
    progress = sys.stderr.isatty()
    lock = threading.Lock()
    reader_gone = threading.Event()
    session: DiagnosisSession | None = None

    def on_finding(f: Finding) -> None:
        # called from the runner's threads: never raises into them (they read the child)
        if not stream or reader_gone.is_set():
            return
        with lock:
            try:
                out(format_finding(f, colour))
            except ReaderGone:  # `gputui diag | head -1`: stop, as SIGPIPE would
                reader_gone.set()
                if session is not None:
                    session.cancel()

    def on_phase(title: str | None) -> None:
        if progress and title:
            with lock:
                print(f"  … {title}", file=sys.stderr, flush=True)

    if stream:
        try:
            out(f"gputui diag: {literal(python)}")
            for line in target.header():
                out(literal(line))
        except ReaderGone:
            return SIGPIPE_EXIT
    with interruptible():
        session = DiagnosisSession(
            python,
            timeout=args.timeout,
            probe_args=["--no-nccl"] if args.no_nccl else [],
            base_env=target.env,
            on_finding=on_finding,
            on_phase=on_phase,
            run_as=target.privileges,
        )
        session.start()  # (assigned first: on_finding may cancel it from the first finding)
        interrupted: Interrupted | None = None
        try:
            diagnosis = session.wait()
        except KeyboardInterrupt as exc:
            interrupted = exc if isinstance(exc, Interrupted) else Interrupted()
            session.cancel()
            diagnosis = session.wait(30)
    if reader_gone.is_set():
        return SIGPIPE_EXIT
    report = diagnosis.to_json()
    report["target"] = target.to_json()
    try:
        if args.json:
            sys.stdout.write(report_json(report))
        elif args.markdown:
            sys.stdout.write(report_markdown(report))
        elif interrupted is None:
            print(verdict_text(diagnosis, colour))
        sys.stdout.flush()
    except BrokenPipeError:  # `| head`: the reader is done
        stdout_gone()
        if interrupted is None:
            return SIGPIPE_EXIT
    except OSError:  # stdout gone with the terminal (SIGHUP)
        pass
    if interrupted is not None:
        say(killed_line("diag", "diagnosis", interrupted, diagnosis.child))
        return interrupted.exit_code
    return diagnosis.exit_code


def format_finding(f: Any, colour: bool = False) -> str:
    status = f"{_COLOURS[f.status]}{f.status}{_RESET}" if colour else f.status
    # the child's text carries what it found (variables, process names): untrusted
    lines = [f"{status:<4}  {literal(f.title)}: {literal(f.summary)}"]
    if f.status in ("WARN", "FAIL"):
        if f.cause_title:
            lines.append(f"      {f.cause_title}: {f.meaning}")
        lines += [
            f"      $ {literal(line)}" if _is_command(line) else f"      {literal(line)}" for line in f.fix
        ]
    elif f.note:
        lines.append(f"      note: {literal(f.note)}")
    return "\n".join(lines)


def _is_command(line: str) -> bool:
    first = line.split(" ", 1)[0]
    return first.startswith("/") or first in (
        "sudo",
        "pip",
        "python",
        "python3",
        "unset",
        "export",
        "nvidia-smi",
    )


def verdict_text(diagnosis: Any, colour: bool = False) -> str:
    status = diagnosis.status
    head = f"{_COLOURS[status]}{status}{_RESET}" if colour else status
    out = [f"\n{head}: {diagnosis.summary_line()}"]
    primary = diagnosis.primary()
    if primary is not None:
        out.append(f"First fix: {primary.cause_title or literal(primary.title)}: {literal(primary.summary)}")
        out += [f"  {literal(line)}" for line in primary.fix]
    return "\n".join(out)
