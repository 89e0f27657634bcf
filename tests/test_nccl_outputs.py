"""NCCL RAS's view reaching the outputs, from the real h100-x4-matrix runs (recordings with
the RAS answers captured beside them merged in at their times; labelled derived): recorded and
replayed as seen, `gputui snapshot --processes --json` (each job's `nccl` section, against the
committed schema), and what a job says where RAS gives nothing."""

from __future__ import annotations

import json

import jsonschema
import pytest
from conftest import gputui
from ras_support import MATRIX, ras_views, with_ras

from gputui.export.nccl_json import nccl_job
from gputui.telemetry.nccl.findings import NO_COMM, NOT_ASKED, NOT_RECORDED, job_nccl, text_only
from gputui.telemetry.nccl.model import NO_JOB, NcclView, RasAnswer
from gputui.telemetry.nccl.watch import OFF
from gputui.telemetry.recording import read_recording

SCHEMA = json.loads(
    (
        __import__("pathlib").Path(__file__).resolve().parents[1] / "gputui/schemas/snapshot-v1.json"
    ).read_text()
)


def test_a_recording_keeps_the_answers_and_a_replay_reads_them_back(tmp_path):
    path = with_ras("3-mismatch-slow-gpu", tmp_path / "r.jsonl.gz")
    header, ticks = read_recording(path)
    views = [s.nccl for s in ticks if s.nccl is not None]
    assert header.derived is not None
    assert len(views) == 12  # a round every 5 s over the 60 s recording
    assert views == ras_views("3-mismatch-slow-gpu")


