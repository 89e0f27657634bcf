"""What the RAS answers say is wrong (gputui/telemetry/nccl/findings.py): the real answers of
the h100-x4-matrix (NCCL 2.28.9 on 4 H100s), and each rule's boundary on hand-built answers
(labelled as such: built here to pin one rule, not NCCL's output)."""

from __future__ import annotations

import pytest
from ras_support import captured, first

from gputui.telemetry.nccl.findings import (
    MAX_PER_COMM,
    comm_findings,
    comms_of,
    findings,
    rank_name,
)
from gputui.telemetry.nccl.model import NcclComm, NcclCount, NcclRank, NcclView, RasAnswer, parse_json
from gputui.telemetry.nccl.text import parse_text

HOST = "192.0.2.2"
"""The matrix machine's address, as its answers give it."""


def view_of(answer: RasAnswer, local: tuple[str, ...] = (HOST,), pids: tuple[int, ...] = ()) -> NcclView:
    from dataclasses import replace

    return NcclView(0.0, (replace(answer, addr="localhost:28028", pids=pids),), local)


def ranks(*counts: int | None, collective: str = "AllReduce", host: str = HOST) -> tuple[NcclRank, ...]:
    return tuple(
        NcclRank(
            rank=k,
            host=host,
            pid=1000 + k,
            init_state=0,
            async_error=0,
            counts=() if n is None else (NcclCount(collective, n),),
        )
        for k, n in enumerate(counts)
    )


def kinds(found) -> list[tuple[str, int | None]]:
    return [(f.kind, f.rank) for f in found]


# --------------------------------------------------------------------------------------
# the real answers
# --------------------------------------------------------------------------------------


def test_the_deadlock_names_rank_1_one_allreduce_behind():
    a = parse_json(first("3-mismatch-slow-gpu", "localhost:28028", "json", '"AllReduce": 150').body)
    (f,) = findings(view_of(a))
    assert (f.kind, f.comm, f.rank, f.pid, f.host, f.collective, f.behind) == (
        "behind",
        "0xa253901d5e78fc46",
        1,
        2227,
        HOST,
        "AllReduce",
        1,
    )
    assert f.detail == "rank 1 (PID 2227) is one AllReduce behind (150; rank 0: 151)"


def test_the_text_form_gives_the_same_finding():
    a = parse_text(first("3-mismatch-slow-gpu", "localhost:28028", "text", "MISMATCH").body)
    (f,) = findings(view_of(a))
    assert f.detail == "rank 1 (PID 2227) is one AllReduce behind (150; rank 0: 151)"


@pytest.mark.parametrize(
    ("slot", "addr", "pid"),
    [("1-healthy-stopped", "localhost:28029", 1266), ("2-exit-early-killed", "localhost:28028", 1790)],
)
def test_a_stopped_or_exited_rank_is_missing_by_rank_pid_and_node(slot, addr, pid):
    for fmt in ("json", "text"):
        c = first(slot, addr, fmt, "INCOMPLETE" if fmt == "text" else '"missing_ranks_count": 1')
        (f,) = findings(view_of(parse_json(c.body) if fmt == "json" else parse_text(c.body)))
        assert (f.kind, f.rank, f.pid, f.host) == ("missing", 1, pid, HOST)
        assert f.detail.startswith(f"rank 1 (PID {pid}) is missing from communicator 0x")
        assert f.detail.endswith("its process does not answer")


def test_healthy_answers_give_no_finding_but_a_passing_lag():
    """Job a of slot 1 is healthy for all of its 60 s: every JSON answer has no finding."""
    healthy = [c for c in captured("1-healthy-stopped") if c.ok and c.addr == "localhost:28028"]
    assert len(healthy) == 20
    for c in healthy:
        a = parse_json(c.body) if c.format == "json" else parse_text(c.body)
        assert findings(view_of(a)) == ()


