"""Hostile answers: each ends in a retry or a typed error, never an untyped one or a number.

Fakes (the scripted HTTP fake and :mod:`tests.source.fault_servers`) because a
real Prometheus never nests JSON 100,000 deep, asks to wait ``nan`` seconds,
writes a NaN timestamp, answers ``count(...)`` with NaN, or sends an SSH banner
instead of a status line.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inference_obs.cli import EXIT_SOURCE, EXIT_USAGE
from inference_obs.errors import AccessDenied, SourceUnavailable
from inference_obs.query import Selector
from inference_obs.reading.alignment import scrape_interval_ms
from inference_obs.reading.resolution import series_count
from inference_obs.samples import Vector, Window
from inference_obs.source.frames import MATRIX_BODY_PREFIX
from inference_obs.source.prometheus import PrometheusSource
from tests.source.fault_servers import (
    REPORT_WINDOW,
    RawServer,
    run_cli,
    small_deployments,
)
from tests.source.test_prometheus_fakes import Answer, FakeServer, Recorded, envelope, fake_server

UP = Selector("up")
WINDOW = Window.parse("2026-01-01T00:00+00:00", 3600.0)
VECTOR = envelope({"resultType": "vector", "result": [{"metric": {"job": "a"}, "value": [1, "2"]}]})
DEEP = 100_000


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    yield from fake_server()


def source(url: str, **kwargs: Any) -> PrometheusSource:
    return PrometheusSource(url, **{"backoff": 0.01, **kwargs})


def waits(caplog: pytest.LogCaptureFixture) -> list[float]:
    """The waits the client chose between attempts, from its debug log."""
    found = (re.search(r"retrying \S+ in ([0-9.]+) s", r.getMessage()) for r in caplog.records)
    return [float(m.group(1)) for m in found if m]


# --- JSON nested deeper than Python's stack -----------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"[" * DEEP,  # cut off
        b"[" * DEEP + b"]" * DEEP,  # valid JSON, deeper than any parser's stack
        b'{"status":"success","data":{"resultType":"vector","result":'
        + b"[" * DEEP
        + b"]" * DEEP
        + b"}}",
        # The matrix fast path decodes each series' labels on their own.
        MATRIX_BODY_PREFIX
        + b'{"metric":'
        + b'{"a":' * DEEP
        + b"1"
        + b"}" * DEEP
        + b',"values":[[1,"1"]]}]}}',
    ],
    ids=["open", "balanced", "in-data", "in-metric"],
)
def test_deeply_nested_json_is_unavailable_not_a_recursion_error(
    fake: FakeServer, body: bytes
) -> None:
    fake.script = [Answer(body=body)]
    with pytest.raises(SourceUnavailable, match="invalid or truncated JSON") as info:
        source(fake.url, retries=1).instant(UP, 0)
    assert info.value.__cause__ is None
    assert len(fake.requests) == 2  # retried once, like any broken answer


# --- Retry-After ----------------------------------------------------------------


@pytest.mark.parametrize("value", ["nan", "inf", "-5", "Wed, 21 Oct 2026 07:28:00 GMT", "soon"])
@pytest.mark.parametrize("status", [429, 503])
def test_an_unusable_retry_after_falls_back_to_own_backoff(
    fake: FakeServer, caplog: pytest.LogCaptureFixture, value: str, status: int
) -> None:
    caplog.set_level(logging.DEBUG, logger="inference_obs.source.prometheus")
    fake.script = [Answer(status, b"busy", {"Retry-After": value}), Answer(body=VECTOR)]
    started = time.monotonic()
    result = source(fake.url).instant(UP, 0)
    assert isinstance(result.value, Vector)
    assert result.value.values.tolist() == [2.0]
    [wait] = waits(caplog)
    assert 0.005 <= wait <= 0.015  # backoff=0.01 with jitter 0.5-1.5x
    assert time.monotonic() - started < 1.0


def test_a_long_retry_after_is_treated_as_down_at_once(fake: FakeServer) -> None:
    fake.script = [Answer(503, b"maintenance", {"Retry-After": "3600"})]
    started = time.monotonic()
    with pytest.raises(SourceUnavailable, match=r"asks to wait 3600 s.*treated as down"):
        source(fake.url, retries=3).instant(UP, 0)
    assert time.monotonic() - started < 1.0
    assert len(fake.requests) == 1


# --- timestamps that are no time ----------------------------------------------


def vector_body(t: str) -> bytes:
    """A vector answer of one sample at time ``t`` (JSON text, unquoted or quoted)."""
    result = f'[{{"metric":{{}},"value":[{t},"1"]}}]'
    return b'{"status":"success","data":{"resultType":"vector","result":' + result.encode() + b"}}"


def matrix_body(t: str, *, compact: bool) -> bytes:
    """A matrix answer: compact (Prometheus' encoding, read by the fast path) or spaced."""
    text = (
        '{"status":"success","data":{"resultType":"matrix","result":'
        f'[{{"metric":{{"job":"a"}},"values":[[1,"1"],[{t},"2"]]}}]}}}}'
    )
    if not compact:
        text = json.dumps(json.loads(text), indent=1).replace("1e+300", t)
    return text.encode()


BAD_TIMES = ["NaN", "Infinity", "-Infinity", "1e300", '"NaN"', '"1e300"']


@pytest.mark.parametrize("t", BAD_TIMES)
def test_a_bad_timestamp_in_a_vector_is_a_malformed_answer(fake: FakeServer, t: str) -> None:
    fake.script = [Answer(body=vector_body(t))]
    with pytest.raises(SourceUnavailable, match="malformed answer"):
        source(fake.url).instant(UP, 0)


@pytest.mark.parametrize("compact", [True, False], ids=["fast-path", "json-path"])
@pytest.mark.parametrize("t", BAD_TIMES)
def test_a_bad_timestamp_in_a_matrix_is_a_malformed_answer(
    fake: FakeServer, t: str, compact: bool
) -> None:
    body = matrix_body(t, compact=compact)
    assert body.startswith(MATRIX_BODY_PREFIX) == compact
    fake.script = [Answer(body=envelope({"version": "2.53.0"})), Answer(body=body)]
    src = source(fake.url)
    with pytest.raises(SourceUnavailable, match="malformed answer"):
        src.range(UP, WINDOW, 60)
    with pytest.raises(SourceUnavailable, match="malformed answer"):
        src.raw(UP, WINDOW)  # the same answer to an instant query of a range selector


def test_the_same_answers_with_a_good_time_are_read() -> None:
    """The bodies above differ from good ones only in that timestamp."""
    for server in fake_server():
        server.script = [
            Answer(body=vector_body("2")),
            Answer(body=envelope({"version": "2.53.0"})),
            Answer(body=matrix_body("2", compact=True)),
            Answer(body=matrix_body("2", compact=False)),
        ]
        src = source(server.url)
        assert src.instant(UP, 0).value.values.tolist() == [1.0]  # type: ignore[union-attr]
        for _ in range(2):
            assert src.range(UP, WINDOW, 60).t_ms.tolist() == [1000, 2000]


@pytest.mark.parametrize(
    "result",
    [
        [{"metric": {}, "value": [1, "2", 3, "4"]}, {"metric": {"a": "b"}, "value": []}],
        [{"metric": {}, "value": "12"}],
        [{"metric": {}, "value": [1]}],
    ],
    ids=["extra-items", "a-string", "one-item"],
)
def test_a_point_that_is_no_pair_is_a_malformed_answer(
    fake: FakeServer, result: list[dict[str, Any]]
) -> None:
    """Flattened, [1, "2", 3, "4"] then [] would read as two samples: never numbers."""
    fake.script = [Answer(body=envelope({"resultType": "vector", "result": result}))]
    with pytest.raises(SourceUnavailable, match="malformed answer"):
        source(fake.url).instant(UP, 0)


@pytest.mark.parametrize("kind", ["string", "matrix"])
def test_an_instant_answer_of_another_type_is_a_malformed_answer(
    fake: FakeServer, kind: str
) -> None:
    fake.script = [Answer(body=envelope({"resultType": kind, "result": []}))]
    with pytest.raises(
        SourceUnavailable,
        match=f"malformed answer \\(result type '{kind}' is not an instant vector or scalar\\)",
    ):
        source(fake.url).instant(UP, 0)


# --- counts that are no count ----------------------------------------------------


def answer_count(value: str) -> Any:
    def respond(request: Recorded) -> Answer:
        query = urllib.parse.parse_qs(request.body.decode()).get("query", [""])[0]
        result = [{"metric": {}, "value": [1, value]}] if query.startswith("count(") else []
        return Answer(body=envelope({"resultType": "vector", "result": result}))

    return respond


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-1", "2.5"])
def test_a_count_that_is_no_count_is_a_malformed_answer(fake: FakeServer, value: str) -> None:
    fake.responder = answer_count(value)
    with pytest.raises(SourceUnavailable, match="malformed answer") as info:
        series_count(source(fake.url), UP, WINDOW)
    assert info.value.promql == "count(count_over_time(up[1h]))"
    fake.responder = answer_count("3")
    assert series_count(source(fake.url), UP, WINDOW) == 3


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-1", "5e-324"])
def test_a_median_sample_count_that_is_no_count_is_a_malformed_answer(
    fake: FakeServer, value: str
) -> None:
    """5e-324 samples would make the interval 3.6e6 / 5e-324: an overflow, not a number."""
    fake.script = [Answer(body=vector_body("1").replace(b'"1"]', f'"{value}"]'.encode()))]
    with pytest.raises(SourceUnavailable, match="malformed answer") as info:
        scrape_interval_ms(source(fake.url), UP, WINDOW)
    assert info.value.promql == "quantile(0.5, count_over_time(up[1h]))"
    fake.script = [Answer(body=vector_body("1").replace(b'"1"]', b'"240"]'))]
    assert scrape_interval_ms(source(fake.url), UP, WINDOW) == 15_000


def test_cli_a_nan_count_is_a_source_error(fake: FakeServer, tmp_path: Path) -> None:
    fake.responder = answer_count("NaN")
    args = ["--deployments", str(small_deployments(tmp_path)), "--out", str(tmp_path / "out")]
    run = run_cli(["report", "--prometheus", fake.url, *args, *REPORT_WINDOW], tmp_path)
    assert run.code == EXIT_SOURCE, run.stderr
    [line] = run.stderr.splitlines()
    assert line.startswith("inference-obs: source error: malformed answer: nan is not a number")
    assert "(query: count(count_over_time(vllm:num_requests_waiting{" in line


# --- bytes that are no HTTP answer ----------------------------------------------


def send(payload: bytes) -> Any:
    def serve(server: RawServer, conn: socket.socket) -> None:
        if server.read_request(conn) is not None:
            conn.sendall(payload)

    return serve


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"SSH-2.0-OpenSSH_9.6\r\n",
        VECTOR,  # a body without a status line
        b"HTTP/1.1 200 OK\r\n" + b"X-A: b\r\n" * 200 + b"\r\n",
        b"HTTP/1.1 200 OK\r\nX-A: " + b"a" * 70_000 + b"\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + VECTOR[:50],
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 9\r\n\r\nnot gzip!",
    ],
    ids=[
        "nothing",
        "ssh-banner",
        "no-status-line",
        "200-headers",
        "70-KB-header",
        "cut-body",
        "bad-chunk",
        "bad-gzip",
    ],
)
def test_bytes_that_are_no_answer_are_retried_then_unavailable(payload: bytes) -> None:
    with RawServer(send(payload)) as server:
        started = time.monotonic()
        with pytest.raises(SourceUnavailable) as info:
            source(server.url, retries=1).instant(UP, 0)
        assert time.monotonic() - started < 1.0
        assert len(server.requests) == 2
        message = str(info.value)
        assert not re.search(r"[\r\n]", message)  # one line, whatever the server sent
        assert len(message) < 600  # server text is cut, whatever it sent