def snapshot_doc(path, tick: int) -> dict:
    r = gputui("snapshot", "--replay", str(path), "--tick", str(tick), "--processes", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    return doc


def test_snapshot_json_shows_the_deadlock_in_job_a_and_nothing_wrong_in_job_b(tmp_path):
    path = with_ras("3-mismatch-slow-gpu", tmp_path / "r.jsonl.gz")
    doc = snapshot_doc(path, 40)
    jobs = {tuple(j["key"]): j for j in doc["health"]["jobs"]}
    a = jobs[("launcher", "2010")]["nccl"]
    b = jobs[("launcher", "2012")]["nccl"]
    assert a["reason"] is None and a["nccl_version"] == "2.28.9"
    (comm,) = a["communicators"]
    assert comm["hash"] == "0xa253901d5e78fc46" and comm["ranks_per_node"] == {"192.0.2.2": 2}
    assert [r["collective_counts"]["AllReduce"] for r in comm["ranks"]] == [151, 150]
    (f,) = a["findings"]
    assert (f["kind"], f["rank"], f["pid"], f["collective"], f["behind"]) == (
        "behind",
        1,
        2227,
        "AllReduce",
        1,
    )
    assert f["detail"] == "rank 1 (PID 2227) is one AllReduce behind (150; rank 0: 151)"
    assert f["since"] is not None and f["since"] <= doc["timestamp"] - 20  # frozen: the deadlock
    assert b["findings"] == [] and len(b["communicators"]) == 1


def test_snapshot_json_names_the_stopped_rank_missing_or_says_why_not(tmp_path):
    """Job b's rank 1 (PID 1266) is SIGSTOPped 10 s in.  The capture asked once per round
    without a second connection: where the stopped process held it, there is no answer (the
    reason says so); otherwise rank 1 is missing."""
    path = with_ras("1-healthy-stopped", tmp_path / "r.jsonl.gz")
    _, ticks = read_recording(path)
    seen = set()
    for tick in (
        k + 1 for k, s in enumerate(ticks) if s.nccl is not None and s.timestamp > ticks[0].timestamp + 15
    ):
        doc = snapshot_doc(path, tick)
        b = next(j for j in doc["health"]["jobs"] if 1266 in {r["pid"] for r in j["ranks"]})["nccl"]
        if b["reason"] is None:
            (f,) = b["findings"]
            assert (f["kind"], f["rank"], f["pid"], f["host"]) == ("missing", 1, 1266, "192.0.2.2")
            seen.add("missing")
        else:
            assert b["reason"] == "no answer within 5 s (a process of the job stopped?)"
            seen.add("reason")
    assert seen == {"missing", "reason"}


def test_a_recording_without_answers_says_not_in_this_recording_for_each_job():
    """Format 6 and older hold no RAS answers: each job says so ("not in this recording", not
    the live view's "no RAS answer yet"), once, and goes on."""
    doc = snapshot_doc(MATRIX / "3-mismatch-slow-gpu" / "recording.jsonl.gz", 30)
    assert len(doc["health"]["jobs"]) == 2
    for job in doc["health"]["jobs"]:
        assert job["nccl"]["reason"] == NOT_RECORDED and job["nccl"]["communicators"] == []


def test_whether_a_recording_holds_answers_is_read_once_and_told_apart_from_live(tmp_path):
    from gputui.telemetry.hub import Hub
    from gputui.telemetry.recording import ReplaySource

    live = Hub()
    assert live.nccl_absent() == NOT_ASKED
    with_answers = Hub()
    with_answers.follow(ReplaySource(with_ras("3-mismatch-slow-gpu", tmp_path / "r.jsonl.gz")))
    assert with_answers.nccl_absent() == NOT_ASKED  # (before its first answer: none yet)
    without = Hub()
    without.follow(ReplaySource(MATRIX / "3-mismatch-slow-gpu" / "recording.jsonl.gz"))
    assert without.nccl_absent() == NOT_RECORDED
    assert job_nccl(None, {1}, NOT_RECORDED).reason == NOT_RECORDED
    assert job_nccl(NcclView(1.0, reason=NO_JOB), {1}, NOT_RECORDED).reason == NOT_RECORDED


# --------------------------------------------------------------------------------------
# the one reason a job's section gives
# --------------------------------------------------------------------------------------


def test_reasons_said_once():
    assert job_nccl(None, {1}).reason == NOT_ASKED
    assert job_nccl(NcclView(1.0, reason=NO_JOB), {1}).reason == NOT_ASKED
    off = NcclView(1.0, (RasAnswer("", pids=(1, 2), reason=OFF),))
    assert job_nccl(off, {1, 2}).reason == OFF
    down = NcclView(
        1.0, (RasAnswer("localhost:28028", pids=(1, 2), reason="nothing listens on localhost:28028"),)
    )
    assert job_nccl(down, {1}).reason == "nothing listens on localhost:28028"
    other = NcclView(1.0, (RasAnswer("localhost:28028", pids=(1, 2), format="json", nccl_version="2.28.9"),))
    assert job_nccl(other, {1}).reason == NO_COMM
    assert job_nccl(other, {99}).reason == NOT_ASKED  # the job came after the round
    old = NcclView(1.0, (RasAnswer("localhost:28028", pids=(1,), format="text", nccl_version="2.27.7"),))
    assert job_nccl(old, {1}).reason == text_only("2.27.7")
    assert nccl_job(old, {1})["reason"].startswith("NCCL 2.27.7 answers in text only")


@pytest.mark.parametrize("slot", ["2-exit-early-killed", "4-slow-host-loader-stall", "5-checkpoint-healthy"])
def test_every_rounds_json_section_fits_the_schema(slot):
    validator = jsonschema.Draft202012Validator(
        SCHEMA["properties"]["health"]["properties"]["jobs"]["items"]["properties"]["nccl"]
    )
    for view in ras_views(slot) + ras_views(slot, "text"):
        for answer in view.answers:
            validator.validate(nccl_job(view, set(answer.pids)))


def test_a_seek_shows_the_recordings_nccl_view_as_of_the_tick(tmp_path) -> None:
    """A replay's NCCL section is the recording's up to the tick, whatever was played: after a
    jump forward it is the latest view recorded at or before the tick (not none), after a
    jump back it is not a later tick's view (the real deadlock with its captured answers)."""
    from ras_support import with_ras

    from gputui.telemetry.hub import Hub
    from gputui.telemetry.recording import ReplaySource, read_recording

    path = with_ras("3-mismatch-slow-gpu", tmp_path / "mismatch-ras.jsonl.gz")
    _, ticks = read_recording(path)

    def recorded(tick: int):  # tick is 1-based, as on screen
        views = [s.nccl for s in ticks[:tick] if s.nccl is not None]
        return views[-1] if views else None

    with_view = [k + 1 for k, s in enumerate(ticks) if s.nccl is not None]
    assert len(with_view) >= 3
    source = ReplaySource(path)
    hub = Hub(capacity=8)
    hub.set_info(source.open())
    hub.follow(source, every=4)
    for tick in (with_view[2] + 2, with_view[1] - 1, with_view[-1] + 1, with_view[0], 1):
        source.seek(tick - 2)
        hub.publish(source.sample())
        assert hub.nccl_view() == recorded(tick), tick


def test_a_seek_published_before_the_engines_shows_the_recordings_nccl_view(tmp_path) -> None:
    """The monitor's first tick is stored before its engines are made (`Hub.make_engines`):
    a first tick further in shows, once they are, the latest view recorded at or before it."""
    from ras_support import with_ras

    from gputui.telemetry.hub import Hub
    from gputui.telemetry.recording import ReplaySource, read_recording
    from gputui.telemetry.replay_judge import Engines

    path = with_ras("3-mismatch-slow-gpu", tmp_path / "mismatch-ras.jsonl.gz")
    _, ticks = read_recording(path)
    tick = next(k + 1 for k, s in enumerate(ticks) if s.nccl is not None) + 1  # the tick after a view
    view = ticks[tick - 2].nccl
    assert view is not None and ticks[tick - 1].nccl is None
    source = ReplaySource(path)
    hub = Hub(capacity=8, make_engines=Engines)
    hub.set_info(source.open())
    hub.follow(source, every=4)
    source.seek(tick - 2)
    hub.publish(source.sample(), judge=False)
    assert hub.judge_pending() is True
    assert hub.nccl_view() == view
