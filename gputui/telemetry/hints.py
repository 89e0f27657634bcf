"""Efficiency hints: what GPM's figures say about how a GPU is used, and the usual remedy.

Pure data, like the alert engine: `HintEngine.update(snapshot)` gives each GPU's hints at
that tick.  Time is the snapshots' own, so a replay gives the hints the live run gave.
Thresholds are the config file's `[hints]` table (`HintConfig`).

  fp32_no_tensor  busy, the tensor cores idle while the FP32 pipe works: float32 matmuls
                  without TF32 or reduced precision
  tiny_kernels    kernels run, but keep the SMs almost idle: tiny kernels, or a GPU waiting on
                  the CPU or the data loader between them.  Never on a GPU whose figures are
                  the spinning signature's (`health.polling_kernel`: GR engine ~100 %, no
                  arithmetic, DRAM idle): one kernel polling, as NCCL waiting for a peer, at
                  any age; job health names it ("one kernel spinning for 12 s", then
                  "waiting in a collective for 3 min?"), and `with_spinning` puts that on the
                  GPU's card in its place
  dram_bound      device memory bandwidth near its maximum
  idle_memory     memory held while the GPU has done nothing for minutes
  input_bound     the GPU works in bursts (low mean utilization over a window) while the
                  rank's child processes, its DataLoader workers, are pegged at ~100 % of a
                  core each: the GPU waits for data (`GpuProcess.worker_cpu`)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gputui.options import option
from gputui.telemetry.health_config import HealthConfig
from gputui.telemetry.model import GpuSample, Snapshot

if TYPE_CHECKING:
    from gputui.telemetry.health_report import HealthReport

MIB = 2**20


@dataclass(frozen=True)
class HintConfig:
    """The config file's [hints]: when an efficiency hint is shown."""

    enabled: bool = option("show efficiency hints on the cards and in the detail view", True)
    busy_util: int = option(
        "NVML utilization (percent) at or above which a GPU counts as busy (fp32_no_tensor)",
        50,
        min=0,
        max=100,
    )
    tensor_idle_below: float = option(
        "tensor-core activity (percent) below which the tensor cores count as idle", 5.0, min=0.0, max=100.0
    )
    fp32_active_above: float = option(
        "FP32-pipe activity (percent) at or above which float32 math counts as the work",
        20.0,
        min=0.0,
        max=100.0,
    )
    tiny_kernels_min_util: int = option(
        "tiny_kernels: only when kernels ran at least this share of the time (percent)", 10, min=0, max=100
    )
    tiny_kernels_sm_ratio: float = option(
        "tiny_kernels: SM activity below this fraction of NVML's utilization (0.25: the SMs "
        "were busy for less than a quarter of the time kernels ran)",
        0.25,
        min=0.0,
        max=1.0,
    )
    dram_bound_above: float = option(
        "DRAM bandwidth (percent of the maximum) at or above which a GPU counts as memory-bound",
        70.0,
        min=0.0,
        max=100.0,
    )
    idle_minutes: float = option(
        "idle_memory: utilization at or below idle_max_util for this many minutes", 5.0, min=0.0
    )
    idle_max_util: int = option("idle_memory: utilization (percent) that counts as idle", 0, min=0, max=100)
    idle_min_memory_mib: int = option("idle_memory: memory used (MiB) that counts as held", 1024, min=0)
    input_bound_seconds: float = option(
        "input_bound: the window (seconds) over which the GPU's utilization is averaged", 30.0, min=1.0
    )
    input_bound_max_util: float = option(
        "input_bound: mean utilization (percent) below which the GPU counts as waiting",
        70.0,
        min=0.0,
        max=100.0,
    )
    input_bound_min_util: float = option(
        "input_bound: mean utilization (percent) at or above which the GPU counts as in use",
        1.0,
        min=0.0,
        max=100.0,
    )
    input_bound_worker_cpu: float = option(
        "input_bound: CPU (percent of one core) at or above which a worker counts as pegged", 90.0, min=0.0
    )
    input_bound_working_cpu: float = option(
        "input_bound: CPU (percent of one core) at or above which a child process counts as working "
        "(an idle forkserver or compile worker does not)",
        10.0,
        min=0.0,
    )
    input_bound_busy_share: float = option(
        "input_bound: the share of a rank's working children that must be pegged (0.5: most)",
        0.5,
        min=0.0,
        max=1.0,
    )


