"""The header line (host, driver, CUDA, GPU count, live/replay/paused, time) and the
"recorded session" banner: every screen of the monitor shows both (the Overview's app, the
GPU detail view)."""

from __future__ import annotations

import time

from gputui.telemetry.model import MachineInfo
from gputui.ui.cards import join_items, kv
from gputui.ui.render import NA, Line, S, clean, line_len, pad_line
from gputui.ui.widgets.lines import LineWidget


class HeaderBar(LineWidget):
    """One line: host, driver, CUDA, GPU count, live/replay/paused, and the time."""

    DEFAULT_CSS = """
    HeaderBar { height: 1; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.info: MachineInfo | None = None
        self.live = True
        self.label = ""
        self.interval = 1.0
        self.paused = False
        self.position: tuple[int, int] | None = None
        self.timestamp: float | None = None
        self.alerts = 0
        """How many alerts are active."""

    def mirror(self, other: HeaderBar) -> None:
        """Say what `other` says (the GPU detail view's header follows the main screen's)."""
        for name in ("info", "live", "label", "interval", "paused", "position", "timestamp", "alerts"):
            setattr(self, name, getattr(other, name))

    def build(self, width: int, height: int) -> list[Line]:
        return [
            header_line(
                self.info,
                width,
                live=self.live,
                label=self.label,
                interval=self.interval,
                paused=self.paused,
                position=self.position,
                timestamp=self.timestamp,
                alerts=self.alerts,
            )
        ]


class Banner(LineWidget):
    """The "recorded session" banner: nobody should mistake a replay for live data."""

    DEFAULT_CSS = """
    Banner { height: auto; }
    """

    def __init__(self, text: str = "", *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.text = text

    def build(self, width: int, height: int) -> list[Line]:
        return [banner_line(self.text, width)] if self.text else []


def header_line(
    info: MachineInfo | None,
    width: int,
    *,
    live: bool,
    label: str,
    interval: float,
    paused: bool,
    position: tuple[int, int] | None,
    timestamp: float | None,
    alerts: int = 0,
) -> Line:
    sys_ = info.system if info else None
    left: Line = [(" gputui ", S.title)]
    items: list[Line] = []
    if sys_ and sys_.nvml_problem is not None:
        items.append([(clean(sys_.hostname), S.value)])
        items.append([("NVML unavailable", S.bad)])
    elif sys_:
        items.append([(clean(sys_.hostname), S.value)])
        items.append(kv("driver", clean(sys_.driver_version or NA)))
        items.append(kv("CUDA", clean(sys_.cuda_driver_version or NA)))
        n = len(info.devices) if info else 0
        items.append([(f"{n} GPU{'s' if n != 1 else ''}", S.label)])
    if paused:
        state: Line = [(" ⏸ PAUSED ", S.paused)]
    elif live:
        state = [("● live", S.live)]
    else:
        state = [("▶ replay", S.warn)]
    if position is not None:
        state.append((f" {position[0]}/{position[1]}", S.label))
    state.append((f" every {interval:g}s", S.label))
    when = ""
    if timestamp is not None:
        # live: the local wall clock; a recording: when it was recorded, in UTC so the same
        # file reads the same everywhere
        if live:
            when = time.strftime("%H:%M:%S", time.localtime(timestamp))
        else:
            when = time.strftime("recorded %Y-%m-%d %H:%M:%S UTC", time.gmtime(timestamp))
            if width < 100:  # the banner already says it is recorded: room for the host
                when = time.strftime("%m-%d %H:%M:%S UTC", time.gmtime(timestamp))
    right: Line = [(when + " ", S.value)]
    # by priority: active alerts, the state (live/replay/paused), the host, then driver, CUDA,
    # GPU count; a less important item never takes the place of a more important one
    priority = [*[1, 2, 3, 4][: len(items)], 0]
    if alerts:
        items.append([(f"⚠ {alerts} alert{'s' if alerts != 1 else ''}", S.warn)])
        priority.insert(len(items) - 1, 0)
    avail = width - line_len(left) - line_len(right) - 1
    if avail < line_len(state) + 2:
        right = []
        avail = width - line_len(left) - 1
    middle = join_items([*items, state], avail, "  ", priority, skip=False)
    gap = width - line_len(left) - line_len(middle) - line_len(right)
    return pad_line([*left, *middle, (" " * max(1, gap), None), *right], width)


def banner_line(text: str, width: int) -> Line:
    """The banner from "|"-separated parts, each starting with a priority digit: parts are
    dropped whole, least important first, until the rest fit; shown in their given order."""
    raw = [p.strip() for p in text.split("|") if p.strip()]
    prio = [int(p[0]) if p[0].isdigit() else 9 for p in raw]
    parts = [p[1:] if p[0].isdigit() else p for p in raw]
    line = join_items([[(p, S.banner)] for p in parts], width - 2, " · ", prio)
    return [(" ", S.banner), *pad_line(line, width - 1, S.banner)]
