"""From the child's events to findings: each check explained (its cause's meaning and fix),
the overall verdict and exit code, the problem to fix first, and the report document."""

from __future__ import annotations

import platform
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gputui import __version__
from gputui.diag.verdicts.causes import CAUSES, Context
from gputui.rules import iso_utc
from gputui.startvars import start_problem
from gputui.untrusted import literal

STATUSES = ("PASS", "WARN", "FAIL", "SKIP")
EXIT_CODES = {"PASS": 0, "WARN": 1, "FAIL": 2}
REPORT_FORMAT = "gputui-diagnosis"
REPORT_VERSION = 1
PROTOCOL = 1
"""The child protocol version this parent speaks (see gputui/diag/probe/__init__.py)."""

#: The order layers depend on each other: the first FAIL in this order is "the" problem.
LAYERS = (
    "system",
    "driver",
    "visibility",
    "torch",
    "devices",
    "cudnn",
    "compute",
    "environment",
    "health",
    "child",
)

# --------------------------------------------------------------------------------------
# findings and the diagnosis
# --------------------------------------------------------------------------------------


@dataclass
class Finding:
    """One check's result, with the cause explained and its fix."""

    id: str
    group: str
    title: str
    status: str
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    cause: str | None = None
    cause_title: str | None = None
    meaning: str | None = None
    fix: list[str] = field(default_factory=list)
    refs: list[str] = field(default_factory=list)
    note: str | None = None
    seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "group": self.group,
            "title": self.title,
            "status": self.status,
            "summary": self.summary,
            "evidence": self.evidence,
            "cause": self.cause,
            "cause_title": self.cause_title,
            "meaning": self.meaning,
            "fix": self.fix,
            "refs": self.refs,
            "note": self.note,
            "seconds": self.seconds,
        }


def _text(value: Any, default: str = "") -> str:
    return value if isinstance(value, str) else default


