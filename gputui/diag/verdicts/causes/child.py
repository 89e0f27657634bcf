"""The diagnosis itself: the child crashed or timed out, a check failed, the interpreter is unusable."""

from __future__ import annotations

from gputui.diag.verdicts.causes.base import Cause, static

CHILD: dict[str, Cause] = {
    "child-crashed": Cause(
        "The diagnosis crashed",
        "The diagnosing process died before it finished (see the signal and stderr): a crash inside "
        "the driver or a library is itself the finding.",
        static(
            "Run the same interpreter with "
            "`python -X faulthandler -c 'import torch; torch.zeros(1, device=\"cuda\")'`"
        ),
    ),
    "child-timeout": Cause(
        "The diagnosis hung",
        "A step did not finish in time and was killed; a hung CUDA initialisation usually means a "
        "driver in a bad state or a missing Fabric Manager.",
        static(
            "dmesg | grep -i -E 'xid|NVRM'",
            "On NVSwitch systems: systemctl status nvidia-fabricmanager",
        ),
    ),
    "check-error": Cause(
        "The check itself failed",
        "This check raised an unexpected error (traceback in the evidence); the checks that do "
        "not depend on it still ran.  Often the interpreter's packages are not what they seem.",
        static(
            "Read the traceback in this check's evidence (gputui diag --json)",
            "If it is gputui's fault, report it at the project's issue tracker with that evidence",
        ),
    ),
    "bad-interpreter": Cause(
        "Not a usable Python interpreter",
        "The interpreter could not be started, or it is older than Python 3.8.",
        static("Pick another interpreter (the path to a `python` executable)"),
    ),
}
