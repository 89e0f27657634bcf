"""NCCL RAS answers parsed: every real answer captured on 4 H100s (NCCL 2.28.9, JSON and text,
tests/fixtures/h100-x4-matrix/*/ras.jsonl.gz), and hostile ones a local process could send."""

from __future__ import annotations

import json

import pytest
from ras_support import SLOTS, captured, first

from gputui.telemetry.nccl.model import (
    MAX_COMMS,
    MAX_RANKS,
    MAX_RANKS_TOTAL,
    NcclComm,
    NcclCount,
    NcclRank,
    RasAnswer,
    carry_since,
    normal_hash,
    parse_json,
)
from gputui.telemetry.nccl.text import parse_text


def parse(c):
    return parse_json(c.body) if c.format == "json" else parse_text(c.body)


# --------------------------------------------------------------------------------------
# the real answers
# --------------------------------------------------------------------------------------


def test_every_real_answer_parses_without_a_reason():
    n = 0
    for c in captured():
        if not c.ok:
            assert c.body == ""  # the capture timed out: nothing to parse
            continue
        a = parse(c)
        assert a.reason is None, (c.slot, c.addr, c.format, a.reason)
        assert a.nccl_version == "2.28.9"
        assert a.format == c.format
        if c.format == "json":
            assert a.communicators_count == len(a.communicators) == 1
            comm = a.communicators[0]
            assert comm.size == 2
            assert comm.ranks_count == len(comm.ranks)
            assert comm.missing_ranks_count == len(comm.missing_ranks)
            assert comm.ranks_count + comm.missing_ranks_count == 2
            for r in comm.ranks:
                assert r.host == "192.0.2.2" and r.pid is not None and r.init_state == 0
                assert [x.collective for x in r.counts] == [
                    "Broadcast",
                    "Reduce",
                    "AllGather",
                    "ReduceScatter",
                    "AllReduce",
                ]
        n += 1
    assert n == sum(1 for c in captured() if c.ok) > 200
    assert {c.slot for c in captured()} == set(SLOTS)


def test_nccl_2_28_9_leaves_out_a_comma_after_a_missing_ranks_nvml_dev_and_it_is_read_anyway():
    c = first("1-healthy-stopped", "localhost:28029", "json", '"missing_ranks_count": 1')
    assert '"nvml_dev": 3\n' in c.body  # NCCL's own output: not valid JSON
    with pytest.raises(json.JSONDecodeError):
        json.loads(c.body)
    a = parse_json(c.body)
    assert a.reason is None
    (m,) = a.communicators[0].missing_ranks
    assert (m.rank, m.host, m.pid, m.cuda_dev, m.nvml_dev) == (1, "192.0.2.2", 1266, 1, 3)
    assert (m.unresponsive, m.considered_dead) == (True, False)


def test_the_deadlock_in_json_and_in_text_says_the_same():
    j = parse_json(first("3-mismatch-slow-gpu", "localhost:28028", "json", '"AllReduce": 150').body)
    t = parse_text(first("3-mismatch-slow-gpu", "localhost:28028", "text", "MISMATCH").body)
    (cj,) = j.communicators
    (ct,) = t.communicators
    assert cj.hash == ct.hash == "0xa253901d5e78fc46"
    for comm in (cj, ct):
        by_rank = {r.rank: (r.pid, r.count("AllReduce")) for r in comm.ranks}
        assert by_rank == {0: (2226, 151), 1: (2227, 150)}
    assert ct.problems == ("MISMATCH", "Communicator ranks have different AllReduce operation counts")
    assert t.summary == ("1 communicator(s) of 2 ranks, 1 node(s), 2 rank(s) per node: RUNNING MISMATCH",)


def test_the_text_forms_zero_padded_hash_is_the_json_forms():
    t = parse_text(first("5-checkpoint-healthy", "localhost:28028", "text", "MISMATCH").body)
    assert "(02e0d20e5df5ce51)" in first("5-checkpoint-healthy", "localhost:28028", "text", "MISMATCH").body
    assert t.communicators[0].hash == "0x2e0d20e5df5ce51"
    j = parse_json(first("5-checkpoint-healthy", "localhost:28028", "json", "hash").body)
    assert j.communicators[0].hash == "0x2e0d20e5df5ce51"


