"""A cause (the failure mode, what it means, how to fix it) and the facts from across the checks
that its fix depends on (`Context`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gputui.diag.verdicts.causes.wheels import INDEX_URL, MIN_DRIVER, torch_index_for


@dataclass
class Context:
    """Facts from across the checks that fixes depend on."""

    python: str = "python"
    driver_version: str | None = None
    driver_cuda: str | None = None
    torch_version: str | None = None
    torch_cuda: str | None = None
    in_container: bool = False

    def pip_install_torch(self) -> list[str]:
        index, pin = torch_index_for(self.driver_cuda)
        spec = f"torch=={pin}" if pin else "torch"
        lines = []
        if self.torch_version:
            lines.append(f"{self.python} -m pip uninstall -y torch")
        lines.append(f"{self.python} -m pip install {spec} --index-url {INDEX_URL.format(index)}")
        return lines

    def index_note(self) -> str:
        index, pin = torch_index_for(self.driver_cuda)
        if self.driver_cuda is None:
            return (
                f"{index} needs a driver for CUDA 13.0 (R580 or newer); with an older driver pick the "
                "index for the 'CUDA Version' that nvidia-smi prints (cu128: R570+, cu126: R560+)"
            )
        if pin:
            return (
                f"the driver supports CUDA {self.driver_cuda}: current torch needs CUDA 12.6 (driver "
                f"{MIN_DRIVER[(12, 6)]}+); torch {pin} is the newest built for {index}"
            )
        return f"{index} matches this driver (CUDA {self.driver_cuda}, driver {self.driver_version})"


@dataclass(frozen=True)
class Cause:
    title: str
    """The failure mode, named."""
    meaning: str
    """What it means, in plain words."""
    fix: Callable[[Context, dict[str, Any]], list[str]] = lambda ctx, ev: []
    """The steps that fix it, most likely first."""
    refs: tuple[str, ...] = ()
    """Where users hit it (issue trackers)."""


def static(*lines: str) -> Callable[[Context, dict[str, Any]], list[str]]:
    return lambda ctx, ev: list(lines)
