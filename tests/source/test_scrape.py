"""The scrape client: GET of one path only, bounded retries, limits, nothing secret shown."""

from __future__ import annotations

import time

import pytest

from inference_obs.errors import AnswerTooLarge, ConfigurationError, SourceUnavailable
from inference_obs.source.auth import BearerToken
from inference_obs.source.http import Limits
from inference_obs.source.scrape import ScrapeClient, parse_target
from inference_obs.source.transport import PooledTransport
from tests.source.fake_exporters import FakeExporter

LIMITS = Limits(timeout=2.0, retries=2, backoff=0.01)


def _client(exporter: FakeExporter, **kwargs: object) -> ScrapeClient:
    target, _ = parse_target(exporter.url)
    return ScrapeClient(target, PooledTransport(target.endpoint, size=1), **kwargs)  # type: ignore[arg-type]


def test_a_scrape_is_one_get_of_the_metrics_path() -> None:
    with FakeExporter(lambda n: "m 1\n") as exporter:
        answer = _client(exporter, limits=LIMITS).scrape(time.monotonic() + 5)
    assert answer.body == b"m 1\n"
    assert answer.content_type is not None
    assert exporter.requests == ["GET /metrics"]


def test_transient_failures_are_retried_within_bounds() -> None:
    with FakeExporter(lambda n: "m 1\n", fail={0, 1}) as exporter:
        assert _client(exporter, limits=LIMITS).scrape(time.monotonic() + 5).body == b"m 1\n"
    with (
        FakeExporter(lambda n: "m 1\n", fail=range(100)) as exporter,
        pytest.raises(SourceUnavailable, match=r"HTTP 500 \(3 attempts\)"),
    ):
        _client(exporter, limits=LIMITS).scrape(time.monotonic() + 5)
    assert len(exporter.requests) == 3


def test_a_wrong_path_is_not_retried() -> None:
    with FakeExporter(lambda n: "m 1\n") as exporter:
        target, _ = parse_target(exporter.url.replace("/metrics", "/other"))
        client = ScrapeClient(target, PooledTransport(target.endpoint), limits=LIMITS)
        with pytest.raises(SourceUnavailable, match="HTTP 404"):
            client.scrape(time.monotonic() + 5)
    assert exporter.requests == ["GET /other"]


def test_the_answer_is_bounded() -> None:
    with FakeExporter(lambda n: "m 1\n" * 1000) as exporter:
        client = _client(exporter, limits=Limits(timeout=2.0, retries=0, max_answer_bytes=100))
        with pytest.raises(AnswerTooLarge, match="larger than 100 bytes"):
            client.scrape(time.monotonic() + 5)


def test_nothing_answers_on_a_closed_port() -> None:
    target, _ = parse_target("http://127.0.0.1:9/metrics")
    client = ScrapeClient(target, PooledTransport(target.endpoint), limits=LIMITS)
    with pytest.raises(SourceUnavailable, match=r"connection failed \(ConnectionRefusedError\)"):
        client.scrape(time.monotonic() + 5)


def test_credentials_are_sent_and_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCRAPE_TOKEN", "s3cret-token")
    with FakeExporter(lambda n: "m 1\n", fail={0, 1, 2}) as exporter:
        client = _client(exporter, limits=LIMITS, auth=BearerToken(env="SCRAPE_TOKEN"))
        with pytest.raises(SourceUnavailable) as raised:
            client.scrape(time.monotonic() + 5)
    assert "s3cret" not in str(raised.value)
    assert "s3cret" not in repr(client)


def test_targets_are_checked() -> None:
    target, auth = parse_target("dcgm=https://user:pw@gpu-node:9400")
    assert (target.job, target.instance, target.url, target.path) == (
        "dcgm",
        "gpu-node:9400",
        "https://gpu-node:9400/metrics",
        "/metrics",
    )
    assert auth is not None
    with pytest.raises(ConfigurationError, match="has a query string"):
        parse_target("http://h/metrics?format=x")
    with pytest.raises(ConfigurationError, match="not a job name"):
        parse_target("bad job=http://h/metrics")
    with pytest.raises(ConfigurationError, match="set by the scrape client"):
        ScrapeClient(target, PooledTransport(target.endpoint), headers={"Accept": "x"})