def test_a_text_answers_missing_rank_names_its_process_and_node():
    a = parse_text(first("2-exit-early-killed", "localhost:28029", "text", "INCOMPLETE").body)
    (comm,) = a.communicators
    (m,) = comm.missing_ranks
    assert (m.rank, m.pid, m.host, m.cuda_dev, m.nvml_dev, m.unresponsive) == (
        1,
        1488,
        "192.0.2.2",
        1,
        3,
        True,
    )
    assert "Process 1488 on node 192.0.2.2 managing GPU 1 (NVML 3)" in a.problems


def test_a_healthy_text_answer_has_no_communicator_with_a_problem():
    a = parse_text(first("1-healthy-stopped", "localhost:28028", "text", "RUNNING").body)
    assert a.communicators == () and a.problems == ()
    assert a.summary == ("1 communicator(s) of 2 ranks, 1 node(s), 2 rank(s) per node: RUNNING OK",)


def test_counts_since_carries_while_the_counts_stand_still():
    comm = NcclComm("0x1", ranks=(NcclRank(0, counts=(NcclCount("AllReduce", 5),)),))
    a1 = carry_since(None, RasAnswer("x", communicators=(comm,)), 100.0)
    assert a1.communicators[0].counts_since == 100.0
    a2 = carry_since(a1, RasAnswer("x", communicators=(comm,)), 110.0)
    assert a2.communicators[0].counts_since == 100.0  # not moved since 100
    moved = NcclComm("0x1", ranks=(NcclRank(0, counts=(NcclCount("AllReduce", 6),)),))
    a3 = carry_since(a2, RasAnswer("x", communicators=(moved,)), 120.0)
    assert a3.communicators[0].counts_since == 120.0
    bare = carry_since(a3, RasAnswer("x", communicators=(NcclComm("0x1", ranks=(NcclRank(0),)),)), 130.0)
    assert bare.communicators[0].counts_since is None  # no counts: nothing to compare


# --------------------------------------------------------------------------------------
# hostile answers: a clear reason, never an exception, always bounded
# --------------------------------------------------------------------------------------


def doc(**comm_fields):
    comm = {"hash": "0x1", "size": 2, "ranks_count": 1, "missing_ranks_count": 0, "ranks": [{"rank": 0}]}
    comm.update(comm_fields)
    return json.dumps({"nccl_version": "2.28.9", "communicators": [comm]})


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{", "not valid JSON (line 1)"),
        ("", "not valid JSON (line 1)"),
        ("[1, 2]", "answer: expected an object, got list"),
        ('{"communicators": {"a": 1}}', "answer.communicators: expected a list, got dict"),
        ('{"nccl_version": 2.28}', "answer.nccl_version: expected a string, got float"),
        (doc(ranks=[{"rank": "1"}]), "communicators[0].ranks[0].rank: expected an integer, got str"),
        (doc(ranks=[{"rank": True}]), "communicators[0].ranks[0].rank: expected an integer, got bool"),
        (doc(ranks=[{"pid": 2**33}]), "communicators[0].ranks[0].pid: 8589934592 is out of range"),
        (doc(ranks=[{"rank": -5}]), "communicators[0].ranks[0].rank: -5 is out of range"),
        (doc(size=10**30), "communicators[0].size: a huge number is out of range"),
        (doc(size=1e400), "communicators[0].size: expected an integer, got float"),
        (doc(hash="0x" + "f" * 17), "communicators[0].hash: expected a hexadecimal communicator hash"),
        (doc(hash="\x1b[31m"), "communicators[0].hash: expected a hexadecimal communicator hash"),
        (
            doc(ranks=[{"collective_counts": {"AllReduce": -1}}]),
            "communicators[0].ranks[0].collective_counts.AllReduce: -1 is out of range",
        ),
        (
            doc(ranks=[{"collective_counts": {"AllReduce": 2**64}}]),
            "communicators[0].ranks[0].collective_counts.AllReduce: a huge number is out of range",
        ),
        (
            doc(ranks=[{"collective_counts": {"\x1b]0;pwned\x07": 1}}]),
            "communicators[0].ranks[0].collective_counts: a collective's name is not a word",
        ),
        (
            doc(ranks=[{"status": {"abort_flag": 1}}]),
            "communicators[0].ranks[0].status.abort_flag: expected true",
        ),
        (doc(ranks=[{"status": []}]), "communicators[0].ranks[0].status: expected an object, got list"),
    ],
)
def test_a_hostile_json_answer_gives_a_clear_reason(text, reason):
    a = parse_json(text)
    assert a.reason is not None
    assert a.reason.startswith(("not a valid RAS answer: " + reason, reason)), a.reason
    assert a.communicators == ()