def test_a_rank_on_another_node_is_named_by_its_node():
    comm = NcclComm(
        "0x1", ranks=(ranks(10)[0], NcclRank(5, "10.0.0.7", 4411, counts=(NcclCount("AllReduce", 9),)))
    )
    (f,) = comm_findings(comm, (HOST,))
    assert f.detail == "rank 5 on node 10.0.0.7 (PID 4411) is one AllReduce behind (9; rank 0: 10)"
    assert rank_name(NcclRank(5, None, None), (HOST,)) == "rank 5 on node ? (PID ?)"
    # this machine's addresses unknown: every rank is named with its node
    assert rank_name(NcclRank(1, HOST, 7), ()) == f"rank 1 on node {HOST} (PID 7)"


# --------------------------------------------------------------------------------------
# boundaries of "behind"
# --------------------------------------------------------------------------------------


def test_a_lag_of_exactly_zero_is_nothing():
    assert comm_findings(NcclComm("0x1", ranks=ranks(225, 225)), (HOST,)) == []


def test_a_lag_of_exactly_one_is_one_operation_behind():
    (f,) = comm_findings(NcclComm("0x1", ranks=ranks(225, 224)), (HOST,))
    assert (f.kind, f.rank, f.behind) == ("behind", 1, 1)
    assert f.detail == "rank 1 (PID 1001) is one AllReduce behind (224; rank 0: 225)"


def test_a_lag_of_two():
    (f,) = comm_findings(NcclComm("0x1", ranks=ranks(5, 7, 7)), (HOST,))
    assert (f.rank, f.behind) == (0, 2)
    assert f.detail == "rank 0 (PID 1000) is 2 AllReduce operations behind (5; rank 1: 7)"


def test_an_unknown_count_is_not_behind():
    """None is not 0: a rank whose count is not reported is never behind."""
    assert comm_findings(NcclComm("0x1", ranks=ranks(225, None)), (HOST,)) == []
    assert comm_findings(NcclComm("0x1", ranks=ranks(None, None)), (HOST,)) == []


def test_a_known_count_of_zero_is_behind():
    (f,) = comm_findings(NcclComm("0x1", ranks=ranks(5, 0)), (HOST,))
    assert (f.rank, f.behind) == (1, 5)


def test_a_count_of_another_collective_is_not_compared():
    comm = NcclComm("0x1", ranks=(ranks(5)[0], ranks(3, collective="Broadcast")[0]))
    assert comm_findings(comm, (HOST,)) == []


def test_when_most_ranks_are_behind_one_finding_says_so():
    (f,) = comm_findings(NcclComm("0x1", ranks=ranks(7, 6, 6, 6)), (HOST,))
    assert (f.kind, f.rank, f.behind) == ("behind", None, 1)
    assert f.detail == "3 of 4 ranks of communicator 0x1 are behind in AllReduce (from 6 to 7 launched)"
    two = comm_findings(NcclComm("0x1", ranks=ranks(7, 7, 6, 6)), (HOST,))  # half: each named
    assert kinds(two) == [("behind", 2), ("behind", 3)]


def test_behind_carries_since_when_the_counts_stood_still():
    (f,) = comm_findings(NcclComm("0x1", ranks=ranks(2, 1), counts_since=123.0), (HOST,))
    assert f.since == 123.0


# --------------------------------------------------------------------------------------
# missing ranks: the count and the list may disagree
# --------------------------------------------------------------------------------------


def test_missing_count_larger_than_the_list_adds_an_unnamed_finding():
    comm = NcclComm("0x1", missing_ranks_count=3, missing_ranks=(NcclRank(4, HOST, 9, unresponsive=True),))
    found = comm_findings(comm, (HOST,))
    assert kinds(found) == [("missing", None), ("missing", 4)]
    assert found[0].detail == "2 more ranks missing from communicator 0x1 (the answer counts 3, names 1)"


def test_missing_count_smaller_than_the_list_trusts_the_list():
    comm = NcclComm("0x1", missing_ranks_count=0, missing_ranks=(NcclRank(4, HOST, 9, unresponsive=True),))
    assert kinds(comm_findings(comm, (HOST,))) == [("missing", 4)]


def test_missing_count_unknown_and_none_listed_is_nothing():
    assert comm_findings(NcclComm("0x1", missing_ranks_count=None), (HOST,)) == []
    (f,) = comm_findings(NcclComm("0x1", missing_ranks_count=1), (HOST,))
    assert f.detail == "1 more rank missing from communicator 0x1 (the answer counts 1, names 0)"


