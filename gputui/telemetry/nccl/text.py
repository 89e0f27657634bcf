"""The text form of a RAS `VERBOSE STATUS` answer, parsed into `model`'s dataclasses (pure).

NCCL older than 2.28 answers only in text (it refuses `SET FORMAT json`).  The text form
summarises: a table of communicator groups, then per communicator only what is wrong (NVIDIA/
nccl `src/ras/client_support.cc`, rasClientRunComms):

    #0-0 (a253901d5e78fc46) MISMATCH
      Communicator ranks have different AllReduce operation counts
      Rank 0 has launched up to operation 151 -- GPU 0 managed by process 2226 on node 10.0.0.2
      Rank 1 has launched up to operation 150 -- GPU 1 managed by process 2227 on node 10.0.0.2

    #0-0 (2c9c6938f67d9d38) INCOMPLETE
      Missing communicator data from 1 rank
      Rank 1 -- GPU 1 managed by process 1790 on node 10.0.0.2

So its communicators are those with a problem, holding the ranks those lines name (with the
counts, status or errors they give).  Every line is untrusted: only lines of these shapes are
read (numbers, NCCL's fixed words, a host without spaces); the others about a communicator
are kept as its `problems`, bounded, for display through the untrusted-text filter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gputui.telemetry.nccl.model import (
    IN_PROGRESS,
    MAX_COMMS,
    MAX_COUNT,
    MAX_ID,
    MAX_PROBLEM_CHARS,
    MAX_PROBLEMS,
    MAX_RANKS,
    MAX_RANKS_TOTAL,
    UNNAMED_ERROR,
    NcclComm,
    NcclCount,
    NcclRank,
    RasAnswer,
    clip,
    normal_hash,
)

_TAIL = (
    r"-- (?:GPU (?P<gpu>\d{1,9})(?: \(NVML (?P<nvml>\d{1,9})\))? managed by process (?P<pid>\d{1,9}) "
    r"on node (?P<host>\S{0,64})|\[process information not found\])$"
)
_RANK = re.compile(
    r"Rank (?P<rank>\d{1,9}) (?:"
    r"has launched up to operation (?P<count>\d{1,20}) |"
    r"has not launched any operations (?P<none>)|"
    r"has status (?P<status>[A-Z]{1,16}) |"
    r"reported (?P<error>[A-Za-z ]{1,40}?) |"
    r")" + _TAIL
)
_GROUP = re.compile(
    r"(?P<n>\d{1,9}) ranks (?:have launched up to operation (?P<count>\d{1,20})|"
    r"(?P<none>have not launched any operations)|have status (?P<status>[A-Z]{1,16})|"
    r"reported (?P<error>[A-Za-z ]{1,40}))$"
)
_COUNTS = re.compile(
    r"Communicator ranks have different (?P<coll>[A-Za-z][A-Za-z0-9_]{0,31}) operation counts$"
)
_ERRORS = re.compile(r"(?P<kind>Initialization|Asynchronous) errors? on \d{1,9} ranks?$")
_BLOCK = re.compile(r"#\d{1,9}-\d{1,9} \((?P<hash>[0-9a-f]{1,16})\) (?P<kind>[A-Z,]{1,40})$")
_VERSION = re.compile(r"NCCL version (?P<v>\S{1,32})")
_TABLE = re.compile(
    r"\s*(?P<group>\d{1,9})\s+(?P<comms>\d{1,9})\s+(?P<nodes>\d{1,9})\s+(?P<per_node>\d{1,9}(?:-\d{1,9})?)"
    r"\s+(?P<ranks>\d{1,9})\s+(?P<total>\d{1,9})\s+(?P<status>[A-Z]{1,16})\s+(?P<errors>[A-Z,]{1,40})$"
)
_TIMEOUTS = re.compile(r"Encountered (?P<n>\d{1,9}) communication timeouts? while gathering")

_ERROR_CODES = {
    "Unhandled CUDA error": 1,
    "System error": 2,
    "Internal error": 3,
    "Invalid argument": 4,
    "Invalid usage": 5,
    "Remote process error": 6,
    "NCCL operation in progress": IN_PROGRESS,
}
"""ncclErrorToString's words -> ncclResult_t."""