def test_an_integer_of_thousands_of_digits_and_deep_nesting_are_refused_not_raised():
    assert parse_json('{"size": ' + "9" * 5000 + "}").reason == "not valid JSON"
    assert parse_json("[" * 100_000 + "]" * 100_000).reason in (
        "not a valid RAS answer: nested too deeply",
        "not valid JSON",
    )


def test_escape_sequences_in_a_host_are_kept_as_data_bounded():
    a = parse_json(doc(ranks=[{"rank": 0, "host": "\x1b[2J\x1b]0;owned\x07" + "x" * 500}]))
    assert a.reason is None
    host = a.communicators[0].ranks[0].host
    assert host is not None and host.startswith("\x1b[2J") and len(host) == 64  # shown through the filter


def test_a_million_ranks_claimed_is_a_number_not_a_list():
    a = parse_json(doc(size=10**6, ranks_count=10**6, missing_ranks_count=10**6))
    comm = a.communicators[0]
    assert (comm.size, comm.ranks_count, comm.missing_ranks_count) == (10**6, 10**6, 10**6)
    assert len(comm.ranks) == 1 and comm.dropped == 0


def test_ranks_and_communicators_are_capped_and_the_rest_counted():
    many = [{"rank": k, "pid": k} for k in range(MAX_RANKS + 10)]
    a = parse_json(doc(ranks=many))
    assert len(a.communicators[0].ranks) == MAX_RANKS and a.communicators[0].dropped == 10
    comms = [{"hash": hex(k + 1), "ranks": [{"rank": 0}]} for k in range(MAX_COMMS + 5)]
    a = parse_json(json.dumps({"communicators": comms}))
    assert len(a.communicators) == MAX_COMMS and a.dropped == 5
    big = [{"hash": hex(k + 1), "ranks": many} for k in range(12)]
    a = parse_json(json.dumps({"communicators": big}))
    assert sum(len(c.ranks) for c in a.communicators) == MAX_RANKS_TOTAL
    assert sum(c.dropped for c in a.communicators) == 12 * len(many) - MAX_RANKS_TOTAL


def test_unknown_fields_are_ignored_and_absent_ones_are_none_not_zero():
    a = parse_json(
        json.dumps({"communicators": [{"hash": "0xAB", "new_field": [1], "ranks": [{"rank": 3}]}]})
    )
    assert a.reason is None
    (comm,) = a.communicators
    assert comm.hash == "0xab"
    assert (comm.size, comm.ranks_count, comm.missing_ranks_count) == (None, None, None)
    (r,) = comm.ranks
    assert (r.pid, r.init_state, r.async_error, r.abort_flag, r.count("AllReduce")) == (None,) * 5


def test_nccl_unknown_host_and_pid_are_none():
    a = parse_json(doc(ranks=[{"rank": 0, "host": "unknown", "pid": -1, "cuda_dev": -1}]))
    r = a.communicators[0].ranks[0]
    assert (r.host, r.pid, r.cuda_dev) == (None, None, None)


def test_normal_hash():
    assert normal_hash("0x00ab") == normal_hash("00ab") == normal_hash("AB") == "0xab"
    assert normal_hash("") is None and normal_hash("0x") is None and normal_hash("0xg1") is None
    assert normal_hash("1" * 17) is None


def test_hostile_text_is_bounded_and_never_raises():
    lines = ["NCCL version 2.27.7 compiled with CUDA 12.9", "Errors", "======", ""]
    lines += [
        "#0-0 (00000000000000ab) MISMATCH",
        "  Communicator ranks have different AllReduce operation counts",
    ]
    lines += [
        f"  Rank {k} has launched up to operation {k} -- GPU 0 managed by process {k} on node h"
        for k in range(3000)
    ]
    lines += ["  \x1b]0;title\x07 " + "y" * 10_000 for _ in range(100)]
    a = parse_text("\n".join(lines))
    (comm,) = a.communicators
    assert len(comm.ranks) == MAX_RANKS
    assert len(comm.problems) <= 32 and all(len(p) <= 160 for p in comm.problems)
    assert comm.ranks[5].count("AllReduce") == 5
    assert parse_text("").reason == "not an NCCL RAS answer (no NCCL version line)"
    assert parse_text("\x00\xff" * 1000).reason is not None
