"""Faults the client already handles, pinned: retries, refusals, annotations, reuse, concurrency.

Fakes (the scripted HTTP fake and :mod:`tests.source.fault_servers`) because a
real Prometheus cannot be made to fail with 5xx, rate-limit, redirect, answer
with a login page, reset a connection mid-body, close a kept-alive connection
between two requests, or hold each answer for a chosen time.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from inference_obs.errors import Annotation, NotPrometheusAPI, SourceUnavailable
from inference_obs.query import Selector
from inference_obs.samples import Labels, Vector, Window
from inference_obs.source.auth import BearerToken
from inference_obs.source.prometheus import PrometheusSource
from tests.source.fault_servers import RawServer, response
from tests.source.test_prometheus_fakes import Answer, FakeServer, Recorded, envelope, fake_server

UP = Selector("up")
VECTOR = envelope({"resultType": "vector", "result": [{"metric": {"job": "a"}, "value": [1, "2"]}]})


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    yield from fake_server()


def retried(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("retrying")]


def assert_two(value: object) -> None:
    assert isinstance(value, Vector)
    assert value.as_dict() == {Labels({"job": "a"}): 2.0}


# --- retried, then answered ---------------------------------------------------------


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_a_5xx_then_an_answer(
    fake: FakeServer, caplog: pytest.LogCaptureFixture, status: int
) -> None:
    caplog.set_level(logging.DEBUG, logger="inference_obs.source.prometheus")
    fake.script = [Answer(status, b"<html>gateway</html>"), Answer(body=VECTOR)]
    assert_two(PrometheusSource(fake.url, backoff=0.01).instant(UP, 0).value)
    assert len(fake.requests) == 2
    [line] = retried(caplog)
    assert f"HTTP {status}" in line


def test_a_429_retry_after_is_obeyed(fake: FakeServer, caplog: pytest.LogCaptureFixture) -> None:
    """Retry-After 0 against an own backoff of at least 2.5 s: the server's wait is the one kept."""
    caplog.set_level(logging.DEBUG, logger="inference_obs.source.prometheus")
    fake.script = [Answer(429, b"slow down", {"Retry-After": "0"}), Answer(body=VECTOR)]
    started = time.monotonic()
    assert_two(PrometheusSource(fake.url, backoff=5).instant(UP, 0).value)
    assert time.monotonic() - started < 1.0
    [line] = retried(caplog)
    assert " in 0.00 s " in line


@pytest.mark.parametrize(
    "body", [b"", b'{"status":"success","data":{"resultType":"vec'], ids=["empty", "cut"]
)
def test_empty_or_truncated_json_is_retried(fake: FakeServer, body: bytes) -> None:
    fake.script = [Answer(body=body), Answer(body=VECTOR)]
    assert_two(PrometheusSource(fake.url, backoff=0.01).instant(UP, 0).value)
    fake.script = [Answer(body=body)]
    with pytest.raises(SourceUnavailable, match=r"invalid or truncated JSON.*after 3 attempts"):
        PrometheusSource(fake.url, retries=2, backoff=0.01).instant(UP, 0)


