"""A Prometheus answer over the cap (issue 31: 400,000 series took 666 MiB and no first screen
in 14 s): it is read series by series and cut at the cap, with one line that says so; what
is past the cap is never downloaded, decoded or held.  And the answer is untrusted JSON:
anything else is one line.

The server here is a loopback HTTP server answering in the Prometheus API's shape with series
the test writes (HAND-WRITTEN, no Prometheus and no GPU claimed); tests/test_cluster.py and
tests/test_cluster_fleet.py read a real Prometheus.  Checks count series, bytes and memory,
never time."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator

import pytest
from cluster_support import FakePrometheus, series_json, vector

from gputui.cluster import promjson
from gputui.cluster.http import HttpClient
from gputui.cluster.promjson import PrometheusError, read_result
from gputui.cluster.sources import PrometheusSource
from gputui.ui.cluster.lines import status_line
from gputui.ui.render import line_len


@pytest.fixture
def fake_prometheus() -> Iterator[type[FakePrometheus]]:
    made: list[FakePrometheus] = []

    class Factory(FakePrometheus):
        def __init__(self, *a, **kw) -> None:  # type: ignore[no-untyped-def]
            super().__init__(*a, **kw)
            made.append(self)

    yield Factory
    for f in made:
        f.close()


CAP = 2_000
NOTE = (
    f"Prometheus answered more than {CAP:,} series: the first {CAP:,} are shown (narrow it with --selector)"
)


@pytest.mark.parametrize("gzipped", [False, True])
def test_an_answer_over_the_cap_is_cut_with_one_line_and_never_read_whole(fake_prometheus, gzipped):
    body = vector(series_json(60_000))
    server = fake_prometheus(body, gzipped=gzipped)
    client = HttpClient(timeout=60, max_body=64 * 2**20)
    src = PrometheusSource(server.url, client, max_series=CAP)
    tracemalloc.start()
    try:
        state = src.fetch()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert state.error is None and state.note == NOTE
    gpus = state.gpus
    assert 0 < len(gpus) <= CAP // 4 + 1 and len(state.hosts) > 1  # a first screen, from the first series
    # the rest was never downloaded: the client stopped reading at the cap
    assert client.bytes_received < max(server.sent) / 4, (client.bytes_received, server.sent)
    assert peak < 16 * 2**20, peak  # what the cap holds, not what the answer is (~13 MB of JSON)
    line = status_line(state, 200, "host", "all", None, 5.0)
    assert NOTE in "".join(t for t, _ in line) and line_len(line) <= 200


def test_an_answer_exactly_at_the_cap_is_whole(fake_prometheus):
    server = fake_prometheus(vector(series_json(CAP)))
    state = PrometheusSource(server.url, HttpClient(timeout=30), max_series=CAP).fetch()
    assert state.error is None and state.note is None
    assert len(state.gpus) == CAP // 4


def test_the_default_cap_holds_a_fleet_many_times_the_benchmarks():
    assert promjson.MAX_SERIES >= 10 * 512 * 17  # 512 GPUs x the list's 17 metrics, ten times


def _read(body: bytes, kind: str = "vector", cap: int = 100, piece: int = 7):
    pieces = iter([body[k : k + piece] for k in range(0, len(body), piece)])
    return read_result(pieces, kind, cap)


def test_series_are_read_across_any_cut_of_the_bytes():
    """The answer in 7-byte pieces (a number, a string, a multi-byte character cut anywhere)."""
    items = series_json(40)
    items[3] = items[3].replace(b'"NVIDIA H200"', '"NVIDIA H200 \u00e9\u4e2d"'.encode())
    result = _read(vector(items), piece=7)
    assert len(result.series) == 40 and not result.truncated
    assert result.series[3].labels["modelName"] == "NVIDIA H200 \u00e9\u4e2d"
    assert result.series[0].name == "DCGM_FI_DEV_GPU_UTIL" and result.series[0].value == [1764300000.123, "0"]
    assert "__name__" not in result.series[0].labels
    # one GPU's series (the same labels but the name) hold one label set
    assert result.series[0].labels is result.series[1].labels


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{}', "cut short"),
        (b"<html>not json</html>", "not JSON"),
        (
            b'{"status":"error","errorType":"bad_data","error":"parse error at char 3"}',
            "query failed: parse error",
        ),
        (b'{"status":"success","data":{"resultType":"matrix","result":[]}}', "expected a vector result"),
        (b'{"status":"success","data":{"result":[]}}', "expected a vector result"),
        (b'{"status":"success"}', "expected a vector result"),
        (b'{"data":{"resultType":"vector","result":[]}}', "query failed"),
        (b'{"status":"success","data":{"resultType":"vector","result":[1 2]}}', "not JSON"),
        (
            b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"'
            + b"x" * (promjson.MAX_SERIES_TEXT + 10)
            + b'"}}]}}',
            "a series longer than 1024 KiB",
        ),
        (b'{"status":"success","warnings":"' + b"w" * (promjson.MAX_VALUE + 10) + b'"}', "longer than"),
    ],
)
def test_anything_but_the_api_shape_is_one_line(body, says):
    with pytest.raises(PrometheusError) as exc:
        _read(body, piece=4096)
    assert says in str(exc.value) and "\n" not in str(exc.value), str(exc.value)


def test_labels_are_capped_in_length_and_number():
    metric = {"__name__": "m", "big": "v" * 5000, **{f"l{k:03d}": "x" for k in range(200)}}
    body = vector([json.dumps({"metric": metric, "value": [0, "1"]}).encode()])
    (s,) = _read(body, piece=1000).series
    assert len(s.labels["big"]) == promjson.MAX_LABEL_VALUE
    assert len(s.labels) == promjson.MAX_LABELS


def test_a_label_that_is_not_text_is_dropped_and_a_series_that_is_not_one_is_skipped():
    body = vector(
        [b'{"metric":{"__name__":"m","a":7,"b":"ok"},"value":[0,"1"]}', b'"just a string"', b"[1,2]"]
    )
    (s,) = _read(body).series
    assert dict(s.labels) == {"b": "ok"}


@pytest.mark.parametrize("piece", range(1, 12))
def test_a_number_cut_between_pieces_is_read_whole(piece):
    """A member that is a number ("seriesFetched": 123456789, as stats might add) cut anywhere:
    never taken as complete at the end of a piece."""
    items = series_json(3)
    body = b'{"status":"success","seriesFetched":123456789,"data":{"resultType":"vector","result":['
    body += b",".join(items) + b'],"count":987654321}}'
    result = _read(body, piece=piece)
    assert len(result.series) == 3


# ---- direct mode: an exporter over the cap -------------------------------------------------


def test_an_exporter_over_the_cap_is_cut_with_one_line_and_never_read_whole():
    """HAND-WRITTEN exposition: 50,000 GPU series from one target, the cap at 2,000."""
    from cluster_support import raw_server_factory

    from gputui.cluster.sources import DirectSource

    lines = b"".join(
        b'DCGM_FI_DEV_GPU_UTIL{gpu="%d",UUID="GPU-%08d",Hostname="big"} 5\n' % (k % 8, k)
        for k in range(50_000)
    )
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(lines) + lines

    def send(conn):  # type: ignore[no-untyped-def]
        try:
            conn.sendall(answer)
        except OSError:
            return False
        return None

    with raw_server_factory() as make:
        s = make(send)
        client = HttpClient(timeout=30)
        src = DirectSource([s.target], client, max_series=CAP)
        state = src.fetch()
        src.close()
    assert state.note == f"1 exporter sent more than {CAP:,} series: the rest was not read"
    assert len(state.gpus) == CAP and state.hosts[0].up
    assert client.bytes_received < len(answer) / 4, client.bytes_received
    text = "".join(t for t, _ in status_line(state, 200, "host", "all", None, 5.0))
    assert state.note in text


def test_scrapes_parse_one_at_a_time_and_wait_on_the_network_together():
    """`one_at_a_time`: the lock is held while the consumer works on a piece and free while
    the next piece is awaited (a scrape waiting on a slow target never holds up the others)."""
    import threading

    from gputui.cluster.sources import one_at_a_time

    lock = threading.Lock()
    seen_while_waiting: list[bool] = []

    def network():  # type: ignore[no-untyped-def]
        for piece in (b"a", b"b", b"c"):
            seen_while_waiting.append(lock.locked())
            yield piece

    held_while_working = [lock.locked() for _ in one_at_a_time(network(), lock)]
    assert seen_while_waiting == [False, False, False] and held_while_working == [True, True, True]
    assert not lock.locked()
    # a consumer that stops early (at its cap) or a network error leaves the lock free
    for _ in one_at_a_time(network(), lock):
        break
    assert not lock.locked()

    def broken():  # type: ignore[no-untyped-def]
        yield b"a"
        raise OSError("reset")

    with pytest.raises(OSError):
        list(one_at_a_time(broken(), lock))
    assert not lock.locked()