@dataclass(frozen=True)
class Hint:
    """One efficiency hint about one GPU."""

    kind: str
    """fp32_no_tensor, tiny_kernels, dram_bound, idle_memory, input_bound."""
    gpu: int
    short: str
    """A few words for a card: "no tensor cores: try TF32 or bf16"."""
    evidence: str
    """The numbers behind it: "utilization 100% · SM 96.9% · tensor 0.0% · FP32 pipe 77.2%"."""
    remedies: tuple[str, ...]
    """What people do about it, most effective first."""


KINDS = ("fp32_no_tensor", "tiny_kernels", "dram_bound", "idle_memory", "input_bound")
GPM_KINDS = ("fp32_no_tensor", "tiny_kernels", "dram_bound")
"""The hints read from GPM (the `efficiency` alert fires on these)."""


def idle_holding_memory(g: GpuSample, max_util: int, min_memory: int) -> bool:
    """The GPU does nothing (utilization at or below `max_util` %) while at least
    `min_memory` bytes are held on it: the idle_memory alert's and hint's condition."""
    held = g.mem_used is not None and g.mem_used >= min_memory
    return held and g.gpu_util is not None and g.gpu_util <= max_util


REMEDIES: dict[str, tuple[str, ...]] = {
    "fp32_no_tensor": (
        "TF32 tensor cores for float32 matmuls: torch.backends.cuda.matmul.allow_tf32 = True "
        '(or torch.set_float32_matmul_precision("high"))',
        'or mixed precision: with torch.autocast("cuda", dtype=torch.bfloat16): ... (fp16 with a GradScaler)',
    ),
    "tiny_kernels": (
        "larger batches: more work per kernel launch",
        "more DataLoader workers and pinned memory: DataLoader(..., num_workers=8, pin_memory=True), "
        ".to(device, non_blocking=True)",
        'CUDA graphs to launch many small kernels at once: torch.compile(model, mode="reduce-overhead") '
        "or torch.cuda.CUDAGraph",
        "avoid synchronizing every step (.item(), .cpu(), print of a GPU tensor)",
    ),
    "dram_bound": (
        "fuse element-wise work so tensors pass through memory once: torch.compile",
        "smaller data types move fewer bytes: bf16/fp16 activations, fp8 where it holds up",
        "avoid needless copies (.contiguous(), .clone(), dtype round trips)",
    ),
    "idle_memory": (
        "end the process holding the memory (the Processes tab, 2, then T) if nobody uses it",
        "a PyTorch process keeps freed memory cached: torch.cuda.empty_cache() returns it",
    ),
    "input_bound": (
        "more DataLoader workers, up to the free cores: DataLoader(..., num_workers=N)",
        "pinned memory and asynchronous copies: DataLoader(..., pin_memory=True), "
        ".to(device, non_blocking=True)",
        "prefetch more batches: DataLoader(..., prefetch_factor=4, persistent_workers=True)",
        "faster storage or cheaper items: local NVMe, a page-cached or pre-decoded dataset, "
        "decoding and augmentation on the GPU (NVIDIA DALI, torchvision.transforms.v2 on CUDA tensors)",
    ),
}


def _pct(v: float | None) -> str:
    return "N/A" if v is None else f"{v:.1f}%"


DEFAULT_HEALTH = HealthConfig()