class Diagnosis:
    """Accumulates a child's events into findings (in the order they arrive)."""

    def __init__(self, python: str = "python") -> None:
        self.context = Context(python=python)
        self.findings: list[Finding] = []
        self.hello: dict[str, Any] | None = None
        self.phases: dict[str, str] = {}
        """Phases started and not ended: name -> title (what runs now)."""
        self.done = False
        self.seconds: float | None = None
        self.child: dict[str, Any] = {}
        """How the child ended (runner.ChildResult.to_json())."""
        self.stray: list[str] = []
        """Lines on the child's stdout that were not protocol events."""
        self.created = time.time()

    # ---- feeding ---------------------------------------------------------------------

    def feed(self, event: dict[str, Any]) -> Finding | None:
        """Take one protocol event; returns the new finding for a check event."""
        kind = event.get("event")
        if kind == "hello":
            self.hello = event
            return None
        if kind == "phase":
            name = _text(event.get("name"))
            if event.get("state") == "start":
                self.phases[name] = _text(event.get("title"), name)
            else:
                self.phases.pop(name, None)
            return None
        if kind == "done":
            self.done = True
            seconds = event.get("seconds")
            self.seconds = float(seconds) if isinstance(seconds, int | float) else None
            return None
        if kind == "check":
            return self.add_check(event)
        return None

    def add_check(self, event: dict[str, Any]) -> Finding:
        evidence = event.get("evidence") if isinstance(event.get("evidence"), dict) else {}
        assert isinstance(evidence, dict)
        self._learn(_text(event.get("id")), evidence)
        status = _text(event.get("status"), "FAIL")
        if status not in STATUSES:
            status = "FAIL"
        cause_id = event.get("cause") if isinstance(event.get("cause"), str) else None
        seconds = event.get("seconds")
        finding = Finding(
            id=_text(event.get("id"), "?"),
            group=_text(event.get("group"), "other"),
            title=_text(event.get("title"), _text(event.get("id"), "?")),
            status=status,
            summary=_text(event.get("summary")),
            evidence=evidence,
            cause=cause_id,
            note=event.get("note") if isinstance(event.get("note"), str) else None,
            seconds=float(seconds) if isinstance(seconds, int | float) else None,
        )
        child_fix = [str(x) for x in event.get("fix") or [] if isinstance(x, str)]
        explain(finding, self.context, child_fix)
        self.findings.append(finding)
        return finding

    def _learn(self, check_id: str, ev: dict[str, Any]) -> None:
        ctx = self.context
        if check_id == "driver.nvml":
            ctx.driver_version = ev.get("driver_version") or ctx.driver_version
            ctx.driver_cuda = ev.get("cuda_driver_version") or ctx.driver_cuda
        elif check_id == "cuda.driver":
            ctx.driver_cuda = ctx.driver_cuda or ev.get("driver_cuda")
        elif check_id in ("visibility.env", "driver.devices"):
            ctx.in_container = ctx.in_container or bool(ev.get("in_container"))
        elif check_id == "torch.import":
            ctx.torch_version = ev.get("version") or ctx.torch_version
        elif check_id == "torch.build":
            ctx.torch_version = ev.get("version") or ctx.torch_version
            ctx.torch_cuda = ev.get("cuda")

    def finish(self, child: dict[str, Any]) -> None:
        """The child ended: record how, and turn a crash, hang or bad exit into a finding."""
        self.child = child
        if child.get("cancelled"):
            return
        if child.get("timed_out"):
            pending = child.get("pending_phase") or self.current_phase()
            self.add_check(
                {
                    "id": "diag.child",
                    "group": "child",
                    "title": "Diagnosis process",
                    "status": "FAIL",
                    "summary": f"timed out after {child.get('timeout')} s"
                    + (f" while {pending} was running" if pending else "")
                    + "; killed",
                    "cause": "child-timeout",
                    "evidence": {"pending_phase": pending, "stderr_tail": child.get("stderr_tail")},
                }
            )
            return
        if child.get("start_error"):
            self.add_check(
                {
                    "id": "diag.child",
                    "group": "child",
                    "title": "Diagnosis process",
                    "status": "FAIL",
                    "summary": f"cannot run {child.get('python')}: {child['start_error']}",
                    "cause": "bad-interpreter",
                    "evidence": {"error": child["start_error"]},
                }
            )
            return
        if self.hello is None and not self.done and not child.get("signal") and not self.findings:
            self.add_check(
                {
                    "id": "diag.child",
                    "group": "child",
                    "title": "Diagnosis process",
                    "status": "FAIL",
                    "summary": f"{child.get('python')} never started the diagnosis (it exited with status "
                    f"{child.get('returncode')} before its first event): not a Python interpreter, or one "
                    "that fails before it runs any code (see its stderr)",
                    "cause": "bad-interpreter",
                    "evidence": {
                        "returncode": child.get("returncode"),
                        "stderr_tail": child.get("stderr_tail"),
                    },
                }
            )
            return
        if not self.done or child.get("returncode"):
            signal_name = child.get("signal")
            how = (
                f"killed by {signal_name}" if signal_name else f"exited with status {child.get('returncode')}"
            )
            pending = self.current_phase()
            suspects = crash_suspects(child)
            self.add_check(
                {
                    "id": "diag.child",
                    "group": "child",
                    "title": "Diagnosis process",
                    "status": "FAIL",
                    "summary": f"the diagnosis {how}"
                    + (f" during {pending}" if pending else "")
                    + ("" if self.done else " before it finished")
                    + (f"; suspects, set when it died: {suspects_text(suspects)}" if suspects else ""),
                    "cause": "child-crashed",
                    "evidence": {
                        "signal": signal_name,
                        "returncode": child.get("returncode"),
                        "pending_phase": pending,
                        "stderr_tail": child.get("stderr_tail"),
                        "suspect_variables": {name: value for name, value, _ in suspects},
                        "malformed_variables": {name: why for name, _, why in suspects if why},
                    },
                    "fix": suspects_fix(suspects),
                }
            )

    # ---- reading ---------------------------------------------------------------------

    def current_phase(self) -> str | None:
        """The step running now (the phase started last)."""
        return next(reversed(self.phases.values()), None) if self.phases else None

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(STATUSES, 0)
        for f in self.findings:
            out[f.status] += 1
        return out

    @property
    def status(self) -> str:
        counts = self.counts()
        if counts["FAIL"]:
            return "FAIL"
        if counts["WARN"]:
            return "WARN"
        return "PASS"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def primary(self) -> Finding | None:
        """The problem to fix first: the first FAIL (else WARN) in layer order."""
        for status in ("FAIL", "WARN"):
            hits = [f for f in self.findings if f.status == status]
            if hits:
                return min(hits, key=lambda f: _layer(f.group))
        return None

    def summary_line(self) -> str:
        c = self.counts()
        return f"{c['PASS']} pass · {c['WARN']} warn · {c['FAIL']} fail · {c['SKIP']} skip"

    def to_json(self, stress: dict[str, Any] | None = None) -> dict[str, Any]:
        primary = self.primary()
        hello = self.hello or {}
        return {
            "format": REPORT_FORMAT,
            "version": REPORT_VERSION,
            "gputui": __version__,
            "created": iso_utc(self.created),
            "host": socket.gethostname(),
            "platform": platform.platform(),
            "python": {
                "executable": hello.get("executable") or self.context.python,
                "version": hello.get("python"),
                "prefix": hello.get("prefix"),
            },
            "status": self.status,
            "exit_code": self.exit_code,
            "counts": self.counts(),
            "primary": primary.to_json() if primary else None,
            "checks": [f.to_json() for f in self.findings],
            "child": self.child,
            "stray_output": self.stray[-20:],
            "stress": stress,
        }


