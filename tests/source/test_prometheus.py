"""PrometheusSource against a FAKE HTTP server: faults a real server cannot be made to produce.

Every test here uses the scripted fake of :mod:`tests.source.test_prometheus_fakes`
because a real Prometheus does not refuse connections, stall, drip a body,
rate-limit, fail with 5xx on demand, truncate JSON or send partial responses.
Round trips against real servers are in ``tests/integration``.
"""

from __future__ import annotations

import gzip
import json
import logging
import re
import urllib.parse
from collections.abc import Iterator

import numpy as np
import pytest

from inference_obs.engine.rules import Rules
from inference_obs.errors import Annotation, ConfigurationError, QueryFailed, SourceUnavailable
from inference_obs.query import Matcher, Selector, to_promql
from inference_obs.samples import Labels, Vector, Window
from inference_obs.source.auth import BasicAuth, BearerToken
from inference_obs.source.http import ALLOWED_PATHS
from inference_obs.source.prometheus import PartialAnswers, PrometheusSource, detect_engine
from inference_obs.source.ranges import plan
from tests.integration.servers import free_port
from tests.source.test_prometheus_fakes import Answer, FakeServer, envelope, fake_server

UP = Selector("up")
VECTOR = envelope({"resultType": "vector", "result": [{"metric": {"job": "a"}, "value": [1, "2"]}]})
TOKEN = "tok-SECRET-7f3a"
PASSWORD = "pw-SECRET-91bd"
WINDOW = Window.parse("2026-01-01T00:00+00:00", 100.0)


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    yield from fake_server()


class Sleeps(list[float]):
    """The waits the client chose between attempts, read from its debug log."""

    def __init__(self, caplog: pytest.LogCaptureFixture) -> None:
        super().__init__()
        self._caplog = caplog
        caplog.set_level(logging.DEBUG, logger="inference_obs.source.prometheus")

    def read(self) -> Sleeps:
        found = (
            re.search(r"retrying \S+ in ([0-9.]+) s", r.getMessage()) for r in self._caplog.records
        )
        self[:] = [float(m.group(1)) for m in found if m]
        return self


@pytest.fixture
def sleeps(caplog: pytest.LogCaptureFixture) -> Sleeps:
    return Sleeps(caplog)


def source(url: str, **kwargs: object) -> PrometheusSource:
    return PrometheusSource(url, **{"backoff": 0.01, **kwargs})  # type: ignore[arg-type]


def test_connection_refused_retries_then_names_the_query(sleeps: Sleeps) -> None:
    """Connection refused: a port nobody listens on (no real server can do this on demand)."""
    src = source(f"http://127.0.0.1:{free_port()}", retries=2)
    with pytest.raises(SourceUnavailable, match="connection failed") as info:
        src.instant(UP, 0)
    assert info.value.promql == "up"
    assert len(sleeps.read()) == 2  # bounded: two retries, then give up


def test_timeout_before_headers(fake: FakeServer) -> None:
    """A server that answers after the timeout (fake: a real one answers at once)."""
    fake.script = [Answer(body=VECTOR, delay_s=0.5)]
    with pytest.raises(SourceUnavailable, match="timed out"):
        source(fake.url, timeout=0.1, retries=1).instant(UP, 0)


def test_slow_body_is_bounded_by_the_timeout(fake: FakeServer) -> None:
    """A body dripped one byte at a time: each read is quick, the whole is too slow (fake)."""
    fake.script = [Answer(body=VECTOR, drip_s=0.01)]
    with pytest.raises(SourceUnavailable, match=r"timed out"):
        source(fake.url, timeout=0.2, retries=0).instant(UP, 0)


def test_429_honours_retry_after(fake: FakeServer, sleeps: Sleeps) -> None:
    """429 with Retry-After (fake: Prometheus does not rate-limit)."""
    fake.script = [Answer(429, b"slow down", {"Retry-After": "1"}), Answer(body=VECTOR)]
    result = source(fake.url).instant(UP, 0)
    assert sleeps.read() == [1.0]
    assert isinstance(result.value, Vector)
    assert result.value.as_dict() == {Labels({"job": "a"}): 2.0}


