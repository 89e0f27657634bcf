"""Alerts: thresholds evaluated over snapshots, with fire/clear hysteresis.

Pure data (no Textual, no I/O): `AlertEngine.update(info, snapshot)` returns the alerts that
fired or cleared at that tick and keeps the active set.  Time is the snapshots' own
timestamps, so a replayed recording raises exactly the alerts the live run would have.

Rules (each can be switched off; see `AlertConfig` in `gputui.telemetry.alert_config` and
`gputui --print-config`):
  memory       GPU memory used, percent of total
  temperature  GPU core temperature, °C
  power        power draw, percent of the enforced power limit
  ecc          volatile uncorrected ECC errors (count since the driver loaded)
  xid          Xid events the driver reported (count since gputui began watching)
  gpu_lost     the GPU fell off the bus
  idle_memory  0 % utilization for N minutes while memory is held ("reserved but wasted")
  process_age  one process holding GPU memory for more than N hours
  efficiency   a GPM efficiency hint (tensor cores idle under float32 work, tiny kernels,
               memory-bound; thresholds in [hints]) holding for N minutes
  job_stuck    a job's health verdict (gputui.telemetry.health) says it is stuck in a
               collective, names the rank the others wait for, or a rank that exited while
               the others wait; the wait threshold is [health] stuck_seconds

A threshold rule fires when its value has been at or above `above` for `for_seconds`, and
clears when the value falls below `clear_below` (hysteresis: a value hovering around the
threshold does not flap).  Duration rules fire when their condition has held long enough
and clear as soon as it no longer holds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from gputui.rules.timestamps import iso_utc
from gputui.telemetry.alert_config import (
    AlertConfig,
    ThresholdRule,
)
from gputui.telemetry.health import HealthEngine
from gputui.telemetry.health_config import STUCK_VERDICTS, HealthConfig
from gputui.telemetry.health_report import HealthReport, JobHealth
from gputui.telemetry.hints import GPM_KINDS, MIB, HintConfig, gpu_hints, idle_holding_memory
from gputui.telemetry.model import DeviceInfo, GpuProcess, GpuSample, MachineInfo, Snapshot

# --------------------------------------------------------------------------------------
# Alerts and events
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Alert:
    """One active condition."""

    key: str
    """Stable identity: "temperature:gpu0", "process_age:gpu1:pid567:1795299714.84"."""
    kind: str
    """The rule: memory, temperature, power, ecc, xid, gpu_lost, idle_memory, process_age."""
    gpu: int
    value: float | None
    """The value that crossed the threshold (latest while it stays active)."""
    threshold: float
    unit: str
    message: str
    since: float
    """Timestamp (seconds since the epoch) when the condition began."""
    fired_at: float
    """Timestamp of the tick at which the alert fired."""
    pid: int | None = None
    process_name: str | None = None
    user: str | None = None


@dataclass(frozen=True)
class AlertEvent:
    state: str
    """"firing" or "resolved"."""
    alert: Alert
    timestamp: float
    """Timestamp of the tick that fired or cleared it."""


def event_json(event: AlertEvent, info: MachineInfo | None, suppressed: int = 0) -> dict[str, Any]:
    """The document an alert command receives on stdin (format gputui-alert, version 1)."""
    a = event.alert
    dev = info.devices[a.gpu] if info and 0 <= a.gpu < len(info.devices) else None
    return {
        "format": "gputui-alert",
        "version": 1,
        "state": event.state,
        "key": a.key,
        "kind": a.kind,
        "message": a.message,
        "hostname": info.system.hostname if info else None,
        "gpu": {
            "index": a.gpu,
            "name": dev.name if dev else None,
            "uuid": dev.uuid if dev else None,
            "pci_bus_id": dev.bus_id if dev else None,
        },
        "value": a.value,
        "threshold": a.threshold,
        "unit": a.unit,
        "since": iso_utc(a.since),
        "timestamp": iso_utc(event.timestamp),
        "process": (None if a.pid is None else {"pid": a.pid, "name": a.process_name, "user": a.user}),
        "suppressed": suppressed,
    }


# --------------------------------------------------------------------------------------
# The engine
# --------------------------------------------------------------------------------------


@dataclass
class _State:
    pending_since: float | None = None
    alert: Alert | None = None


ValueFn = Callable[[GpuSample, DeviceInfo], float | None]


def _memory_pct(g: GpuSample, d: DeviceInfo) -> float | None:
    if g.mem_used is None or not d.memory_total:
        return None
    return 100.0 * g.mem_used / d.memory_total


def _power_pct(g: GpuSample, d: DeviceInfo) -> float | None:
    limit = g.power_limit or d.power_limit
    if g.power_draw is None or not limit:
        return None
    return 100.0 * g.power_draw / limit


def _temperature(g: GpuSample, d: DeviceInfo) -> float | None:
    return None if g.temperature is None else float(g.temperature)


def _xid(g: GpuSample, d: DeviceInfo) -> float | None:
    return None if g.xid_count is None else float(g.xid_count)


def _ecc(g: GpuSample, d: DeviceInfo) -> float | None:
    v = g.ecc_volatile_uncorrected
    return None if v is None else float(v)


#: kind -> (value of a GPU, unit, how to say it)
_THRESHOLDS: dict[str, tuple[ValueFn, str, str]] = {
    "memory": (_memory_pct, "%", "GPU {gpu}: memory {value:.1f}% used (alert at {threshold:g}%)"),
    "temperature": (_temperature, "°C", "GPU {gpu}: temperature {value:.0f} °C (alert at {threshold:g} °C)"),
    "power": (
        _power_pct,
        "%",
        "GPU {gpu}: power draw at {value:.0f}% of its limit (alert at {threshold:g}%)",
    ),
    "ecc": (_ecc, "errors", "GPU {gpu}: {value:.0f} uncorrected ECC error(s) since the driver loaded"),
    "xid": (
        _xid,
        "events",
        "GPU {gpu}: {value:.0f} Xid event(s) from the driver (the detail view names them)",
    ),
}


class AlertEngine:
    """Evaluates `AlertConfig` tick by tick; `active` is the set of alerts firing now."""

    def __init__(
        self,
        config: AlertConfig | None = None,
        hints: HintConfig | None = None,
        health: HealthConfig | None = None,
    ) -> None:
        self.config = config or AlertConfig()
        self.health = HealthEngine(dataclasses.replace(health or HealthConfig(), enabled=True))
        """The job verdicts the job_stuck rule reads, when `update` is given no report (the
        rule is evaluated whether or not the health view is on)."""
        self.hints = dataclasses.replace(hints or HintConfig(), enabled=True)
        """The hints' thresholds (the efficiency rule is evaluated whether or not the hints
        are shown)."""
        self._states: dict[str, _State] = {}
        self._first_seen: dict[tuple[int, int], float] = {}
        self._last_ts: float | None = None
        self.active: dict[str, Alert] = {}
        """Replaced (never mutated) on every update: safe to read from another thread."""

    def reset(self) -> None:
        self._states.clear()
        self._first_seen.clear()
        self._last_ts = None
        self.active = {}
        self.health.reset()

    def update(
        self, info: MachineInfo, snap: Snapshot, health: HealthReport | None = None
    ) -> list[AlertEvent]:
        """`health`: the job verdicts of this tick where the caller has them (a Hub with a
        HealthEngine); else the engine's own."""
        ts = snap.timestamp
        events: list[AlertEvent] = []
        if self._last_ts is not None and ts < self._last_ts:
            # time went backwards (a replay looped): what was active is over
            events += [AlertEvent("resolved", a, ts) for a in self.active.values()]
            self.reset()
        self._last_ts = ts
        cfg = self.config
        seen: set[str] = set()
        devices = info.devices
        for g in snap.gpus:
            if not 0 <= g.index < len(devices):
                continue
            d = devices[g.index]
            if cfg.gpu_lost.enabled:
                self._lost(events, seen, g.index, g.lost, ts)
            if g.lost:
                continue
            for kind, (value_fn, unit, text) in _THRESHOLDS.items():
                rule: ThresholdRule = getattr(cfg, kind)
                if rule.enabled:
                    self._threshold(events, seen, kind, rule, g.index, value_fn(g, d), unit, text, ts)
            if cfg.idle_memory.enabled:
                self._idle(events, seen, g, ts)
            if cfg.efficiency.enabled:
                self._efficiency(events, seen, g, ts)
        if cfg.process_age.enabled:
            self._process_age(events, seen, snap.processes, ts)
        else:
            self._first_seen.clear()
        if cfg.job_stuck.enabled:
            report = health if health is not None else self.health.update(snap)
            for job in report.jobs:
                self._job_stuck(events, seen, job, ts)
        # conditions whose subject vanished (a process exited, a rule was switched off)
        for key in [k for k in self._states if k not in seen]:
            state = self._states.pop(key)
            if state.alert is not None:
                events.append(AlertEvent("resolved", state.alert, ts))
        self.active = {k: s.alert for k, s in self._states.items() if s.alert is not None}
        return events

    # ---- rule kinds ------------------------------------------------------------------

    def _threshold(
        self,
        events: list[AlertEvent],
        seen: set[str],
        kind: str,
        rule: ThresholdRule,
        gpu: int,
        value: float | None,
        unit: str,
        text: str,
        ts: float,
    ) -> None:
        key = f"{kind}:gpu{gpu}"
        seen.add(key)
        state = self._states.setdefault(key, _State())
        if value is None:  # not available this tick: keep what is, start no new episode
            state.pending_since = None
            return
        if state.alert is not None:
            if value < rule.clear_below:
                cleared = _with_value(state.alert, value, text, rule.above)
                events.append(AlertEvent("resolved", cleared, ts))
                state.alert = None
                state.pending_since = None
            else:
                state.alert = _with_value(state.alert, value, text, rule.above)
            return
        if value >= rule.above:
            if state.pending_since is None:
                state.pending_since = ts
            if ts - state.pending_since >= rule.for_seconds:
                state.alert = Alert(
                    key, kind, gpu, value, rule.above, unit,
                    text.format(gpu=gpu, value=value, threshold=rule.above),
                    state.pending_since, ts,
                )  # fmt: skip
                events.append(AlertEvent("firing", state.alert, ts))
        else:
            state.pending_since = None

    def _duration(
        self,
        events: list[AlertEvent],
        seen: set[str],
        key: str,
        condition: bool,
        ts: float,
        hold: float,
        make: Callable[[float], Alert],
        since: float | None = None,
    ) -> None:
        """A condition that fires after holding for `hold` seconds and clears when it ends."""
        seen.add(key)
        state = self._states.setdefault(key, _State())
        if not condition:
            if state.alert is not None:
                events.append(AlertEvent("resolved", state.alert, ts))
            state.alert = None
            state.pending_since = None
            return
        if state.pending_since is None:
            state.pending_since = ts if since is None else since
        if state.alert is None and ts - state.pending_since >= hold:
            state.alert = make(state.pending_since)
            events.append(AlertEvent("firing", state.alert, ts))

    def _lost(self, events: list[AlertEvent], seen: set[str], gpu: int, lost: bool, ts: float) -> None:
        key = f"gpu_lost:gpu{gpu}"

        def make(since: float) -> Alert:
            text = f"GPU {gpu}: fell off the bus (GPU is lost); check dmesg for Xid 79"
            return Alert(key, "gpu_lost", gpu, None, 0.0, "", text, since, ts)

        self._duration(events, seen, key, lost, ts, 0.0, make)

    def _idle(self, events: list[AlertEvent], seen: set[str], g: GpuSample, ts: float) -> None:
        rule = self.config.idle_memory
        key = f"idle_memory:gpu{g.index}"

        def make(since: float) -> Alert:
            minutes = (ts - since) / 60
            mem = (g.mem_used or 0) / 2**30
            return Alert(
                key, "idle_memory", g.index, minutes, rule.minutes, "min",
                f"GPU {g.index}: idle ({g.gpu_util}% utilization) for {minutes:.1f} min "
                f"while {mem:.1f} GiB of memory is held",
                since, ts,
            )  # fmt: skip

        condition = idle_holding_memory(g, rule.max_util, rule.min_memory_mib * MIB)
        self._duration(events, seen, key, condition, ts, rule.minutes * 60, make)

    def _efficiency(self, events: list[AlertEvent], seen: set[str], g: GpuSample, ts: float) -> None:
        rule = self.config.efficiency
        hints = {h.kind: h for h in gpu_hints(g, self.hints, spin=self.health.config)}
        for kind in GPM_KINDS:
            key = f"efficiency:gpu{g.index}:{kind}"
            hint = hints.get(kind)

            def make(since: float, hint: Any = hint, key: str = key) -> Alert:
                minutes = (ts - since) / 60
                return Alert(
                    key, "efficiency", g.index, minutes, rule.minutes, "min",
                    f"GPU {g.index}: {hint.short} for {minutes:.1f} min ({hint.evidence})",
                    since, ts,
                )  # fmt: skip

            self._duration(events, seen, key, hint is not None, ts, rule.minutes * 60, make)

    def _process_age(
        self, events: list[AlertEvent], seen: set[str], procs: Iterable[GpuProcess], ts: float
    ) -> None:
        rule = self.config.process_age
        present: set[tuple[int, int]] = set()
        for p in procs:
            ident = (p.gpu_index, p.pid)
            present.add(ident)
            first = self._first_seen.setdefault(ident, ts)
            start = p.create_time if p.create_time is not None else first
            holding = p.gpu_memory is not None and p.gpu_memory >= rule.min_memory_mib * MIB
            key = f"process_age:gpu{p.gpu_index}:pid{p.pid}:{start:.2f}"

            def make(since: float, p: GpuProcess = p, key: str = key) -> Alert:
                hours = (ts - since) / 3600
                who = f"{p.name or 'pid ' + str(p.pid)} (pid {p.pid}" + (f", {p.user})" if p.user else ")")
                return Alert(
                    key, "process_age", p.gpu_index, hours, rule.hours, "h",
                    f"GPU {p.gpu_index}: {who} has held "
                    f"{(p.gpu_memory or 0) / 2**30:.1f} GiB for {hours:.1f} h",
                    since, ts, p.pid, p.name, p.user,
                )  # fmt: skip

            self._duration(events, seen, key, holding, ts, rule.hours * 3600, make, since=start)
        for ident in [i for i in self._first_seen if i not in present]:
            del self._first_seen[ident]

    def _job_stuck(self, events: list[AlertEvent], seen: set[str], job: JobHealth, ts: float) -> None:
        key = "job_stuck:" + ":".join(job.key)
        v = job.verdict
        stuck = v is not None and v.kind in STUCK_VERDICTS

        def make(since: float) -> Alert:
            assert v is not None
            named = [r for r in (*job.ranks, *job.exited) if r.pid in v.pids]
            gpu = named[0].gpu if named else job.ranks[0].gpu
            pid = named[0].pid if named else None
            return Alert(
                key, "job_stuck", gpu, ts - since, self.health.config.stuck_seconds, "s",
                f"{job_label(job)}: {v.short}", since, ts, pid,
            )  # fmt: skip

        since = v.since if v is not None and v.since is not None else ts
        self._duration(events, seen, key, stuck, ts, 0.0, make, since=since)


