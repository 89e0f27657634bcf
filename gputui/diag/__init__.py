"""Diagnostics and the stress benchmark.

`probe.py` and `stress.py` run inside the interpreter being diagnosed (stdlib and torch only,
Python 3.8+, no gputui imports) and speak the JSON-lines protocol documented in `probe.py`;
`runner.py` starts and watches them; `verdicts.py` turns their events into findings, fixes
and reports.  The monitor process itself never imports torch nor initialises CUDA.
"""

from pathlib import Path

PROBE = Path(__file__).with_name("probe.py")
"""The diagnosis child script."""
STRESS = Path(__file__).with_name("stress.py")
"""The stress-benchmark child script."""