@pytest.mark.parametrize(("status", "error_type"), [(500, "internal"), (502, "http_502")])
def test_5xx_then_success(fake: FakeServer, sleeps: Sleeps, status: int, error_type: str) -> None:
    """A transient 5xx, then an answer (fake: a real server cannot fail on demand)."""
    fake.script = [Answer(status, b"<html>oops</html>"), Answer(body=VECTOR)]
    result = source(fake.url).instant(UP, 0)
    assert result.value.values.tolist() == [2.0]  # type: ignore[union-attr]
    assert len(sleeps.read()) == 1
    assert 0.005 <= sleeps[0] <= 0.015


def test_500_forever_gives_up_naming_the_query(fake: FakeServer, sleeps: Sleeps) -> None:
    """500 on every attempt (fake): bounded attempts, then SourceUnavailable with the PromQL."""
    fake.script = [Answer(500, b"broken")]
    with pytest.raises(SourceUnavailable, match=r"gave up after 4 attempts.*query: up"):
        source(fake.url, retries=3).instant(UP, 0)
    assert len(fake.requests) == 4
    sleeps.read()
    assert len(sleeps) == 3
    # Each wait is backoff * 2**k * [0.5, 1.5): the third is always above the first.
    assert sleeps[2] > sleeps[0]


def test_truncated_json_is_retried_then_fails(fake: FakeServer) -> None:
    """A 200 whose JSON is cut off (fake): never a number from a broken answer."""
    fake.script = [Answer(body=VECTOR[:-7])]
    with pytest.raises(SourceUnavailable, match="invalid or truncated JSON"):
        source(fake.url, retries=1).instant(UP, 0)
    assert len(fake.requests) == 2


def test_truncated_then_good(fake: FakeServer) -> None:
    """A truncated answer, then a good one (fake)."""
    fake.script = [Answer(body=VECTOR[:10]), Answer(body=VECTOR)]
    value = source(fake.url).instant(UP, 0).value
    assert isinstance(value, Vector)
    assert len(value) == 1


def test_malformed_success_is_not_a_number(fake: FakeServer) -> None:
    """Valid JSON, wrong shape (fake): SourceUnavailable, never a value."""
    fake.script = [Answer(body=envelope({"resultType": "vector", "result": [{"value": [1]}]}))]
    with pytest.raises(SourceUnavailable, match="malformed answer"):
        source(fake.url).instant(UP, 0)


# Prometheus web/api/v1 returnAPIError: the HTTP status of each errorType.
ERROR_STATUS = {
    "bad_data": 400,
    "execution": 422,
    "canceled": 499,
    "timeout": 503,
    "internal": 500,
    "unavailable": 503,
    "not_found": 404,
}


@pytest.mark.parametrize(("error_type", "status"), sorted(ERROR_STATUS.items()))
def test_error_envelopes_raise_query_failed(fake: FakeServer, error_type: str, status: int) -> None:
    """``status: error`` of each errorType (fake: most cannot be provoked on a real server)."""
    body = json.dumps({"status": "error", "errorType": error_type, "error": "it broke"})
    fake.script = [Answer(status, body.encode())]
    with pytest.raises(QueryFailed, match="it broke") as info:
        source(fake.url, retries=1).instant(UP, 0)
    assert info.value.error_type == error_type
    assert info.value.promql == "up"
    transient = error_type in ("timeout", "internal", "unavailable")
    assert len(fake.requests) == (2 if transient else 1)


def test_warnings_infos_and_partial_become_annotations(fake: FakeServer) -> None:
    """Warnings, infos and a VictoriaMetrics-style isPartial (fake: needs a federated setup)."""
    body = json.loads(VECTOR)
    body.update(warnings=["store down"], infos=["guessed"], isPartial=True)
    fake.script = [Answer(body=json.dumps(body).encode())]
    result = source(fake.url).instant(UP, 0)
    assert result.annotations == (
        Annotation("server_warning", "store down"),
        Annotation("server_info", "guessed"),
        Annotation("partial_response", "the server answered with partial data"),
    )


