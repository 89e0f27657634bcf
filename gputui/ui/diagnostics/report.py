"""Saving the Diagnostics tab's report (`w`): Markdown and JSON, private, never over a planted link."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

from gputui.diag.verdicts import EXIT_CODES, Diagnosis, report_json, report_markdown, stress_only_report
from gputui.safefile import save_new
from gputui.ui.render import clean


def report_stem(diagnosis: Diagnosis) -> str:
    """The name a saved report starts with: host and time (predictable: see `save_report`)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(diagnosis.created))
    return f"gputui-diag-{clean(socket.gethostname()).replace('/', '_')}-{stamp}"


def save_report(
    diagnosis: Diagnosis,
    directory: Path | None = None,
    stress: dict[str, Any] | None = None,
    target: dict[str, Any] | None = None,
) -> tuple[Path, Path]:
    """Write the report as Markdown and JSON; returns both paths.  `target`: which interpreter
    and environment the diagnosis used, and why (gputui.diag.target), for the report's top.

    The name is predictable, so another user could plant a link there: each file is written
    to a new temporary file (O_EXCL | O_NOFOLLOW, mode 0600), then linked to its name, which
    fails rather than replace anything there (a link is never followed); a taken name gets a
    "-2", "-3"... suffix.  Nothing half-written ever appears under the final name."""
    stem = report_stem(diagnosis)
    candidates = [directory] if directory is not None else [Path.cwd(), Path.home()]
    last: OSError | None = None
    if stress is not None and not diagnosis.findings:
        report = stress_only_report(diagnosis.context.python, stress)
    else:
        report = diagnosis.to_json(stress)
        if stress is not None and EXIT_CODES[stress["status"]] > report["exit_code"]:
            report["status"], report["exit_code"] = stress["status"], EXIT_CODES[stress["status"]]
    if target is not None:
        report["target"] = target
    texts = {".md": report_markdown(report), ".json": report_json(report)}
    for folder in candidates:
        try:
            return _save_pair(folder, stem, texts)
        except OSError as exc:
            last = exc
    assert last is not None
    raise last


def _save_pair(folder: Path, stem: str, texts: dict[str, str]) -> tuple[Path, Path]:
    md, js = save_new(folder, stem, texts)  # gputui.safefile: 0600, never follows a planted link
    return md, js