def gpu_hints(
    g: GpuSample, cfg: HintConfig, idle_seconds: float | None = None, spin: HealthConfig = DEFAULT_HEALTH
) -> tuple[Hint, ...]:
    """The hints one GPU sample gives.  `idle_seconds`: how long the GPU has been idle with
    memory held (HintEngine keeps that); None when unknown.  `spin`: the [health] settings,
    whose spinning signature is not tiny kernels."""
    from gputui.telemetry.health import polling_kernel  # (the engines': not for the first frame)

    if not cfg.enabled or g.lost:
        return ()
    out: list[Hint] = []
    w = g.activity
    util = g.gpu_util
    if w is not None and util is not None:
        tensor, fp32, sm, dram = w.tensor_active, w.fp32_active, w.sm_active, w.dram_active
        if (
            util >= cfg.busy_util
            and tensor is not None
            and fp32 is not None
            and tensor < cfg.tensor_idle_below
            and fp32 >= cfg.fp32_active_above
        ):
            out.append(
                Hint(
                    "fp32_no_tensor",
                    g.index,
                    "no tensor cores: try TF32 or bf16",
                    f"utilization {util}% · SM {_pct(sm)} · tensor cores {_pct(tensor)} · "
                    f"FP32 pipe {_pct(fp32)}",
                    REMEDIES["fp32_no_tensor"],
                )
            )
        if (
            util >= cfg.tiny_kernels_min_util
            and sm is not None
            and sm < cfg.tiny_kernels_sm_ratio * util
            and polling_kernel(g, spin) is not True
        ):
            out.append(
                Hint(
                    "tiny_kernels",
                    g.index,
                    "SMs idle: tiny kernels or CPU-bound",
                    f"kernels ran {util}% of the time but the SMs were {_pct(sm)} active",
                    REMEDIES["tiny_kernels"],
                )
            )
        if dram is not None and dram >= cfg.dram_bound_above:
            out.append(
                Hint(
                    "dram_bound",
                    g.index,
                    "memory-bandwidth bound",
                    f"DRAM bandwidth {_pct(dram)} of the maximum · SM {_pct(sm)} · "
                    f"tensor cores {_pct(tensor)}",
                    REMEDIES["dram_bound"],
                )
            )
    if idle_seconds is not None and idle_seconds >= cfg.idle_minutes * 60:
        held = (g.mem_used or 0) / 2**30
        minutes = idle_seconds / 60
        out.append(
            Hint(
                "idle_memory",
                g.index,
                f"idle {minutes:.0f} min holding {held:.1f} GiB",
                f"utilization ≤ {cfg.idle_max_util}% for {minutes:.1f} min while {held:.1f} GiB is held",
                REMEDIES["idle_memory"],
            )
        )
    return tuple(out)


def pegged_workers(cpu: tuple[float, ...] | None, cfg: HintConfig) -> tuple[int, float] | None:
    """(how many, their mean CPU %) of one rank's children that are pegged, when they are
    most of its working children (`input_bound_busy_share`) and at least one; None when
    they are not, or the children's CPU is not known (None is never read as idle)."""
    if cpu is None:
        return None
    busy = [c for c in cpu if c >= cfg.input_bound_worker_cpu]
    working = sum(c >= cfg.input_bound_working_cpu for c in cpu)
    if not busy or len(busy) < cfg.input_bound_busy_share * working:
        return None
    return len(busy), sum(busy) / len(busy)


def input_bound_hint(
    gpu: int, mean_util: float | None, seconds: float, workers: list[tuple[int, float]], cfg: HintConfig
) -> Hint | None:
    """The input_bound hint of one GPU: its utilization averaged `mean_util` over the last
    `seconds` (None: not known over the whole window) while its ranks' `workers` ((pegged
    workers, their mean CPU %) per rank, from `pegged_workers`) are pegged."""
    if not cfg.enabled or mean_util is None or seconds < cfg.input_bound_seconds or not workers:
        return None
    if not cfg.input_bound_min_util <= mean_util < cfg.input_bound_max_util:
        return None
    n = sum(k for k, _ in workers)
    cpu = sum(k * c for k, c in workers) / n
    noun = "loader worker" if n == 1 else "loader workers"
    ranks = "its process" if len(workers) == 1 else f"its {len(workers)} processes"
    return Hint(
        "input_bound",
        gpu,
        f"input-bound: {n} {noun} at {cpu:.0f} % CPU",
        f"utilization {mean_util:.0f}% on average over the last {cfg.input_bound_seconds:.0f} s while "
        f"{n} child process(es) of {ranks} (DataLoader workers) ran at {cpu:.0f} % of a core each: "
        "the GPU waits for data",
        REMEDIES["input_bound"],
    )