def crash_suspects(child: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """The variables that change how CUDA, torch and NCCL start, set in a child that died:
    (name, value, why it is malformed or None), malformed first."""
    found = child.get("start_variables")
    if not isinstance(found, dict):
        return []
    out = [(str(n), str(v), start_problem(str(n), str(v))) for n, v in found.items() if isinstance(v, str)]
    return sorted(out, key=lambda t: (t[2] is None, t[0]))


def suspects_text(suspects: list[tuple[str, str, str | None]]) -> str:
    """`NAME='value' (malformed: why), ...`: names, values and reasons as untrusted text."""
    return ", ".join(
        f"{literal(name)}='{literal(value)}'" + (f" (malformed: {literal(why)})" if why else "")
        for name, value, why in suspects
    )


def suspects_fix(suspects: list[tuple[str, str, str | None]]) -> list[str]:
    if not suspects:
        return []
    lines = [f"unset {literal(name)}   # malformed: {literal(why)}" for name, _, why in suspects if why]
    names = " ".join(f"-u {literal(name)}" for name, _, _ in suspects)
    lines.append(
        f"Run the diagnosis again without them (`env {names} gputui diag`): if it no longer crashes, "
        "one of them is the cause"
    )
    return lines


def explain(finding: Finding, ctx: Context, child_fix: Iterable[str] = ()) -> None:
    """Attach the cause's name, meaning, fix and references to a finding."""
    cause = CAUSES.get(finding.cause or "")
    fixes = list(child_fix)
    if cause is not None:
        finding.cause_title = cause.title
        finding.meaning = cause.meaning
        finding.refs = list(cause.refs)
        if finding.status != "PASS" or finding.note:
            fixes += [line for line in cause.fix(ctx, finding.evidence) if line not in fixes]
    finding.fix = fixes if finding.status != "PASS" or finding.note else []


def _layer(group: str) -> int:
    return LAYERS.index(group) if group in LAYERS else len(LAYERS)
