"""`gputui stacks`: the Python stacks of processes, or of a job's ranks, folded.

Exit status: 0 every stack read, 1 some missing (each says why), 2 none could be tried (py-spy
not installed, no such job) or bad input, 128+N when interrupted (py-spy children killed).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from typing import Any

from gputui.commands.common import INSTALL, Interrupted, install_help, interruptible, positive, say

NAME = "stacks"


def pid_arg(value: str) -> int:
    """An argparse type: a process id (a whole number above 0)."""
    if not value.isdigit() or not 0 < int(value) < 1 << 22:
        raise argparse.ArgumentTypeError(f"not a process id: {value!r}")
    return int(value)


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "stacks",
        help="the Python stacks of processes or of a job's ranks (py-spy), shared frames folded",
        description="Dump the Python stack of each process with `py-spy dump` (in parallel, each "
        "bounded in time) and fold the outer frames they share.  Where a stack cannot be read, say "
        "why: py-spy missing, ptrace refused, the process stopped, not Python, exited.  Needs py-spy: "
        f"{INSTALL}.  Exit status: 0 all read, 1 some missing, 2 none tried.",
        formatter_class=install_help("stacks", "py-spy"),
    )
    p.add_argument("pids", metavar="PID", nargs="*", type=pid_arg, help="processes to dump")
    p.add_argument(
        "--job",
        metavar="PID",
        type=pid_arg,
        default=None,
        help="every rank of the job whose launcher (torchrun, mpirun ...) is PID, or that PID runs under",
    )
    p.add_argument("--native", action="store_true", help="include native (C/C++) frames")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument(
        "--timeout",
        type=positive,
        default=10.0,
        metavar="S",
        help="kill a dump after S seconds (default 10)",
    )


def run(args: argparse.Namespace) -> int:
    from gputui.extras import install_hint
    from gputui.stacks.dump import dump_many, find_py_spy
    from gputui.stacks.model import Reason
    from gputui.stacks.render import text, to_json

    if bool(args.pids) == (args.job is not None):
        say("gputui stacks: name processes (gputui stacks PID ...) or a job (--job PID), not both")
        return 2
    targets: list[int | tuple[int, float | None]] = list(dict.fromkeys(args.pids))
    if args.job is not None:
        from gputui.stacks.ranks import job_ranks

        job = job_ranks(args.job)
        if job.problem is not None:
            say(f"gputui stacks: {job.problem}")
            return 2
        targets = list(job.ranks)
        if not args.json:
            print(f"job: {job.header()}", flush=True)
    py_spy = find_py_spy()
    t0 = time.monotonic()
    with interruptible():
        try:
            results = dump_many(targets, native=args.native, timeout=args.timeout, py_spy=py_spy)
        except KeyboardInterrupt as exc:
            say("gputui stacks: interrupted; the py-spy children were killed")
            return exc.exit_code if isinstance(exc, Interrupted) else 130
    seconds = time.monotonic() - t0
    with contextlib.suppress(OSError):
        if args.json:
            sys.stdout.write(to_json(results, native=args.native, py_spy=py_spy, seconds=seconds))
        elif py_spy is not None:
            sys.stdout.write(text(results, seconds=seconds))
        else:
            # the other reasons (stopped, exited) are still told, each on its line
            for r in results:
                if r.missing is not None and r.missing.reason is not Reason.NO_PY_SPY:
                    print(f"{r.label()}: {r.missing.message}")
        sys.stdout.flush()
    if py_spy is None:
        say(f"gputui stacks: py-spy is not installed: {install_hint('stacks', 'py-spy')}")
        return 2
    return 0 if all(r.ok for r in results) else 1