def job_label(job: JobHealth) -> str:
    """A job of ranks in words: its Slurm job step or pod as its ranks' JOB column names it
    (`gputui.telemetry.host.jobs.job_label`, the one job label: "slurm 555.0 (env)"), or "job
    of launcher PID 1013".  Untrusted text (a Slurm id, a pod name) is escaped."""
    from gputui.telemetry.host.jobs import job_label as label
    from gputui.telemetry.model import Job
    from gputui.untrusted import escaped

    kind, *rest = job.key
    if kind == "launcher":
        return f"job of launcher PID {rest[0]}"
    known = job.job
    if known is None:  # a report made without its ranks' job: what its key says
        step = rest[1] if len(rest) > 1 else ""
        known = Job(
            kind, rest[0] if rest else "?", step=step or None, source=rest[2] if len(rest) > 2 else "cgroup"
        )
    return escaped(label(known))


def _with_value(alert: Alert, value: float, text: str, threshold: float) -> Alert:
    """The active alert with the latest value (its identity and start stay)."""
    if alert.value == value:
        return alert
    return Alert(
        alert.key, alert.kind, alert.gpu, value, alert.threshold, alert.unit,
        text.format(gpu=alert.gpu, value=value, threshold=threshold),
        alert.since, alert.fired_at,
    )  # fmt: skip


EFFICIENCY_SHORT = {
    "fp32_no_tensor": "no tensor cores",
    "tiny_kernels": "SMs idle",
    "dram_bound": "DRAM-bound",
}


def short_text(alert: Alert) -> str:
    """A few words for a GPU card's border or a compact row: "86°C", "mem 96%", "idle 31 min"."""
    v = alert.value
    if alert.kind == "temperature" and v is not None:
        return f"{v:.0f}°C"
    if alert.kind == "memory" and v is not None:
        return f"mem {v:.0f}%"
    if alert.kind == "power" and v is not None:
        return f"power {v:.0f}%"
    if alert.kind == "ecc" and v is not None:
        return f"ECC errors {v:.0f}"
    if alert.kind == "idle_memory" and v is not None:
        return f"idle {v:.0f} min, memory held"
    if alert.kind == "process_age" and v is not None:
        return f"pid {alert.pid} held {v:.0f} h"
    if alert.kind == "job_stuck":
        return "job stuck"
    if alert.kind == "efficiency":
        return EFFICIENCY_SHORT.get(alert.key.rsplit(":", 1)[-1], "inefficient")
    return alert.kind.replace("_", " ")
