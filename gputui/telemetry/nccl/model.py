"""NCCL RAS answers as frozen dataclasses, and the parser of its JSON form (pure: no I/O).

NCCL's RAS service (NCCL 2.24 and newer, in every process of a job) answers `VERBOSE STATUS`
for every communicator of the job, from any of its nodes: each rank's host, PID, CUDA and
NVML device, its init/async-error/finalize/destroy/abort state and how many operations of
each collective it has launched, and the ranks it could not hear from.  NCCL 2.28 and newer
answer in JSON after `SET FORMAT json`; older ones only in text (`text.py` parses that form
into the same dataclasses).  NVIDIA/nccl `src/ras/client_support.cc` writes both.

Every value of an answer is untrusted: the port has no authentication, and any local process
may listen on it.  Each field is type-checked and bounded here (`MAX_*`); a value of the wrong
type or out of range makes the whole answer a `RasAnswer` whose `reason` says which field and
why, never an exception.  Fields NCCL may add later are ignored; fields it leaves out are None.
Strings are kept as sent (bounded) and pass through `gputui.untrusted` wherever shown.

`None` is "not known", never 0: a rank whose AllReduce count is missing is not "behind".
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

MAX_ANSWER_BYTES = 4 << 20
"""The most of an answer that is read (a 64-rank JSON answer is about 40 KB)."""
MAX_COMMS = 64
"""Communicators kept per answer; the rest are counted in `RasAnswer.dropped`."""
MAX_RANKS = 1024
"""Rank entries kept per communicator (its ranks and missing ranks each); the rest are counted
in `NcclComm.dropped`."""
MAX_RANKS_TOTAL = 8192
"""Rank entries kept per answer, all communicators together."""
MAX_COLLECTIVES = 16
"""Collective counts kept per rank (NCCL 2.28 has five: Broadcast, Reduce, AllGather,
ReduceScatter, AllReduce)."""
MAX_TEXT = 64
"""Characters kept of a host, version or collective name."""
MAX_PROBLEMS = 32
"""Lines of the text form's Errors and Warnings kept per answer and per communicator."""
MAX_PROBLEM_CHARS = 160
MAX_COUNT = 2**64 - 1
"""Operation counts are C `unsigned long`s."""
MAX_ID = 2**31 - 1
"""Ranks, PIDs, devices, sizes: C `int`s."""

IN_PROGRESS = 7
"""ncclInProgress: an init or a nonblocking call still running (not an error)."""
NCCL_RESULTS = {
    0: "success",
    1: "unhandled CUDA error",
    2: "system error",
    3: "internal error",
    4: "invalid argument",
    5: "invalid usage",
    6: "remote process error",
    IN_PROGRESS: "in progress",
}
"""ncclResult_t, as NCCL's own text form words them."""
UNNAMED_ERROR = -1
"""The code kept where the text form says "Unexpected error" (a code it does not name)."""


NO_JOB = "no job of two ranks or more"
"""`NcclView.reason` when the last job RAS was asked about has ended."""


def result_name(code: int) -> str:
    return NCCL_RESULTS.get(code, "an unexpected error" if code == UNNAMED_ERROR else f"error {code}")


# --------------------------------------------------------------------------------------
# The dataclasses (recorded: Snapshot.nccl)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NcclCount:
    """How many operations of one collective a rank has launched."""

    collective: str
    """NCCL's name: "AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter"."""
    count: int


