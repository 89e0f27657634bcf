"""The variables that change how CUDA, torch and NCCL start, each with the form of its value.

One table, one place (`START_VARIABLES`), standard library only, Python 3.8+, no gputui
imports: like gputui/rules/, the diagnosis child loads this file by its path and checks
every one of these that is set before any CUDA call (a malformed value named, not a crash
explained afterwards); gputui's own process imports it as `gputui.startvars` and names the
ones set in a child that died as the suspects (`start_suspects`).

Each validator returns the problem with a value in words, or None when the value is well
formed.  Formats from NVIDIA's "CUDA Environment Variables" (CUDA Programming Guide), NCCL's
"Environment Variables" page, PyTorch's "CUDA semantics: memory management" and c10's
allocator-config parser (the tests compare `alloc_conf` with torch's own parser, which the
CPU build has too).  CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER are judged by the diagnosis's
visibility check with gputui/rules/cuda_devices.py's `visible_devices` (`checked_by`).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass


def _in(allowed: Sequence[str], *, fold: bool = False, what: str = "") -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        v = value.strip().lower() if fold else value
        if v in ((a.lower() for a in allowed) if fold else allowed):
            return None
        listed = ", ".join(allowed[:-1]) + " or " + allowed[-1] if len(allowed) > 1 else allowed[0]
        return f"{value!r} is not {listed}" + (f" ({what})" if what else "")

    return check


_BIT = _in(("0", "1"))
_BOOL = _in(("0", "1", "true", "false"), fold=True)  # c10d's getCvarBool
_PY_BOOL = _in(("True", "False"))  # the allocator config's


def _integer(
    lo: int | None = None, hi: int | None = None, *, choices: Sequence[int] = ()
) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        text = value.strip()
        if not re.fullmatch(r"[+-]?[0-9]+", text):
            return f"{value!r} is not a whole number"
        n = int(text)
        if choices and n not in choices:
            return "{} is not one of {}".format(n, ", ".join(map(str, choices)))
        if lo is not None and n < lo:
            return f"{n} is below {lo}"
        if hi is not None and n > hi:
            return f"{n} is above {hi}"
        return None

    return check


def _number_between(
    lo: float, hi: float, *, open_low: bool = False, open_high: bool = False
) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        try:
            x = float(value.strip())
        except ValueError:
            return f"{value!r} is not a number"
        if not math.isfinite(x) or x < lo or x > hi or (open_low and x == lo) or (open_high and x == hi):
            return "{} is outside {}{}, {}{}".format(
                x, "(" if open_low else "[", lo, hi, ")" if open_high else "]"
            )
        return None

    return check


def _existing(kind: str) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        if not value.strip():
            return "empty"
        ok = os.path.isdir(value) if kind == "directory" else os.path.isfile(value)
        return None if ok else f"no {kind} {value!r}"

    return check


def _not_a_file(value: str) -> str | None:
    """A directory CUDA creates if needed: only a file in its place is wrong."""
    if not value.strip():
        return "empty"
    return (
        f"{value!r} exists and is not a directory"
        if os.path.exists(value) and not os.path.isdir(value)
        else None
    )


def _tokens(allowed: Sequence[str], *, sep: str = ",") -> Callable[[str], str | None]:
    """A list of names from `allowed` (any case), optionally led by ^ (all but these)."""
    names = {a.lower() for a in allowed}

    def check(value: str) -> str | None:
        parts = [t.strip() for t in value.lstrip("^").split(sep)]
        bad = [t for t in parts if t.lower() not in names]
        if bad:
            return "{} not {}".format(", ".join(repr(t) for t in bad), "one of " + ", ".join(allowed))
        return None

    return check


def _per_collective(allowed: Sequence[str]) -> Callable[[str], str | None]:
    """NCCL_ALGO / NCCL_PROTO: a list, or per collective (2.24+) `allreduce:tree,ring;...`."""
    plain = _tokens(allowed)

    def check(value: str) -> str | None:
        for part in value.split(";"):
            if not part.strip():
                return f"{value!r} has an empty entry"
            problem = plain(part.split(":", 1)[1] if ":" in part else part)
            if problem:
                return problem
        return None

    return check


#: NCCL's topology levels (NCCL_P2P_LEVEL, NCCL_NET_GDR_LEVEL), nearest first.
NCCL_LEVELS = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PXN", "P2C", "PHB", "SYS")


def _nccl_level(value: str) -> str | None:
    if value.strip().upper() in NCCL_LEVELS or re.fullmatch(r"[0-9]+", value.strip()):
        return None
    return "{!r} is not one of {} (or a number)".format(value, ", ".join(NCCL_LEVELS))


def _interfaces(value: str) -> str | None:
    """NCCL_SOCKET_IFNAME: interface name prefixes (`=` exact, `^` all but): one that names
    no interface here means NCCL finds no socket interface."""
    entries = [e.strip() for e in value.lstrip("^").lstrip("=").split(",")]
    if not all(entries):
        return f"{value!r} has an empty entry"
    if value.startswith("^"):
        return None
    try:
        present = os.listdir("/sys/class/net")
    except OSError:
        return None
    exact = value.startswith("=")
    if not any(n == e if exact else n.startswith(e) for e in entries for n in present):
        return "{} matches no network interface here ({})".format(
            ", ".join(repr(e) for e in entries), ", ".join(sorted(present)) or "none"
        )
    return None


def _search_path(value: str) -> str | None:
    """LD_LIBRARY_PATH: an empty entry (a leading, trailing or doubled ':') or a relative one
    is the current directory: whatever library sits there is loaded first."""
    entries = value.split(":")
    if any(not e for e in entries):
        return "an empty entry (a leading, trailing or doubled ':') searches the current directory"
    relative = [e for e in entries if not e.startswith("/")]
    if relative:
        return "relative entries ({}) are searched from the current directory".format(", ".join(relative))
    return None


def _preload(value: str) -> str | None:
    missing = [e for e in re.split(r"[ :]", value) if e and "/" in e and not os.path.isfile(e)]
    return "no file {}".format(", ".join(repr(e) for e in missing)) if missing else None


_ARCH = re.compile(
    r"(?:[0-9]+\.[0-9]+[af]?|Kepler|Maxwell|Pascal|Volta|Turing|Ampere|Ada|Hopper|Blackwell)(?:\+PTX)?"
)


def _arch_list(value: str) -> str | None:
    """TORCH_CUDA_ARCH_LIST: `8.0;9.0a;9.0+PTX` (`;` or spaces), or architecture names."""
    items = [t for t in re.split(r"[; ]+", value.strip()) if t]
    bad = [t for t in items if not _ARCH.fullmatch(t)]
    if not items:
        return "empty"
    return (
        "{} not an architecture (like 8.0, 9.0a, 9.0+PTX or Hopper)".format(", ".join(map(repr, bad)))
        if bad
        else None
    )


def _cublas_workspace(value: str) -> str | None:
    return (
        None
        if re.fullmatch(r"(?::[0-9]+:[0-9]+)+", value.strip())
        else f"{value!r} is not :SIZE:COUNT (like :4096:8)"
    )


def _mps_memory(value: str) -> str | None:
    """CUDA_MPS_PINNED_DEVICE_MEM_LIMIT: `0=1G,1=512M`."""
    for part in value.split(","):
        if not re.fullmatch(r"\s*[0-9]+\s*=\s*[0-9]+\s*[KMGT]?B?\s*", part, re.IGNORECASE):
            return f"{part!r} is not DEVICE=SIZE (like 0=1G)"
    return None


def _scale(value: str) -> str | None:
    return _in(("0.25x", "0.5x", "2x", "4x"))(value)


# ---- PYTORCH_CUDA_ALLOC_CONF --------------------------------------------------------

_SIZE = re.compile(r"[0-9]+")


def _alloc_size(minimum: int = 0) -> Callable[[str], str | None]:
    def check(v: str) -> str | None:
        if not _SIZE.fullmatch(v):
            return f"{v!r} is not a whole number of MiB"
        if int(v) < minimum:
            return f"{v} is below {minimum} (torch refuses it)"
        return None

    return check


def _power_of_two(n: int) -> bool:
    return n == 0 or (n & (n - 1)) == 0


def _roundup(v: str) -> str | None:
    """`4`, or per size `[256:1,512:2,>:8]` (sizes and divisions powers of 2, 0 to disable)."""
    if v.startswith("["):
        if not v.endswith("]") or len(v) < 3:
            return f"{v!r} is not a list closed by ']'"
        for item in v[1:-1].split(","):
            size, _, div = item.strip().partition(":")
            if not (
                size == ">" or (_SIZE.fullmatch(size) and _power_of_two(int(size)))
            ) or not _SIZE.fullmatch(div):
                return f"{item.strip()!r} is not SIZE:DIVISIONS (a power of 2, or >)"
            if not _power_of_two(int(div)):
                return f"{div} divisions: not a power of 2 (or 0 to disable roundup)"
        return None
    if not _SIZE.fullmatch(v):
        return f"{v!r} is not a whole number"
    n = int(v)  # one value for every size: 0 is not allowed here (only in the list)
    return None if n and _power_of_two(n) else f"{n} divisions: not a power of 2"


def _fraction_open(v: str) -> str | None:
    return _number_between(0.0, 1.0, open_low=True, open_high=True)(v)


def _threads(v: str) -> str | None:
    if not _SIZE.fullmatch(v):
        return f"{v!r} is not a whole number"
    n = int(v)
    return None if n and _power_of_two(n) and n <= 128 else f"{n} threads: not a power of 2 up to 128"


#: PYTORCH_CUDA_ALLOC_CONF's keys (torch 2.0 to 2.13) and the form of their value.
ALLOC_CONF_KEYS: dict[str, Callable[[str], str | None]] = {
    "backend": _in(("native", "cudaMallocAsync")),
    "max_split_size_mb": _alloc_size(20),
    "max_non_split_rounding_mb": _alloc_size(),
    "roundup_power2_divisions": _roundup,
    "garbage_collection_threshold": _fraction_open,
    "expandable_segments": _PY_BOOL,
    "release_lock_on_cudamalloc": _PY_BOOL,
    "pinned_use_cuda_host_register": _PY_BOOL,
    "pinned_num_register_threads": _threads,
    "pinned_use_background_threads": _PY_BOOL,
    "pinned_max_cached_size_mb": _alloc_size(),
    "pinned_max_round_threshold_mb": _alloc_size(),
    "pinned_reserve_segment_size_mb": _alloc_size(),
    "graph_capture_record_stream_reuse": _PY_BOOL,
    "per_process_memory_fraction": _number_between(0.0, 1.0),
}


def alloc_conf(value: str) -> str | None:
    """PYTORCH_CUDA_ALLOC_CONF (and PYTORCH_ALLOC_CONF): `key:value` pairs separated by
    commas; torch refuses a malformed one when CUDA starts (an error, or on some versions a
    crash)."""
    # the commas inside roundup_power2_divisions' [...] do not separate pairs
    pairs = re.findall(r"[^,\[]*(?:\[[^\]]*\]?)?[^,]*", value)
    for pair in (p.strip() for p in pairs):
        if not pair:
            continue
        key, sep, v = (s.strip() for s in pair.partition(":"))
        if not sep:
            return f"{pair!r} has no value (key:value)"
        check = ALLOC_CONF_KEYS.get(key)
        if check is None:
            return "{!r} is not a key torch knows ({})".format(key, ", ".join(ALLOC_CONF_KEYS))
        problem = check(v)
        if problem:
            return f"{key}: {problem}"
    return None


@dataclass(frozen=True)
class StartVariable:
    """One variable that changes how CUDA, torch or NCCL start."""

    name: str
    """The name, or a prefix ending in "*" (NCCL_*: any other NCCL variable)."""
    library: str
    """Who reads it: CUDA, PyTorch, NCCL, the loader."""
    what: str
    check: Callable[[str], str | None] | None = None
    """The problem with a value in words, None when it is well formed (no check: any value)."""
    stops: bool = False
    """A malformed value stops the start (an error or a crash) rather than being ignored."""
    checked_by: str | None = None
    """The diagnosis check that judges it instead (CUDA_VISIBLE_DEVICES: visibility.env)."""


_V = StartVariable
START_VARIABLES: tuple[StartVariable, ...] = (
    # CUDA
    _V("CUDA_VISIBLE_DEVICES", "CUDA", "which GPUs CUDA shows", stops=True, checked_by="visibility.env"),
    _V("CUDA_DEVICE_ORDER", "CUDA", "the order of device indices", checked_by="visibility.env"),
    _V("CUDA_MODULE_LOADING", "CUDA", "when kernels are loaded", _in(("DEFAULT", "LAZY", "EAGER"))),
    _V("CUDA_MODULE_DATA_LOADING", "CUDA", "when module data is loaded", _in(("DEFAULT", "LAZY", "EAGER"))),
    _V("CUDA_LAUNCH_BLOCKING", "CUDA", "every kernel launch waits for the previous one", _BIT),
    _V("CUDA_CACHE_DISABLE", "CUDA", "the JIT cache of compiled PTX is off", _BIT),
    _V("CUDA_CACHE_MAXSIZE", "CUDA", "the JIT cache's size in bytes", _integer(0, 4 << 30)),
    _V("CUDA_CACHE_PATH", "CUDA", "where the JIT cache lives", _not_a_file),
    _V("CUDA_FORCE_PTX_JIT", "CUDA", "ignore compiled kernels, JIT-compile PTX", _BIT),
    _V("CUDA_DISABLE_PTX_JIT", "CUDA", "never JIT-compile PTX", _BIT),
    _V("CUDA_FORCE_JIT", "CUDA", "JIT-compile every kernel", _BIT),
    _V("CUDA_DISABLE_JIT", "CUDA", "never JIT-compile", _BIT),
    _V("CUDA_DEVICE_MAX_CONNECTIONS", "CUDA", "hardware work queues per device", _integer(1, 32)),
    _V("CUDA_DEVICE_MAX_COPY_CONNECTIONS", "CUDA", "hardware copy queues per device", _integer(1, 32)),
    _V("CUDA_SCALE_LAUNCH_QUEUES", "CUDA", "the size of the launch queues", _scale),
    _V("CUDA_AUTO_BOOST", "CUDA", "GPU boost clocks", _BIT),
    _V("CUDA_MANAGED_FORCE_DEVICE_ALLOC", "CUDA", "managed memory always on the device", _BIT),
    _V("CUDA_ENABLE_COREDUMP_ON_EXCEPTION", "CUDA", "a GPU core dump on an exception", _BIT),
    _V("CUDA_ENABLE_CPU_COREDUMP_ON_EXCEPTION", "CUDA", "a CPU core dump on an exception", _BIT),
    _V("CUDA_ENABLE_LIGHTWEIGHT_COREDUMP", "CUDA", "a small GPU core dump", _BIT),
    _V("CUDA_DEVICE_WAITS_ON_EXCEPTION", "CUDA", "a faulting kernel waits for a debugger", _BIT),
    _V(
        "CUDA_INJECTION64_PATH", "CUDA", "a library injected into every CUDA program", _existing("file"), True
    ),
    _V("CUDA_MPS_PIPE_DIRECTORY", "CUDA", "the MPS server CUDA goes through", _existing("directory")),
    _V(
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
        "CUDA",
        "the share of SMs under MPS",
        _number_between(0, 100, open_low=True),
    ),
    _V("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "CUDA", "device memory per MPS client", _mps_memory),
    _V("CUDA_MPS_CLIENT_PRIORITY", "CUDA", "the MPS client's priority", _BIT),
    _V("CUDA_MPS_*", "CUDA", "MPS settings"),
    # the loader
    _V("LD_LIBRARY_PATH", "loader", "searched for CUDA, cuDNN and NCCL before the system", _search_path),
    _V("LD_PRELOAD", "loader", "loaded into every process first", _preload),
    # PyTorch
    _V("PYTORCH_CUDA_ALLOC_CONF", "PyTorch", "the CUDA caching allocator's settings", alloc_conf, True),
    _V("PYTORCH_ALLOC_CONF", "PyTorch", "the caching allocator's settings (torch 2.9+)", alloc_conf, True),
    _V("PYTORCH_HIP_ALLOC_CONF", "PyTorch", "the ROCm caching allocator's settings", alloc_conf, True),
    _V("PYTORCH_NO_CUDA_MEMORY_CACHING", "PyTorch", "the caching allocator is off", _BIT),
    _V("PYTORCH_NVML_BASED_CUDA_CHECK", "PyTorch", "is_available() asks NVML, not CUDA", _BIT),
    _V("PYTORCH_CUDA_*", "PyTorch", "torch's CUDA settings"),
    _V("TORCH_CUDA_ARCH_LIST", "PyTorch", "the architectures extensions are built for", _arch_list),
    _V("TORCH_USE_CUDA_DSA", "PyTorch", "device-side assertions", _BIT),
    _V(
        "CUBLAS_WORKSPACE_CONFIG",
        "PyTorch",
        "cuBLAS workspaces (deterministic matmuls)",
        _cublas_workspace,
        True,
    ),
    _V("TORCH_NCCL_ASYNC_ERROR_HANDLING", "PyTorch", "what a failed NCCL call does", _integer(0, 3)),
    _V("TORCH_NCCL_BLOCKING_WAIT", "PyTorch", "collectives block until done", _BOOL),
    _V("TORCH_NCCL_ENABLE_MONITORING", "PyTorch", "the NCCL watchdog's monitor", _BOOL),
    _V("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "PyTorch", "the watchdog's timeout", _integer(1)),
    _V("TORCH_NCCL_TRACE_BUFFER_SIZE", "PyTorch", "the flight recorder's size", _integer(0)),
    _V("TORCH_NCCL_DUMP_ON_TIMEOUT", "PyTorch", "dump the flight recorder on a timeout", _BOOL),
    _V("TORCH_NCCL_*", "PyTorch", "torch's NCCL settings"),
    # NCCL
    _V(
        "NCCL_DEBUG",
        "NCCL",
        "how much NCCL logs",
        _in(("VERSION", "WARN", "INFO", "TRACE", "ABORT"), fold=True),
    ),
    _V(
        "NCCL_DEBUG_SUBSYS",
        "NCCL",
        "which parts log",
        _tokens(
            (
                "INIT",
                "COLL",
                "P2P",
                "SHM",
                "NET",
                "GRAPH",
                "TUNING",
                "ENV",
                "ALLOC",
                "CALL",
                "PROXY",
                "NVLS",
                "BOOTSTRAP",
                "REG",
                "PROFILE",
                "RAS",
                "ALL",
            )
        ),
    ),
    _V("NCCL_P2P_DISABLE", "NCCL", "no direct GPU-to-GPU transfers", _BIT),
    _V("NCCL_P2P_LEVEL", "NCCL", "the farthest GPUs that use P2P", _nccl_level),
    _V("NCCL_SHM_DISABLE", "NCCL", "no shared-memory transport", _BIT),
    _V("NCCL_IB_DISABLE", "NCCL", "no InfiniBand / RoCE", _BIT),
    _V("NCCL_NET_GDR_LEVEL", "NCCL", "the farthest NIC that uses GPUDirect RDMA", _nccl_level),
    _V("NCCL_NET_GDR_READ", "NCCL", "GPUDirect RDMA for sends", _BIT),
    _V("NCCL_SOCKET_IFNAME", "NCCL", "the network interfaces NCCL uses", _interfaces),
    _V("NCCL_SOCKET_FAMILY", "NCCL", "IPv4 or IPv6", _in(("AF_INET", "AF_INET6"))),
    _V("NCCL_NVLS_ENABLE", "NCCL", "NVLink SHARP (multicast)", _integer(choices=(0, 1, 2))),
    _V("NCCL_CUMEM_ENABLE", "NCCL", "cuMem* allocations", _BIT),
    _V(
        "NCCL_ALGO",
        "NCCL",
        "the algorithms NCCL may use",
        _per_collective(("Ring", "Tree", "CollnetDirect", "CollnetChain", "NVLS", "NVLSTree", "PAT")),
    ),
    _V("NCCL_PROTO", "NCCL", "the protocols NCCL may use", _per_collective(("LL", "LL128", "Simple"))),
    _V("NCCL_BUFFSIZE", "NCCL", "the buffer between GPUs, in bytes", _integer(1)),
    _V("NCCL_NTHREADS", "NCCL", "CUDA threads per block", _integer(choices=(64, 128, 256, 512))),
    _V("NCCL_MIN_NCHANNELS", "NCCL", "the fewest channels", _integer(0)),
    _V("NCCL_MAX_NCHANNELS", "NCCL", "the most channels", _integer(1)),
    _V("NCCL_CROSS_NIC", "NCCL", "rings across NICs", _integer(0, 2)),
    _V("NCCL_IB_TIMEOUT", "NCCL", "the InfiniBand timeout exponent", _integer(1, 31)),
    _V("NCCL_IB_RETRY_CNT", "NCCL", "InfiniBand retries", _integer(0, 7)),
    _V("NCCL_IB_GID_INDEX", "NCCL", "the RoCE GID index", _integer(-1)),
    _V("NCCL_IB_TC", "NCCL", "the InfiniBand traffic class", _integer(0, 255)),
    _V("NCCL_IB_SL", "NCCL", "the InfiniBand service level", _integer(0, 15)),
    _V("NCCL_LAUNCH_MODE", "NCCL", "how kernels are launched", _in(("PARALLEL", "GROUP"))),
    _V("NCCL_TOPO_FILE", "NCCL", "the topology file read at start", _existing("file"), True),
    _V("NCCL_*", "NCCL", "NCCL settings"),
)
del _V


#: Names under a prefix above that change nothing (container images set them for information).
NOT_START_VARIABLES = frozenset({"NCCL_VERSION"})


def start_variable(name: str) -> StartVariable | None:
    """The table's entry for `name`: its own, else the prefix entry it falls under."""
    if name in NOT_START_VARIABLES:
        return None
    best: StartVariable | None = None
    for v in START_VARIABLES:
        if v.name == name:
            return v
        prefix = v.name.endswith("*") and name.startswith(v.name[:-1])
        if prefix and (best is None or len(v.name) > len(best.name)):
            best = v
    return best


def start_problem(name: str, value: str) -> str | None:
    """Why `value` is a malformed value of `name`, or None (well formed, or not checked)."""
    v = start_variable(name)
    if v is None or v.check is None:
        return None
    try:
        return v.check(value)
    except Exception as exc:  # a validator must never stop the diagnosis
        return f"cannot be checked: {type(exc).__name__}"


def start_suspects(env: Mapping[str, str], skip: Sequence[str] = ()) -> list[tuple[str, str, str | None]]:
    """The variables set in `env` that change how CUDA, torch and NCCL start: (name, value,
    problem or None), malformed first, each group by name.  `skip`: names not to list
    (those gputui itself set)."""
    found = [
        (name, value, start_problem(name, value))
        for name, value in env.items()
        if name not in skip and start_variable(name) is not None
    ]
    return sorted(found, key=lambda t: (t[2] is None, t[0]))