class HintEngine:
    """Keeps how long each GPU has been idle with memory held; `update` gives the hints.
    `spin`: the [health] settings (a GPU showing their spinning signature is not tiny
    kernels)."""

    def __init__(self, config: HintConfig | None = None, spin: HealthConfig | None = None) -> None:
        self.config = config or HintConfig()
        self.spin = spin or DEFAULT_HEALTH
        self._idle_since: dict[int, float] = {}
        self._util: dict[int, deque[tuple[float, int]]] = {}
        """GPU -> (time, utilization) of the ticks in the input_bound window."""
        self._util_since: dict[int, float] = {}
        """GPU -> since when its utilization has been known at every tick."""
        self._last_ts: float | None = None
        self.current: dict[int, tuple[Hint, ...]] = {}
        """GPU -> its hints at the last update (replaced, never mutated)."""

    def reset(self) -> None:
        self._idle_since.clear()
        self._util.clear()
        self._util_since.clear()
        self._last_ts = None
        self.current = {}

    def update(self, snap: Snapshot) -> dict[int, tuple[Hint, ...]]:
        ts = snap.timestamp
        if self._last_ts is not None and ts < self._last_ts:
            self.reset()  # a replay looped
        self._last_ts = ts
        cfg = self.config
        out: dict[int, tuple[Hint, ...]] = {}
        workers = self._workers(snap) if cfg.enabled else {}
        for g in snap.gpus:
            if idle_holding_memory(g, cfg.idle_max_util, cfg.idle_min_memory_mib * MIB):
                since = self._idle_since.setdefault(g.index, ts)
                idle: float | None = ts - since
            else:
                self._idle_since.pop(g.index, None)
                idle = None
            hints = gpu_hints(g, cfg, idle, self.spin)
            mean, seconds = self._mean_util(g, ts)
            ib = input_bound_hint(g.index, mean, seconds, workers.get(g.index, []), cfg)
            if ib is not None:
                hints = (ib, *hints)  # first: more specific than "SMs idle" (the card shows one)
            if hints:
                out[g.index] = hints
        self.current = out
        return out

    def _mean_util(self, g: GpuSample, ts: float) -> tuple[float | None, float]:
        """The GPU's mean utilization over the input_bound window, and how many seconds of
        known utilization lie behind it; (None, 0) after a tick without it."""
        i, util = g.index, g.gpu_util
        if util is None or g.lost:
            self._util.pop(i, None)
            self._util_since.pop(i, None)
            return None, 0.0
        window = self._util.setdefault(i, deque())
        window.append((ts, util))
        since = self._util_since.setdefault(i, ts)
        start = ts - self.config.input_bound_seconds
        while window[0][0] < start:
            window.popleft()
        return sum(u for _, u in window) / len(window), ts - since

    def _workers(self, snap: Snapshot) -> dict[int, list[tuple[int, float]]]:
        """GPU -> (pegged workers, their mean CPU %) of each of its ranks that has them."""
        out: dict[int, list[tuple[int, float]]] = {}
        seen: set[tuple[int, int]] = set()
        cfg = self.config
        for p in snap.processes:
            if p.worker_cpu is None or (p.gpu_index, p.pid) in seen:
                continue
            seen.add((p.gpu_index, p.pid))
            pegged = pegged_workers(p.worker_cpu, cfg)
            if pegged is not None:
                out.setdefault(p.gpu_index, []).append(pegged)
        return out


def with_spinning(
    hints: Mapping[int, tuple[Hint, ...]], report: HealthReport | None
) -> Mapping[int, tuple[Hint, ...]]:
    """Each GPU's hints for its card and detail view, a GPU showing job health's spinning
    signature first.  With GPM from its first tick: "one kernel spinning for 12 s", and once
    it has held `[health] spin_seconds`, "waiting in a collective for 3 min?": the age
    decides the words, not the kind (the figures are never "tiny kernels": `gpu_hints`).
    Without GPM, where busy at idle power may be tiny kernels too and a job's first second
    reads the same, only once it has held: "spinning or tiny kernels for 3 min?"."""
    shown = {} if report is None else {i: g for i, g in report.gpus.items() if g.certain or g.waiting}
    if not shown:
        return hints
    out = dict(hints)
    for i, g in shown.items():
        out[i] = (Hint("spinning", i, g.short, g.evidence, ()), *hints.get(i, ()))
    return out