@dataclass
class _Block:
    """One communicator's lines while they are read."""

    hash: str
    ranks: dict[int, dict[str, object]] = field(default_factory=dict)
    missing: dict[int, dict[str, object]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    collective: str | None = None
    mode: str | None = None
    """What the "Rank N -- ..." lines that follow are: "missing", "counts", "status",
    "init", "async"."""
    value: object = None
    """The group's count, status or error those lines share."""


def _note(lines: list[str], line: str) -> None:
    if len(lines) < MAX_PROBLEMS:
        lines.append(clip(line, MAX_PROBLEM_CHARS))


def _facts(m: re.Match[str]) -> dict[str, object]:
    out: dict[str, object] = {"rank": int(m["rank"])}
    if m["pid"] is not None:
        out["pid"] = int(m["pid"])
        out["host"] = clip(m["host"]) or None
        out["cuda_dev"] = int(m["gpu"])
        out["nvml_dev"] = int(m["nvml"]) if m["nvml"] is not None else int(m["gpu"])
    return out


def _status(entry: dict[str, object], word: object) -> None:
    if word == "ABORT":
        entry["abort_flag"] = True
    elif word == "FINALIZE":
        entry["finalize_called"] = True
    elif word == "INIT":
        entry["init_state"] = IN_PROGRESS
    elif word == "RUNNING":
        entry["init_state"] = 0


def _rank_line(b: _Block, m: re.Match[str], budget: list[int]) -> None:
    rank = int(m["rank"])
    word = m["status"] if m["status"] is not None else (b.value if b.mode == "status" else None)
    missing = b.mode == "missing" or word == "NOCOMM"
    table = b.missing if missing else b.ranks
    if rank > MAX_ID or (rank not in table and (budget[0] <= 0 or len(table) >= MAX_RANKS)):
        return
    if rank not in table:
        budget[0] -= 1
    entry = table.setdefault(rank, {})
    entry.update(_facts(m))
    if missing:  # NOCOMM: its process answered, without this communicator
        entry["unresponsive"] = word != "NOCOMM"
        return
    count: object = None
    if m["count"] is not None or m["none"] is not None:
        count = int(m["count"]) if m["count"] is not None else 0
    elif b.mode == "counts" and m["error"] is None and m["status"] is None:
        count = b.value
    if b.collective is not None and isinstance(count, int) and count <= MAX_COUNT:
        counts = entry.setdefault("counts", {})
        assert isinstance(counts, dict)
        counts[b.collective] = count
    _status(entry, word)
    error = m["error"] if m["error"] is not None else b.value
    if b.mode in ("init", "async") and isinstance(error, str):
        entry["init_state" if b.mode == "init" else "async_error"] = _ERROR_CODES.get(error, UNNAMED_ERROR)


def _group_line(b: _Block, m: re.Match[str]) -> None:
    if m["count"] is not None or m["none"] is not None:
        b.value = int(m["count"]) if m["count"] is not None else 0
    elif m["status"] is not None:
        b.mode, b.value = "status", m["status"]
    else:
        b.value = m["error"]


def _block_line(b: _Block, line: str, budget: list[int]) -> None:
    if (m := _RANK.fullmatch(line)) is not None:
        _rank_line(b, m, budget)
    elif (m := _GROUP.fullmatch(line)) is not None:
        _group_line(b, m)
    elif (m := _COUNTS.fullmatch(line)) is not None:
        b.collective, b.mode, b.value = m["coll"], "counts", None
        _note(b.problems, line)
    elif (m := _ERRORS.fullmatch(line)) is not None:
        b.mode, b.value = ("init" if m["kind"] == "Initialization" else "async"), None
        _note(b.problems, line)
    else:
        if line.startswith("Missing communicator data from"):
            b.mode = "missing"
        elif line == "Communicator ranks have different status":
            b.mode, b.value = "status", None
        _note(b.problems, line)


def _rank_of(entry: dict[str, object]) -> NcclRank:
    counts = entry.pop("counts", {})
    assert isinstance(counts, dict)
    return NcclRank(
        **entry,  # type: ignore[arg-type]
        counts=tuple(NcclCount(k, v) for k, v in counts.items()),
    )


def _comm(b: _Block) -> NcclComm:
    ranks = tuple(_rank_of(e) for _, e in sorted(b.ranks.items()))
    missing = tuple(_rank_of(e) for _, e in sorted(b.missing.items()))
    return NcclComm(hash=b.hash, ranks=ranks, missing_ranks=missing, problems=tuple(b.problems))


def parse_text(text: str) -> RasAnswer:
    """The text form of a `VERBOSE STATUS` answer.  Never raises: lines of another shape are
    kept as problems (bounded) or skipped."""
    version = None
    summary: list[str] = []
    problems: list[str] = []
    blocks: dict[str, _Block] = {}
    budget = [MAX_RANKS_TOTAL]
    dropped = 0
    timeouts = None
    section = None
    block: _Block | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            block = None
            continue
        if version is None and (m := _VERSION.match(line)) is not None:
            version = m["v"]
        elif line in ("Errors", "Warnings"):
            section = line
        elif section is None and (m := _TABLE.fullmatch(raw)) is not None:
            if len(summary) < MAX_PROBLEMS:
                summary.append(
                    f"{m['comms']} communicator(s) of {m['ranks']} ranks, {m['nodes']} node(s), "
                    f"{m['per_node']} rank(s) per node: {m['status']} {m['errors']}"
                )
        elif section is not None and (m := _BLOCK.fullmatch(line)) is not None:
            h = normal_hash(m["hash"])
            assert h is not None
            if h not in blocks and len(blocks) >= MAX_COMMS:
                dropped += 1
                block = None
                continue
            block = blocks.setdefault(h, _Block(h))
            _note(block.problems, m["kind"])
        elif block is not None:
            _block_line(block, line, budget)
        elif section is not None and not set(line) <= {"=", "-"}:
            if (m := _TIMEOUTS.search(line)) is not None:
                timeouts = int(m["n"])
            _note(problems, line)
    return RasAnswer(
        addr="",
        format="text",
        nccl_version=version,
        communicators=tuple(_comm(b) for b in blocks.values()),
        dropped=dropped,
        timeouts_count=timeouts,
        problems=tuple(problems),
        summary=tuple(summary),
        reason=None if version is not None else "not an NCCL RAS answer (no NCCL version line)",
    )