# --- credentials refused --------------------------------------------------------
# Prometheus itself checks no bearer token; a proxy in front of it does (an
# oauth2-proxy, an ingress), answering 401/403 in its own words: the fake plays it.


@pytest.mark.parametrize("status", [401, 403])
def test_refused_credentials_are_said_once_and_not_retried(fake: FakeServer, status: int) -> None:
    fake.script = [
        Answer(status=status, body=b"Unauthorized\n", headers={"content-type": "text/plain"})
    ]
    with pytest.raises(AccessDenied) as caught:
        source(fake.url, retries=3).instant(Selector("up"), 1.0)
    assert f"HTTP {status}, the credentials were refused ('Unauthorized\\n')" in str(caught.value)
    assert len(fake.requests) == 1  # not retried: the same token would be refused again


def test_cli_refused_credentials_are_input_not_an_outage(fake: FakeServer, tmp_path: Path) -> None:
    fake.script = [Answer(status=401, body=b"Unauthorized", headers={"content-type": "text/plain"})]
    args = ["--deployments", str(small_deployments(tmp_path)), "--out", str(tmp_path / "out")]
    run = run_cli(["report", "--prometheus", fake.url, *args, *REPORT_WINDOW], tmp_path)
    assert run.code == EXIT_USAGE, run.stderr
    [line] = run.stderr.splitlines()
    assert "HTTP 401, the credentials were refused" in line
    assert "source error" not in line  # retrying a scheduled run will not help
