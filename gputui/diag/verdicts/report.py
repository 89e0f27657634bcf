"""The report as JSON (its schema is gputui/diag/report.schema.json) and as Markdown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gputui.diag.verdicts.diagnosis import EXIT_CODES, Diagnosis
from gputui.diag.verdicts.stress import md_cell, stress_markdown

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "report.schema.json"

# --------------------------------------------------------------------------------------
# reports
# --------------------------------------------------------------------------------------


def load_schema() -> dict[str, Any]:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    assert isinstance(schema, dict)
    return schema


def report_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n"


def report_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown, to paste into a bug report."""
    lines: list[str] = []
    status = report["status"]
    py = report["python"]
    lines.append(f"# gputui diagnosis: {status}")
    lines.append("")
    lines.append(
        f"{report['host']} · {report['created']} · Python {py.get('version') or '?'} "
        f"`{py.get('executable')}` · gputui {report['gputui']}"
    )
    lines.append("")
    c = report["counts"]
    lines.append(f"**{c['PASS']} pass · {c['WARN']} warn · {c['FAIL']} fail · {c['SKIP']} skip**")
    primary = report.get("primary")
    if primary:
        lines.append("")
        lines.append(
            f"**{primary['status']}: {primary.get('cause_title') or primary['title']}**: {primary['summary']}"
        )
        if primary.get("fix"):
            lines.append("")
            lines.append("Fix:")
            lines.append("")
            lines.append("```sh")
            lines += primary["fix"]
            lines.append("```")
    lines.append("")
    lines.append("| status | check | result |")
    lines.append("|---|---|---|")
    for chk in report["checks"]:
        lines.append(f"| {chk['status']} | {md_cell(chk['title'])} | {md_cell(chk['summary'])} |")
    problems = [chk for chk in report["checks"] if chk["status"] in ("FAIL", "WARN") or chk.get("note")]
    if problems:
        lines.append("")
        lines.append("## Findings")
        for chk in problems:
            lines.append("")
            lines.append(f"### {chk['status']} · {chk['title']} (`{chk['id']}`)")
            lines.append("")
            lines.append(chk["summary"])
            if chk.get("cause_title"):
                lines.append("")
                lines.append(f"*{chk['cause_title']}*: {chk.get('meaning') or ''}")
            if chk.get("note"):
                lines.append("")
                lines.append(f"Note: {chk['note']}")
            if chk.get("fix"):
                lines.append("")
                lines.append("```sh")
                lines += chk["fix"]
                lines.append("```")
            if chk.get("refs"):
                lines.append("")
                lines.append("Seen in: " + ", ".join(chk["refs"]))
    stress = report.get("stress")
    if stress:
        lines.append("")
        lines += stress_markdown(stress)
    child = report.get("child") or {}
    if child.get("stderr_tail") and (
        child.get("returncode") or child.get("timed_out") or child.get("signal")
    ):
        lines.append("")
        lines.append("## Diagnosis process stderr (tail)")
        lines.append("")
        lines.append("```")
        lines.append(child["stderr_tail"].rstrip())
        lines.append("```")
    lines.append("")
    lines.append("<details><summary>Evidence (every check)</summary>")
    lines.append("")
    lines.append("```json")
    lines.append(json.dumps({chk["id"]: chk["evidence"] for chk in report["checks"]}, indent=1, default=str))
    lines.append("```")
    lines.append("")
    lines.append("</details>")
    return "\n".join(lines) + "\n"


def stress_only_report(python: str, stress: dict[str, Any]) -> dict[str, Any]:
    """A report holding only a stress run (what `gputui stress --json` prints)."""
    report = Diagnosis(python=python).to_json(stress)
    report["status"] = stress["status"]
    report["exit_code"] = EXIT_CODES[stress["status"]]
    report["child"] = stress.get("child") or {}
    return report
