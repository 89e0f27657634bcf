"""The report as JSON (its schema is gputui/diag/report.schema.json) and as Markdown."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from gputui.diag.verdicts.diagnosis import EXIT_CODES, Diagnosis
from gputui.diag.verdicts.stress import md_cell, stress_markdown
from gputui.untrusted import json_text, literal

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "report.schema.json"

# --------------------------------------------------------------------------------------
# reports
# --------------------------------------------------------------------------------------


def load_schema() -> dict[str, Any]:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    assert isinstance(schema, dict)
    return schema


def report_json(report: dict[str, Any]) -> str:
    """The report as JSON: every string exact, with no control character raw (untrusted text
    from the diagnosed interpreter is in it)."""
    return json_text(json.dumps(report, indent=2, ensure_ascii=False, default=str)) + "\n"


#: First words of a fix line that make it a shell command.
SHELL_WORDS = frozenset(
    (
        *("sudo", "unset", "export", "ls", "lspci", "dmesg", "nvidia-smi", "nvidia-ctk", "systemctl"),
        *("journalctl", "echo", "cat", "srun", "scontrol", "pip", "pip3", "conda", "python", "python3"),
        *("docker", "modprobe"),
    )
)
_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")
_LEAD = re.compile(r"^([A-Z][^:`]*):\s+(.+)$")
_COMMENT = re.compile(r"^(.*?\S)\s{2,}(\S.*)$")


def _segments(text: str) -> list[str]:
    """`text` split at "; " outside quotes (a quote opens only at the start of a word)."""
    parts, current, quote = [], "", ""
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"" and (i == 0 or text[i - 1] in " =("):
            quote = c
        elif text.startswith("; ", i):
            parts.append(current)
            current, i = "", i + 2
            continue
        current += c
        i += 1
    parts.append(current)
    return parts


def _is_shell(text: str) -> bool:
    first = text.split(" ", 1)[0]
    return first in SHELL_WORDS or first.startswith(("/", "~/", "./", "$")) or bool(_ASSIGNMENT.match(first))


def _shell_line(text: str) -> str | None:
    """The fix line as a shell line (a trailing remark becomes a comment), or None if it holds
    prose."""
    command, comment = text, ""
    m = _COMMENT.match(text)
    if m and not m.group(1).endswith("|"):
        command, comment = m.group(1), m.group(2)
    if not all(_is_shell(part.strip()) for part in _segments(command)):
        return None
    if comment.startswith("(") and comment.endswith(")"):
        comment = comment[1:-1]
    if comment and not comment.startswith("#"):
        comment = "# " + comment
    return command + ("   " + comment if comment else "")


def _prose(text: str) -> str:
    """A fix line that is prose: its shell parts (between "; ") and Python calls as code."""
    parts = []
    for part in _segments(text):
        first = part.split(" ", 1)[0]
        if "`" not in part and (_is_shell(part) or ("(" in first and "." in first)):
            m = _COMMENT.match(part)
            code, remark = (m.group(1), m.group(2).lstrip("# ")) if m else (part, "")
            parts.append(f"`{code}`" + (f" ({remark})" if remark else ""))
        else:
            parts.append(part)
    return "; ".join(parts)


def fix_markdown(fix: list[str]) -> list[str]:
    """Fix steps as Markdown: runs of shell commands in ```sh blocks, prose as list items (a
    lead-in like "Check: cmd" becomes an item followed by the command)."""
    out: list[str] = []
    shell: list[str] = []

    def flush() -> None:
        if shell:
            out.extend(["```sh", *shell, "```"])
            shell.clear()

    for line in fix:
        command = _shell_line(line)
        if command is None:
            lead = _LEAD.match(line)
            if lead and _shell_line(lead.group(2)) is not None:
                flush()
                out.append(f"- {lead.group(1)}:")
                command = _shell_line(lead.group(2))
            else:
                flush()
                out.append(f"- {_prose(line)}")
                continue
        shell.append(str(command))
    flush()
    return out


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
    target = report.get("target")
    if isinstance(target, dict):  # which interpreter and environment, and why (diag --pid, g)
        from gputui.diag.target import header_items

        lines += [f"- {name}: {md_cell(text)}" for name, text in header_items(target)]
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
            lines += fix_markdown(primary["fix"])
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
                lines += fix_markdown(chk["fix"])
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
    # the checks' text, evidence and stderr come from the diagnosed interpreter: each line
    # is shown literally (control and invisible characters as escapes)
    return "\n".join(literal(line) for line in "\n".join(lines).split("\n")) + "\n"


def stress_only_report(python: str, stress: dict[str, Any]) -> dict[str, Any]:
    """A report holding only a stress run (what `gputui stress --json` prints)."""
    report = Diagnosis(python=python).to_json(stress)
    report["status"] = stress["status"]
    report["exit_code"] = EXIT_CODES[stress["status"]]
    report["child"] = stress.get("child") or {}
    return report