def test_a_connection_reset_mid_body_is_retried() -> None:
    def serve(server: RawServer, conn: socket.socket) -> None:
        if server.read_request(conn) is None:
            return
        if server.connections == 1:
            conn.sendall(response(200, VECTOR)[: -len(VECTOR) // 2])
            # SO_LINGER 0: close() sends a reset, not an orderly end.
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            conn.sendall(response(200, VECTOR, [("Connection", "close")]))

    with RawServer(serve) as server:
        assert_two(PrometheusSource(server.url, backoff=0.01).instant(UP, 0).value)
        assert (server.connections, len(server.requests)) == (2, 2)


# --- refused, not retried ---------------------------------------------------------------


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_redirects_are_not_followed(fake: FakeServer, status: int) -> None:
    """The redirect names another fake: it must see nothing, least of all the token."""
    for elsewhere in fake_server():
        location = elsewhere.url + "/api/v1/query"
        fake.script = [Answer(status, b"moved", {"Location": location})]
        src = PrometheusSource(fake.url, auth=BearerToken("tok-redirect"), retries=3)
        with pytest.raises(SourceUnavailable, match=f"HTTP {status} without an API answer"):
            src.instant(UP, 0)
        assert len(fake.requests) == 1
        assert elsewhere.requests == []


def test_a_login_page_with_200_is_no_prometheus_api(fake: FakeServer) -> None:
    """An SSO proxy's login form, with status 200: not an answer, and no retry will make one."""
    page = b"<!DOCTYPE html><html><form action='/login'><input name='user'></form></html>"
    fake.script = [Answer(200, page, {"Content-Type": "text/html"})]
    with pytest.raises(NotPrometheusAPI, match=r"answered HTTP 200 with 'text/html'"):
        PrometheusSource(fake.url, retries=1, backoff=0.01).instant(UP, 0)
    assert len(fake.requests) == 1


# --- non-fatal conditions are annotations ------------------------------------------------


def test_warnings_infos_and_partial_answers_become_annotations(fake: FakeServer) -> None:
    """Each range piece says the same: one annotation each, in the order first said."""
    result = [{"metric": {"job": "a"}, "values": [[0, "1"], [10, "2"]]}]
    body = envelope(
        {"resultType": "matrix", "result": result},
        warnings=["store B down"],
        infos=["metric might not be a counter"],
        partial_response=True,
    )
    fake.script = [Answer(body=body)]
    src = PrometheusSource(fake.url, max_points=2)
    matrix = src.range(UP, Window.parse("1970-01-01T00:00+00:00", 30.0), 10.0)
    assert len(fake.requests) == 2  # two pieces
    assert matrix.annotations == (
        Annotation("server_warning", "store B down"),
        Annotation("server_info", "metric might not be a counter"),
        Annotation("partial_response", "the server answered with partial data"),
    )


# --- kept-alive connections ----------------------------------------------------------------


Serve = Callable[[RawServer, socket.socket], None]


def keep_alive(per_connection: int) -> tuple[threading.Event, Serve]:
    """Answers on a kept-alive connection, closing it (no ``Connection: close``) after a few."""
    closed = threading.Event()

    def serve(server: RawServer, conn: socket.socket) -> None:
        for _ in range(per_connection):
            if server.read_request(conn) is None:
                return
            conn.sendall(response(200, VECTOR))
        conn.close()
        closed.set()

    return closed, serve


def test_a_kept_alive_connection_is_reused() -> None:
    _, serve = keep_alive(per_connection=3)
    with RawServer(serve) as server:
        src = PrometheusSource(server.url, retries=0)
        for _ in range(3):
            assert_two(src.instant(UP, 0).value)
        assert (server.connections, len(server.requests)) == (1, 3)


def test_a_connection_closed_between_requests_is_resent_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """retries=0: the second request succeeds by the transport's one re-send, not a retry."""
    caplog.set_level(logging.DEBUG, logger="inference_obs.source.prometheus")
    closed, serve = keep_alive(per_connection=1)
    with RawServer(serve) as server:
        src = PrometheusSource(server.url, retries=0)
        assert_two(src.instant(UP, 0).value)
        assert closed.wait(5)
        time.sleep(0.05)  # the server's FIN reaches the idle connection
        assert_two(src.instant(UP, 0).value)
        # The request never arrived on the closed connection: one each, on two connections.
        assert (server.connections, len(server.requests)) == (2, 2)
        assert retried(caplog) == []


# --- concurrency ------------------------------------------------------------------------------


class InFlight:
    """Counts requests the fake is answering at once; each is held ``hold_s(request)``."""

    def __init__(
        self, answer: Callable[[Recorded], Answer], hold_s: Callable[[Recorded], float]
    ) -> None:
        self._answer, self._hold_s = answer, hold_s
        self._lock = threading.Lock()
        self.now = self.peak = 0

    def __call__(self, request: Recorded) -> Answer:
        with self._lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        try:
            time.sleep(self._hold_s(request))
            return self._answer(request)
        finally:
            with self._lock:
                self.now -= 1


def fields(request: Recorded) -> dict[str, str]:
    return {k: v[0] for k, v in urllib.parse.parse_qs(request.body.decode()).items()}


def test_parallel_bounds_range_pieces_in_flight_and_keeps_their_order(fake: FakeServer) -> None:
    """Six pieces, later ones answered sooner: at most 2 at the fake, joined in time order."""

    def answer(request: Recorded) -> Answer:
        start = float(fields(request)["start"])
        points = [[start, str(start)], [start + 10, str(start + 10)]]
        result = [{"metric": {"job": "a"}, "values": points}]
        return Answer(body=envelope({"resultType": "matrix", "result": result}))

    counter = InFlight(answer, lambda r: 0.15 - float(fields(r)["start"]) / 1000)
    fake.responder = counter
    src = PrometheusSource(fake.url, max_points=2, parallel=2)
    matrix = src.range(UP, Window.parse("1970-01-01T00:00+00:00", 110.0), 10.0)
    assert len(fake.requests) == 6
    assert counter.peak == 2  # reached, never passed
    expected = np.arange(0.0, 120.0, 10.0)
    assert np.array_equal(matrix.t_ms, expected * 1000)
    assert np.array_equal(matrix.values, expected)


def test_parallel_bounds_callers_on_many_threads(fake: FakeServer) -> None:
    """Eight threads ask at once: two requests at the fake at most, each answer to its asker."""

    def answer(request: Recorded) -> Answer:
        name = fields(request)["query"]
        value = [{"metric": {"__name__": name}, "value": [1, name.removeprefix("m")]}]
        return Answer(body=envelope({"resultType": "vector", "result": value}))

    counter = InFlight(answer, lambda r: 0.05)
    fake.responder = counter
    src = PrometheusSource(fake.url, parallel=2)
    got: dict[int, object] = {}

    def ask(i: int) -> None:
        got[i] = src.instant(Selector(f"m{i}"), 0).value

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert counter.peak == 2
    for i in range(8):
        value = got[i]
        assert isinstance(value, Vector)
        assert value.as_dict() == {Labels({"__name__": f"m{i}"}): float(i)}