@pytest.mark.parametrize(
    ("unresponsive", "dead", "why"),
    [
        (True, False, "its process does not answer"),
        (True, True, "RAS considers its process dead"),
        (False, False, "its process answers but no longer reports it (destroyed or aborted it?)"),
        (None, None, "RAS has no data from it"),
    ],
)
def test_why_a_rank_is_missing(unresponsive, dead, why):
    comm = NcclComm(
        "0x1", missing_ranks=(NcclRank(2, HOST, 9, unresponsive=unresponsive, considered_dead=dead),)
    )
    (f,) = comm_findings(comm, (HOST,))
    assert f.detail == f"rank 2 (PID 9) is missing from communicator 0x1: {why}"


# --------------------------------------------------------------------------------------
# errors, aborts, init, state mismatch
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("code", "found"), [(None, False), (0, False), (7, False), (2, True), (99, True)])
def test_async_error_is_a_finding_unless_none_success_or_in_progress(code, found):
    comm = NcclComm("0x1", ranks=(NcclRank(0, HOST, 5, init_state=0, async_error=code),))
    got = comm_findings(comm, (HOST,))
    assert bool(got) == found
    if found:
        assert got[0].kind == "async_error" and got[0].detail.startswith(
            "rank 0 (PID 5) reports an asynchronous error"
        )


def test_abort_and_init():
    comm = NcclComm(
        "0x1",
        ranks=(
            NcclRank(0, HOST, 5, init_state=0, abort_flag=True),
            NcclRank(1, HOST, 6, init_state=7),
            NcclRank(2, HOST, 7, init_state=3),
            NcclRank(3, HOST, 8, init_state=None, abort_flag=None),
        ),
    )
    found = comm_findings(comm, (HOST,))
    assert kinds(found) == [("abort", 0), ("init", 1), ("init", 2), ("mismatch", None)]
    assert found[1].detail == "rank 1 (PID 6) has not finished initialising communicator 0x1"
    assert found[2].detail == "rank 2 (PID 7) failed to initialise communicator 0x1: internal error"
    assert found[3].detail == "the ranks of communicator 0x1 differ in state: 1 ABORT, 2 INIT"


def test_findings_are_capped_per_communicator():
    comm = NcclComm("0x1", missing_ranks=tuple(NcclRank(k, HOST, k) for k in range(500)))
    assert len(comm_findings(comm, (HOST,))) == MAX_PER_COMM


# --------------------------------------------------------------------------------------
# which job a communicator is
# --------------------------------------------------------------------------------------


def test_comms_of_maps_by_pid_on_this_machine():
    mine = NcclComm("0xa", ranks=ranks(1, 1))  # PIDs 1000, 1001 on HOST
    remote = NcclComm("0xb", ranks=ranks(1, 1, host="10.9.9.9"))  # same PIDs, another node
    view = NcclView(0.0, (RasAnswer("localhost:28028", communicators=(mine, remote)),), (HOST,))
    assert [c.hash for c in comms_of(view, {1000})] == ["0xa"]
    assert comms_of(view, {4242}) == ()
    assert comms_of(None, {1000}) == ()
    unknown = NcclView(0.0, view.answers, ())  # this machine's addresses not known: PIDs only
    assert [c.hash for c in comms_of(unknown, {1000})] == ["0xa", "0xb"]


def test_a_missing_rank_maps_its_job_too():
    comm = NcclComm("0xc", ranks=ranks(3, host="10.9.9.9"), missing_ranks=(NcclRank(1, HOST, 77),))
    view = NcclView(0.0, (RasAnswer("x", communicators=(comm,)),), (HOST,))
    assert comms_of(view, {77}) == (comm,)


def test_one_communicator_reported_by_two_addresses_counts_once():
    comm = NcclComm("0xa", ranks=ranks(2, 1))
    view = NcclView(
        0.0, (RasAnswer("a", communicators=(comm,)), RasAnswer("b", communicators=(comm,))), (HOST,)
    )
    assert len(findings(view)) == 1