def test_a_partial_answer_is_refused_when_asked(fake: FakeServer) -> None:
    """A Thanos-style partial response with PartialAnswers.REFUSE (fake)."""
    fake.script = [
        Answer(body=envelope({"resultType": "vector", "result": []}, partial_response=True))
    ]
    with pytest.raises(SourceUnavailable, match="partial"):
        source(fake.url, partial_answers=PartialAnswers.REFUSE).instant(UP, 0)


def test_redirects_are_not_followed(fake: FakeServer) -> None:
    """A 302 elsewhere (fake): credentials must not follow it to another host."""
    fake.script = [Answer(302, b"", {"Location": "http://127.0.0.1:1/steal"})]
    with pytest.raises(SourceUnavailable, match="HTTP 302"):
        source(fake.url, auth=BearerToken(TOKEN)).instant(UP, 0)
    assert len(fake.requests) == 1


def test_only_allowlisted_requests_exist(fake: FakeServer) -> None:
    """The client refuses any path or method off the allowlist; no generic method is public."""
    src = source(fake.url)
    with pytest.raises(ValueError, match="not an allowed"):
        src._client.call("/api/v1/admin/tsdb/delete_series", "POST", {}, "x")
    with pytest.raises(ValueError, match="not an allowed"):
        src._client.call("/api/v1/query", "GET", {}, "x")
    assert fake.requests == []
    public = {name for name in dir(src) if not name.startswith("_")}
    assert public == {
        "close", "from_connect", "info", "instant", "label_names", "label_values", "metadata",
        "range", "raw", "series", "url",
    }  # fmt: skip
    assert set(ALLOWED_PATHS) >= {"/api/v1/query", "/api/v1/status/buildinfo"}
    with pytest.raises(QueryFailed, match="invalid label name"):
        src.label_values("../../admin", WINDOW)


def test_queries_are_post_forms_and_discovery_is_get(fake: FakeServer) -> None:
    """Method and encoding of each request (fake records them exactly).

    Series selectors go in a POST body too: a 1 MB selector in a URL gets HTTP 431.
    """
    fake.script = [
        Answer(body=VECTOR),
        Answer(body=envelope(["a", "b"])),
        Answer(body=envelope([])),
    ]
    src = source(fake.url, headers={"X-Scope-OrgID": "tenant-1"})
    src.instant(Selector("up").where(), 12.5)
    src.label_values("job", WINDOW)
    long = Selector("up", (Matcher.equal("pod", "x" * 1_000_000),))
    assert src.series(long, WINDOW) == ()
    query, values, series = fake.requests
    assert (series.method, series.path) == ("POST", "/api/v1/series")
    assert urllib.parse.parse_qs(series.body.decode())["match[]"] == [to_promql(long)]
    assert (query.method, query.path) == ("POST", "/api/v1/query")
    assert urllib.parse.parse_qs(query.body.decode()) == {"query": ["up"], "time": ["12.500"]}
    assert query.headers["x-scope-orgid"] == "tenant-1"
    assert values.method == "GET"
    assert values.path.startswith("/api/v1/label/job/values?start=")


