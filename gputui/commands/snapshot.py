"""`gputui snapshot`: print one sample as CSV (nvidia-smi's field names) or JSON, and exit."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from gputui.commands.common import (
    add_config_option,
    add_replay_options,
    judging_config,
    nvml_unavailable,
    open_replay,
    positive,
)

NAME = "snapshot"
PROG = "gputui snapshot"
SLOW_WAIT_S = 1.5
"""Longest a single live snapshot waits for NVML's slow-cadence values (PCIe throughput,
energy, per-process utilization) when a field needs them."""
GPM_WINDOW_S = 0.2
"""The window a one-shot snapshot measures GPM over (SM, tensor, DRAM activity) when a field
asks for it, unless --gpm-window says otherwise: the shortest that gives stable figures under
steady loads (docs/gpm-and-hints.md, bench/gpm_window.py).  The snapshot waits for the longer
of this window and its slow-cadence reads, not for both."""
WATCH_SLOW_S = 1.0
"""With --watch, the slow cadence (and so the GPM window) when a field needs it."""


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        NAME,
        help="print one sample as CSV or JSON and exit (like nvidia-smi --query-gpu)",
        description="Print one sample of every GPU and exit: CSV with nvidia-smi's --query-gpu "
        "field names and units (the default), or a versioned JSON document (--json; schema: "
        "--schema).  Exit status: 0 ok, 2 NVML unavailable (the reason on stderr).",
        epilog="Examples:  gputui snapshot --fields index,memory.used,utilization.gpu "
        "--format csv,noheader,nounits      gputui snapshot --json | jq '.gpus[0]'",
    )
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_const", dest="format", const="json", help="a JSON document")
    fmt.add_argument("--csv", action="store_const", dest="format", const="csv", help="CSV (the default)")
    fmt.add_argument(
        "--format",
        dest="format",
        metavar="FMT",
        help="json, or csv with nvidia-smi's options: csv[,noheader][,nounits]",
    )
    p.add_argument(
        "--fields",
        "--query-gpu",
        dest="fields",
        metavar="A,B,...",
        help="fields to print, by nvidia-smi's query names (--list-fields); JSON: all by default",
    )
    p.add_argument(
        "--processes",
        action="store_true",
        help="JSON: add every GPU process and the jobs' health (verdicts need watching over "
        "time: --watch, or --replay); CSV: print the processes (one row each) instead of the GPUs",
    )
    add_config_option(p)
    p.add_argument("--nounits", action="store_true", help="CSV: numbers without units (as csv,nounits)")
    p.add_argument("--noheader", action="store_true", help="CSV: no header line (as csv,noheader)")
    p.add_argument(
        "--watch", type=positive, default=None, metavar="S", help="repeat every S seconds until Ctrl-C"
    )
    p.add_argument(
        "--gpm-window",
        type=_gpm_window,
        default=GPM_WINDOW_S,
        metavar="S",
        help=f"seconds a one-shot live snapshot measures GPM over (default {GPM_WINDOW_S:g}; 0.05 to 10): "
        "longer averages more, shorter answers sooner",
    )
    p.add_argument("--list-fields", action="store_true", help="list the fields with units and exit")
    p.add_argument("--schema", action="store_true", help="print the JSON schema of --json and exit")
    add_replay_options(p, "take the snapshot")
    p.add_argument(
        "--tick", type=int, default=1, metavar="N", help="with --replay: the recorded tick to print (from 1)"
    )


def _gpm_window(value: str) -> float:
    seconds = positive(value)
    if not 0.05 <= seconds <= 10.0:
        raise argparse.ArgumentTypeError(f"must be from 0.05 to 10 seconds: {value!r}")
    return seconds


def _parse_format(text: str | None) -> tuple[str, set[str]]:
    parts = [x.strip() for x in (text or "csv").lower().split(",") if x.strip()]
    kind, opts = (parts[0] if parts else "csv"), set(parts[1:])
    if kind not in ("csv", "json") or not opts <= {"noheader", "nounits"} or (kind == "json" and opts):
        raise ValueError(f"--format {text}: expected json or csv[,noheader][,nounits]")
    return kind, opts


def list_fields() -> str:
    from gputui.export.snapshot_fields import GPU_FIELDS, PROCESS_FIELDS

    lines = []
    for title, fields in (
        ("GPU fields (--fields)", GPU_FIELDS),
        ("process fields (--processes)", PROCESS_FIELDS),
    ):
        lines.append(f"{title}; * = gputui's own, the rest as nvidia-smi names them:")
        for f in fields:
            alias = f"  (also {', '.join(f.aliases)})" if f.aliases else ""
            lines.append(f"  {'*' if not f.smi else ' '} {f.header:<44} {f.doc}{alias}")
        lines.append("")
    return "\n".join(lines)


@dataclass
class Selection:
    """What one `gputui snapshot` prints and what it must read for that."""

    kind: str
    """"csv" or "json"."""
    opts: set[str]
    gpu_fields: list[tuple[str, Any]] | None = None
    proc_fields: list[tuple[str, Any]] | None = None
    csv_fields: list[tuple[str, Any]] = field(default_factory=list)
    wanted: list[Any] = field(default_factory=list)
    """The fields printed: what a live snapshot waits for (slow values, a GPM window)."""
    reads: list[Any] = field(default_factory=list)
    """The fields whose static facts are read."""


def select(args: argparse.Namespace) -> Selection:
    """The fields of `args`; ValueError with a one-line message for a wrong format or name."""
    from gputui.export import snapshot_fields as snap_fields

    kind, opts = _parse_format(args.format)
    if args.nounits:
        opts.add("nounits")
    if args.noheader:
        opts.add("noheader")
    sel = Selection(kind, opts)
    names = args.fields.split(",") if args.fields else []
    if kind == "csv":
        table = snap_fields.PROCESS_BY_NAME if args.processes else snap_fields.GPU_BY_NAME
        default = snap_fields.DEFAULT_CSV_PROCESS if args.processes else snap_fields.DEFAULT_CSV_GPU
        what = "process" if args.processes else "GPU"
        sel.csv_fields = snap_fields.select(names or default, table, what)
        sel.wanted = sel.reads = [f for _, f in sel.csv_fields]
        return sel
    gpu_sel = [n for n in names if n.strip().lower() in snap_fields.GPU_BY_NAME]
    proc_sel = [n for n in names if n.strip().lower() in snap_fields.PROCESS_BY_NAME]
    unknown = [n for n in names if n not in gpu_sel and n not in proc_sel and n.strip()]
    if unknown:
        snap_fields.select(unknown, snap_fields.GPU_BY_NAME, "")  # raises with the name
    sel.gpu_fields = snap_fields.select(gpu_sel, snap_fields.GPU_BY_NAME, "GPU") if gpu_sel else None
    sel.proc_fields = (
        snap_fields.select(proc_sel, snap_fields.PROCESS_BY_NAME, "process") if proc_sel else None
    )
    sel.reads = [f for _, f in sel.gpu_fields] if sel.gpu_fields else list(snap_fields.GPU_FIELDS)
    if args.processes:
        sel.reads += [f for _, f in sel.proc_fields] if sel.proc_fields else list(snap_fields.PROCESS_FIELDS)
    # the whole document (no --fields) prints every field: it waits for what they need
    # (one slow pass; a GPM window where GPM works), so a null is never "not waited for"
    sel.wanted = [f for _, f in (sel.gpu_fields or []) + (sel.proc_fields or [])] if names else sel.reads
    return sel


def open_live(sel: Selection, processes: bool, nvml: Any = None, *, one_shot: bool = False) -> Any:
    """The NVML source for `sel`: only what the fields need (the slow thread's PCIe calls,
    psutil's process facts and some static facts, NUMA affinity alone 12 ms on an H200,
    cost a one-shot reader tens of ms).  `one_shot`: no slow thread; the slow values are
    read once (`open_one_shot`)."""
    from gputui.export import snapshot_fields as snap_fields
    from gputui.telemetry.nvml.source import NvmlSource

    window = any(f.window for f in sel.wanted)
    return NvmlSource(
        slow_interval=WATCH_SLOW_S if window else 2.0,
        nvml=nvml,
        slow=any(f.slow for f in sel.wanted) and not one_shot,
        enrich_processes=processes,
        static=snap_fields.static_facts(sel.reads),
        ras=False,  # `snapshot --processes --json` asks RAS itself (`_Judge`)
    )


def open_one_shot(source: Any, sel: Selection, gpm_window: float) -> Any:
    """A one-shot live snapshot's start: NVML opened and, where the fields need them, the
    slow-cadence values read once, with GPM over `gpm_window` seconds where a field needs it
    (the reads and the static facts inside that window: telemetry/nvml/one_shot.py); the
    MachineInfo."""
    from gputui.telemetry.nvml.one_shot import open_measured

    if not any(f.slow for f in sel.wanted):
        return source.open()
    return open_measured(source, gpm_window if any(f.window for f in sel.wanted) else None)


def wait_for_slow(source: Any, sel: Selection) -> None:
    """Wait (bounded) for the slow-cadence pass the fields need, then, where a GPM field is
    wanted and GPM works on a GPU (its first pass took a sample, no reason why not), for the
    second pass that closes its first window: about WATCH_SLOW_S more (--watch)."""
    if not any(f.slow for f in sel.wanted):
        return
    deadline = time.monotonic() + SLOW_WAIT_S
    while source.slow_passes < 1 and time.monotonic() < deadline:
        time.sleep(0.005)
    if not any(f.window for f in sel.wanted) or not source.gpm_window_pending():
        return
    deadline = time.monotonic() + SLOW_WAIT_S + WATCH_SLOW_S
    while source.slow_passes < 2 and time.monotonic() < deadline:
        time.sleep(0.005)


class _Judge:
    """The job-health verdicts across the documents of one run: a replay's tick is judged
    as a function of the recording up to it (as the TUI and a live run judge it,
    `Hub.follow`), a live --watch builds up its own history.  NCCL RAS's view: a replay's
    latest recorded one up to the tick (the Hub keeps it); live, asked here (at most every
    RasWatch.interval seconds, bounded by the client's deadline)."""

    def __init__(self, args: argparse.Namespace, source: Any, live: bool) -> None:
        from gputui.stacks.sampler import for_source
        from gputui.telemetry.health import HealthEngine
        from gputui.telemetry.hub import Hub

        self.config = judging_config(PROG, args, source).health
        self.hub = Hub(capacity=2, health=HealthEngine(self.config))
        watching = live and args.watch is not None  # a one-shot has no wait to look into
        self.hub.use_stacks(for_source(watching, self.config))
        self.first: float | None = None
        self.live = live
        self.nccl: Any = None
        self.ras: Any = None
        self.ras_due = 0.0
        if not live:
            self.hub.follow(source)
            self.first = source.ticks[0].timestamp

    def _ask_ras(self, snap: Any) -> Any:
        """Live: one round of RAS questions for the jobs of this snapshot, when due; the view
        of that round (None when none was due)."""
        from gputui.telemetry.nccl.model import NO_JOB, NcclView
        from gputui.telemetry.nccl.watch import RasWatch, job_ranks

        if self.ras is None:
            self.ras = RasWatch()
        if time.monotonic() < self.ras_due:
            return None
        self.ras_due = time.monotonic() + self.ras.interval
        ranks = job_ranks(snap.processes)
        return self.ras.round(ranks, time.time()) if ranks else NcclView(time.time(), reason=NO_JOB)

    def block(self, snap: Any) -> dict[str, Any]:
        import dataclasses

        from gputui.export.health_json import health_block

        if self.first is None:
            self.first = snap.timestamp
        if self.live:  # the round's view goes into the snapshot the verdicts judge, as a source's
            view = self._ask_ras(snap)
            if view is not None:
                self.nccl = view
                snap = dataclasses.replace(snap, nccl=view)
        self.hub.publish(snap)
        report = self.hub.health_report()
        assert report is not None
        nccl = self.nccl if self.live else self.hub.nccl_view()
        return health_block(
            report, snap, self.config, snap.timestamp - self.first, nccl, self.hub.nccl_absent()
        )


def run(args: argparse.Namespace) -> int:
    from gputui.export import snapshot as snap_fmt
    from gputui.telemetry.recording import RecordingError

    if args.list_fields:
        sys.stdout.write(list_fields())
        return 0
    if args.schema:
        print(json.dumps(snap_fmt.schema(), indent=2, ensure_ascii=False))
        return 0
    try:
        sel = select(args)
    except ValueError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    kind, opts = sel.kind, sel.opts
    gpu_fields, proc_fields, csv_fields = sel.gpu_fields, sel.proc_fields, sel.csv_fields

    if args.replay is not None:
        source: Any = open_replay(PROG, args.replay, args.tick, loop=False)
        if source is None:
            return 2
        live = False
    else:
        source = open_live(sel, bool(args.processes), one_shot=args.watch is None)
        live = True
    one_shot = live and args.watch is None
    info = open_one_shot(source, sel, args.gpm_window) if one_shot else source.open()
    problem = info.system.nvml_problem
    if problem is not None:
        if kind == "json":  # a script reading JSON gets JSON that says why
            src = {"kind": "live"} if live else {"kind": "replay", "file": str(args.replay)}
            doc = snap_fmt.unavailable_document(info, problem, src)
            print(snap_fmt.dumps(doc, pretty=args.watch is None), flush=True)
        return nvml_unavailable(PROG, problem)
    if live and not one_shot:
        wait_for_slow(source, sel)
    judge = _Judge(args, source, live) if kind == "json" and args.processes else None

    def emit(first: bool) -> None:
        snap = source.sample()
        if kind == "json":
            src: dict[str, Any] = {"kind": "live"}
            if not live:
                src = {"kind": "replay", "file": str(args.replay), "tick": source.position + 1}
            health = judge.block(snap) if judge is not None else None
            doc = snap_fmt.document(
                info, snap, gpu_fields, proc_fields, processes=args.processes, source=src, health=health
            )
            out = snap_fmt.dumps(doc, pretty=args.watch is None)
        else:
            out = snap_fmt.csv_text(
                info,
                snap,
                csv_fields,
                processes=args.processes,
                header=first and "noheader" not in opts,
                units="nounits" not in opts,
                live=live,
            ).rstrip("\n")
        if out:
            print(out, flush=True)

    try:
        emit(True)
        if args.watch is None:
            if live:
                # one-shot: the answer is out; skip the interpreter's teardown (module and
                # NVML clean-up cost tens of ms on slow machines; the kernel releases NVML)
                sys.stdout.flush()
                os._exit(0)
            return 0
        next_due = time.monotonic() + args.watch
        while live or source.position + 1 < len(source.ticks):
            time.sleep(max(0.0, next_due - time.monotonic()))
            next_due = max(next_due + args.watch, time.monotonic())
            emit(False)
    except KeyboardInterrupt:
        pass
    except RecordingError as exc:  # a bad line further into the recording
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `| head`: the reader is done
        sys.stderr.close()
    finally:
        if args.watch is not None:
            source.close()
        if judge is not None:
            judge.hub.use_stacks(None)
    return 0
