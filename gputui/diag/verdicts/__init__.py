"""From the children's events to findings a person can act on.

The child (`gputui/diag/probe/`) decides each check's status from what it measured and names
the failure mode (`cause`).  Here: `causes` (what each cause means and how to fix it),
`diagnosis` (findings, the verdict, the exit code, the problem to fix first), `report`
(JSON and Markdown), `stress` (the stress run's results and per-GPU verdicts).
"""

from gputui.diag.verdicts.causes import CAUSES, Cause, Context, min_driver_for, torch_index_for
from gputui.diag.verdicts.diagnosis import (
    EXIT_CODES,
    LAYERS,
    PROTOCOL,
    REPORT_FORMAT,
    REPORT_VERSION,
    STATUSES,
    Diagnosis,
    Finding,
    explain,
)
from gputui.diag.verdicts.report import (
    SCHEMA_PATH,
    load_schema,
    report_json,
    report_markdown,
    stress_only_report,
)
from gputui.diag.verdicts.stress import (
    ACHIEVABLE,
    DATASHEET,
    SLOW_FRACTION,
    STRESS_PHASES,
    StressGpu,
    StressResults,
    stress_markdown,
    stress_table,
    stress_verdicts,
)

__all__ = [
    "ACHIEVABLE",
    "CAUSES",
    "DATASHEET",
    "EXIT_CODES",
    "LAYERS",
    "PROTOCOL",
    "REPORT_FORMAT",
    "REPORT_VERSION",
    "SCHEMA_PATH",
    "SLOW_FRACTION",
    "STATUSES",
    "STRESS_PHASES",
    "Cause",
    "Context",
    "Diagnosis",
    "Finding",
    "StressGpu",
    "StressResults",
    "explain",
    "load_schema",
    "min_driver_for",
    "report_json",
    "report_markdown",
    "stress_markdown",
    "stress_only_report",
    "stress_table",
    "stress_verdicts",
    "torch_index_for",
]
