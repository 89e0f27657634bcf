"""Diagnostics and the stress benchmark.

`probe/` (a package run as a directory) and `stress.py` run inside the interpreter being
diagnosed (stdlib and torch only, Python 3.8+, no gputui imports; the rules they share with
gputui are loaded from `gputui/rules/` by path) and speak the JSON-lines protocol documented
in `probe/__init__.py`; `runner.py` starts and watches them; `verdicts/` turns their events
into findings, fixes and reports.  The monitor process itself never imports torch nor initialises CUDA.
"""

from pathlib import Path

PROBE = Path(__file__).with_name("probe")
"""The diagnosis child: a package directory, run as `python PROBE`."""
STRESS = Path(__file__).with_name("stress.py")
"""The stress-benchmark child script."""
