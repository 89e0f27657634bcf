"""GPU memory held by other processes: a GPU that is nearly full is no place to start a job,
however well everything else works.  Read from NVML before this probe starts CUDA (it holds
nothing itself then), with the processes that hold the memory named."""

from __future__ import annotations

import os
import time

from .protocol import check, first_line, read_text
from .registry import declare

#: Less free than this share of the total: a job started here will likely run out of memory.
LOW_FREE_FRACTION = 0.10
GIB = 1 << 30


def gib(n):
    return "%.1f GiB" % (n / GIB)


def who(pid):
    """The name and user of a process, from /proc (None where it is not in this PID namespace)."""
    name = read_text("/proc/%d/comm" % pid)
    user = None
    try:
        import pwd

        uid = os.stat("/proc/%d" % pid).st_uid
        try:
            user = pwd.getpwuid(uid).pw_name
        except KeyError:
            user = str(uid)
    except (OSError, ImportError):
        pass
    return (name.strip() if name else None), user


def holder_text(proc):
    """`PID 4242 (python3, bob) 77.0 GiB`; a process outside this PID namespace by PID alone,
    its memory "memory not reported" where NVML cannot say (None is not 0)."""
    facts = [x for x in (proc.get("name"), proc.get("user")) if x]
    used = proc.get("used_bytes")
    return "PID %d%s %s" % (
        proc["pid"],
        " (%s)" % ", ".join(facts) if facts else "",
        gib(used) if used is not None else "(memory not reported)",
    )


def held_text(memory, processes, own_pids=()):
    """`2.1 GiB of 79.6 GiB free, held by PID 480 (python3, bob) 76.0 GiB`: what a check that
    could not get memory says instead of a verdict on the GPU (None values are unknown)."""
    if not memory or memory.get("free") is None or not memory.get("total"):
        free = "free memory unknown (NVML does not report it)"
    else:
        free = "%s of %s free" % (gib(memory["free"]), gib(memory["total"]))
    others = sorted(
        (p for p in (processes or []) if p.get("pid") not in own_pids),
        key=lambda p: -(p.get("used_bytes") or 0),
    )
    if others:
        return free + ", held by " + "; ".join(holder_text(p) for p in others)
    if processes is None:
        return free + " (NVML cannot list the processes holding it)"
    return free


def held_on(p, torch_index, own_pids=()):
    """`held_text` for torch's GPU `torch_index`, read from NVML now (None: no NVML, or the
    GPU is not matched)."""
    if not p.nvml.ok:
        return None
    i = p.nvml_index(torch_index)
    if i is None:
        return None
    procs = p.nvml.processes(i)
    for proc in procs or []:
        proc["name"], proc["user"] = who(proc["pid"])
    return "GPU %d: %s" % (torch_index, held_text(p.nvml.memory(i), procs, {os.getpid(), *own_pids}))


def judge_memory(memory, processes, own_pids=(), visible=True):
    """(status, cause, summary, evidence) for one GPU from NVML's memory figures
    ({"total", "free", "used"} in bytes, or None) and the processes holding it
    ([{"pid", "used_bytes", "name", "user"}], or None when NVML cannot list them).

    WARN when less than LOW_FREE_FRACTION of the memory is free on a GPU this process can
    see, naming the processes that hold it, largest first; the probe's own processes
    (`own_pids`) are not others."""
    if not memory or not memory.get("total") or memory.get("free") is None:
        return "SKIP", None, "NVML does not report this GPU's memory", {"memory": memory}
    total, free = memory["total"], memory["free"]
    others = [p for p in (processes or []) if p.get("pid") not in own_pids]
    others.sort(key=lambda p: -(p.get("used_bytes") or 0))
    evidence = {
        "total_bytes": total,
        "free_bytes": free,
        "used_bytes": memory.get("used"),
        "free_fraction": round(free / total, 4),
        "processes": others,
        "processes_listed": processes is not None,
        "visible_here": visible,
        "low_free_fraction": LOW_FREE_FRACTION,
    }
    free_text = "%s of %s free" % (gib(free), gib(total))
    held = "; ".join(holder_text(p) for p in others)
    low = free < LOW_FREE_FRACTION * total
    if not low or not visible:
        summary = free_text + ("; held by " + held if held else "")
        if low:
            summary += " (not visible to this process: CUDA_VISIBLE_DEVICES)"
        return "PASS", None, summary, evidence
    if held:
        whom = "held by other processes: " + held
    elif processes is None:
        whom = "NVML cannot list the processes holding it"
    else:
        whom = "held by processes NVML does not list here (another container or VM, or the driver)"
    summary = "only %s: %s; a job started here will run out of memory" % (free_text, whom)
    return "WARN", "memory-held", summary, evidence


@declare("memory", "devices", "GPU memory held by other processes", needs=("nvml",))
def memory(p):
    own = {os.getpid()}
    for i in range(len(p.nvml.handles)):
        t0 = time.monotonic()
        procs = p.nvml.processes(i)
        for proc in procs or []:
            proc["name"], proc["user"] = who(proc["pid"])
        visible = p.visible_nvml is None or i in p.visible_nvml
        status, cause, summary, ev = judge_memory(p.nvml.memory(i), procs, own, visible)
        name = p.nvml_devices[i].get("name") if i < len(p.nvml_devices) else None
        ev["name"] = name
        check("memory.%d" % i, "devices", "GPU %d memory" % i, status, summary, ev, cause=cause, t0=t0)


def out_of_memory(torch, exc):
    """Whether `exc` is a failure to get GPU memory (torch's OutOfMemoryError, or CUDA's
    "out of memory" error from a context or a peer mapping), not a wrong result."""
    for owner in (torch, getattr(torch, "cuda", None)):
        oom = getattr(owner, "OutOfMemoryError", None)
        if isinstance(oom, type) and isinstance(exc, oom):
            return True
    return "out of memory" in str(exc).lower()


def failed_run(torch, exc, **facts):
    """A check's result on one GPU that raised: its error, and whether it was a lack of memory
    (then it says nothing about the GPU: `starved_text`)."""
    return dict(facts, ok=False, error=first_line(str(exc)), out_of_memory=out_of_memory(torch, exc))


def split_starved(bad):
    """(results that could not get memory, results that failed or were wrong)."""
    return [r for r in bad if r.get("out_of_memory")], [r for r in bad if not r.get("out_of_memory")]


def starved_text(what, starved, held=lambda gpu: None):
    """`could not get GPU memory for WHAT on GPU 0: not tested (GPU 0: ... held by ...)`."""
    gpus = sorted({r.get("gpu") for r in starved}, key=str)
    whose = [w for w in (held(gpu) for gpu in gpus) if w]
    return "could not get GPU memory for %s on GPU %s: not tested%s" % (
        what,
        ", ".join(map(str, gpus)),
        " (%s)" % "; ".join(whose) if whose else "",
    )