def test_secrets_never_leak(fake: FakeServer, caplog: pytest.LogCaptureFixture) -> None:
    """Token and password: absent from logs, repr/str, fault messages and the fake's log."""
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []
    for kwargs in ({"auth": BearerToken(TOKEN)}, {"auth": BasicAuth("alice", PASSWORD)}):
        fake.script = [Answer(500, b"down")]
        src = source(fake.url, **kwargs)
        texts += [repr(src), str(src)]
        with pytest.raises(SourceUnavailable) as info:
            src.instant(UP, 0)
        texts += [str(info.value), repr(info.value), str(info.value.__cause__)]
        fake.script = [
            Answer(
                400,
                json.dumps({"status": "error", "errorType": "bad_data", "error": "no"}).encode(),
            )
        ]
        with pytest.raises(QueryFailed) as failed:
            src.range(UP, WINDOW, 10)
        texts += [str(failed.value), repr(failed.value)]
    userinfo = source(f"http://bob:{PASSWORD}@127.0.0.1:{free_port()}", retries=0)
    texts.append(repr(userinfo))
    with pytest.raises(SourceUnavailable) as refused:
        userinfo.instant(UP, 0)
    texts += [str(refused.value), repr(userinfo._client._auth)]
    texts += [record.getMessage() for record in caplog.records] + fake.log_lines
    for request in fake.requests:
        texts += [request.path, request.body.decode()]
        texts += [f"{k}: {v}" for k, v in request.headers.items() if k != "authorization"]
    assert any(r.headers.get("authorization") == f"Bearer {TOKEN}" for r in fake.requests)
    joined = "\n".join(texts)
    assert TOKEN not in joined
    assert PASSWORD not in joined
    assert "127.0.0.1" in repr(userinfo)
    assert "bob" not in repr(userinfo)