@dataclass(frozen=True, slots=True)
class NcclRank:
    """One rank of a communicator as RAS reports it (or one it misses: `unresponsive` and
    `considered_dead` are set only for those).  None: not reported."""

    rank: int | None = None
    host: str | None = None
    """The node's IP address as NCCL prints it (no name lookup); None where NCCL says
    "unknown"."""
    pid: int | None = None
    """The PID in the rank's own PID namespace (a container's PID differs from the host's)."""
    cuda_dev: int | None = None
    nvml_dev: int | None = None
    """NVML's index of its GPU on its node."""
    init_state: int | None = None
    """ncclResult_t of its communicator's init: 0 done, 7 still initialising, else an error."""
    async_error: int | None = None
    """ncclResult_t of its asynchronous error: 0 none, 7 in progress, else an error."""
    finalize_called: bool | None = None
    destroy_flag: bool | None = None
    abort_flag: bool | None = None
    counts: tuple[NcclCount, ...] = ()
    """Operations launched, per collective (NCCL's order)."""
    unresponsive: bool | None = None
    """A missing rank: its process did not answer RAS (False: it answered but no longer
    reports this communicator, e.g. it destroyed it)."""
    considered_dead: bool | None = None
    """A missing rank: RAS has declared its process dead (no keep-alive for ~60 s)."""

    def count(self, collective: str) -> int | None:
        """Operations of `collective` launched; None when not reported (never 0 for that)."""
        return next((c.count for c in self.counts if c.collective == collective), None)


@dataclass(frozen=True, slots=True)
class NcclComm:
    """One communicator of the job."""

    hash: str
    """RAS's communicator hash, "0x" and lower-case hex without leading zeros (the JSON form's
    spelling; the text form's zero-padded one is normalised to it)."""
    size: int | None = None
    """Ranks the communicator has (NCCL's commNRanks)."""
    ranks_count: int | None = None
    """Ranks RAS heard from."""
    missing_ranks_count: int | None = None
    ranks: tuple[NcclRank, ...] = ()
    missing_ranks: tuple[NcclRank, ...] = ()
    dropped: int = 0
    """Rank entries the answer held beyond `MAX_RANKS` (or `MAX_RANKS_TOTAL`): not kept."""
    problems: tuple[str, ...] = ()
    """The text form: its lines about this communicator (MISMATCH, INCOMPLETE, ERROR)."""
    counts_since: float | None = None
    """When (Unix time) this gputui first saw every rank's collective counts as they are in
    this answer (`carry_since`): a communicator whose counts have not moved since then made
    no progress.  None where its ranks report no counts."""


@dataclass(frozen=True, slots=True)
class RasAnswer:
    """What one RAS address said (or why it said nothing)."""

    addr: str
    """Where it was asked, "localhost:28028"; "" where nothing was asked (RAS off)."""
    pids: tuple[int, ...] = ()
    """The local GPU processes (host PIDs) whose environment named this address."""
    seconds: float | None = None
    """How long the query took."""
    format: str | None = None
    """"json", "text" (NCCL older than 2.28 answers only in text), None: no answer."""
    reason: str | None = None
    """Why there is no answer, or only part of one (fixed words, no text of the answer)."""
    nccl_version: str | None = None
    communicators: tuple[NcclComm, ...] = ()
    """The JSON form: every communicator; the text form: those it reports a problem for."""
    communicators_count: int | None = None
    """How many communicators the answer says there are."""
    dropped: int = 0
    """Communicators beyond `MAX_COMMS`: not kept."""
    timeouts_count: int | None = None
    """Timeouts RAS itself met gathering the data from the job's other processes."""
    problems: tuple[str, ...] = ()
    """The text form: its job-wide Errors and Warnings lines (missing and dead processes)."""
    summary: tuple[str, ...] = ()
    """The text form: its communicator table, one line per group, rebuilt from its numbers."""


@dataclass(frozen=True, slots=True)
class NcclView:
    """One round of RAS questions: an answer per address asked.  `Snapshot.nccl` carries it on
    the tick after the round (None on the other ticks)."""

    asked_at: float
    """Unix time the round began."""
    answers: tuple[RasAnswer, ...] = ()
    local_hosts: tuple[str, ...] = ()
    """This machine's IP addresses when asked: a rank whose host is one of them runs here."""
    reason: str | None = None
    """Why there are no answers: `NO_JOB` (the last job ended), or the round failed; None
    when `answers` say."""


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


class BadAnswer(ValueError):
    """An answer that is not NCCL's: where and why (fixed words and numbers only)."""


def normal_hash(text: str) -> str | None:
    """ "0x02e0d20e5df5ce51" or "02e0d20e5df5ce51" -> "0x2e0d20e5df5ce51"; None unless 1-16
    hex digits."""
    digits = text[2:] if text[:2].lower() == "0x" else text
    if not 1 <= len(digits) <= 16 or not re.fullmatch(r"[0-9a-fA-F]+", digits):
        return None
    return f"0x{int(digits, 16):x}"


def clip(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def key_counts(comm: NcclComm) -> tuple[tuple[int | None, tuple[NcclCount, ...]], ...]:
    """What `counts_since` compares: each rank's counts, by rank."""
    return tuple(sorted(((r.rank, r.counts) for r in comm.ranks), key=lambda x: -1 if x[0] is None else x[0]))


def carry_since(previous: RasAnswer | None, answer: RasAnswer, now: float) -> RasAnswer:
    """`answer` with each communicator's `counts_since`: the previous answer's where every
    rank's counts are what they were then (no progress since), else `now` (first seen now);
    None for a communicator whose ranks report no counts."""
    before = {c.hash: c for c in previous.communicators} if previous is not None else {}
    comms = []
    for c in answer.communicators:
        old = before.get(c.hash)
        if not any(r.counts for r in c.ranks):
            since = None
        elif old is not None and old.counts_since is not None and key_counts(old) == key_counts(c):
            since = old.counts_since
        else:
            since = now
        comms.append(replace(c, counts_since=since))
    return replace(answer, communicators=tuple(comms))


# --------------------------------------------------------------------------------------
# The JSON form
# --------------------------------------------------------------------------------------

_MISSING_COMMA = re.compile(r'([0-9"el}\]])([ \t]*\r?\n[ \t]*"[^"\n]{0,64}"[ \t]*:)')
"""A value at a line's end, the next line a key: NCCL 2.28.9 leaves out the comma after a
missing rank's "nvml_dev" (client_support.cc's jsonWriteMissingRank, fixed later).  JSON
strings hold no raw newline, so this never matches inside one."""


def _load(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        repaired = _MISSING_COMMA.sub(r"\1,\2", text)
        if repaired == text:
            raise
        return json.loads(repaired)


def _int(obj: dict[str, Any], key: str, where: str, lo: int = 0, hi: int = MAX_ID) -> int | None:
    v = obj.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise BadAnswer(f"{where}.{key}: expected an integer, got {type(v).__name__}")
    if not lo <= v <= hi:
        raise BadAnswer(f"{where}.{key}: {v if abs(v) < 10**12 else 'a huge number'} is out of range")
    return v


def _id(obj: dict[str, Any], key: str, where: str) -> int | None:
    """A rank, PID or device: -1 ("unknown" in NCCL's JSON) is None."""
    v = _int(obj, key, where, lo=-1)
    return None if v == -1 else v


def _bool(obj: dict[str, Any], key: str, where: str) -> bool | None:
    v = obj.get(key)
    if v is None or isinstance(v, bool):
        return v
    raise BadAnswer(f"{where}.{key}: expected true or false, got {type(v).__name__}")


def _str(obj: dict[str, Any], key: str, where: str) -> str | None:
    v = obj.get(key)
    if v is None:
        return None
    if not isinstance(v, str):
        raise BadAnswer(f"{where}.{key}: expected a string, got {type(v).__name__}")
    return clip(v)


def _obj(v: Any, where: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise BadAnswer(f"{where}: expected an object, got {type(v).__name__}")
    return v


def _or_empty(v: Any) -> Any:
    return {} if v is None else v


def _list(obj: dict[str, Any], key: str, where: str) -> list[Any]:
    v = obj.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise BadAnswer(f"{where}.{key}: expected a list, got {type(v).__name__}")
    return v


_COLLECTIVE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")


def _counts(obj: dict[str, Any], where: str) -> tuple[NcclCount, ...]:
    v = obj.get("collective_counts")
    if v is None:
        return ()
    counts = _obj(v, f"{where}.collective_counts")
    out = []
    for name in list(counts)[:MAX_COLLECTIVES]:
        if not _COLLECTIVE.fullmatch(name):
            raise BadAnswer(f"{where}.collective_counts: a collective's name is not a word")
        value = _int(counts, name, f"{where}.collective_counts", hi=MAX_COUNT)
        if value is not None:
            out.append(NcclCount(name, value))
    return tuple(out)


def _host(obj: dict[str, Any], where: str) -> str | None:
    host = _str(obj, "host", where)
    return None if host in (None, "", "unknown") else host


def _rank(v: Any, where: str, missing: bool) -> NcclRank:
    r = _obj(v, where)
    status = _obj(_or_empty(r.get("status")), f"{where}.status")
    sw = f"{where}.status"
    base = NcclRank(
        rank=_id(r, "rank", where),
        host=_host(r, where),
        pid=_id(r, "pid", where),
        cuda_dev=_id(r, "cuda_dev", where),
        nvml_dev=_id(r, "nvml_dev", where),
    )
    if missing:
        return replace(
            base,
            unresponsive=_bool(status, "unresponsive", sw),
            considered_dead=_bool(status, "considered_dead", sw),
        )
    return replace(
        base,
        init_state=_int(status, "init_state", sw, lo=-MAX_ID),
        async_error=_int(status, "async_error", sw, lo=-MAX_ID),
        finalize_called=_bool(status, "finalize_called", sw),
        destroy_flag=_bool(status, "destroy_flag", sw),
        abort_flag=_bool(status, "abort_flag", sw),
        counts=_counts(r, where),
    )


class _Budget:
    """Rank entries left for the whole answer (MAX_RANKS_TOTAL)."""

    def __init__(self) -> None:
        self.left = MAX_RANKS_TOTAL


def _ranks(
    items: list[Any], where: str, budget: _Budget, make: Callable[[Any, str], NcclRank]
) -> tuple[tuple[NcclRank, ...], int]:
    keep = min(len(items), MAX_RANKS, budget.left)
    budget.left -= keep
    return tuple(make(x, f"{where}[{k}]") for k, x in enumerate(items[:keep])), len(items) - keep


def _comm(v: Any, where: str, budget: _Budget) -> NcclComm:
    c = _obj(v, where)
    raw = _str(c, "hash", where)
    h = normal_hash(raw) if raw is not None else None
    if h is None:
        raise BadAnswer(f"{where}.hash: expected a hexadecimal communicator hash")
    ranks, dropped = _ranks(
        _list(c, "ranks", where), f"{where}.ranks", budget, lambda x, w: _rank(x, w, False)
    )
    missing, dropped2 = _ranks(
        _list(c, "missing_ranks", where), f"{where}.missing_ranks", budget, lambda x, w: _rank(x, w, True)
    )
    return NcclComm(
        hash=h,
        size=_int(c, "size", where),
        ranks_count=_int(c, "ranks_count", where),
        missing_ranks_count=_int(c, "missing_ranks_count", where),
        ranks=ranks,
        missing_ranks=missing,
        dropped=dropped + dropped2,
    )


def parse_json(text: str) -> RasAnswer:
    """The JSON form of a `VERBOSE STATUS` answer (what follows the protocol's replies).  A
    hostile or broken one gives a RasAnswer whose `reason` says why, never an exception."""
    try:
        doc = _obj(_load(text), "answer")
        ras = _obj(_or_empty(doc.get("ras")), "answer.ras")
        budget = _Budget()
        items = _list(doc, "communicators", "answer")
        comms = tuple(_comm(x, f"communicators[{k}]", budget) for k, x in enumerate(items[:MAX_COMMS]))
        return RasAnswer(
            addr="",
            format="json",
            nccl_version=_str(doc, "nccl_version", "answer"),
            communicators=comms,
            communicators_count=_int(doc, "communicators_count", "answer"),
            dropped=max(0, len(items) - MAX_COMMS),
            timeouts_count=_int(ras, "timeouts_count", "answer.ras"),
        )
    except BadAnswer as exc:
        return RasAnswer(addr="", format="json", reason=f"not a valid RAS answer: {exc}")
    except RecursionError:
        return RasAnswer(addr="", format="json", reason="not a valid RAS answer: nested too deeply")
    except ValueError as exc:  # JSONDecodeError; an integer of thousands of digits
        where = f" (line {exc.lineno})" if isinstance(exc, json.JSONDecodeError) else ""
        return RasAnswer(addr="", format="json", reason=f"not valid JSON{where}")