def test_token_file_and_env(
    fake: FakeServer, tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Token sources: a file (re-read per request) and an environment variable."""
    from pathlib import Path

    path = Path(str(tmp_path)) / "token"
    path.write_text("file-token\n")
    fake.script = [Answer(body=VECTOR)]
    source(fake.url, auth=BearerToken(file=path)).instant(UP, 0)
    monkeypatch.setenv("PROM_TOKEN", "env-token")
    source(fake.url, auth=BearerToken(env="PROM_TOKEN")).instant(UP, 0)
    assert [r.headers["authorization"] for r in fake.requests] == [
        "Bearer file-token",
        "Bearer env-token",
    ]


def test_scalar_result(fake: FakeServer) -> None:
    """A scalar answer becomes a float."""
    fake.script = [Answer(body=envelope({"resultType": "scalar", "result": [1, "+Inf"]}))]
    assert source(fake.url).instant(UP, 0).value == float("inf")


def test_range_split_joins_pieces(fake: FakeServer) -> None:
    """Pieces fetched separately are joined per series in time order (fake answers each)."""

    def piece(points: list[list[object]]) -> Answer:
        result = [{"metric": {"job": "a"}, "values": points}]
        return Answer(body=envelope({"resultType": "matrix", "result": result}))

    answers = {"0.000": piece([[0, "1"], [10, "2"]]), "20.000": piece([[20, "3"], [30, "4"]])}
    # Pieces are fetched in parallel: answer each by its start, not by arrival order.
    fake.responder = lambda r: answers[urllib.parse.parse_qs(r.body.decode())["start"][0]]
    src = source(fake.url, max_points=2, rules=Rules.PROMETHEUS_2)
    matrix = src.range(UP, Window.parse("1970-01-01T00:00+00:00", 30.0), 10.0)
    assert matrix.t_ms.tolist() == [0, 10_000, 20_000, 30_000]
    assert np.array_equal(matrix.values, [1, 2, 3, 4])
    starts = sorted(urllib.parse.parse_qs(r.body.decode())["start"][0] for r in fake.requests)
    assert starts == ["0.000", "20.000"]
    assert len(fake.requests) == 2


def test_plan_is_step_aligned_and_covers_every_point() -> None:
    """Pieces sit on the original step grid, never overlap, and cover every point."""
    pieces = plan(5.0, 5.0 + 99 * 7.0, 7.0, 30)
    grid = [t for lo, hi in pieces for t in np.arange(lo, hi + 1e-9, 7.0)]
    assert grid == [5.0 + 7.0 * i for i in range(100)]
    assert plan(0.0, 10.0, 10.0, 11_000) == [(0.0, 10.0)]


@pytest.mark.parametrize(
    ("step", "limit", "message"),
    [
        (0.0, 10, "range query step 0.0 must be a positive, finite number of seconds"),
        (float("inf"), 10, "range query step inf must be"),
        (15.0, 0, r"max points 0 per series per request must be at least 1 \(max_points=\)"),
    ],
)
def test_plan_refuses_bad_arguments(step: float, limit: int, message: str) -> None:
    # A step or a limit is an argument of the request, not a part of the query.
    with pytest.raises(ConfigurationError, match=message):
        plan(0.0, 60.0, step, limit)


@pytest.mark.parametrize("max_points", [0, -5])
def test_max_points_below_one_is_refused_when_the_source_is_made(max_points: int) -> None:
    with pytest.raises(ConfigurationError, match=f"max_points {max_points} must be at least 1"):
        PrometheusSource("http://127.0.0.1:9", max_points=max_points)


@pytest.mark.parametrize(
    ("data", "headers", "kind", "rules"),
    [
        ({"version": "2.42.0", "branch": "HEAD"}, {}, "prometheus", Rules.PROMETHEUS_2),
        ({"version": "3.1.0"}, {}, "prometheus", Rules.PROMETHEUS_3),
        ({}, {"x-server-hostname": "vm"}, "victoriametrics", Rules.VICTORIAMETRICS),
        ({"version": "0.34.1"}, {}, "thanos", Rules.PROMETHEUS_2),
        ({"version": "0.37.2"}, {}, "thanos", Rules.PROMETHEUS_3),
        ({"application": "Grafana Mimir", "version": "2.10.0"}, {}, "mimir", Rules.PROMETHEUS_2),
    ],
)
def test_detect_engine(
    data: dict[str, str], headers: dict[str, str], kind: str, rules: Rules
) -> None:
    """Engine and rule set from buildinfo answers (Thanos/Mimir shapes are not run here)."""
    info = detect_engine(data, headers, None)
    assert (info.kind, info.rules) == (kind, rules)
    assert detect_engine(data, headers, Rules.PROMETHEUS_3).rules is Rules.PROMETHEUS_3


def test_info_is_cached(fake: FakeServer) -> None:
    """buildinfo is asked once."""
    fake.script = [Answer(body=envelope({"version": "2.42.0"}))]
    src = source(fake.url)
    first = src.info()
    assert src.info() is first
    assert len(fake.requests) == 1


def test_from_connect_reuses_url_headers_and_auth(fake: FakeServer) -> None:
    """A PrometheusConnect's URL, headers and basic auth carry over."""
    from prometheus_api_client import PrometheusConnect

    prom = PrometheusConnect(fake.url, headers={"X-Scope-OrgID": "t"}, auth=("u", PASSWORD))
    fake.script = [Answer(body=VECTOR)]
    src = PrometheusSource.from_connect(prom, retries=0)
    src.instant(UP, 0)
    assert fake.requests[0].headers["x-scope-orgid"] == "t"
    assert fake.requests[0].headers["authorization"].startswith("Basic ")
    assert PASSWORD not in repr(src)
    prom.close()


def test_answers_are_asked_for_gzipped_and_decoded(fake: FakeServer) -> None:
    """The client accepts gzip and decodes it (fake: a real server is checked in integration)."""
    fake.script = [Answer(body=gzip.compress(VECTOR), headers={"Content-Encoding": "gzip"})]
    value = source(fake.url).instant(UP, 0).value
    assert isinstance(value, Vector)
    assert value.as_dict() == {Labels({"job": "a"}): 2.0}
    assert fake.requests[0].headers.get("accept-encoding") == "gzip"


def test_truncated_gzip_is_retried_then_fails(fake: FakeServer) -> None:
    """A gzip body cut off in transit (fake): retried, then named; never a number."""
    cut = gzip.compress(VECTOR)[:-9]
    fake.script = [Answer(body=cut, headers={"Content-Encoding": "gzip"})] * 2
    with pytest.raises(SourceUnavailable, match="invalid or truncated gzip body"):
        source(fake.url, retries=1).instant(UP, 0)
    assert len(fake.requests) == 2
